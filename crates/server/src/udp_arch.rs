//! [`Arch::Udp`](crate::Arch::Udp): N workers blocking in `recvfrom` on one shared UDP
//! socket — a single queue (the socket's receive queue) served by whichever worker is idle.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use host::tstamp::{self, mono_now_ns};
use wire::nullrpc::{self, Decoded, Kind};

use crate::common::{place, AtomicCounters, Pre, Work};
use crate::{spawn, ServerError, Shared, Started};

/// Safety net for shutdown: a blocked `recvfrom` returns at least this often to look at the
/// stop flag (shutdown normally wakes it at once with `shutdown(2)`).
const RECV_TIMEOUT: Duration = Duration::from_millis(100);

/// Transmit-stamp bookkeeping of the shared socket. With `SOF_TIMESTAMPING_OPT_ID` a UDP
/// socket numbers its datagrams 0, 1, 2… in send order from when stamping is switched on,
/// so while stamps are allowed every send goes through this lock to keep the count in step
/// with the kernel's. Stamping is switched on by the first request that wants T6; from then
/// on every send is stamped and the workers drain the error queue after each send.
#[derive(Default)]
struct TxBook {
    on: bool,
    sent: u32,
    /// datagram number → (request id, client) of responses whose T6 the client wants.
    pending: HashMap<u32, (u64, SocketAddr)>,
}

/// Give up on stamps of this many outstanding responses (lost ones would otherwise pile up).
const MAX_PENDING: usize = 4096;

pub(crate) fn start(socket: UdpSocket, shared: &Arc<Shared>) -> Result<Started, ServerError> {
    socket
        .set_read_timeout(Some(RECV_TIMEOUT))
        .map_err(|e| ServerError::io("setsockopt(SO_RCVTIMEO)", e))?;
    if shared.cfg.stamps {
        tstamp::enable_with(socket.as_raw_fd(), true, false, shared.hw.is_some())?;
    }
    let socket = Arc::new(socket);
    let book = Arc::new(Mutex::new(TxBook::default()));
    let mut threads = Vec::new();
    for i in 0..shared.cfg.workers {
        let (s, b, sh) = (Arc::clone(&socket), Arc::clone(&book), Arc::clone(shared));
        match spawn(format!("ts-udp-{i}"), move || worker(i as u64, &s, &b, &sh)) {
            Ok(t) => threads.push(t),
            Err(e) => {
                shared.stop.set();
                // SAFETY: plain syscall on a socket we own.
                unsafe { libc::shutdown(socket.as_raw_fd(), libc::SHUT_RD) };
                for t in threads {
                    let _ = t.join();
                }
                return Err(e);
            }
        }
    }
    let s = Arc::clone(&socket);
    Ok(Started {
        threads,
        // shutdown(SHUT_RD) wakes every thread blocked in recvfrom on this socket (Linux
        // reports ENOTCONN for an unconnected UDP socket but still marks it and wakes them).
        wake: Box::new(move || {
            // SAFETY: plain syscall on a socket we own.
            unsafe { libc::shutdown(s.as_raw_fd(), libc::SHUT_RD) };
        }),
    })
}

