//! The built-in server bounds its memory against any client (issue 9, item 5): a client that
//! sends and never reads is pushed back instead of growing the server, without losing its
//! replies, while a well-behaved client on another connection keeps being served.
//!
//! The server runs in this process, so its memory is this process's RSS growth. That is why
//! the tests of this file take `SERIAL` (they must not measure each other) and why the
//! flooding client keeps its own buffers to one request.

use crate::common;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Mutex;

use common::*;
use server::{Arch, Counters, Limits, ServerConfig, StagedConfig};
use wire::nullrpc::{self, Decoded, Flags, Kind};

/// The measuring tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// What the never-reading client tries to send: an unbounded server reads it all and holds
/// its replies (or the requests themselves) in memory, growing by about this much.
const FLOOD_BYTES: usize = 96 << 20;

/// Requests of the largest size the server accepts, so that few syscalls carry many bytes.
const FLOOD_REQ_LEN: usize = nullrpc::MAX_FRAME;

/// The RSS growth allowed while the flood is pushed back. The default limits hold at most
/// 8 MiB of queued requests and 256 KiB (plus one read's replies) of unsent output per
/// connection; the rest is allocator slack and the good client.
const RSS_GROWTH_BOUND_KIB: u64 = 32 << 10;

/// A write that makes no progress for this long means the server stopped reading. This is a
/// stopping rule, not an assertion: a machine so slow that it trips early only makes the
/// test weaker (an unbounded server would then have grown less before being caught).
const STALL_MS: i32 = 2_000;

/// This process's resident set, KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Blocks until `s` is writable or `ms` pass; true if writable.
fn wait_writable(s: &TcpStream, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    rc > 0
}

/// The never-reading client's connection and how many bytes it got the server to take.
struct Flood {
    stream: TcpStream,
    sent: usize,
}

/// Sends copies of one request until `FLOOD_BYTES` are sent or the server stops taking them;
/// never reads.
fn flood(addr: SocketAddr) -> Flood {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_nonblocking(true).unwrap();
    let mut req = Vec::new();
    nullrpc::encode_request(&mut req, 7, 0, FLOOD_REQ_LEN, Flags::default()).unwrap();
    let (mut sent, mut off) = (0, 0);
    while sent < FLOOD_BYTES {
        match (&stream).write(&req[off..]) {
            Ok(n) => {
                sent += n;
                off = (off + n) % req.len();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if !wait_writable(&stream, STALL_MS) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("flood write: {e}"),
        }
    }
    Flood { stream, sent }
}

/// Reads `n` responses (of `len` bytes, id 7) from the flood's connection, one frame buffered
/// at a time: back-pressure must not have lost any.
fn read_back(s: &mut TcpStream, n: usize, len: usize) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = Vec::with_capacity(2 * len);
    let mut tmp = vec![0u8; 64 * 1024];
    for i in 0..n {
        loop {
            if let Decoded::Frame {
                header, consumed, ..
            } = nullrpc::decode(&buf).unwrap()
            {
                assert_eq!((header.kind, header.id), (Kind::Response, 7), "reply {i}");
                assert_eq!(header.len as usize, len);
                buf.drain(..consumed);
                break;
            }
            let k = s.read(&mut tmp).unwrap();
            assert!(k > 0, "server closed the flood after {i} of {n} replies");
            buf.extend_from_slice(&tmp[..k]);
        }
    }
}

/// Runs the flood against a server with `cfg` while a good client keeps calling; checks the
/// RSS growth, that every flooded request is answered once the client reads, and returns the
/// server's counters.
fn never_reading_client_is_bounded(cfg: ServerConfig) -> Counters {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let arch = cfg.arch;
    let h = start(cfg);
    let addr = h.local_addr();
    let mut good = TcpClient::connect(addr);
    let mut id = 0u64;
    let mut call = |good: &mut TcpClient| {
        id += 1;
        assert!(good.call(id, 256, Flags::default()).payload_ok, "{arch}");
    };
    // Threads started and buffers allocated before the baseline.
    call(&mut good);
    let base = rss_kib();
    let mut peak = base;
    let flooder = std::thread::spawn(move || flood(addr));
    let mut during = 0;
    while !flooder.is_finished() {
        call(&mut good);
        during += 1;
        peak = peak.max(rss_kib());
    }
    let mut f = flooder.join().unwrap();
    peak = peak.max(rss_kib());
    // The flood's connection is still open and unread: the others are still served.
    for _ in 0..100 {
        call(&mut good);
    }
    peak = peak.max(rss_kib());
    let growth = peak - base;
    eprintln!(
        "{arch}: flood sent {} MiB; RSS {base} → peak {peak} KiB (+{growth} KiB); \
         {during} good calls during the flood",
        f.sent >> 20
    );
    assert!(
        growth < RSS_GROWTH_BOUND_KIB,
        "{arch}: RSS grew by {growth} KiB (bound {RSS_GROWTH_BOUND_KIB} KiB) under a client \
         that never reads"
    );
    assert!(
        f.sent < FLOOD_BYTES,
        "{arch}: the server took all {FLOOD_BYTES} bytes without pushing back"
    );
    // Back-pressure, not loss: every whole request sent gets its reply once the client reads.
    let whole = f.sent / FLOOD_REQ_LEN;
    read_back(&mut f.stream, whole, FLOOD_REQ_LEN);
    call(&mut good);
    drop(f);
    let c = h.shutdown().unwrap();
    eprintln!("{arch}: {c:?}");
    assert_eq!(
        c.served,
        id + whole as u64,
        "{arch}: served ≠ good calls + whole flood requests"
    );
    c
}

