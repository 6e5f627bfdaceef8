//! The host the measurement runs on: where server and generator threads are placed, and the
//! kernel's own clock readings of the packets they exchange.
//!
//! In the data flow this crate sits under both ends of `load generator ⇄ server`:
//! - [`placement`] pins threads to CPUs and sets their scheduling policy (the "background
//!   processes" and "non-FIFO scheduling" sources of Tales of the Tail §4 and their
//!   mitigations: dedicated cores, realtime priority, nice);
//! - [`tstamp`] turns on `SO_TIMESTAMPING` and reads the kernel's software receive and
//!   transmit timestamps, mapped onto `CLOCK_MONOTONIC`, which become the T1 and T6 stage
//!   stamps of the per-request records (§3.3.1) without kernel patches — or a NIC's
//!   hardware receive stamp, whose capability, clock (PHC) and mapping are in [`hwstamp`];
//! - [`probe`] is `tailscope doctor`'s read-only look at the host (governors, C-states, IRQ
//!   routing, isolation, NUMA, THP, swap, watchdogs, steal time, RT throttling, the server's
//!   policy and run-queue wait) through a root path that tests point at fixture trees;
//! - [`mitigate`] applies the safe subset of the fixes with a journal, and reverts them on
//!   drop or, after a crash, on the next start;
//! - [`isolate`] creates a run's isolation mechanisms (cgroup cpuset, memory limit and CPU
//!   bandwidth, an HTB rate limit, resctrl cache ways), journalled and removed the same way;
//! - [`topology`] and [`facts`] read the CPU topology (SMT siblings, for placement) and what
//!   a platform comparison stores with each run.
//!
//! Linux only.

pub mod clock;
mod error;
pub mod facts;
pub mod hwstamp;
pub mod isolate;
mod jsonl;
pub mod listener;
pub mod mitigate;
pub mod numa;
pub mod placement;
pub mod probe;
pub mod procfs;
pub mod threads;
pub mod topology;
pub mod tstamp;

pub use error::HostError;
