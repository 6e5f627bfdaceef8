//! Tiny null-RPC servers written for the tests (no dependency on crate `server`).
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use wire::nullrpc::{decode, encode_response, Decoded, Kind, Stamps};

pub fn now() -> u64 {
    host::tstamp::mono_now_ns()
}

pub fn spin_ns(ns: u64) {
    let end = now() + ns;
    while now() < end {
        std::hint::spin_loop();
    }
}

/// How the test server treats each request.
#[derive(Clone, Copy, Default)]
pub struct Behaviour {
    /// Busy-spin this long per request before answering (known service time).
    pub spin_ns: u64,
    /// Instead of a plain spin, pace completions: request k on a connection completes
    /// at max(completion k−1, its arrival) + spin_ns. A backlogged connection then serves
    /// exactly one request per spin_ns even if this thread is briefly descheduled on a
    /// busy machine (a known service time that machine noise cannot stretch).
    pub paced: bool,
    /// Hold the reply to request `id` for `(id % 3) * reorder_ns` extra, so replies on one
    /// connection come back out of order when requests arrive close together.
    pub reorder_ns: u64,
    /// Requests whose id is a multiple of `stall_every` (if > 0) take `stall_ns` instead.
    pub stall_every: u64,
    pub stall_ns: u64,
}

/// A TCP null-RPC echo server: one reader thread per connection; replies carry stamps
/// T3 = after the read, T4 = after the spin, T5 = before the write (this host's clock).
pub struct TcpEcho {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
    pub served: Arc<AtomicU64>,
}

impl TcpEcho {
    pub fn start(b: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let served = Arc::new(AtomicU64::new(0));
        let (st, ss, sv) = (stop.clone(), streams.clone(), served.clone());
        let accept = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        s.set_nodelay(true).unwrap();
                        ss.lock().unwrap().push(s.try_clone().unwrap());
                        let sv = sv.clone();
                        std::thread::spawn(move || serve_conn(s, b, sv));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
            // The listener is dropped here: reconnects are refused from now on.
        });
        TcpEcho {
            addr,
            stop,
            streams,
            accept: Some(accept),
            served,
        }
    }

    /// Simulates the server dying: stop listening and cut every connection.
    pub fn kill(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            h.join().unwrap();
        }
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for TcpEcho {
    fn drop(&mut self) {
        self.kill();
    }
}

fn serve_conn(mut s: TcpStream, b: Behaviour, served: Arc<AtomicU64>) {
    let mut buf = vec![0u8; 1 << 16];
    let (mut start, mut end) = (0usize, 0usize);
    let mut writer = s.try_clone().unwrap();
    // Pending delayed replies: (due, response bytes).
    let mut held: BinaryHeap<Reverse<(u64, Vec<u8>)>> = BinaryHeap::new();
    let mut free_at = 0u64;
    if b.reorder_ns > 0 {
        s.set_read_timeout(Some(Duration::from_micros(100)))
            .unwrap();
    }
    loop {
        while let Some(Reverse((due, _))) = held.peek() {
            if *due > now() {
                break;
            }
            let Reverse((_, bytes)) = held.pop().unwrap();
            if writer.write_all(&bytes).is_err() {
                return;
            }
        }
        if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        match s.read(&mut buf[end..]) {
            Ok(0) => return,
            Ok(n) => end += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        let t3 = now();
        loop {
            match decode(&buf[start..end]) {
                Ok(Decoded::Frame {
                    header,
                    payload,
                    consumed,
                    ..
                }) if header.kind == Kind::Request => {
                    // Byte 0 carries the request's label (class); the rest is the id pattern.
                    assert!(payload
                        .iter()
                        .enumerate()
                        .skip(1)
                        .all(|(i, b)| *b == wire::nullrpc::payload_byte(header.id, i)));
                    if b.stall_every > 0 && header.id.is_multiple_of(b.stall_every) {
                        spin_ns(b.stall_ns);
                    } else if b.paced {
                        free_at = free_at.max(t3) + b.spin_ns;
                        while now() < free_at {
                            std::hint::spin_loop();
                        }
                    } else {
                        spin_ns(b.spin_ns);
                    }
                    let t4 = now();
                    let mut out = Vec::new();
                    let stamps = Stamps([0, 0, t3, t4, now(), 0]);
                    let want = header.flags.want_stamps;
                    encode_response(&mut out, &header, payload, want.then_some(&stamps)).unwrap();
                    if header.flags.want_tx_stamp {
                        // A follow-up with a made-up T6 (this host's clock after the reply).
                        wire::nullrpc::encode_tx_stamp(&mut out, header.id, now());
                    }
                    start += consumed;
                    served.fetch_add(1, Ordering::Relaxed);
                    if b.reorder_ns > 0 {
                        held.push(Reverse((now() + (header.id % 3) * b.reorder_ns, out)));
                    } else if writer.write_all(&out).is_err() {
                        return;
                    }
                }
                Ok(Decoded::Incomplete { .. }) => break,
                _ => return,
            }
        }
        if start == end {
            start = 0;
            end = 0;
        }
    }
}

/// A UDP null-RPC echo server that drops every `drop_every`-th datagram (0 = none).
pub struct UdpEcho {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    pub dropped: Arc<AtomicU64>,
}

impl UdpEcho {
    pub fn start(drop_every: u64) -> Self {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let (st, dr) = (stop.clone(), dropped.clone());
        let handle = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut k = 0u64;
            while !st.load(Ordering::Relaxed) {
                let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                k += 1;
                if drop_every > 0 && k.is_multiple_of(drop_every) {
                    dr.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if let Ok(Decoded::Frame {
                    header, payload, ..
                }) = decode(&buf[..n])
                {
                    let mut out = Vec::new();
                    let stamps = Stamps([0, 0, now(), now(), now(), 0]);
                    let want = header.flags.want_stamps;
                    encode_response(&mut out, &header, payload, want.then_some(&stamps)).unwrap();
                    let _ = sock.send_to(&out, peer);
                }
            }
        });
        UdpEcho {
            addr,
            stop,
            handle: Some(handle),
            dropped,
        }
    }
}

impl Drop for UdpEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
