//! Kernel software timestamps (`SO_TIMESTAMPING`) mapped onto `CLOCK_MONOTONIC`.
//!
//! The kernel stamps a received packet when the network stack first sees it
//! (`SOF_TIMESTAMPING_RX_SOFTWARE`) and a sent packet when it is handed to the device driver
//! (`SOF_TIMESTAMPING_TX_SOFTWARE`, read back from the socket's error queue). Both arrive as
//! `CLOCK_REALTIME`; every stamp tailscope keeps is `CLOCK_MONOTONIC`, so they are converted
//! with a [`ClockMap`] (realtime − monotonic offset), re-sampled every
//! [`CLOCK_MAP_MAX_AGE_NS`] per thread so that NTP slewing (≤ 500 ppm) moves the mapping by at
//! most 5 µs between samples.

use std::cell::{Cell, RefCell};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};

use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrLike, SockaddrStorage,
    TimestampingFlag,
};
use nix::sys::time::TimeSpec;

use crate::HostError;

/// `SCM_TSTAMP_SND` from linux/errqueue.h (not in the libc crate): the stamp was taken when
/// the packet was handed to the driver.
const SCM_TSTAMP_SND: u32 = 0;

/// How long a thread reuses its realtime→monotonic mapping before sampling it again.
pub const CLOCK_MAP_MAX_AGE_NS: u64 = 10_000_000;

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks always exist on Linux, so the
    // call cannot fail and its return value carries no information.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// `clock_gettime(CLOCK_MONOTONIC)` in ns.
#[inline]
pub fn mono_now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`), ns: what a background
/// thread of tailscope cost.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock_gettime(CLOCK_REALTIME)` in ns.
#[inline]
pub fn realtime_now_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// The offset between `CLOCK_REALTIME` and `CLOCK_MONOTONIC` at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockMap {
    /// realtime − monotonic, ns.
    offset_ns: i64,
    /// Width of the monotonic bracket around the realtime read that produced `offset_ns`:
    /// the offset is known to within ± half of it.
    uncertainty_ns: u64,
    /// When the sample was taken (monotonic ns).
    sampled_at_ns: u64,
}

impl ClockMap {
    /// Reads (mono, realtime, mono) a few times and keeps the tightest bracket; the realtime
    /// reading is paired with the bracket's midpoint.
    pub fn sample() -> Self {
        let mut best: Option<ClockMap> = None;
        for _ in 0..5 {
            let m1 = mono_now_ns();
            let r = realtime_now_ns();
            let m2 = mono_now_ns();
            let gap = m2.saturating_sub(m1);
            let mid = m1 + gap / 2;
            let cand = ClockMap {
                offset_ns: (r as i64).wrapping_sub(mid as i64),
                uncertainty_ns: gap,
                sampled_at_ns: m2,
            };
            best = match best {
                Some(b) if b.uncertainty_ns <= cand.uncertainty_ns => Some(b),
                _ => Some(cand),
            };
        }
        // The loop runs at least once.
        best.unwrap_or(ClockMap {
            offset_ns: 0,
            uncertainty_ns: u64::MAX,
            sampled_at_ns: 0,
        })
    }

    /// Converts a `CLOCK_REALTIME` reading to `CLOCK_MONOTONIC` (saturating at 0).
    #[inline]
    pub fn realtime_to_mono(&self, rt_ns: u64) -> u64 {
        let m = (rt_ns as i64).wrapping_sub(self.offset_ns);
        m.max(0) as u64
    }

    /// realtime − monotonic, ns.
    pub fn offset_ns(&self) -> i64 {
        self.offset_ns
    }

    /// The bracket width of the chosen sample (the offset is good to ± half of it).
    pub fn uncertainty_ns(&self) -> u64 {
        self.uncertainty_ns
    }
}

thread_local! {
    static CLOCK_MAP: Cell<Option<ClockMap>> = const { Cell::new(None) };
    static CMSG_BUF: RefCell<Vec<u8>> = RefCell::new(nix::cmsg_space!(
        [libc::timespec; 3],
        libc::sock_extended_err,
        libc::sockaddr_in6
    ));
}

/// This thread's mapping, re-sampled when older than [`CLOCK_MAP_MAX_AGE_NS`].
fn current_map() -> ClockMap {
    CLOCK_MAP.with(|c| match c.get() {
        Some(m) if mono_now_ns().saturating_sub(m.sampled_at_ns) < CLOCK_MAP_MAX_AGE_NS => m,
        _ => {
            let m = ClockMap::sample();
            c.set(Some(m));
            m
        }
    })
}

fn timespec_ns(ts: &TimeSpec) -> Option<u64> {
    let (s, ns) = (ts.tv_sec(), ts.tv_nsec());
    if (s == 0 && ns == 0) || s < 0 || ns < 0 {
        return None;
    }
    Some((s as u64).saturating_mul(1_000_000_000) + ns as u64)
}

