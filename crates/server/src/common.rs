//! Pieces every architecture shares: counters, the stop signal, thread placement, the
//! per-request work and stamps. The TCP connection buffers are in `tcp_buf`.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::net::TcpStream;

use host::tstamp::{self, mono_now_ns};
use nix::sys::epoll::EpollFlags;
use nix::sys::eventfd::{EfdFlags, EventFd};
use wire::nullrpc::{self, Header, Stamps};

use crate::{ServerConfig, ServerError, Shared};

/// What the server has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests answered.
    pub served: u64,
    /// Connections closed (TCP) or datagrams dropped (UDP) because a frame was malformed.
    pub malformed_closed: u64,
    /// TCP connections accepted.
    pub connections_accepted: u64,
    /// Transmit-stamp follow-ups sent.
    pub tx_stamps_sent: u64,
    /// Times a connection's reads were paused for undrained replies: its unsent reply bytes
    /// passed [`Limits::max_unsent_bytes`](crate::Limits::max_unsent_bytes) (for
    /// [`Arch::Thread`](crate::Arch::Thread): a reply write found the socket full and
    /// blocked, so the thread read nothing more until the client took its replies).
    pub reads_paused: u64,
    /// Times the reading thread of [`Arch::Dispatch`](crate::Arch::Dispatch) or
    /// [`Arch::Staged`](crate::Arch::Staged) stopped reading because the requests waiting
    /// for a worker reached [`Limits::max_queued_requests`](crate::Limits) or
    /// `max_queued_bytes`.
    pub queue_full_pauses: u64,
    /// TCP connections closed as soon as accepted because
    /// [`Limits::max_connections`](crate::Limits::max_connections) were open
    /// ([`Arch::Thread`](crate::Arch::Thread)).
    pub connections_refused: u64,
    /// Reads whose T1 came from the kernel's software receive stamp, and from the NIC's
    /// hardware stamp (mapped from its clock).
    pub rx_stamps_software: u64,
    pub rx_stamps_hardware: u64,
    /// Writes that took reply bytes ([`Arch::Epoll`](crate::Arch::Epoll); the other
    /// architectures leave it 0): one per reply, or one per read with
    /// [`ServerConfig::batch_replies`](crate::ServerConfig::batch_replies).
    pub reply_writes: u64,
}

#[derive(Default)]
pub(crate) struct AtomicCounters {
    pub served: AtomicU64,
    pub malformed_closed: AtomicU64,
    pub connections_accepted: AtomicU64,
    pub tx_stamps_sent: AtomicU64,
    pub reads_paused: AtomicU64,
    pub queue_full_pauses: AtomicU64,
    pub connections_refused: AtomicU64,
    pub rx_stamps_software: AtomicU64,
    pub rx_stamps_hardware: AtomicU64,
    pub reply_writes: AtomicU64,
}

impl AtomicCounters {
    pub fn snapshot(&self) -> Counters {
        Counters {
            served: self.served.load(Ordering::Relaxed),
            malformed_closed: self.malformed_closed.load(Ordering::Relaxed),
            connections_accepted: self.connections_accepted.load(Ordering::Relaxed),
            tx_stamps_sent: self.tx_stamps_sent.load(Ordering::Relaxed),
            reads_paused: self.reads_paused.load(Ordering::Relaxed),
            queue_full_pauses: self.queue_full_pauses.load(Ordering::Relaxed),
            connections_refused: self.connections_refused.load(Ordering::Relaxed),
            rx_stamps_software: self.rx_stamps_software.load(Ordering::Relaxed),
            rx_stamps_hardware: self.rx_stamps_hardware.load(Ordering::Relaxed),
            reply_writes: self.reply_writes.load(Ordering::Relaxed),
        }
    }

    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a receive stamp by its kind; gives its monotonic time.
    pub fn rx_stamp(&self, s: Option<tstamp::RxStamp>) -> Option<u64> {
        let s = s?;
        match s.kind {
            tstamp::RxStampKind::Software => Self::add(&self.rx_stamps_software, 1),
            tstamp::RxStampKind::Hardware => Self::add(&self.rx_stamps_hardware, 1),
        }
        Some(s.mono_ns)
    }
}

