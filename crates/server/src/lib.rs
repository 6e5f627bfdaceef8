//! The built-in null-RPC server: the *target* end of `load generator ⇄ server` in the data
//! flow, and the source of the per-request stage stamps in the request records.
//!
//! It answers each [`wire::nullrpc`] request by echoing its payload, after an optional,
//! exactly known amount of synthetic work (a busy spin on `CLOCK_MONOTONIC` for a time drawn
//! from a [`model::ServiceSpec`]). Because the work is known, a measured latency distribution
//! can be compared with the queueing ideal for the same arrivals; what is left is the OS's
//! and the architecture's doing (Tales of the Tail §3.3, §4). Four concurrency architectures
//! ([`Arch`]) give the queueing structures the paper contrasts: per-connection threads,
//! statically partitioned epoll workers (per-worker queues), and two single-queue servers
//! (a shared UDP socket, a dispatcher feeding a FIFO). A fifth, [`Arch::Staged`], is the LNS
//! paper's tandem of network stack, dispatcher and k workers with exactly known stage costs
//! and optional full-stack priority for delay-sensitive requests (see [`staged`], which also
//! gives its own stamp mapping).
//!
//! # Stage stamps
//!
//! When a request sets `WANT_STAMPS` (and [`ServerConfig::stamps`] allows it) the response
//! carries six `CLOCK_MONOTONIC` ns stamps of this host (0 = not available). Tales of the
//! Tail §3.3.1 stamps six events with a patched kernel; without patches tailscope takes:
//!
//! | ours | taken                                                               | paper |
//! |------|---------------------------------------------------------------------|-------|
//! | T1   | kernel receive stamp (`SO_TIMESTAMPING`): the software stamp, the stack's first sight of the packet that carried the request's last byte (realtime → monotonic); or the NIC's hardware stamp when the NIC gives one and its clock can be read (see below) | ≈ T1 (driver notified; the software stamp is a little later, at the stack's entry; the hardware one earlier, at the NIC) |
//! | —    | after TCP/UDP processing, the data queued on the socket, before the application is woken: the server cannot see it; with the eBPF collector (`--stages ebpf`) the records get it as `stack_ns` (`sock:sk_data_ready`) | T2 |
//! | T2   | the worker is awake: return of `epoll_wait`, or of the blocking `recv`/`recvfrom` | T3 |
//! | T3   | the request has been read and decoded                               | T4 |
//! | T4   | the synthetic work is done                                           | (inside T4→T5) |
//! | T5   | just before the response's `write`/`sendto` (with [`ServerConfig::batch_replies`]: when the response is encoded; the read's one write follows) | T5 |
//! | T6   | kernel software transmit stamp (error queue), sent in a follow-up frame when `WANT_TX_STAMP` | T6 |
//!
//! Our numbering is kept (the records' columns `t1_ns`..`t6_ns` and the stage names keep
//! their meaning); the paper's T2 travels beside it as the record's `stack_ns`. So T1→T2 is
//! the network stack plus the queueing and wake-up — one stage, labelled merged in the stage
//! table, unless the eBPF collector split it at the data's queueing on the socket ("queued", the paper's T2) into "protocol stack (T1→queued)"
//! and "queueing + wake-up (queued→T2)". T2→T3 is the copy to user space (and, for a thread
//! serving several ready connections or pipelined requests, the wait for its turn), T3→T4
//! the work (for [`Arch::Dispatch`] also the wait in the shared FIFO), T4→T5 the response
//! encoding, T5→T6 the transmit path; T6 − T1 is the paper's server latency.
//!
//! # Hardware receive stamps
//!
//! At start the server asks the NIC that owns its listening address what it can stamp
//! (`ETHTOOL_GET_TS_INFO`, [`host::hwstamp`]). When the NIC stamps received packets in
//! hardware and has a clock the host can read (`/dev/ptpN`), the server's sockets also ask
//! for the raw hardware stamp, and a read whose packet carries one takes its T1 from it,
//! mapped from the NIC's clock onto `CLOCK_MONOTONIC` with an offset sampled in a bracket of
//! monotonic reads (good to ± half the bracket, a few µs across the PCI bus); otherwise T1 is
//! the software stamp. [`Counters`] count the reads of each kind (`rx_stamps_hardware`,
//! `rx_stamps_software`) and [`ServerHandle::hw_clock`] names the clock, so a run says
//! which T1 it had. The server never switches the NIC's stamping on (`SIOCSHWTSTAMP` is
//! NIC-wide state that PTP daemons own): turn it on with `hwstamp_ctl -i IFACE -r 1` or
//! ptp4l; until then no hardware stamp arrives. A wildcard listening address (`0.0.0.0`),
//! loopback and veth have no hardware stamps.
//!
//! T1 is known only for the request whose last byte ended a `recv` (TCP can hand several
//! requests to one `recv`; the kernel stamp then belongs to the last). A request that
//! arrived while its thread was already awake waited for no wake-up: its T2 is set to T1, so
//! that T1 ≤ T2 ≤ T3 ≤ T4 ≤ T5 always holds. T6 is 0 in the response itself (it is not known
//! until after the write).
//!
//! # Memory bounds
//!
//! No client can make the server hold more than [`Limits`] allows (a field of
//! [`ServerConfig`] with documented defaults). Each bound is kept by back-pressure — the
//! server stops reading, the requests wait in the kernel's socket buffers, then the client's
//! writes block — never by dropping a request it has read; every pause and refusal is
//! counted in [`Counters`].
//!
//! | what grows | bound (default) | when it is reached | counter |
//! |---|---|---|---|
//! | a connection's unsent replies ([`Arch::Epoll`], [`Arch::Dispatch`], [`Arch::Staged`]) | `max_unsent_bytes` (256 KiB) | the connection's read events are dropped until the client has drained it to `resume_unsent_bytes` (64 KiB) | `reads_paused` |
//! | a connection's unsent replies ([`Arch::Thread`]) | the replies to one read | the thread blocks in its write, so reads nothing more, until the client takes them | `reads_paused` (a write found the socket full) |
//! | requests read but not yet taken by a worker ([`Arch::Dispatch`]; [`Arch::Staged`]: from stage 1's read to a worker) | `max_queued_requests` (4096) and `max_queued_bytes` (8 MiB) | the reading thread reads (and accepts) nothing until the workers have taken half | `queue_full_pauses` |
//! | connections, each a thread ([`Arch::Thread`]) | `max_connections` (1024) | a new connection is closed as soon as accepted | `connections_refused` |
//! | a connection's partial request | [`ServerConfig::max_frame`] | a longer frame closes the connection | `malformed_closed` |
//!
//! So a client that sends and never reads costs the server at most about
//! `max_unsent_bytes` plus one read's replies (and, for dispatch and staged, its share of the
//! queue bound); the other connections are served meanwhile. Each bound is overshot by at
//! most one read (≤ `max_frame` + 16 KiB of requests), because the check comes between
//! reads. An output buffer that grew gives its memory back once drained. Not bounded here:
//! the number of connections of the epoll-driven architectures (each costs its input buffer,
//! 16 KiB, and is bounded by the process's file-descriptor limit), and [`Arch::Udp`], whose
//! only queue is the kernel's socket buffer.
//!
//! While its backlog is full the reading thread of [`Arch::Dispatch`] also writes no
//! leftover output (the workers still write every reply as they make it), and stage 1 of
//! [`Arch::Staged`] polls no sockets, so a delay-sensitive request that arrives then cannot
//! overtake: under that overload the priority applies only to requests already read.