/// Enables kernel software timestamps on `fd`: receive stamps when `rx`, transmit stamps via
/// the error queue when `tx` (with `OPT_ID`, so each stamp carries a key, and `OPT_TSONLY`,
/// so the error queue does not echo the sent bytes back).
///
/// The kernel turns receive stamping on lazily (a static key flipped from a workqueue when
/// the first socket on the host asks for it), so the first packets after that first `enable`
/// may arrive without a stamp; later ones have one.
///
/// For TCP the tx key of a `send` is the offset of its last byte counted from the first byte
/// sent after `enable` (call it before the first send); for UDP it counts datagrams from 0.
pub fn enable(fd: RawFd, rx: bool, tx: bool) -> Result<(), HostError> {
    let mut flags = TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
    if rx {
        flags |= TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE;
    }
    if tx {
        flags |= TimestampingFlag::SOF_TIMESTAMPING_TX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_ID
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_TSONLY;
    }
    // SAFETY: the caller owns `fd` for the duration of this call.
    let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
    setsockopt(&bfd, sockopt::Timestamping, &flags)
        .map_err(|e| HostError::sys("setsockopt(SO_TIMESTAMPING)", io::Error::from(e)))
}

/// Software timestamp carried by the control messages, realtime ns.
fn rx_realtime(cmsgs: impl Iterator<Item = ControlMessageOwned>) -> Option<u64> {
    let mut out = None;
    for c in cmsgs {
        if let ControlMessageOwned::ScmTimestampsns(t) = c {
            out = timespec_ns(&t.system);
        }
    }
    out
}

fn recv_inner<S: SockaddrLike>(
    fd: RawFd,
    buf: &mut [u8],
    flags: i32,
) -> io::Result<(usize, Option<S>, Option<u64>)> {
    CMSG_BUF.with(|cb| {
        let mut cb = cb.borrow_mut();
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<S>(
            fd,
            &mut iov,
            Some(&mut cb),
            MsgFlags::from_bits_retain(flags),
        )
        .map_err(io::Error::from)?;
        let rt = match msg.cmsgs() {
            Ok(it) => rx_realtime(it),
            // Control data truncated: the bytes are good, the stamp is not known.
            Err(_) => None,
        };
        let stamp = rt.map(|r| current_map().realtime_to_mono(r));
        Ok((msg.bytes, msg.address, stamp))
    })
}

/// `recvmsg` into `buf` with `flags` (`MSG_*`); returns the bytes read and the kernel software
/// receive timestamp of the (last) packet read, as `CLOCK_MONOTONIC` ns, when the socket has
/// receive stamps enabled and the kernel attached one.
pub fn recv_with_stamp(fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<(usize, Option<u64>)> {
    let (n, _, stamp) = recv_inner::<()>(fd, buf, flags)?;
    Ok((n, stamp))
}

/// [`recv_with_stamp`] for datagram sockets: also returns the sender's address.
pub fn recv_from_with_stamp(
    fd: RawFd,
    buf: &mut [u8],
    flags: i32,
) -> io::Result<(usize, SocketAddr, Option<u64>)> {
    let (n, addr, stamp) = recv_inner::<SockaddrStorage>(fd, buf, flags)?;
    let addr = addr
        .and_then(|a| {
            if let Some(v4) = a.as_sockaddr_in() {
                Some(SocketAddr::V4((*v4).into()))
            } else {
                a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
            }
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "sender is not an IP socket"))?;
    Ok((n, addr, stamp))
}

/// Reads one transmit timestamp from `fd`'s error queue without blocking:
/// `Ok(Some((key, monotonic_ns)))`, or `Ok(None)` when the queue holds no timestamp now.
/// Error-queue entries that are not software send stamps are consumed and skipped.
pub fn read_tx_stamp(fd: RawFd) -> io::Result<Option<(u32, u64)>> {
    let flags = libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT;
    // OPT_TSONLY: no payload comes back; a small buffer absorbs it if the option was not set.
    let mut scratch = [0u8; 64];
    loop {
        let got = CMSG_BUF.with(|cb| -> io::Result<Option<Option<(u32, u64)>>> {
            let mut cb = cb.borrow_mut();
            let mut iov = [IoSliceMut::new(&mut scratch)];
            let msg = match recvmsg::<()>(
                fd,
                &mut iov,
                Some(&mut cb),
                MsgFlags::from_bits_retain(flags),
            ) {
                Ok(m) => m,
                Err(nix::errno::Errno::EAGAIN) => return Ok(None),
                Err(e) => return Err(io::Error::from(e)),
            };
            let Ok(cmsgs) = msg.cmsgs() else {
                return Ok(Some(None));
            };
            let mut stamp = None;
            let mut key = None;
            for c in cmsgs {
                match c {
                    ControlMessageOwned::ScmTimestampsns(t) => stamp = timespec_ns(&t.system),
                    ControlMessageOwned::Ipv4RecvErr(e, _)
                    | ControlMessageOwned::Ipv6RecvErr(e, _)
                        if e.ee_errno == libc::ENOMSG as u32
                            && e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING
                            && e.ee_info == SCM_TSTAMP_SND =>
                    {
                        key = Some(e.ee_data)
                    }
                    _ => {}
                }
            }
            Ok(Some(match (key, stamp) {
                (Some(k), Some(rt)) => Some((k, current_map().realtime_to_mono(rt))),
                _ => None,
            }))
        })?;
        match got {
            None => return Ok(None),
            Some(Some(s)) => return Ok(Some(s)),
            Some(None) => continue,
        }
    }
}

/// Waits up to `timeout_ms` for `fd`'s error queue to become readable (`poll` with no
/// requested events reports `POLLERR` only). Returns whether it is.
pub fn wait_error_queue(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0 && p.revents & libc::POLLERR != 0)
}

#[cfg(test)]
#[path = "tstamp_tests.rs"]
mod tests;