/// The shutdown signal: a flag for loops that poll it and an eventfd that wakes every epoll
/// (and poll) loop it is registered in. The eventfd is level-triggered: once written it
/// stays readable, so every loop sees it.
pub(crate) struct Stop {
    flag: AtomicBool,
    efd: EventFd,
}

/// The epoll `data` value of the stop eventfd.
pub(crate) const STOP_TOKEN: u64 = u64::MAX;

impl Stop {
    pub fn new() -> Result<Self, ServerError> {
        let efd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| ServerError::io("eventfd", e))?;
        Ok(Stop {
            flag: AtomicBool::new(false),
            efd,
        })
    }

    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    pub fn set(&self) {
        self.flag.store(true, Ordering::Release);
        // A full counter (EAGAIN) is still readable, which is all that matters.
        let _ = self.efd.write(1);
    }

    pub fn eventfd(&self) -> &EventFd {
        &self.efd
    }

    /// Blocks until `fd` is readable or the stop signal is set; true if `fd` is readable.
    pub fn wait_readable(&self, fd: RawFd) -> io::Result<bool> {
        let mut p = [
            libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.efd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            if self.is_set() {
                return Ok(false);
            }
            // SAFETY: `p` is an array of two valid pollfds.
            let rc = unsafe { libc::poll(p.as_mut_ptr(), 2, -1) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if self.is_set() || p[1].revents != 0 {
                return Ok(false);
            }
            if p[0].revents != 0 {
                return Ok(true);
            }
        }
    }
}

