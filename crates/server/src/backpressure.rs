//! Back-pressure: how the server stops reading instead of growing (see the crate doc,
//! "Memory bounds"). Two mechanisms:
//!
//! - per connection, [`sync_interest`] drops the read events of a connection whose unsent
//!   replies passed [`Limits::max_unsent_bytes`](crate::Limits) and takes them back once the
//!   client has drained them to `resume_unsent_bytes`;
//! - per server, a [`Backlog`] counts the requests read but not yet taken by a worker
//!   (dispatch, staged) and holds the reading thread while they are too many.
//!
//! Either way the requests stay in the kernel's socket buffers and then in the client's: the
//! client's writes block, which is the signal it needs. Nothing read is dropped.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};

use crate::common::{AtomicCounters, Stop, READ_EVENTS};
use crate::tcp_buf::OutBuf;
use crate::{Limits, Shared};

/// Brings a connection's epoll registration in line with its output: EPOLLOUT while replies
/// are unsent, the read events unless reads are paused for undrained replies (a new pause
/// is counted). Callers that share `out` between threads hold its lock, so that they agree
/// on `registered`.
pub(crate) fn sync_interest(ep: &Epoll, s: &TcpStream, out: &mut OutBuf, shared: &Shared) {
    if out.update_pause(&shared.cfg.limits) {
        AtomicCounters::add(&shared.counters.reads_paused, 1);
    }
    let mut want = EpollFlags::empty();
    if !out.paused {
        want |= READ_EVENTS;
    }
    if !out.is_empty() {
        want |= EpollFlags::EPOLLOUT;
    }
    if want != out.registered {
        let mut e = EpollEvent::new(want, std::os::fd::AsRawFd::as_raw_fd(s) as u64);
        if ep.modify(s, &mut e).is_ok() {
            out.registered = want;
        }
    }
}

/// True when a connection whose reads are paused got a hang-up: its client is gone both ways,
/// its replies cannot be delivered, and reading the rest of its requests would only queue
/// more of them. The caller closes it.
pub(crate) fn paused_and_hung_up(out: &OutBuf, ev: EpollFlags) -> bool {
    out.paused && ev.contains(EpollFlags::EPOLLHUP)
}

/// The requests a reading thread has decoded that no worker has taken yet, bounded by
/// [`Limits::max_queued_requests`] and [`Limits::max_queued_bytes`].
///
/// The counts are atomics so that the hot path (one add per request read, one remove per
/// request taken) takes no lock; the lock and condition variable are only for the reading
/// thread's wait when the backlog is full, and a worker touches them only while that
/// thread is waiting.
pub(crate) struct Backlog {
    requests: AtomicUsize,
    bytes: AtomicUsize,
    max_requests: usize,
    max_bytes: usize,
    /// The reading thread is (about to be) waiting in [`Backlog::wait_for_room`].
    reader_waiting: AtomicBool,
    lock: Mutex<()>,
    room: Condvar,
}

impl Backlog {
    pub fn new(limits: &Limits) -> Self {
        Backlog {
            requests: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            max_requests: limits.max_queued_requests,
            max_bytes: limits.max_queued_bytes,
            reader_waiting: AtomicBool::new(false),
            lock: Mutex::new(()),
            room: Condvar::new(),
        }
    }

    /// A request of `bytes` (its whole frame) was read.
    pub fn add(&self, bytes: usize) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.bytes.fetch_add(bytes, Ordering::SeqCst);
    }

    /// A worker took a request of `bytes`; wakes the reading thread if it waits and the
    /// backlog is down to half its bounds.
    pub fn remove(&self, bytes: usize) {
        self.requests.fetch_sub(1, Ordering::SeqCst);
        self.bytes.fetch_sub(bytes, Ordering::SeqCst);
        // SeqCst pairs with the reader's store of `reader_waiting` and its re-check: either
        // it sees this removal or this sees it waiting.
        if self.reader_waiting.load(Ordering::SeqCst) && self.at_low_mark() {
            let _guard = self.lock.lock();
            self.room.notify_all();
        }
    }

    /// The reading thread must not read more.
    pub fn is_full(&self) -> bool {
        self.requests.load(Ordering::SeqCst) >= self.max_requests
            || self.bytes.load(Ordering::SeqCst) >= self.max_bytes
    }

    /// Half of both bounds: the reading thread resumes here rather than as soon as one
    /// request is taken, so that it reads in batches instead of waking per request.
    fn at_low_mark(&self) -> bool {
        self.requests.load(Ordering::SeqCst) <= self.max_requests / 2
            && self.bytes.load(Ordering::SeqCst) <= self.max_bytes / 2
    }

    /// Blocks the reading thread until the backlog is down to half its bounds or the server
    /// stops; false when it stops.
    pub fn wait_for_room(&self, stop: &Stop) -> bool {
        let Ok(mut g) = self.lock.lock() else {
            return false;
        };
        self.reader_waiting.store(true, Ordering::SeqCst);
        while !self.at_low_mark() && !stop.is_set() {
            g = match self.room.wait(g) {
                Ok(g) => g,
                Err(_) => return false,
            };
        }
        self.reader_waiting.store(false, Ordering::SeqCst);
        !stop.is_set()
    }

    /// Wakes the reading thread for shutdown (the stop flag is already set); taking the lock
    /// orders this after its stop check.
    pub fn wake(&self) {
        let _guard = self.lock.lock();
        self.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn backlog(max_requests: usize, max_bytes: usize) -> Backlog {
        Backlog::new(&Limits {
            max_queued_requests: max_requests,
            max_queued_bytes: max_bytes,
            ..Limits::default()
        })
    }

    #[test]
    fn full_at_either_bound() {
        let b = backlog(2, 1000);
        b.add(10);
        assert!(!b.is_full());
        b.add(10);
        assert!(b.is_full(), "two requests");
        b.remove(10);
        b.remove(10);
        b.add(1000);
        assert!(b.is_full(), "1000 bytes");
    }

    #[test]
    fn the_reader_waits_until_workers_take_half() {
        let b = Arc::new(backlog(4, 1 << 20));
        for _ in 0..4 {
            b.add(1);
        }
        let stop = Stop::new().unwrap();
        let worker = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                for _ in 0..2 {
                    b.remove(1);
                }
            })
        };
        assert!(b.wait_for_room(&stop));
        assert!(b.at_low_mark());
        worker.join().unwrap();
    }

    #[test]
    fn stop_releases_a_waiting_reader() {
        let b = Arc::new(backlog(1, 1 << 20));
        b.add(1);
        let stop = Arc::new(Stop::new().unwrap());
        let reader = {
            let (b, stop) = (Arc::clone(&b), Arc::clone(&stop));
            std::thread::spawn(move || b.wait_for_room(&stop))
        };
        stop.set();
        b.wake();
        assert!(!reader.join().unwrap());
    }
}
