//! Closed-loop null-RPC round trips against each architecture on loopback, with the server's
//! stage stamps: a quick look at what the built-in server costs, stage by stage.
//!
//! `cargo run --release -p server --example null_rtt [REQUESTS]`

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};

use host::tstamp::mono_now_ns;
use server::{Arch, Server, ServerConfig};
use wire::nullrpc::{self, Decoded, Flags, Kind, DEFAULT_REQUEST_LEN};

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
        .unwrap_or(20_000);
    let flags = Flags {
        want_stamps: true,
        want_tx_stamp: true,
    };
    println!(
        "{n} sequential {DEFAULT_REQUEST_LEN}-byte requests per architecture, 1 worker; µs p50/p99"
    );
    println!("arch      rtt            T2-T1          T3-T2          T5-T3          T6-T5");
    for arch in [Arch::Thread, Arch::Epoll, Arch::Udp, Arch::Dispatch] {
        let cfg = ServerConfig {
            arch,
            workers: 1,
            ..ServerConfig::default()
        };
        let h = if arch == Arch::Udp {
            Server::start_udp(UdpSocket::bind("127.0.0.1:0").unwrap(), cfg).unwrap()
        } else {
            Server::start_tcp(TcpListener::bind("127.0.0.1:0").unwrap(), cfg).unwrap()
        };
        let mut cols: [Vec<u64>; 5] = Default::default();
        let mut tcp = (arch != Arch::Udp).then(|| {
            let s = TcpStream::connect(h.local_addr()).unwrap();
            s.set_nodelay(true).unwrap();
            s
        });
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut req = Vec::new();
        let mut buf = vec![0u8; 65536];
        let mut have = 0;
        for id in 0..n as u64 {
            req.clear();
            nullrpc::encode_request(&mut req, id, 0, DEFAULT_REQUEST_LEN, flags).unwrap();
            let t0 = mono_now_ns();
            match &mut tcp {
                Some(s) => s.write_all(&req).unwrap(),
                None => {
                    udp.send_to(&req, h.local_addr()).unwrap();
                }
            }
            let (mut stamps, mut t6, mut t_rx) = (None, None, 0);
            while stamps.is_none() || t6.is_none() {
                match &mut tcp {
                    Some(s) => {
                        let k = s.read(&mut buf[have..]).unwrap();
                        assert!(k > 0);
                        have += k;
                    }
                    None => have = udp.recv(&mut buf).unwrap(),
                }
                while let Ok(Decoded::Frame {
                    header,
                    stamps: st,
                    tx_stamp,
                    consumed,
                    ..
                }) = nullrpc::decode(&buf[..have])
                {
                    match header.kind {
                        Kind::Response => {
                            t_rx = mono_now_ns();
                            stamps = st;
                        }
                        Kind::TxStamp => t6 = tx_stamp,
                        Kind::Request => unreachable!(),
                    }
                    buf.copy_within(consumed..have, 0);
                    have -= consumed;
                }
            }
            let s = stamps.unwrap().0;
            cols[0].push(t_rx - t0);
            if s[0] != 0 {
                cols[1].push(s[1] - s[0]);
            }
            cols[2].push(s[2] - s[1]);
            cols[3].push(s[4] - s[2]);
            cols[4].push(t6.unwrap().saturating_sub(s[4]));
        }
        print!("{:<9}", arch.name());
        for c in &mut cols {
            let (a, b) = p50_p99(c);
            print!(" {a:>6.1}/{b:<7.1}");
        }
        println!();
        h.shutdown().unwrap();
    }
}