#[test]
fn epoll_bounds_a_client_that_never_reads() {
    let c = never_reading_client_is_bounded(cfg(Arch::Epoll, 1));
    assert!(c.reads_paused >= 1, "{c:?}");
}

#[test]
fn thread_bounds_a_client_that_never_reads() {
    let c = never_reading_client_is_bounded(cfg(Arch::Thread, 1));
    assert!(c.reads_paused >= 1, "{c:?}");
}

#[test]
fn dispatch_bounds_a_client_that_never_reads() {
    // Slow workers, so that the shared queue can fill as well as the connection's output.
    // Which bound the flood meets first depends on scheduling; `queue_bound_*` below pins
    // the queue's own.
    let c = never_reading_client_is_bounded(ServerConfig {
        work: Some("det:1ms".parse().unwrap()),
        ..cfg(Arch::Dispatch, 1)
    });
    assert!(c.reads_paused + c.queue_full_pauses >= 1, "{c:?}");
}

fn staged_sleeping_worker(r0_ns: f64) -> ServerConfig {
    ServerConfig {
        arch: Arch::Staged,
        staged: StagedConfig {
            r0_ns,
            worker_sleep: true,
            ..StagedConfig::default()
        },
        ..ServerConfig::default()
    }
}

#[test]
fn staged_bounds_a_client_that_never_reads() {
    // A worker that sleeps its 1 ms (no CPU burnt), so that the queues can fill as well.
    let c = never_reading_client_is_bounded(staged_sleeping_worker(1e6));
    assert!(c.reads_paused + c.queue_full_pauses >= 1, "{c:?}");
}

/// A client that pipelines far more requests than the queue may hold, and reads its replies:
/// the reading thread stops at the bound (counted) and every request is still answered.
fn queue_bound_pushes_back_without_loss(cfg: ServerConfig) {
    const N: u64 = 500;
    const LEN: usize = 1024;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let arch = cfg.arch;
    let h = start(ServerConfig {
        limits: Limits {
            max_queued_requests: 8,
            ..Limits::default()
        },
        ..cfg
    });
    let mut c = TcpClient::connect(h.local_addr());
    let mut bytes = Vec::new();
    for id in 0..N {
        nullrpc::encode_request(&mut bytes, id, 0, LEN, Flags::default()).unwrap();
    }
    // One write of all of them: the reading thread finds many requests per read.
    let mut w = c.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&bytes).unwrap());
    let mut ids: Vec<u64> = (0..N).map(|_| c.next_frame().0.id).collect();
    writer.join().unwrap();
    ids.sort_unstable();
    assert_eq!(ids, (0..N).collect::<Vec<_>>(), "{arch}");
    let counters = h.shutdown().unwrap();
    assert_eq!(counters.served, N, "{arch}");
    assert!(counters.queue_full_pauses >= 1, "{arch}: {counters:?}");
}

#[test]
fn dispatch_queue_bound_pushes_back_without_loss() {
    queue_bound_pushes_back_without_loss(ServerConfig {
        work: Some("det:100us".parse().unwrap()),
        ..cfg(Arch::Dispatch, 1)
    });
}

#[test]
fn staged_queue_bound_pushes_back_without_loss() {
    queue_bound_pushes_back_without_loss(staged_sleeping_worker(1e5));
}

/// One request on a fresh connection; false if the server closed it instead of answering.
fn answered(addr: SocketAddr, id: u64) -> bool {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut req = Vec::new();
    nullrpc::encode_request(&mut req, id, 0, 64, Flags::default()).unwrap();
    if s.write_all(&req).is_err() {
        return false;
    }
    let mut resp = vec![0u8; 64];
    match s.read_exact(&mut resp) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => false,
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => false,
        Err(e) => panic!("reading the answer: {e}"),
    }
}

#[test]
fn thread_refuses_connections_beyond_its_cap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let h = start(ServerConfig {
        limits: Limits {
            max_connections: 3,
            ..Limits::default()
        },
        ..cfg(Arch::Thread, 1)
    });
    let addr = h.local_addr();
    let mut open: Vec<TcpClient> = (0..3)
        .map(|id| {
            let mut c = TcpClient::connect(addr);
            assert!(c.call(id, 64, Flags::default()).payload_ok);
            c
        })
        .collect();
    // A fourth is closed as soon as accepted (and counted before it is closed)…
    let mut fourth = TcpClient::connect(addr);
    assert!(fourth.is_closed_by_server());
    assert_eq!(h.counters().connections_refused, 1);
    // …while the three are still served.
    for (i, c) in open.iter_mut().enumerate() {
        assert!(c.call(10 + i as u64, 64, Flags::default()).payload_ok);
    }
    // Once one leaves, a new connection is served: its thread's exit frees the place. That
    // exit is asynchronous, so try again until it has happened (refusals meanwhile are
    // counted too).
    drop(open.pop());
    assert!(
        (0..2_000).any(|i| {
            answered(addr, 100 + i) || {
                std::thread::sleep(std::time::Duration::from_millis(5));
                false
            }
        }),
        "no place freed after a connection left"
    );
    drop(open);
    let c = h.shutdown().unwrap();
    assert_eq!(c.connections_accepted, 4, "{c:?}");
    assert!(c.connections_refused >= 1, "{c:?}");
}
