//! Kernel software timestamps (`SO_TIMESTAMPING`) mapped onto `CLOCK_MONOTONIC`.
//!
//! The kernel stamps a received packet when the network stack first sees it
//! (`SOF_TIMESTAMPING_RX_SOFTWARE`) and a sent packet when it is handed to the device driver
//! (`SOF_TIMESTAMPING_TX_SOFTWARE`, read back from the socket's error queue). Both arrive as
//! `CLOCK_REALTIME`; every stamp tailscope keeps is `CLOCK_MONOTONIC`, so they are converted
//! with a [`ClockMap`] (realtime − monotonic offset), re-sampled every
//! [`CLOCK_MAP_MAX_AGE_NS`] per thread so that NTP slewing (≤ 500 ppm) moves the mapping by at
//! most 5 µs between samples.
//!
//! The receive stamps are read from the `SCM_TIMESTAMPING` control message by
//! [`scm_timestamping`] (software stamp and the NIC's raw hardware stamp) and chosen by
//! [`choose_rx`]: the hardware one when the packet has it and the NIC's clock is mapped
//! ([`recv_stamped`] with a [`HwClock`](crate::hwstamp::HwClock)), else the software one; an
//! [`RxStamp`] says which.

use std::cell::{Cell, RefCell};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};

use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrLike, SockaddrStorage,
    TimestampingFlag,
};
use nix::sys::time::TimeSpec;

pub use crate::clock::{
    mono_now_ns, realtime_now_ns, thread_cpu_ns, ClockMap, CLOCK_MAP_MAX_AGE_NS,
};
use crate::hwstamp::HwClock;
use crate::HostError;

/// `SCM_TSTAMP_SND` from linux/errqueue.h (not in the libc crate): the stamp was taken when
/// the packet was handed to the driver.
const SCM_TSTAMP_SND: u32 = 0;

thread_local! {
    static CLOCK_MAP: Cell<Option<ClockMap>> = const { Cell::new(None) };
    // Sized by nix's macro (its capacity) and filled, so that its length is the space.
    static CMSG_BUF: RefCell<Vec<u8>> = RefCell::new(vec![
        0u8;
        nix::cmsg_space!(
            [libc::timespec; 3],
            libc::sock_extended_err,
            libc::sockaddr_in6
        )
        .capacity()
    ]);
}

/// This thread's mapping, re-sampled when older than [`CLOCK_MAP_MAX_AGE_NS`].
fn current_map() -> ClockMap {
    CLOCK_MAP.with(|c| match c.get() {
        Some(m) if mono_now_ns().saturating_sub(m.sampled_at_ns()) < CLOCK_MAP_MAX_AGE_NS => m,
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
    enable_with(fd, rx, tx, false)
}

/// The `SO_TIMESTAMPING` flags `fd` has now (0 when they cannot be read).
fn current_flags(fd: RawFd) -> u32 {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid, writable and sized for an int option.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        v as u32
    } else {
        0
    }
}

/// [`enable`], also asking for the NIC's raw hardware receive stamps when `hw_rx` (they
/// arrive only from a NIC whose receive filter is on: see [`crate::hwstamp`]). Hardware
/// receive stamps the socket already asked for are kept while `rx` (so that switching
/// transmit stamps on later with [`enable`] does not drop them).
pub fn enable_with(fd: RawFd, rx: bool, tx: bool, hw_rx: bool) -> Result<(), HostError> {
    let hw_bits = crate::hwstamp::SOF_TIMESTAMPING_RX_HARDWARE
        | crate::hwstamp::SOF_TIMESTAMPING_RAW_HARDWARE;
    let hw_rx = hw_rx || (rx && current_flags(fd) & hw_bits == hw_bits);
    let mut flags = TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
    if rx {
        flags |= TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE;
    }
    if rx && hw_rx {
        flags |= TimestampingFlag::from_bits_retain(
            (crate::hwstamp::SOF_TIMESTAMPING_RX_HARDWARE
                | crate::hwstamp::SOF_TIMESTAMPING_RAW_HARDWARE) as _,
        );
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

/// Which clock a receive stamp was taken on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RxStampKind {
    /// The kernel's software stamp (the stack's entry; `CLOCK_REALTIME`).
    Software,
    /// The NIC's raw hardware stamp (its PHC).
    Hardware,
}

/// A receive stamp mapped onto `CLOCK_MONOTONIC`, and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxStamp {
    pub mono_ns: u64,
    pub kind: RxStampKind,
}

/// The stamps of one `SCM_TIMESTAMPING` control message, ns (None for a zero timespec): the
/// software stamp (`CLOCK_REALTIME`, its first timespec) and the raw hardware stamp (the
/// NIC's PHC, its third; the second is unused since Linux 3.17).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScmTimestamping {
    pub software: Option<u64>,
    pub hw_raw: Option<u64>,
}

