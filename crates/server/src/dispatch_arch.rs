//! [`Arch::Dispatch`](crate::Arch::Dispatch): one dispatcher thread accepts, reads and
//! decodes; N workers take requests from one shared FIFO, do the work and write the
//! responses themselves (one queue, c servers: the M/G/c structure).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Condvar, Mutex};

use host::tstamp::mono_now_ns;
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags, EpollTimeout};
use wire::nullrpc::{Header, HEADER_LEN};

use crate::backpressure::{paused_and_hung_up, sync_interest, Backlog};
use crate::common::READ_EVENTS;
use crate::common::{accept_nonblocking, place, Accepted, AtomicCounters, Pre, Work, STOP_TOKEN};
use crate::epoll_arch::new_epoll;
use crate::tcp_buf::{InBuf, OutBuf};
use crate::{spawn, ServerError, Shared, Started};

pub(crate) const LISTENER_TOKEN: u64 = u64::MAX - 1;

/// The part of a connection workers share with the dispatcher: the socket and its output.
pub(crate) struct DConn {
    pub stream: TcpStream,
    pub out: Mutex<OutBuf>,
}

/// The connections of one reading thread: shared part and input buffer, by fd.
pub(crate) type Conns = HashMap<RawFd, (Arc<DConn>, InBuf)>;

/// What a request counts in the [`Backlog`]: its whole frame.
pub(crate) fn frame_bytes(payload: &[u8]) -> usize {
    HEADER_LEN + payload.len()
}

/// A request as the reading thread decoded it (already added to the [`Backlog`]).
pub(crate) struct Decoded {
    pub conn: Arc<DConn>,
    pub header: Header,
    pub payload: Vec<u8>,
    /// The kernel receive stamp, when this request's last byte ended the `recv`.
    pub t1: Option<u64>,
}

struct Job {
    conn: Arc<DConn>,
    header: Header,
    payload: Vec<u8>,
    pre: Option<Pre>,
}

/// The shared FIFO, and its bound.
struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
    backlog: Backlog,
}

/// The epoll instance of a server whose one thread accepts and reads (this architecture's
/// dispatcher, the staged server's first stage): the stop eventfd and the non-blocking
/// listener registered.
pub(crate) fn listener_epoll(
    listener: &TcpListener,
    shared: &Shared,
) -> Result<Arc<Epoll>, ServerError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| ServerError::io("set_nonblocking(listener)", e))?;
    let ep = new_epoll(shared)?;
    ep.add(
        listener,
        EpollEvent::new(EpollFlags::EPOLLIN, LISTENER_TOKEN),
    )
    .map_err(|e| ServerError::io("epoll_ctl(listener)", e))?;
    Ok(Arc::new(ep))
}

pub(crate) fn start(listener: TcpListener, shared: &Arc<Shared>) -> Result<Started, ServerError> {
    let ep = listener_epoll(&listener, shared)?;
    let queue = Arc::new(Queue {
        jobs: Mutex::default(),
        ready: Condvar::new(),
        backlog: Backlog::new(&shared.cfg.limits),
    });
    let mut threads = Vec::new();
    let result = (|| {
        for i in 0..shared.cfg.workers {
            let (q, e, sh) = (Arc::clone(&queue), Arc::clone(&ep), Arc::clone(shared));
            threads.push(spawn(format!("ts-worker-{i}"), move || {
                worker(i as u64, &q, &e, &sh)
            })?);
        }
        let (q, sh) = (Arc::clone(&queue), Arc::clone(shared));
        threads.push(spawn("ts-dispatch".into(), move || {
            dispatcher(&listener, &ep, &q, &sh)
        })?);
        Ok(())
    })();
    let q = Arc::clone(&queue);
    let wake = move || {
        // Taking the lock orders this after any worker's stop check, so none misses it.
        let guard = q.jobs.lock();
        q.ready.notify_all();
        drop(guard);
        q.backlog.wake();
    };
    Started::finish(result, threads, shared, Box::new(wake))
}