mod backpressure;
mod common;
mod config;
mod dispatch_arch;
mod epoll_arch;
mod error;
pub mod staged;
mod tcp_buf;
mod thread_arch;
mod udp_arch;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;

pub use common::Counters;
pub use config::{Arch, Limits, ServerConfig, StagedConfig};
pub use error::ServerError;

use common::{AtomicCounters, Stop};

/// State every thread of one server sees.
pub(crate) struct Shared {
    pub cfg: ServerConfig,
    pub stop: Stop,
    pub counters: AtomicCounters,
    /// The clock of the NIC that owns the listening address, when it stamps received
    /// packets in hardware (see the module's "Hardware receive stamps").
    pub hw: Option<host::hwstamp::HwClock>,
}

/// What an architecture's `start` hands back: its threads and how to wake them for shutdown.
pub(crate) struct Started {
    pub threads: Vec<JoinHandle<()>>,
    /// Called once after the stop flag is set, to wake threads blocked outside epoll.
    pub wake: Box<dyn Fn() + Send + Sync>,
}

impl Started {
    /// The end of every architecture's start: on success the running threads; on a failure
    /// part-way, stop, wake and join the threads already started, then return the error.
    pub(crate) fn finish(
        result: Result<(), ServerError>,
        threads: Vec<JoinHandle<()>>,
        shared: &Shared,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> Result<Started, ServerError> {
        if let Err(e) = result {
            shared.stop.set();
            wake();
            for t in threads {
                let _ = t.join();
            }
            return Err(e);
        }
        Ok(Started { threads, wake })
    }
}

/// Entry points.
pub struct Server;

impl Server {
    /// Serves TCP on an already-bound `listener` (tests bind `127.0.0.1:0`) with a TCP
    /// architecture; starts the threads and returns at once.
    pub fn start_tcp(
        listener: TcpListener,
        cfg: ServerConfig,
    ) -> Result<ServerHandle, ServerError> {
        if cfg.arch.is_udp() {
            return Err(ServerError::Config(
                "the udp architecture needs start_udp".into(),
            ));
        }
        let local_addr = listener
            .local_addr()
            .map_err(|e| ServerError::io("getsockname", e))?;
        let shared = prepare(cfg, local_addr)?;
        let started = match shared.cfg.arch {
            Arch::Thread => thread_arch::start(listener, &shared)?,
            Arch::Epoll => epoll_arch::start(listener, &shared)?,
            Arch::Dispatch => dispatch_arch::start(listener, &shared)?,
            Arch::Staged => staged::start(listener, &shared)?,
            Arch::Udp => unreachable!("checked above"),
        };
        Ok(ServerHandle::new(local_addr, shared, started))
    }