/// `SO_TIMESTAMPING_NEW` (asm-generic/socket.h): the 64-bit-time form, three
/// `__kernel_timespec`s of 16 bytes.
const SO_TIMESTAMPING_NEW: libc::c_int = 65;

fn ns_of(sec: i64, nsec: i64) -> Option<u64> {
    if (sec == 0 && nsec == 0) || sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return None;
    }
    Some((sec as u64).saturating_mul(1_000_000_000) + nsec as u64)
}

/// The `SCM_TIMESTAMPING` message among the control messages `control` (the bytes
/// `recvmsg` wrote: `struct cmsghdr`s, each aligned to the word size), None when there is
/// none or it is malformed. The last one wins.
pub fn scm_timestamping(control: &[u8]) -> Option<ScmTimestamping> {
    const W: usize = std::mem::size_of::<usize>();
    let align = |n: usize| n.div_ceil(W) * W;
    let hdr = align(std::mem::size_of::<libc::cmsghdr>());
    let word = |b: &[u8], at: usize, n: usize| -> Option<i64> {
        let s = b.get(at..at + n)?;
        Some(match n {
            4 => i32::from_ne_bytes([s[0], s[1], s[2], s[3]]) as i64,
            _ => i64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
        })
    };
    let mut out = None;
    let mut at = 0usize;
    while at + hdr <= control.len() {
        let len = word(control, at, W)? as usize;
        let level = word(control, at + W, 4)? as libc::c_int;
        let kind = word(control, at + W + 4, 4)? as libc::c_int;
        if len < hdr || at + len > control.len() {
            return out;
        }
        let data = &control[at + hdr..at + len];
        if level == libc::SOL_SOCKET
            && (kind == libc::SO_TIMESTAMPING || kind == SO_TIMESTAMPING_NEW)
        {
            // SO_TIMESTAMPING_NEW: 64-bit fields; the old form: the C library's timespec.
            let (sec, nsec) = if kind == SO_TIMESTAMPING_NEW {
                (8, 8)
            } else {
                (
                    std::mem::size_of::<libc::time_t>(),
                    std::mem::size_of::<libc::c_long>(),
                )
            };
            let ts = align(sec + nsec).max(sec + nsec);
            let one = |k: usize| -> Option<Option<u64>> {
                let s = word(data, k * ts, sec)?;
                let n = word(data, k * ts + sec, nsec)?;
                Some(ns_of(s, n))
            };
            if let (Some(sw), Some(hw)) = (one(0), one(2)) {
                out = Some(ScmTimestamping {
                    software: sw,
                    hw_raw: hw,
                });
            }
        }
        at += align(len);
    }
    out
}

/// The receive stamp to use: the raw hardware stamp when there is one and the NIC's clock
/// is mapped (`hw`), else the software stamp (`realtime` maps it); None when neither.
pub fn choose_rx(
    ts: ScmTimestamping,
    realtime: &ClockMap,
    hw: Option<&ClockMap>,
) -> Option<RxStamp> {
    if let (Some(raw), Some(map)) = (ts.hw_raw, hw) {
        return Some(RxStamp {
            mono_ns: map.realtime_to_mono(raw),
            kind: RxStampKind::Hardware,
        });
    }
    ts.software.map(|rt| RxStamp {
        mono_ns: realtime.realtime_to_mono(rt),
        kind: RxStampKind::Software,
    })
}

