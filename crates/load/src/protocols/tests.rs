//! The real-target codecs against fake servers written here (127.0.0.1, port 0).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::workload::{KvOp, PathGen, SizeDist, WorkloadGen};
use crate::{run_open_loop, LoadConfig, Outcome, RunRecords, StopAt};

#[path = "tests_http.rs"]
mod http;

type Answer = dyn Fn(usize, usize, &[u8]) -> (Vec<u8>, bool) + Send + Sync;

/// A TCP server: `split` finds the length of the first whole request in the buffer,
/// `answer(conn, request number on conn, request)` gives the reply and whether to close
/// after it. Records requests per accepted connection.
struct Fake {
    addr: SocketAddr,
    per_conn: Arc<Mutex<Vec<usize>>>,
}

fn tcp_server(split: fn(&[u8]) -> Option<usize>, answer: Arc<Answer>) -> Fake {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let per_conn = Arc::new(Mutex::new(Vec::new()));
    let pc = per_conn.clone();
    std::thread::spawn(move || {
        for (conn, s) in l.incoming().enumerate() {
            let Ok(mut s) = s else { return };
            pc.lock().unwrap().push(0);
            let (pc, answer) = (pc.clone(), answer.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                let mut k = 0;
                loop {
                    while let Some(n) = split(&buf) {
                        let req: Vec<u8> = buf.drain(..n).collect();
                        let (out, close) = answer(conn, k, &req);
                        k += 1;
                        pc.lock().unwrap()[conn] = k;
                        if s.write_all(&out).is_err() {
                            return;
                        }
                        if close {
                            // Lingering close, as nginx does: stop writing, drain what
                            // the client pipelined, so no RST destroys the last reply.
                            let _ = s.shutdown(std::net::Shutdown::Write);
                            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                            while matches!(s.read(&mut chunk), Ok(n) if n > 0) {}
                            return;
                        }
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    Fake { addr, per_conn }
}

fn crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// memcached text requests: a line, plus a data block for `set`.
fn mc_split(b: &[u8]) -> Option<usize> {
    let l = crlf(b)?;
    if !b.starts_with(b"set ") {
        return Some(l + 2);
    }
    let n: usize = std::str::from_utf8(&b[..l])
        .ok()?
        .split(' ')
        .nth(4)?
        .parse()
        .ok()?;
    (b.len() >= l + 2 + n + 2).then_some(l + 2 + n + 2)
}

/// A tiny memcached: stores values; refuses values over 100 bytes with SERVER_ERROR.
fn mc_answer(store: &Mutex<HashMap<Vec<u8>, Vec<u8>>>, req: &[u8]) -> Vec<u8> {
    let l = crlf(req).unwrap();
    let line: Vec<&[u8]> = req[..l].split(|&b| b == b' ').collect();
    let mut out = Vec::new();
    let resp = match line[0] {
        b"get" => match store.lock().unwrap().get(line[1]) {
            Some(v) => {
                wire::memcache::encode_response(
                    &mut out,
                    &wire::memcache::Response::Hit {
                        key: line[1],
                        flags: 0,
                        data: v,
                    },
                );
                return out;
            }
            None => wire::memcache::Response::Miss,
        },
        b"set" if req.len() - l - 4 > 100 => {
            wire::memcache::Response::ServerError(b"out of memory")
        }
        b"set" => {
            store
                .lock()
                .unwrap()
                .insert(line[1].to_vec(), req[l + 2..req.len() - 2].to_vec());
            wire::memcache::Response::Stored
        }
        _ => wire::memcache::Response::Error,
    };
    wire::memcache::encode_response(&mut out, &resp);
    out
}

fn kv_workload() -> KvWorkload {
    KvWorkload {
        get_ratio: 0.7,
        key_size: SizeDist::Fixed(16),
        value_size: SizeDist::Uniform { lo: 10, hi: 200 },
        items: 50,
        popularity: Popularity::Zipf(0.9),
    }
}

/// Expected (errors, misses) of `n` requests on one connection with the same store rules.
fn simulate(w: &KvWorkload, seed: u64, n: usize) -> (usize, u64) {
    let mut g = WorkloadGen::new(Arc::new(w.clone()), mix_seed(seed, 0)).unwrap();
    let mut stored = std::collections::HashSet::new();
    let (mut errors, mut misses) = (0, 0);
    for _ in 0..n {
        match g.next_op() {
            KvOp::Get { item } => misses += u64::from(!stored.contains(&item)),
            KvOp::Set { value_len, .. } if value_len > 100 => errors += 1,
            KvOp::Set { item, .. } => {
                stored.insert(item);
            }
        }
    }
    (errors, misses)
}

fn run(url: &str, w: &Workload, n: u64, tweak: impl Fn(&mut LoadConfig)) -> RunRecords {
    let target: Target = url.parse().unwrap();
    let mut cfg = LoadConfig::new(target.clone(), 20_000.0);
    cfg.stop = StopAt::Requests(n);
    cfg.seed = 5;
    tweak(&mut cfg);
    let f = protocol_factory(&target, w, cfg.seed).unwrap();
    run_open_loop(&cfg, &*f, &AtomicBool::new(false), &|_, _| {}).unwrap()
}

#[test]
fn memcached_tcp_fifo_errors_and_misses_match_the_server() {
    let store = Arc::new(Mutex::new(HashMap::new()));
    let s2 = store.clone();
    let fake = tcp_server(
        mc_split,
        Arc::new(move |_, _, r| (mc_answer(&s2, r), false)),
    );
    let w = kv_workload();
    let n = 400;
    let r = run(
        &format!("memcached://{}", fake.addr),
        &Workload::Kv(w.clone()),
        n,
        |_| {},
    );
    let (errors, misses) = simulate(&w, 5, n as usize);
    assert!(errors > 0 && misses > 0);
    assert_eq!(r.count(Outcome::Error), errors);
    assert_eq!(r.count(Outcome::Ok), n as usize - errors);
    assert_eq!(r.misses, misses);
    assert_eq!(r.connects, 0);
}

#[test]
fn garbage_fails_the_connection_which_reconnects() {
    let store = Arc::new(Mutex::new(HashMap::new()));
    let s2 = store.clone();
    // The first connection answers its 10th request with garbage.
    let fake = tcp_server(
        mc_split,
        Arc::new(move |conn, k, r| {
            if conn == 0 && k == 9 {
                (b"HELLO?\r\n".to_vec(), false)
            } else {
                (mc_answer(&s2, r), false)
            }
        }),
    );
    let w = Workload::Kv(KvWorkload {
        value_size: SizeDist::Fixed(20),
        ..kv_workload()
    });
    let r = run(&format!("memcached://{}", fake.addr), &w, 200, |c| {
        c.rate_per_s = 5_000.0;
        c.max_outstanding_per_conn = 1;
    });
    assert!(
        r.errors.iter().any(|e| e.contains("malformed")),
        "{:?}",
        r.errors
    );
    assert_eq!(r.connects, 1);
    assert_eq!(fake.per_conn.lock().unwrap().len(), 2);
    // Only the request answered with garbage failed (one outstanding at a time); some
    // requests may have been dropped while the reconnect backed off (1 ms).
    assert_eq!(r.count(Outcome::Error), 1);
    assert_eq!(r.count(Outcome::Timeout), 0);
    assert!(r.count(Outcome::Ok) >= 150, "{}", r.count(Outcome::Ok));
}

fn resp_split(b: &[u8]) -> Option<usize> {
    wire::resp::decode(b).ok().flatten().map(|(n, _)| n)
}

#[test]
fn redis_get_set_errors_and_misses() {
    let store: Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>> = Arc::new(Mutex::new(HashMap::new()));
    let s2 = store.clone();
    let fake = tcp_server(
        resp_split,
        Arc::new(move |_, _, req| {
            let Some((_, wire::resp::Value::Array(Some(args)))) = wire::resp::decode(req).unwrap()
            else {
                return (b"-ERR protocol\r\n".to_vec(), false);
            };
            let arg = |i: usize| match &args[i] {
                wire::resp::Value::Bulk(Some(b)) => b.to_vec(),
                _ => Vec::new(),
            };
            let mut out = Vec::new();
            let v = match arg(0).as_slice() {
                b"GET" => store_get(&s2, &arg(1)),
                b"SET" if arg(2).len() > 100 => {
                    wire::resp::encode_value(&mut out, &wire::resp::Value::Error(b"ERR too big"));
                    return (out, false);
                }
                b"SET" => {
                    s2.lock().unwrap().insert(arg(1), arg(2));
                    None
                }
                _ => None,
            };
            match v {
                Some(v) => wire::resp::encode_value(&mut out, &wire::resp::Value::Bulk(Some(&v))),
                None if arg(0) == b"SET" => {
                    wire::resp::encode_value(&mut out, &wire::resp::Value::Simple(b"OK"))
                }
                None => wire::resp::encode_value(&mut out, &wire::resp::Value::Bulk(None)),
            }
            (out, false)
        }),
    );
    let w = kv_workload();
    let n = 400;
    let r = run(
        &format!("redis://{}", fake.addr),
        &Workload::Kv(w.clone()),
        n,
        |_| {},
    );
    let (errors, misses) = simulate(&w, 5, n as usize);
    assert_eq!(r.count(Outcome::Error), errors);
    assert_eq!(r.count(Outcome::Ok), n as usize - errors);
    assert_eq!(r.misses, misses);
    // Preload stores every item (values up to 200 > 100 bytes fail, as configured).
    let stats = crate::preload(
        &format!("redis://{}", fake.addr).parse().unwrap(),
        &Workload::Kv(KvWorkload {
            value_size: SizeDist::Fixed(50),
            ..w
        }),
        3,
        &AtomicBool::new(false),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!((stats.items, stats.stored, stats.failed), (50, 50, 0));
    assert_eq!(stats.bytes, 50 * 50);
    assert_eq!(store.lock().unwrap().len(), 50);
}

fn store_get(s: &Mutex<HashMap<Vec<u8>, Vec<u8>>>, k: &[u8]) -> Option<Vec<u8>> {
    s.lock().unwrap().get(k).cloned()
}

#[test]
fn memcached_preload_then_every_get_hits() {
    let store = Arc::new(Mutex::new(HashMap::new()));
    let s2 = store.clone();
    let fake = tcp_server(
        mc_split,
        Arc::new(move |_, _, r| (mc_answer(&s2, r), false)),
    );
    let w = KvWorkload {
        get_ratio: 1.0,
        value_size: SizeDist::Fixed(64),
        items: 300,
        ..kv_workload()
    };
    let target: Target = format!("memcached+udp://{}", fake.addr).parse().unwrap();
    // UDP targets are preloaded over TCP at the same address.
    let stats = crate::preload(
        &target,
        &Workload::Kv(w.clone()),
        4,
        &AtomicBool::new(false),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!((stats.stored, stats.failed), (300, 0));
    let r = run(
        &format!("memcached://{}", fake.addr),
        &Workload::Kv(w),
        300,
        |_| {},
    );
    assert_eq!((r.count(Outcome::Ok), r.misses), (300, 0));
}

/// A UDP memcached that answers every get with a 3000-byte value in 3 datagrams sent in
/// the order 2, 0, 1, and every set with STORED.
fn udp_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = s.local_addr().unwrap();
    let served = Arc::new(AtomicUsize::new(0));
    let sv = served.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        let value = vec![b'v'; 3000];
        loop {
            let Ok((n, from)) = s.recv_from(&mut buf) else {
                return;
            };
            let Ok((h, req)) = wire::memcache::udp::parse_datagram(&buf[..n]) else {
                continue;
            };
            let mut reply = Vec::new();
            let resp = if req.starts_with(b"get ") {
                let key = &req[4..req.len() - 2];
                wire::memcache::Response::Hit {
                    key,
                    flags: 0,
                    data: &value,
                }
            } else {
                wire::memcache::Response::Stored
            };
            wire::memcache::encode_response(&mut reply, &resp);
            let mut ds = wire::memcache::udp::split_reply(h.request_id, &reply, 1100);
            if ds.len() == 3 {
                ds = vec![ds[2].clone(), ds[0].clone(), ds[1].clone()];
            }
            for d in ds {
                let _ = s.send_to(&d, from);
            }
            sv.fetch_add(1, Ordering::Relaxed);
        }
    });
    (addr, served)
}

#[test]
fn memcached_udp_reassembles_out_of_order_replies_by_id() {
    let (addr, served) = udp_server();
    let w = Workload::Kv(KvWorkload {
        value_size: SizeDist::Fixed(100),
        ..kv_workload()
    });
    let r = run(&format!("memcached+udp://{addr}"), &w, 500, |c| {
        c.connections = 2;
        c.rate_per_s = 2_000.0;
    });
    // Loopback UDP at this rate loses nothing; every reply is matched to its request.
    assert_eq!(r.count(Outcome::Ok), 500, "{:?}", r.errors);
    assert_eq!(served.load(Ordering::Relaxed), 500);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    // Sets that cannot fit one datagram are refused up front.
    let big = Workload::Kv(KvWorkload {
        value_size: SizeDist::Fixed(2000),
        ..kv_workload()
    });
    let t: Target = format!("memcached+udp://{addr}").parse().unwrap();
    assert!(protocol_factory(&t, &big, 1).is_err());
}

#[test]
fn udp_codec_maps_16_bit_ids_back() {
    let w = Arc::new(KvWorkload {
        get_ratio: 1.0,
        ..kv_workload()
    });
    let mut p = MemcachedUdp::new(w.clone(), value_bytes(&w), 1).unwrap();
    let mut out = Vec::new();
    p.encode(1_000_001, 0, &mut out);
    let (h, _) = wire::memcache::udp::parse_datagram(&out).unwrap();
    let ds = wire::memcache::udp::split_reply(h.request_id, b"END\r\n", 2);
    assert_eq!(ds.len(), 3);
    assert_eq!(p.decode(&ds[1]).unwrap(), None);
    assert_eq!(p.decode(&ds[0]).unwrap(), None);
    let (n, r) = p.decode(&ds[2]).unwrap().unwrap();
    assert_eq!(
        (n, r.id, r.ok, r.miss),
        (ds[2].len(), Some(1_000_001), true, true)
    );
    // A second copy completes nothing.
    let (_, again) = p
        .decode(&wire::memcache::udp::split_reply(h.request_id, b"END\r\n", 9)[0])
        .unwrap()
        .unwrap();
    assert_eq!(again.id, None);
    // Garbage inside a datagram is an error the engine reports, not a panic.
    assert!(p
        .decode(&wire::memcache::udp::split_reply(3, b"??\r\n", 9)[0])
        .is_err());
}

#[test]
fn factory_refuses_mismatched_workloads() {
    let t: Target = "redis://127.0.0.1:6379".parse().unwrap();
    assert!(protocol_factory(&t, &Workload::Http(http::http_workload()), 1).is_err());
    let n: Target = "nullrpc://127.0.0.1:7".parse().unwrap();
    assert!(protocol_factory(&n, &Workload::Kv(KvWorkload::default()), 1).is_err());
    let ok = crate::NullRpcWorkload::default();
    assert!(protocol_factory(&n, &Workload::NullRpc(ok), 1).is_ok());
    let tiny = crate::NullRpcWorkload {
        request_size: 3,
        ..ok
    };
    assert!(protocol_factory(&n, &Workload::NullRpc(tiny), 1).is_err());
    let h: Target = "http://127.0.0.1:80/a".parse().unwrap();
    let bad = HttpWorkload {
        paths: vec!["/a b".into()],
        popularity: Popularity::Uniform,
    };
    assert!(protocol_factory(&h, &Workload::Http(bad), 1).is_err());
}

#[test]
fn memcached_reply_of_the_wrong_kind_is_a_protocol_error() {
    let w = Arc::new(KvWorkload {
        get_ratio: 1.0,
        ..kv_workload()
    });
    let mut p = MemcachedTcp::new(w.clone(), value_bytes(&w), 1).unwrap();
    let mut out = Vec::new();
    p.encode(0, 0, &mut out);
    p.encode(1, 0, &mut out);
    assert!(out.starts_with(b"get "));
    let (_, r) = p.decode(b"END\r\n").unwrap().unwrap();
    assert!(r.ok && r.miss && r.id.is_none());
    assert!(matches!(
        p.decode(b"STORED\r\n"),
        Err(crate::ProtoError::Unexpected(_))
    ));
    // Nothing outstanding after a reset (the engine closed the connection).
    p.reset();
    assert!(p.decode(b"END\r\n").is_err());
}

#[test]
fn redis_reply_of_the_wrong_type_is_a_protocol_error() {
    let w = Arc::new(KvWorkload {
        get_ratio: 0.0,
        ..kv_workload()
    });
    let mut p = Redis::new(w.clone(), value_bytes(&w), 1).unwrap();
    let mut out = Vec::new();
    p.encode(0, 0, &mut out);
    p.encode(1, 0, &mut out);
    p.encode(2, 0, &mut out);
    assert!(out.starts_with(b"*3\r\n$3\r\nSET\r\n"));
    assert!(p.decode(b"+OK\r\n").unwrap().unwrap().1.ok);
    assert!(!p.decode(b"-OOM\r\n").unwrap().unwrap().1.ok);
    assert!(matches!(
        p.decode(b"$1\r\nx\r\n"),
        Err(crate::ProtoError::Unexpected(_))
    ));
}
