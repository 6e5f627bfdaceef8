//! The host the measurement runs on: where server and generator threads are placed, and the
//! kernel's own clock readings of the packets they exchange.
//!
//! In the data flow this crate sits under both ends of `load generator ⇄ server`:
//! - [`placement`] pins threads to CPUs and sets their scheduling policy (the "background
//!   processes" and "non-FIFO scheduling" sources of Tales of the Tail §4 and their
//!   mitigations: dedicated cores, realtime priority, nice);
//! - [`tstamp`] turns on `SO_TIMESTAMPING` and reads the kernel's software receive and
//!   transmit timestamps, mapped onto `CLOCK_MONOTONIC`, which become the T1 and T6 stage
//!   stamps of the per-request records (§3.3.1) without kernel patches.
//!
//! Linux only.

mod error;
pub mod mitigate;
pub mod placement;
pub mod probe;
pub mod tstamp;

pub use error::HostError;