/// `recvmsg` into `buf`: the bytes read, the sender (`name`, when given), and the receive
/// stamp of the (last) packet read.
fn recv_inner(
    fd: RawFd,
    buf: &mut [u8],
    flags: i32,
    name: Option<&mut libc::sockaddr_storage>,
    hw: Option<&HwClock>,
) -> io::Result<(usize, libc::socklen_t, Option<RxStamp>)> {
    CMSG_BUF.with(|cb| {
        let mut cb = cb.borrow_mut();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is a valid empty one.
        let mut mhdr: libc::msghdr = unsafe { std::mem::zeroed() };
        if let Some(n) = name {
            mhdr.msg_name = (n as *mut libc::sockaddr_storage).cast();
            mhdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        }
        mhdr.msg_iov = &mut iov;
        mhdr.msg_iovlen = 1;
        mhdr.msg_control = cb.as_mut_ptr().cast();
        mhdr.msg_controllen = cb.len() as _;
        // SAFETY: every pointer in `mhdr` points at live, writable memory of the stated
        // length (the caller's buffer, the address, this thread's control buffer).
        let n = unsafe { libc::recvmsg(fd, &mut mhdr, flags) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // Control data truncated: the bytes are good, the stamp is not known.
        let stamp = if mhdr.msg_flags & libc::MSG_CTRUNC != 0 {
            None
        } else {
            let len = (mhdr.msg_controllen as usize).min(cb.len());
            scm_timestamping(&cb[..len]).and_then(|ts| {
                let hw_map = ts.hw_raw.and(hw).and_then(|c| c.map());
                choose_rx(ts, &current_map(), hw_map.as_ref())
            })
        };
        Ok((n as usize, mhdr.msg_namelen, stamp))
    })
}

/// `recvmsg` into `buf` with `flags` (`MSG_*`); returns the bytes read and the kernel software
/// receive timestamp of the (last) packet read, as `CLOCK_MONOTONIC` ns, when the socket has
/// receive stamps enabled and the kernel attached one.
pub fn recv_with_stamp(fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<(usize, Option<u64>)> {
    let (n, _, stamp) = recv_inner(fd, buf, flags, None, None)?;
    Ok((n, stamp.map(|s| s.mono_ns)))
}

/// [`recv_with_stamp`] preferring the NIC's hardware stamp when `hw` (the NIC's clock) is
/// given and the packet carries one; says which kind it used.
pub fn recv_stamped(
    fd: RawFd,
    buf: &mut [u8],
    flags: i32,
    hw: Option<&HwClock>,
) -> io::Result<(usize, Option<RxStamp>)> {
    let (n, _, stamp) = recv_inner(fd, buf, flags, None, hw)?;
    Ok((n, stamp))
}

/// [`recv_with_stamp`] for datagram sockets: also returns the sender's address.
pub fn recv_from_with_stamp(
    fd: RawFd,
    buf: &mut [u8],
    flags: i32,
) -> io::Result<(usize, SocketAddr, Option<u64>)> {
    let (n, addr, stamp) = recv_from_stamped(fd, buf, flags, None)?;
    Ok((n, addr, stamp.map(|s| s.mono_ns)))
}

/// [`recv_stamped`] for datagram sockets: also returns the sender's address.
pub fn recv_from_stamped(
    fd: RawFd,
    buf: &mut [u8],
    flags: i32,
    hw: Option<&HwClock>,
) -> io::Result<(usize, SocketAddr, Option<RxStamp>)> {
    // SAFETY: an all-zero sockaddr_storage is valid (family AF_UNSPEC).
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let (n, len, stamp) = recv_inner(fd, buf, flags, Some(&mut ss), hw)?;
    // SAFETY: `ss` holds `len` bytes of the address the kernel wrote.
    let addr = unsafe {
        SockaddrStorage::from_raw((&ss as *const libc::sockaddr_storage).cast(), Some(len))
    };
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