    /// Serves UDP on an already-bound `socket` with [`Arch::Udp`]; returns at once.
    pub fn start_udp(socket: UdpSocket, cfg: ServerConfig) -> Result<ServerHandle, ServerError> {
        if !cfg.arch.is_udp() {
            return Err(ServerError::Config(format!(
                "start_udp needs the udp architecture, not {}",
                cfg.arch
            )));
        }
        let local_addr = socket
            .local_addr()
            .map_err(|e| ServerError::io("getsockname", e))?;
        let shared = prepare(cfg, local_addr)?;
        let started = udp_arch::start(socket, &shared)?;
        Ok(ServerHandle::new(local_addr, shared, started))
    }
}

/// Validates `cfg` and tries its placement on a scratch thread, so that a CPU set or a
/// policy the kernel refuses is an error here rather than a silent failure in a worker.
fn prepare(cfg: ServerConfig, local_addr: SocketAddr) -> Result<Arc<Shared>, ServerError> {
    cfg.validate()?;
    if !cfg.cpus.is_empty() || cfg.sched.is_some() {
        let probe = cfg.clone();
        std::thread::spawn(move || common::place(&probe))
            .join()
            .map_err(|_| ServerError::ThreadPanicked)??;
    }
    let hw = cfg
        .stamps
        .then(|| {
            host::hwstamp::rx_clock_for(
                local_addr.ip(),
                &host::hwstamp::Ethtool,
                std::path::Path::new("/dev"),
            )
        })
        .flatten();
    Ok(Arc::new(Shared {
        cfg,
        stop: Stop::new()?,
        counters: AtomicCounters::default(),
        hw,
    }))
}

/// A running server. Dropping it shuts it down too (use [`ServerHandle::shutdown`] to get
/// the final counters and any error).
pub struct ServerHandle {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl ServerHandle {
    fn new(local_addr: SocketAddr, shared: Arc<Shared>, s: Started) -> Self {
        ServerHandle {
            local_addr,
            shared,
            threads: s.threads,
            wake: s.wake,
        }
    }

    /// The address the server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The counters now.
    pub fn counters(&self) -> Counters {
        self.shared.counters.snapshot()
    }

    /// The NIC clock whose hardware receive stamps the server uses for T1 (None: the
    /// kernel's software stamps only).
    pub fn hw_clock(&self) -> Option<&std::path::Path> {
        self.shared.hw.as_ref().map(|c| c.path())
    }

    /// Stops every thread (they are woken: eventfd for epoll loops, `shutdown(2)` for
    /// blocking sockets, condition variables for the dispatch and staged queues) and joins
    /// them. Requests still queued are dropped unanswered.
    pub fn shutdown(mut self) -> Result<Counters, ServerError> {
        self.stop_and_join()?;
        Ok(self.shared.counters.snapshot())
    }

    fn stop_and_join(&mut self) -> Result<(), ServerError> {
        if self.threads.is_empty() {
            return Ok(());
        }
        self.shared.stop.set();
        (self.wake)();
        let mut panicked = false;
        for t in self.threads.drain(..) {
            panicked |= t.join().is_err();
        }
        if panicked {
            Err(ServerError::ThreadPanicked)
        } else {
            Ok(())
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// Spawns a named server thread.
pub(crate) fn spawn(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, ServerError> {
    std::thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|e| ServerError::io("spawning a thread", e))
}