/// After a failed `accept`: on anything but "no connection waiting" (e.g. EMFILE, which
/// leaves the listener readable) pause briefly rather than spin on it.
pub(crate) fn accept_backoff(e: &io::Error) {
    if e.kind() != io::ErrorKind::WouldBlock && e.kind() != io::ErrorKind::Interrupted {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// What a non-blocking listener gave.
pub(crate) enum Accepted {
    /// A connection, non-blocking and set up for the server ([`setup_conn`]).
    Conn(TcpStream),
    /// One that could not be set up (dropped: its client sees the connection close).
    Skipped,
    /// None waiting now (after the pause [`accept_backoff`] asks for on an error).
    None,
}

/// The next connection from a non-blocking `listener`.
pub(crate) fn accept_nonblocking(listener: &std::net::TcpListener, shared: &Shared) -> Accepted {
    match listener.accept() {
        Ok((s, _)) if s.set_nonblocking(true).is_ok() && setup_conn(&s, shared).is_ok() => {
            Accepted::Conn(s)
        }
        Ok(_) => Accepted::Skipped,
        Err(e) => {
            accept_backoff(&e);
            Accepted::None
        }
    }
}

/// Pins the calling thread and applies the scheduling and memory policies of `cfg`.
pub(crate) fn place(cfg: &ServerConfig) -> Result<(), ServerError> {
    if !cfg.cpus.is_empty() {
        host::placement::pin_current_thread(&cfg.cpus)?;
    }
    if let Some(s) = &cfg.sched {
        host::placement::apply_sched_current_thread(s)?;
    }
    if let Some(p) = &cfg.numa {
        let (mode, mask) = p.raw();
        host::numa::set_mempolicy(mode, &mask)
            .map_err(|e| ServerError::Config(format!("set_mempolicy({p}): {e}")))?;
    }
    Ok(())
}

/// Busy-spins on CLOCK_MONOTONIC until `ns` have passed since `from`; returns the time read
/// last (≥ `from + ns`).
pub(crate) fn spin_until(from: u64, ns: u64) -> u64 {
    let end = from.saturating_add(ns);
    loop {
        let now = mono_now_ns();
        if now >= end {
            return now;
        }
        std::hint::spin_loop();
    }
}

/// One worker's request processing: synthetic work and stage stamps.
pub(crate) struct Work {
    gen: Option<model::ServiceGen>,
    stamps_allowed: bool,
}

/// The stamps taken before the work: T1 (kernel rx, 0 unknown), T2 (wake-up), T3 (decoded).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pre {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
}

impl Pre {
    /// Builds T1..T3 so that they are non-decreasing. T1 is the kernel's stamp of the packet
    /// that carried the request's last byte, or 0. A request that arrived while the thread was
    /// already awake (T1 after the wake-up reading) had no wake-up to wait for: T2 = T1.
    pub fn new(t1: Option<u64>, t2: u64, t3: u64) -> Self {
        let t1 = t1.unwrap_or(0);
        let t2 = t2.max(t1);
        Pre {
            t1,
            t2,
            t3: t3.max(t2),
        }
    }
}

impl Work {
    pub fn new(cfg: &ServerConfig, index: u64) -> Result<Self, ServerError> {
        let gen = match &cfg.work {
            Some(spec) => Some(model::ServiceGen::new(spec, cfg.seed.wrapping_add(index))?),
            None => None,
        };
        Ok(Work {
            gen,
            stamps_allowed: cfg.stamps,
        })
    }

    /// A responder without synthetic work (for architectures that spend their own costs).
    pub fn without_work(cfg: &ServerConfig) -> Self {
        Work {
            gen: None,
            stamps_allowed: cfg.stamps,
        }
    }

    /// Whether this request gets stamps (then `pre` should be filled in by the caller).
    pub fn wants_stamps(&self, h: &Header) -> bool {
        self.stamps_allowed && h.flags.want_stamps
    }

    /// Spends the synthetic work (busy spin); returns T4 when `stamped`, else 0.
    pub fn do_work(&mut self, stamped: bool) -> u64 {
        let work_ns = self
            .gen
            .as_mut()
            .map_or(0, |g| g.sample_ns().max(0.0).round() as u64);
        if work_ns > 0 {
            spin_until(mono_now_ns(), work_ns)
        } else if stamped {
            mono_now_ns()
        } else {
            0
        }
    }

    /// Appends the response to `out`, with T4 as given and T5 taken right here, just before
    /// the caller writes. Returns whether the client asked for (and will get, if the kernel
    /// reports it) a transmit-stamp follow-up.
    pub fn respond(
        &self,
        h: &Header,
        payload: &[u8],
        pre: Option<Pre>,
        t4: u64,
        out: &mut Vec<u8>,
    ) -> bool {
        let stamps = pre.map(|p| {
            let t4 = t4.max(p.t3);
            Stamps([p.t1, p.t2, p.t3, t4, mono_now_ns().max(t4), 0])
        });
        if nullrpc::encode_response(out, h, payload, stamps.as_ref()).is_ok() {
            return stamps.is_some() && h.flags.want_tx_stamp;
        }
        // Only a maximal request plus the trailer can exceed MAX_FRAME: answer without stamps.
        let _ = nullrpc::encode_response(out, h, payload, None);
        false
    }

    /// [`Work::do_work`] then [`Work::respond`].
    pub fn serve(
        &mut self,
        h: &Header,
        payload: &[u8],
        pre: Option<Pre>,
        out: &mut Vec<u8>,
    ) -> bool {
        let t4 = self.do_work(pre.is_some());
        self.respond(h, payload, pre, t4, out)
    }
}

/// The events a connection is registered for while it is read: data, and the peer's
/// half-close.
pub(crate) const READ_EVENTS: EpollFlags = EpollFlags::EPOLLIN.union(EpollFlags::EPOLLRDHUP);

/// Sets up an accepted connection the way every TCP architecture wants it.
pub(crate) fn setup_conn(s: &TcpStream, shared: &Shared) -> io::Result<()> {
    s.set_nodelay(true)?;
    if shared.cfg.stamps {
        // Receive stamps only; transmit stamps are switched on by the first request that
        // wants T6 (see `OutBuf`). Best effort: a socket that refuses is served without T1.
        let _ = tstamp::enable_with(s.as_raw_fd(), true, false, shared.hw.is_some());
    }
    AtomicCounters::add(&shared.counters.connections_accepted, 1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_stamps_are_made_non_decreasing() {
        let p = Pre::new(Some(50), 40, 45);
        assert_eq!((p.t1, p.t2, p.t3), (50, 50, 50));
        let p = Pre::new(None, 40, 45);
        assert_eq!((p.t1, p.t2, p.t3), (0, 40, 45));
        let p = Pre::new(Some(10), 40, 45);
        assert_eq!((p.t1, p.t2, p.t3), (10, 40, 45));
    }
}
