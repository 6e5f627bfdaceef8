//! What the staged (LNS tandem) server costs beyond its synthetic stage costs: closed-loop
//! round trips of one request at a time on loopback, for a few worker counts, with the stage
//! stamps split into stage 1 (T3 − T2 − T), the hand-off through the dispatcher to a worker
//! plus the worker (T4 − T3 − R), and the round trip left after both costs (rtt − T − R).
//! That remainder is the part of the paper's constant M that an idle server adds.
//!
//! `cargo run --release -p server --example staged_overhead [REQUESTS]`

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use host::tstamp::mono_now_ns;
use server::staged::set_request_class;
use server::{Arch, Server, ServerConfig, StagedConfig};
use wire::nullrpc::{self, Decoded, Flags};

/// Median and 99th percentile (nearest rank) of `v`, in µs.
fn p50_p99(v: &mut [u64]) -> (f64, f64) {
    v.sort_unstable();
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1e3;
    (at(0.5), at(0.99))
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000);
    let len = 256;
    println!("{n} sequential {len}-byte requests; T0 = 10 µs, mT = 20 ns/B, R0 = 20 µs, mR = 2 µs");
    println!("k  T µs   R µs   stage1-T p50/p99   hand-off+worker-R p50/p99   rtt-T-R p50/p99");
    for k in [1, 2, 4] {
        let s = StagedConfig {
            t0_ns: 10_000.0,
            mt_ns_per_byte: 20.0,
            r0_ns: 20_000.0,
            mr_ns_per_worker: 2_000.0,
            workers: k,
            priority: true,
            worker_sleep: false,
        };
        let (t, r) = (
            s.stack_cost_ns(len - nullrpc::HEADER_LEN),
            s.worker_cost_ns(),
        );
        let cfg = ServerConfig {
            arch: Arch::Staged,
            staged: s,
            ..ServerConfig::default()
        };
        let h = Server::start_tcp(TcpListener::bind("127.0.0.1:0").unwrap(), cfg).unwrap();
        let mut c = TcpStream::connect(h.local_addr()).unwrap();
        c.set_nodelay(true).unwrap();
        let flags = Flags {
            want_stamps: true,
            want_tx_stamp: false,
        };
        let mut cols: [Vec<u64>; 3] = Default::default();
        let (mut buf, mut have, mut req) = (vec![0u8; 65536], 0, Vec::new());
        for id in 0..n as u64 {
            req.clear();
            nullrpc::encode_request(&mut req, id, 0, len, flags).unwrap();
            set_request_class(&mut req, (id % 2) as u8);
            let t_tx = mono_now_ns();
            c.write_all(&req).unwrap();
            let stamps = loop {
                if let Ok(Decoded::Frame {
                    stamps, consumed, ..
                }) = nullrpc::decode(&buf[..have])
                {
                    buf.copy_within(consumed..have, 0);
                    have -= consumed;
                    break stamps.unwrap().0;
                }
                let got = c.read(&mut buf[have..]).unwrap();
                assert!(got > 0, "server closed");
                have += got;
            };
            let rtt = mono_now_ns() - t_tx;
            cols[0].push((stamps[2] - stamps[1]).saturating_sub(t));
            cols[1].push((stamps[3] - stamps[2]).saturating_sub(r));
            cols[2].push(rtt.saturating_sub(t + r));
        }
        print!("{k}  {:<6.2} {:<6.2}", t as f64 / 1e3, r as f64 / 1e3);
        for col in &mut cols {
            let (a, b) = p50_p99(col);
            print!("   {a:>7.2}/{b:<9.2}");
        }
        println!();
        h.shutdown().unwrap();
    }
}
