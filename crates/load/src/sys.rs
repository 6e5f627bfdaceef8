//! A minimal epoll wrapper.
//!
//! Written by hand on libc rather than taken from nix because the engine needs
//! `epoll_pwait2` (nanosecond timeouts, Linux ≥ 5.11) to wake ~100 µs before a far send;
//! `epoll_wait` only has millisecond timeouts. Its polls use `epoll_pwait2` as well, which
//! keeps them off the call the measured servers wait in (and the eBPF collector traces).
//! Falls back to `epoll_wait` when the kernel lacks `epoll_pwait2`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `epoll_pwait2` returned ENOSYS, so later waits go straight to `epoll_wait`.
static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

pub(crate) struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    pub(crate) fn new(capacity: usize) -> io::Result<Self> {
        // SAFETY: plain syscall; the returned fd is checked and then owned.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let empty = libc::epoll_event { events: 0, u64: 0 };
        Ok(Epoll {
            fd,
            events: vec![empty; capacity.clamp(8, 1024)],
        })
    }

    /// Registers `fd` for level-triggered readability; `token` comes back with its events.
    pub(crate) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: ev is a valid epoll_event for the duration of the call.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits at most `timeout_ns` (0 = poll) and returns the tokens of ready descriptors.
    pub(crate) fn wait(&mut self, timeout_ns: u64) -> io::Result<impl Iterator<Item = u64> + '_> {
        let max = self.events.len() as libc::c_int;
        let epfd = self.fd.as_raw_fd();
        let ptr = self.events.as_mut_ptr();
        let wait_ms = |timeout_ns: u64| {
            // Millisecond fallback, rounded down so we still wake early.
            let ms = (timeout_ns / 1_000_000).min(i32::MAX as u64) as libc::c_int;
            // SAFETY: ptr/max describe our owned events buffer.
            unsafe { libc::epoll_wait(epfd, ptr, max, ms) }
        };
        // A poll (0) goes through epoll_pwait2 too: the servers tailscope measures wait in
        // epoll_wait, so the eBPF stage collector traces that call and leaves epoll_pwait2
        // alone, and the engine's polls between sends (tens per request) then run none of
        // its programs.
        let mut n = if NO_PWAIT2.load(Ordering::Relaxed) {
            wait_ms(timeout_ns)
        } else {
            let ts = libc::timespec {
                tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: as above; ts outlives the call; a null sigmask means "unchanged".
            let r = unsafe { libc::epoll_pwait2(epfd, ptr, max, &ts, std::ptr::null()) };
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                NO_PWAIT2.store(true, Ordering::Relaxed);
                wait_ms(timeout_ns)
            } else {
                r
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                n = 0;
            } else {
                return Err(e);
            }
        }
        Ok(self.events[..n as usize].iter().map(|e| e.u64))
    }
}