fn dispatcher(listener: &TcpListener, ep: &Epoll, queue: &Queue, shared: &Shared) {
    let _ = place(&shared.cfg);
    let mut conns = Conns::new();
    let mut events = vec![EpollEvent::empty(); 64];
    loop {
        // Back-pressure: with the queue full, read nothing (and accept nothing) until the
        // workers have taken half of it; the requests wait in the kernel meanwhile.
        if queue.backlog.is_full() {
            AtomicCounters::add(&shared.counters.queue_full_pauses, 1);
            if !queue.backlog.wait_for_room(&shared.stop) {
                break;
            }
        }
        let n = match ep.wait(&mut events, EpollTimeout::NONE) {
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        };
        let t2 = mono_now_ns();
        let mut batch = Vec::new();
        let backlog = &queue.backlog;
        let go_on = on_events(
            &events[..n],
            listener,
            ep,
            &mut conns,
            backlog,
            shared,
            &mut |d| {
                let pre = (shared.cfg.stamps && d.header.flags.want_stamps)
                    .then(|| Pre::new(d.t1, t2, mono_now_ns()));
                batch.push(Job {
                    conn: d.conn,
                    header: d.header,
                    payload: d.payload,
                    pre,
                });
            },
        );
        if !batch.is_empty() {
            let Ok(mut q) = queue.jobs.lock() else { break };
            let k = batch.len();
            q.extend(batch);
            drop(q);
            if k == 1 {
                queue.ready.notify_one();
            } else {
                queue.ready.notify_all();
            }
        }
        if !go_on {
            break;
        }
    }
    close_all(ep, conns);
}

/// Handles the readiness `events` of a reading thread: accepts new connections, reads and
/// decodes requests (each added to `backlog` and handed to `sink` in arrival order), writes
/// pending output, closes broken connections. Once `backlog` is full it reads no more (the
/// connections stay readable, level-triggered, for later). False when the stop signal was
/// among the events.
pub(crate) fn on_events(
    events: &[EpollEvent],
    listener: &TcpListener,
    ep: &Epoll,
    conns: &mut Conns,
    backlog: &Backlog,
    shared: &Shared,
    sink: &mut dyn FnMut(Decoded),
) -> bool {
    for ev in events {
        match ev.data() {
            STOP_TOKEN => return false,
            LISTENER_TOKEN => loop {
                let s = match accept_nonblocking(listener, shared) {
                    Accepted::Conn(s) => s,
                    Accepted::Skipped => continue,
                    Accepted::None => break,
                };
                let fd = s.as_raw_fd();
                if ep.add(&s, EpollEvent::new(READ_EVENTS, fd as u64)).is_ok() {
                    let c = DConn {
                        stream: s,
                        out: Mutex::new(OutBuf::new()),
                    };
                    conns.insert(fd, (Arc::new(c), InBuf::new()));
                }
            },
            tok => {
                let fd = tok as RawFd;
                let Some((c, inb)) = conns.get_mut(&fd) else {
                    continue;
                };
                if handle(c, inb, ev.events(), ep, backlog, shared, sink).is_err() {
                    let _ = ep.delete(&c.stream);
                    let _ = c.stream.shutdown(Shutdown::Both);
                    conns.remove(&fd);
                }
            }
        }
    }
    true
}

/// Shuts every connection down (at exit of the reading thread).
pub(crate) fn close_all(ep: &Epoll, conns: Conns) {
    for (c, _) in conns.values() {
        let _ = ep.delete(&c.stream);
        let _ = c.stream.shutdown(Shutdown::Both);
    }
}