fn worker(index: u64, socket: &UdpSocket, book: &Mutex<TxBook>, shared: &Shared) {
    let _ = place(&shared.cfg);
    let Ok(mut work) = Work::new(&shared.cfg, index) else {
        return;
    };
    let cfg = &shared.cfg;
    let counters = &shared.counters;
    let fd = socket.as_raw_fd();
    // One byte more than the limit, so an oversized datagram is seen as such.
    let mut buf = vec![0u8; cfg.max_frame + 1];
    let mut out = Vec::with_capacity(cfg.max_frame + nullrpc::STAMPS_LEN);
    while !shared.stop.is_set() {
        let (n, peer, t1) = match tstamp::recv_from_stamped(fd, &mut buf, 0, shared.hw.as_ref()) {
            Ok((n, peer, s)) => (n, peer, counters.rx_stamp(s)),
            Err(_) => continue, // timeout, EINTR, or an ICMP error from an earlier send
        };
        let t2 = mono_now_ns();
        if shared.stop.is_set() {
            return;
        }
        let frame = if n > cfg.max_frame {
            None
        } else {
            match nullrpc::decode(&buf[..n]) {
                Ok(Decoded::Frame {
                    header,
                    payload,
                    consumed,
                    ..
                }) if header.kind == Kind::Request && consumed == n => Some((header, payload)),
                _ => None,
            }
        };
        let Some((header, payload)) = frame else {
            AtomicCounters::add(&counters.malformed_closed, 1);
            continue;
        };
        let pre = work
            .wants_stamps(&header)
            .then(|| Pre::new(t1, t2, mono_now_ns()));
        out.clear();
        let want_tx = work.serve(&header, payload, pre, &mut out);
        let stamp_for = want_tx.then_some(header.id);
        let tx_on = match send(socket, book, cfg.stamps, &out, peer, stamp_for) {
            Ok(on) => {
                AtomicCounters::add(&counters.served, 1);
                on
            }
            Err(_) => false,
        };
        if tx_on {
            follow_up(socket, book, counters, stamp_for);
        }
    }
}

/// Sends one datagram. While stamps are allowed: switches transmit stamping on if
/// `stamp_for` (a request id) wants it, and, once it is on, counts the datagram and records
/// it as awaiting its stamp. Returns whether transmit stamping is on.
fn send(
    socket: &UdpSocket,
    book: &Mutex<TxBook>,
    stamps_allowed: bool,
    bytes: &[u8],
    peer: SocketAddr,
    stamp_for: Option<u64>,
) -> io::Result<bool> {
    if !stamps_allowed {
        return socket.send_to(bytes, peer).map(|_| false);
    }
    let mut b = book
        .lock()
        .map_err(|_| io::Error::other("a server thread panicked holding a lock"))?;
    if stamp_for.is_some() && !b.on && tstamp::enable(socket.as_raw_fd(), true, true).is_ok() {
        // The kernel restarts its datagram count at 0.
        b.on = true;
        b.sent = 0;
    }
    socket.send_to(bytes, peer)?;
    if !b.on {
        return Ok(false);
    }
    let key = b.sent;
    b.sent = b.sent.wrapping_add(1);
    if let Some(id) = stamp_for {
        if b.pending.len() >= MAX_PENDING {
            b.pending.clear();
        }
        b.pending.insert(key, (id, peer));
    }
    Ok(true)
}

/// Drains the transmit stamps waiting on the shared socket and sends a follow-up for each
/// response a client is waiting on; waits up to 1 ms once if the stamp of request `own` has
/// not turned up. Any worker may pick up any worker's stamp.
fn follow_up(
    socket: &UdpSocket,
    book: &Mutex<TxBook>,
    counters: &AtomicCounters,
    own: Option<u64>,
) {
    let fd = socket.as_raw_fd();
    let mut waited = false;
    let mut own_done = false;
    let mut frame = Vec::with_capacity(nullrpc::TX_STAMP_LEN);
    loop {
        match tstamp::read_tx_stamp(fd) {
            Ok(Some((key, t6))) => {
                let hit = book.lock().ok().and_then(|mut b| b.pending.remove(&key));
                if let Some((id, peer)) = hit {
                    own_done |= Some(id) == own;
                    frame.clear();
                    nullrpc::encode_tx_stamp(&mut frame, id, t6);
                    if send(socket, book, true, &frame, peer, None).is_ok() {
                        AtomicCounters::add(&counters.tx_stamps_sent, 1);
                    }
                }
            }
            Ok(None) if own.is_some() && !waited && !own_done => {
                waited = true;
                if !matches!(tstamp::wait_error_queue(fd, 1), Ok(true)) {
                    return;
                }
            }
            _ => return,
        }
    }
}
