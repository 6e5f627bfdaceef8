//! [`Arch::Epoll`](crate::Arch::Epoll): N epoll workers; an acceptor deals connections out
//! round-robin and each stays on its worker (per-worker queues, memcached/nginx style).

use std::collections::HashMap;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Mutex};

use host::tstamp::mono_now_ns;
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

use crate::backpressure::{paused_and_hung_up, sync_interest};
use crate::common::{
    accept_nonblocking, place, Accepted, AtomicCounters, Pre, Work, READ_EVENTS, STOP_TOKEN,
};
use crate::tcp_buf::{InBuf, OutBuf};
use crate::{spawn, ServerError, Shared, Started};

/// Connections accepted for a worker but not yet taken into its table.
type Inbox = Arc<Mutex<Vec<TcpStream>>>;

/// A new epoll instance with the stop eventfd registered.
pub(crate) fn new_epoll(shared: &Shared) -> Result<Epoll, ServerError> {
    let ep = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)
        .map_err(|e| ServerError::io("epoll_create", e))?;
    ep.add(
        shared.stop.eventfd(),
        EpollEvent::new(EpollFlags::EPOLLIN, STOP_TOKEN),
    )
    .map_err(|e| ServerError::io("epoll_ctl(eventfd)", e))?;
    Ok(ep)
}

pub(crate) fn start(listener: TcpListener, shared: &Arc<Shared>) -> Result<Started, ServerError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| ServerError::io("set_nonblocking(listener)", e))?;
    let mut threads = Vec::new();
    let mut slots = Vec::new();
    let result = (|| {
        for i in 0..shared.cfg.workers {
            let ep = Arc::new(new_epoll(shared)?);
            let inbox: Inbox = Arc::default();
            let (e2, in2, sh) = (Arc::clone(&ep), Arc::clone(&inbox), Arc::clone(shared));
            threads.push(spawn(format!("ts-epoll-{i}"), move || {
                worker(i as u64, &e2, &in2, &sh)
            })?);
            slots.push((ep, inbox));
        }
        let sh = Arc::clone(shared);
        threads.push(spawn("ts-accept".into(), move || {
            accept_loop(listener, slots, &sh)
        })?);
        Ok(())
    })();
    Started::finish(result, threads, shared, Box::new(|| {}))
}

fn accept_loop(listener: TcpListener, slots: Vec<(Arc<Epoll>, Inbox)>, shared: &Shared) {
    let _ = place(&shared.cfg);
    let mut next = 0usize;
    while let Ok(true) = shared.stop.wait_readable(listener.as_raw_fd()) {
        loop {
            let s = match accept_nonblocking(&listener, shared) {
                Accepted::Conn(s) => s,
                Accepted::Skipped => continue,
                Accepted::None => break,
            };
            let (ep, inbox) = &slots[next % slots.len()];
            next += 1;
            // The stream goes into the inbox before its fd is registered, under the inbox lock,
            // so the worker finds it on its first event and cannot close it before the add.
            let Ok(mut ib) = inbox.lock() else { return };
            let fd = s.as_raw_fd();
            ib.push(s);
            // SAFETY: `fd` belongs to the stream just pushed, which cannot be dropped while
            // the inbox lock is held.
            let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
            if ep
                .add(bfd, EpollEvent::new(READ_EVENTS, fd as u64))
                .is_err()
            {
                ib.pop();
            }
        }
    }
}

struct Conn {
    stream: TcpStream,
    inb: InBuf,
    out: OutBuf,
}

fn worker(index: u64, ep: &Epoll, inbox: &Inbox, shared: &Shared) {
    let _ = place(&shared.cfg);
    let Ok(mut work) = Work::new(&shared.cfg, index) else {
        return;
    };
    let mut conns: HashMap<RawFd, Conn> = HashMap::new();
    let mut events = vec![EpollEvent::empty(); 64];
    loop {
        let n = match ep.wait(&mut events, EpollTimeout::NONE) {
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(_) => return,
        };
        let t2 = mono_now_ns();
        for ev in &events[..n] {
            if ev.data() == STOP_TOKEN || shared.stop.is_set() {
                return;
            }
            let fd = ev.data() as RawFd;
            if !conns.contains_key(&fd) {
                if let Ok(mut ib) = inbox.lock() {
                    for s in ib.drain(..) {
                        conns.insert(
                            s.as_raw_fd(),
                            Conn {
                                stream: s,
                                inb: InBuf::new(),
                                out: OutBuf::new(),
                            },
                        );
                    }
                }
            }
            let Some(c) = conns.get_mut(&fd) else {
                continue;
            };
            let writes = c.out.writes;
            let keep = handle(c, ev.events(), t2, &mut work, shared).is_ok();
            AtomicCounters::add(&shared.counters.reply_writes, c.out.writes - writes);
            if keep {
                sync_interest(ep, &c.stream, &mut c.out, shared);
            } else {
                let _ = ep.delete(&c.stream);
                conns.remove(&fd);
            }
        }
    }
}

/// Handles one readiness event; `Err` closes the connection.
fn handle(
    c: &mut Conn,
    ev: EpollFlags,
    t2: u64,
    work: &mut Work,
    shared: &Shared,
) -> io::Result<()> {
    let counters = &shared.counters;
    let fd = c.stream.as_raw_fd();
    if paused_and_hung_up(&c.out, ev) {
        return Err(io::ErrorKind::ConnectionAborted.into());
    }
    let mut stamps_seen = 0;
    if ev.contains(EpollFlags::EPOLLERR) {
        stamps_seen = c.out.collect_tx_stamps(fd)?;
        AtomicCounters::add(&counters.tx_stamps_sent, stamps_seen);
    }
    // A paused connection is registered without read events, but an event of this batch
    // may predate the pause: that one read more is harmless (one read's replies).
    let readable = ev.intersects(READ_EVENTS | EpollFlags::EPOLLHUP)
        || (ev.contains(EpollFlags::EPOLLERR) && stamps_seen == 0);
    if readable {
        let (n, t1) = match c.inb.read_from(fd, 0, shared) {
            Ok(r) => r,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                return flush(c, counters);
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        loop {
            let req = match c.inb.pop_frame(shared.cfg.max_frame) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    AtomicCounters::add(&counters.malformed_closed, 1);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
            };
            let pre = work
                .wants_stamps(&req.header)
                .then(|| Pre::new(if req.at_tail { t1 } else { None }, t2, mono_now_ns()));
            let payload = c.inb.bytes(req.payload.clone());
            c.out.push(fd, req.header.id, |b| {
                work.serve(&req.header, payload, pre, b)
            });
            AtomicCounters::add(&counters.served, 1);
            if !shared.cfg.batch_replies {
                c.out.flush(&c.stream)?;
            }
        }
    }
    // With batch_replies, every reply of the read goes out here, in one write.
    flush(c, counters)
}

/// Writes what is pending, then picks up transmit stamps that are already there (on
/// loopback they usually are by the time `send` returns) and writes their follow-ups.
fn flush(c: &mut Conn, counters: &AtomicCounters) -> io::Result<()> {
    c.out.flush(&c.stream)?;
    if c.out.tx_on {
        let n = c.out.collect_tx_stamps(c.stream.as_raw_fd())?;
        if n > 0 {
            AtomicCounters::add(&counters.tx_stamps_sent, n);
            c.out.flush(&c.stream)?;
        }
    }
    Ok(())
}