/// Handles one readiness event of a connection; `Err` closes it.
fn handle(
    c: &Arc<DConn>,
    inb: &mut InBuf,
    ev: EpollFlags,
    ep: &Epoll,
    backlog: &Backlog,
    shared: &Shared,
    sink: &mut dyn FnMut(Decoded),
) -> io::Result<()> {
    let counters = &shared.counters;
    let fd = c.stream.as_raw_fd();
    let mut stamps_seen = 0;
    if ev.intersects(EpollFlags::EPOLLERR | EpollFlags::EPOLLOUT | EpollFlags::EPOLLHUP) {
        let mut out = lock(&c.out)?;
        if paused_and_hung_up(&out, ev) {
            return Err(io::ErrorKind::ConnectionAborted.into());
        }
        if ev.contains(EpollFlags::EPOLLERR) {
            stamps_seen = out.collect_tx_stamps(fd)?;
            AtomicCounters::add(&counters.tx_stamps_sent, stamps_seen);
        }
        out.flush(&c.stream)?;
        sync_interest(ep, &c.stream, &mut out, shared);
    }
    // A paused connection is registered without read events, but an event of this batch may
    // predate the pause: that one read more is harmless (one read's requests).
    let readable = ev.intersects(READ_EVENTS | EpollFlags::EPOLLHUP)
        || (ev.contains(EpollFlags::EPOLLERR) && stamps_seen == 0);
    if !readable || backlog.is_full() {
        return Ok(());
    }
    let (n, t1) = match inb.read_from(fd, 0, shared) {
        Ok(r) => r,
        Err(e)
            if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted =>
        {
            return Ok(())
        }
        Err(e) => return Err(e),
    };
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    loop {
        match inb.pop_frame(shared.cfg.max_frame) {
            Ok(Some(req)) => {
                let payload = inb.bytes(req.payload).to_vec();
                backlog.add(frame_bytes(&payload));
                sink(Decoded {
                    conn: Arc::clone(c),
                    header: req.header,
                    payload,
                    t1: if req.at_tail { t1 } else { None },
                })
            }
            Ok(None) => return Ok(()),
            Err(e) => {
                AtomicCounters::add(&counters.malformed_closed, 1);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> io::Result<std::sync::MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| io::Error::other("a server thread panicked holding a lock"))
}

fn worker(index: u64, queue: &Queue, ep: &Epoll, shared: &Shared) {
    let _ = place(&shared.cfg);
    let Ok(mut work) = Work::new(&shared.cfg, index) else {
        return;
    };
    loop {
        let job = {
            let Ok(mut q) = queue.jobs.lock() else { return };
            loop {
                if shared.stop.is_set() {
                    return;
                }
                if let Some(j) = q.pop_front() {
                    break j;
                }
                q = match queue.ready.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
        };
        queue.backlog.remove(frame_bytes(&job.payload));
        let t4 = work.do_work(job.pre.is_some());
        let req = Request {
            conn: &job.conn,
            header: &job.header,
            payload: &job.payload,
            pre: job.pre,
        };
        if !reply(req, t4, &work, ep, shared) {
            return;
        }
    }
}

/// A request a worker answers: its connection, header and payload, and the server's stamps
/// taken before the work.
pub(crate) struct Request<'a> {
    pub conn: &'a DConn,
    pub header: &'a Header,
    pub payload: &'a [u8],
    pub pre: Option<Pre>,
}

/// A worker's answer: encodes the response (T5 taken there), writes it, forwards any transmit
/// stamps already there, and leaves EPOLLOUT armed if output is left (pausing the
/// connection's reads if too much is). False if a lock was poisoned (another server thread
/// panicked).
pub(crate) fn reply(req: Request<'_>, t4: u64, work: &Work, ep: &Epoll, shared: &Shared) -> bool {
    let Request {
        conn,
        header,
        payload,
        pre,
    } = req;
    let Ok(mut out) = conn.out.lock() else {
        return false;
    };
    // Responses of one connection may leave out of order when several workers serve it;
    // each carries its request's id.
    out.push(conn.stream.as_raw_fd(), header.id, |b| {
        work.respond(header, payload, pre, t4, b)
    });
    AtomicCounters::add(&shared.counters.served, 1);
    // A write error means the peer is gone; the reading thread sees the hang-up and closes.
    if out.flush(&conn.stream).is_ok() {
        if out.tx_on {
            if let Ok(n) = out.collect_tx_stamps(conn.stream.as_raw_fd()) {
                AtomicCounters::add(&shared.counters.tx_stamps_sent, n);
                let _ = out.flush(&conn.stream);
            }
        }
        sync_interest(ep, &conn.stream, &mut out, shared);
    }
    true
}
