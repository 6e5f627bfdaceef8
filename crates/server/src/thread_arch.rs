//! [`Arch::Thread`](crate::Arch::Thread): one acceptor, one blocking thread per connection.
//!
//! Its bounds: at most [`Limits::max_connections`](crate::Limits) connections (threads) at
//! once, more are closed as soon as accepted; and a connection's thread writes its replies
//! with blocking writes, so while its client does not take them it reads nothing more —
//! unsent output never exceeds the replies to one read.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use host::tstamp::{self, mono_now_ns};

use crate::common::{accept_backoff, place, setup_conn, AtomicCounters, Pre, Work};
use crate::tcp_buf::{InBuf, OutBuf};
use crate::{spawn, ServerError, Shared, Started};

/// Connections still open, so that shutdown can `shutdown(2)` them out of blocking calls.
type Registry = Arc<Mutex<HashMap<u64, TcpStream>>>;

pub(crate) fn start(listener: TcpListener, shared: &Arc<Shared>) -> Result<Started, ServerError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| ServerError::io("set_nonblocking(listener)", e))?;
    let sh = Arc::clone(shared);
    let acceptor = spawn("ts-accept".into(), move || accept_loop(listener, sh))?;
    Ok(Started {
        threads: vec![acceptor],
        // The acceptor polls the stop eventfd and closes the connections itself.
        wake: Box::new(|| {}),
    })
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let _ = place(&shared.cfg);
    let registry: Registry = Arc::default();
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    let mut next: u64 = 0;
    while let Ok(true) = shared.stop.wait_readable(listener.as_raw_fd()) {
        let s = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                accept_backoff(&e);
                continue;
            }
        };
        // The registry holds exactly the connections whose threads have not finished.
        let open = registry.lock().map_or(usize::MAX, |r| r.len());
        if open >= shared.cfg.limits.max_connections {
            // Closed at once (the client sees EOF): a thread, its stack and buffers per
            // connection is what this bound is for.
            AtomicCounters::add(&shared.counters.connections_refused, 1);
            drop(s);
            continue;
        }
        if s.set_nonblocking(false).is_err() || setup_conn(&s, &shared).is_err() {
            continue;
        }
        let Ok(clone) = s.try_clone() else { continue };
        let k = next;
        next += 1;
        if let Ok(mut r) = registry.lock() {
            r.insert(k, clone);
        }
        let (sh, reg) = (Arc::clone(&shared), Arc::clone(&registry));
        match spawn(format!("ts-conn-{k}"), move || {
            serve_conn(&s, k, &sh);
            let _ = s.shutdown(Shutdown::Both);
            if let Ok(mut r) = reg.lock() {
                r.remove(&k);
            }
        }) {
            Ok(h) => conns.push(h),
            Err(_) => {
                if let Ok(mut r) = registry.lock() {
                    r.remove(&k);
                }
            }
        }
        // Reap finished connection threads so the list does not grow without bound.
        let (done, live): (Vec<_>, Vec<_>) = conns.into_iter().partition(|h| h.is_finished());
        for h in done {
            let _ = h.join();
        }
        conns = live;
    }
    if let Ok(r) = registry.lock() {
        for s in r.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
    for h in conns {
        let _ = h.join();
    }
}

/// Upper bound on the wait for one transmit stamp (the kernel normally has it before
/// `send` returns on loopback; on a real NIC it follows within microseconds).
const TX_STAMP_WAIT_MS: i32 = 1;

fn serve_conn(s: &TcpStream, k: u64, shared: &Shared) {
    let _ = place(&shared.cfg);
    let Ok(mut work) = Work::new(&shared.cfg, k) else {
        return;
    };
    let counters = &shared.counters;
    let fd = s.as_raw_fd();
    let mut inb = InBuf::new();
    let mut out = OutBuf::new();
    loop {
        let (n, t1) = match inb.read_from(fd, 0, shared) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if n == 0 || shared.stop.is_set() {
            return;
        }
        let t2 = mono_now_ns();
        loop {
            let req = match inb.pop_frame(shared.cfg.max_frame) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(_) => {
                    AtomicCounters::add(&counters.malformed_closed, 1);
                    return;
                }
            };
            let pre = work
                .wants_stamps(&req.header)
                .then(|| Pre::new(if req.at_tail { t1 } else { None }, t2, mono_now_ns()));
            let payload = inb.bytes(req.payload.clone());
            out.push(fd, req.header.id, |b| {
                work.serve(&req.header, payload, pre, b)
            });
            AtomicCounters::add(&counters.served, 1);
            if write_out(s, &mut out, counters).is_err() {
                return;
            }
            if out.tx_on && send_tx_stamps(s, &mut out, counters).is_err() {
                return;
            }
        }
    }
}

/// Writes the replies. When the socket is full — the client is not taking them — the read
/// pause is counted and the write blocks: this thread reads nothing more from the connection
/// until the client has taken its replies (this architecture's back-pressure).
fn write_out(s: &TcpStream, out: &mut OutBuf, counters: &AtomicCounters) -> io::Result<()> {
    if out.flush_nowait(s.as_raw_fd())? {
        return Ok(());
    }
    AtomicCounters::add(&counters.reads_paused, 1);
    out.flush(s).map(drop)
}

/// Drains the error queue, waits briefly for the transmit stamps of responses that await
/// one, and sends the follow-ups. A stamp that does not come in time is given up on (that
/// client gets no follow-up).
fn send_tx_stamps(s: &TcpStream, out: &mut OutBuf, counters: &AtomicCounters) -> io::Result<()> {
    let fd = s.as_raw_fd();
    for _ in 0..3 {
        let n = out.collect_tx_stamps(fd)?;
        if n > 0 {
            AtomicCounters::add(&counters.tx_stamps_sent, n);
            out.flush(s)?;
        }
        if !out.awaiting_tx() {
            return Ok(());
        }
        tstamp::wait_error_queue(fd, TX_STAMP_WAIT_MS)?;
    }
    out.abandon_tx();
    Ok(())
}
