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
use wire::nullrpc::Header;

use crate::common::{accept_backoff, place, AtomicCounters, InBuf, OutBuf, Pre, Work, STOP_TOKEN};
use crate::epoll_arch::{new_epoll, READ_EVENTS};
use crate::thread_arch::setup_conn;
use crate::{spawn, ServerError, Shared, Started};

const LISTENER_TOKEN: u64 = u64::MAX - 1;

/// The part of a connection workers share with the dispatcher: the socket and its output.
struct DConn {
    stream: TcpStream,
    out: Mutex<OutBuf>,
}

struct Job {
    conn: Arc<DConn>,
    header: Header,
    payload: Vec<u8>,
    pre: Option<Pre>,
}

/// The shared FIFO.
#[derive(Default)]
struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

pub(crate) fn start(listener: TcpListener, shared: &Arc<Shared>) -> Result<Started, ServerError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| ServerError::io("set_nonblocking(listener)", e))?;
    let ep = Arc::new(new_epoll(shared)?);
    ep.add(
        &listener,
        EpollEvent::new(EpollFlags::EPOLLIN, LISTENER_TOKEN),
    )
    .map_err(|e| ServerError::io("epoll_ctl(listener)", e))?;
    let queue = Arc::new(Queue::default());
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
        let _guard = q.jobs.lock();
        q.ready.notify_all();
    };
    if let Err(e) = result {
        shared.stop.set();
        wake();
        for t in threads {
            let _ = t.join();
        }
        return Err(e);
    }
    Ok(Started {
        threads,
        wake: Box::new(wake),
    })
}

fn dispatcher(listener: &TcpListener, ep: &Epoll, queue: &Queue, shared: &Shared) {
    let _ = place(&shared.cfg);
    let mut conns: HashMap<RawFd, (Arc<DConn>, InBuf)> = HashMap::new();
    let mut events = vec![EpollEvent::empty(); 64];
    loop {
        let n = match ep.wait(&mut events, EpollTimeout::NONE) {
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        };
        let t2 = mono_now_ns();
        for ev in &events[..n] {
            match ev.data() {
                STOP_TOKEN => {
                    close_all(ep, conns);
                    return;
                }
                LISTENER_TOKEN => loop {
                    let s = match listener.accept() {
                        Ok((s, _)) => s,
                        Err(e) => {
                            accept_backoff(&e);
                            break;
                        }
                    };
                    if s.set_nonblocking(true).is_err() || setup_conn(&s, shared).is_err() {
                        continue;
                    }
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
                    if handle(c, inb, ev.events(), t2, ep, queue, shared).is_err() {
                        let _ = ep.delete(&c.stream);
                        let _ = c.stream.shutdown(Shutdown::Both);
                        conns.remove(&fd);
                    }
                }
            }
        }
    }
    close_all(ep, conns);
}

fn close_all(ep: &Epoll, conns: HashMap<RawFd, (Arc<DConn>, InBuf)>) {
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
    t2: u64,
    ep: &Epoll,
    queue: &Queue,
    shared: &Shared,
) -> io::Result<()> {
    let counters = &shared.counters;
    let fd = c.stream.as_raw_fd();
    let mut stamps_seen = 0;
    if ev.intersects(EpollFlags::EPOLLERR | EpollFlags::EPOLLOUT) {
        let mut out = lock(&c.out)?;
        if ev.contains(EpollFlags::EPOLLERR) {
            stamps_seen = out.collect_tx_stamps(fd)?;
            AtomicCounters::add(&counters.tx_stamps_sent, stamps_seen);
        }
        out.flush(&c.stream)?;
        rearm(c, &mut out, ep);
    }
    let readable = ev.intersects(READ_EVENTS | EpollFlags::EPOLLHUP)
        || (ev.contains(EpollFlags::EPOLLERR) && stamps_seen == 0);
    if !readable {
        return Ok(());
    }
    let (n, t1) = match inb.read_from(fd, 0) {
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
    let mut batch = Vec::new();
    let mut result = Ok(());
    loop {
        match inb.pop_frame(shared.cfg.max_frame) {
            Ok(Some(req)) => {
                let pre = (shared.cfg.stamps && req.header.flags.want_stamps)
                    .then(|| Pre::new(if req.at_tail { t1 } else { None }, t2, mono_now_ns()));
                batch.push(Job {
                    conn: Arc::clone(c),
                    header: req.header,
                    payload: inb.bytes(req.payload).to_vec(),
                    pre,
                });
            }
            Ok(None) => break,
            Err(e) => {
                AtomicCounters::add(&counters.malformed_closed, 1);
                result = Err(io::Error::new(io::ErrorKind::InvalidData, e));
                break;
            }
        }
    }
    if !batch.is_empty() {
        let mut q = lock(&queue.jobs)?;
        let k = batch.len();
        q.extend(batch);
        drop(q);
        if k == 1 {
            queue.ready.notify_one();
        } else {
            queue.ready.notify_all();
        }
    }
    result
}

fn lock<T>(m: &Mutex<T>) -> io::Result<std::sync::MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| io::Error::other("a server thread panicked holding a lock"))
}

/// Arms EPOLLOUT while output is pending and disarms it when none is. Called with the
/// output lock held, so workers and the dispatcher agree on `armed`.
fn rearm(c: &DConn, out: &mut OutBuf, ep: &Epoll) {
    let want = !out.is_empty();
    if want != out.armed {
        let flags = if want {
            READ_EVENTS | EpollFlags::EPOLLOUT
        } else {
            READ_EVENTS
        };
        let mut e = EpollEvent::new(flags, c.stream.as_raw_fd() as u64);
        if ep.modify(&c.stream, &mut e).is_ok() {
            out.armed = want;
        }
    }
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
        let t4 = work.do_work(job.pre.is_some());
        let Ok(mut out) = job.conn.out.lock() else {
            return;
        };
        // Responses of one connection may leave out of order when several workers serve it;
        // each carries its request's id.
        out.push(job.conn.stream.as_raw_fd(), job.header.id, |b| {
            work.respond(&job.header, &job.payload, job.pre, t4, b)
        });
        AtomicCounters::add(&shared.counters.served, 1);
        // A write error means the peer is gone; the dispatcher sees the hang-up and closes.
        if out.flush(&job.conn.stream).is_ok() {
            if out.tx_on {
                if let Ok(n) = out.collect_tx_stamps(job.conn.stream.as_raw_fd()) {
                    AtomicCounters::add(&shared.counters.tx_stamps_sent, n);
                    let _ = out.flush(&job.conn.stream);
                }
            }
            rearm(&job.conn, &mut out, ep);
        }
    }
}
