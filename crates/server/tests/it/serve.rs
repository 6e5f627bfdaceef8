//! The built-in server end to end on 127.0.0.1, for every architecture.

use crate::common;

use std::collections::BTreeSet;
use std::io::Write;
use std::net::TcpStream;

use common::*;
use server::{Arch, ServerConfig};
use wire::nullrpc::{self, Flags, DEFAULT_REQUEST_LEN};

#[test]
fn every_arch_echoes_ids_to_concurrent_clients() {
    const CLIENTS: u64 = 4;
    const PER_CLIENT: u64 = 150;
    for arch in ALL {
        let h = start(cfg(arch, 2));
        let addr = h.local_addr();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                std::thread::spawn(move || {
                    let mut cl = Client::new(arch, addr);
                    let mut seen = BTreeSet::new();
                    for i in 0..PER_CLIENT {
                        let id = c << 32 | i;
                        let len = 32 + (i as usize * 7) % 300;
                        let a = cl.call(id, len, Flags::default());
                        assert!(a.payload_ok, "{arch}: payload of {id} not echoed");
                        assert_eq!(a.header.len as usize, len);
                        assert_eq!(a.stamps, None);
                        seen.insert(a.header.id);
                    }
                    seen
                })
            })
            .collect();
        let mut all = BTreeSet::new();
        for t in clients {
            all.extend(t.join().unwrap());
        }
        assert_eq!(all.len() as u64, CLIENTS * PER_CLIENT, "{arch}");
        let c = h.shutdown().unwrap();
        assert_eq!(c.served, CLIENTS * PER_CLIENT, "{arch}");
        assert_eq!(c.malformed_closed, 0);
        let conns = if arch == Arch::Udp { 0 } else { CLIENTS };
        assert_eq!(c.connections_accepted, conns, "{arch}");
    }
}

#[test]
fn pipelined_and_byte_by_byte_requests_on_tcp() {
    for arch in TCP {
        let h = start(cfg(arch, 2));
        // Pipelined: 50 requests in one write, then all answers.
        let mut c = TcpClient::connect(h.local_addr());
        let mut bytes = Vec::new();
        for id in 0..50 {
            nullrpc::encode_request(&mut bytes, id, 0, DEFAULT_REQUEST_LEN, Flags::default())
                .unwrap();
        }
        c.s.write_all(&bytes).unwrap();
        let mut ids = BTreeSet::new();
        for _ in 0..50 {
            let (hd, ok, _, _) = c.next_frame();
            assert!(ok);
            ids.insert(hd.id);
        }
        assert_eq!(ids, (0..50).collect(), "{arch}");
        // One byte per write: the server must reassemble.
        let mut c = TcpClient::connect(h.local_addr());
        let mut req = Vec::new();
        nullrpc::encode_request(&mut req, 777, 0, 64, Flags::default()).unwrap();
        for b in &req {
            c.s.write_all(std::slice::from_ref(b)).unwrap();
        }
        let (hd, ok, _, _) = c.next_frame();
        assert_eq!((hd.id, ok), (777, true), "{arch}");
        assert_eq!(h.shutdown().unwrap().served, 51);
    }
}

#[test]
fn large_pipelined_requests_exercise_partial_writes() {
    const N: u64 = 120;
    const LEN: usize = 48 * 1024;
    for arch in TCP {
        let h = start(cfg(arch, 2));
        let c = TcpClient::connect(h.local_addr());
        let mut w = c.s.try_clone().unwrap();
        // Writer and reader apart: several MB in flight fill both socket buffers, so the
        // server sees short writes and EAGAIN.
        let writer = std::thread::spawn(move || {
            for id in 0..N {
                let mut req = Vec::new();
                nullrpc::encode_request(&mut req, id, 0, LEN, Flags::default()).unwrap();
                w.write_all(&req).unwrap();
            }
        });
        let mut c = c;
        let mut ids = BTreeSet::new();
        for _ in 0..N {
            let (hd, ok, _, _) = c.next_frame();
            assert!(ok && hd.len as usize == LEN, "{arch}");
            ids.insert(hd.id);
        }
        writer.join().unwrap();
        assert_eq!(ids.len() as u64, N);
        h.shutdown().unwrap();
    }
}

#[test]
fn stamps_are_ordered_and_inside_the_client_window() {
    for arch in ALL {
        let h = start(cfg(arch, 2));
        let mut c = Client::new(arch, h.local_addr());
        let mut with_t1 = 0;
        for id in 0..200 {
            let a = c.call(id, DEFAULT_REQUEST_LEN, STAMPS);
            let s = a.stamps.expect("stamps requested and allowed").0;
            let [t1, t2, t3, t4, t5, t6_inline] = s;
            assert_eq!(t6_inline, 0, "T6 is not known when the response is written");
            // User-space stamps: same clock as the client, so exact bounds.
            assert!(a.sent_ns <= t2, "{arch}: T2 {t2} before send {}", a.sent_ns);
            assert!(t2 <= t3 && t3 <= t4 && t4 <= t5, "{arch}: {s:?}");
            assert!(t5 <= a.received_ns, "{arch}: T5 after receive");
            // Kernel stamps: within SLACK_NS of the window (clock mapping).
            if t1 != 0 {
                with_t1 += 1;
                // (T1 ≤ T2 holds by construction: see the crate doc.)
                assert!(t1 + SLACK_NS >= a.sent_ns, "{arch}: T1 before send {s:?}");
            }
            let t6 = a.t6.expect("follow-up announced");
            assert!(t6 + SLACK_NS >= t5, "{arch}: T6 {t6} before T5 {t5}");
            assert!(t6 <= a.received_ns + SLACK_NS, "{arch}: T6 after receive");
        }
        // Receive stamping is switched on lazily by the kernel: the first few may lack T1.
        assert!(with_t1 >= 150, "{arch}: only {with_t1}/200 requests had T1");
        // Loopback has no NIC clock: every T1 is the kernel's software stamp.
        assert!(h.hw_clock().is_none(), "{arch}");
        let counters = h.shutdown().unwrap();
        assert_eq!(counters.tx_stamps_sent, 200, "{arch}");
        assert_eq!(counters.rx_stamps_hardware, 0, "{arch}");
        assert!(
            counters.rx_stamps_software >= with_t1,
            "{arch}: {} software stamps for {with_t1} T1s",
            counters.rx_stamps_software
        );
    }
}

#[test]
fn stamps_off_means_no_trailer_and_no_follow_up() {
    for arch in ALL {
        let h = start(ServerConfig {
            stamps: false,
            ..cfg(arch, 1)
        });
        let mut c = Client::new(arch, h.local_addr());
        let a = c.call(5, 64, STAMPS);
        assert_eq!((a.stamps, a.t6), (None, None), "{arch}");
        assert_eq!(a.header.flags, Flags::default());
        assert_eq!(h.shutdown().unwrap().tx_stamps_sent, 0);
    }
}

#[test]
fn deterministic_work_is_never_undercut() {
    const WORK_NS: u64 = 200_000;
    for arch in ALL {
        let h = start(ServerConfig {
            work: Some("det:200us".parse().unwrap()),
            ..cfg(arch, 2)
        });
        let mut c = Client::new(arch, h.local_addr());
        for id in 0..15 {
            let flags = if id % 2 == 0 {
                STAMPS
            } else {
                Flags::default()
            };
            let a = c.call(id, 64, flags);
            let rtt = a.received_ns - a.sent_ns;
            assert!(rtt >= WORK_NS, "{arch}: rtt {rtt} ns < work");
            if let Some(s) = a.stamps {
                assert!(s.0[3] - s.0[2] >= WORK_NS, "{arch}: T4-T3 {:?}", s);
            }
        }
        h.shutdown().unwrap();
    }
}

#[test]
fn a_malformed_frame_closes_only_its_connection() {
    for arch in TCP {
        let h = start(ServerConfig {
            max_frame: 1024,
            ..cfg(arch, 2)
        });
        let addr = h.local_addr();
        let mut good = TcpClient::connect(addr);
        assert!(good.call(1, 64, Flags::default()).payload_ok);

        let mut garbage = TcpClient::connect(addr);
        garbage.s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert!(garbage.is_closed_by_server(), "{arch}: bad magic");

        let mut huge = TcpClient::connect(addr);
        let mut req = Vec::new();
        nullrpc::encode_request(&mut req, 9, 0, 2048, Flags::default()).unwrap();
        // Only the header: the server must refuse before the body arrives.
        huge.s.write_all(&req[..nullrpc::HEADER_LEN]).unwrap();
        assert!(huge.is_closed_by_server(), "{arch}: len > max_frame");

        // The good connection still works, before and after.
        assert!(good.call(2, 64, Flags::default()).payload_ok, "{arch}");
        let c = h.shutdown().unwrap();
        assert_eq!((c.malformed_closed, c.served), (2, 2), "{arch}");
    }
}

#[test]
fn udp_drops_malformed_datagrams_and_keeps_serving() {
    let h = start(ServerConfig {
        max_frame: 1024,
        ..cfg(Arch::Udp, 2)
    });
    let mut c = UdpClient::new(h.local_addr());
    c.send_raw(b"not a frame");
    let mut big = Vec::new();
    nullrpc::encode_request(&mut big, 3, 0, 2000, Flags::default()).unwrap();
    c.send_raw(&big);
    let mut truncated = Vec::new();
    nullrpc::encode_request(&mut truncated, 4, 0, 100, Flags::default()).unwrap();
    c.send_raw(&truncated[..60]);
    for id in 10..20 {
        assert!(c.call(id, 100, Flags::default()).payload_ok);
    }
    let counters = h.shutdown().unwrap();
    assert_eq!((counters.malformed_closed, counters.served), (3, 10));
}

#[test]
fn shutdown_returns_with_idle_and_busy_connections() {
    for arch in ALL {
        let h = start(ServerConfig {
            work: Some("det:50us".parse().unwrap()),
            ..cfg(arch, 3)
        });
        let addr = h.local_addr();
        // Idle connections (blocking readers on the server side for the thread arch).
        let idle: Vec<_> = (0..3)
            .filter(|_| arch != Arch::Udp)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let mut c = Client::new(arch, addr);
        c.call(1, 64, Flags::default());
        let counters = h.shutdown().unwrap();
        assert_eq!(counters.served, 1, "{arch}");
        drop(idle);
    }
}

#[test]
fn start_rejects_a_mismatched_socket_or_bad_config() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(server::Server::start_tcp(l, cfg(Arch::Udp, 1)).is_err());
    let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    assert!(server::Server::start_udp(u, cfg(Arch::Epoll, 1)).is_err());
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(server::Server::start_tcp(l, cfg(Arch::Epoll, 0)).is_err());
    for arch in [Arch::Thread, Arch::Dispatch] {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = ServerConfig {
            batch_replies: true,
            ..cfg(arch, 1)
        };
        assert!(server::Server::start_tcp(l, c).is_err(), "{arch}");
    }
}

/// 50 requests in one write reach the epoll worker in a read or two: answered one write per
/// reply by default, one write per read with `batch_replies` (and still each with its T6).
#[test]
fn epoll_batched_replies_take_one_write_per_read() {
    const N: u64 = 50;
    for (batch, flags) in [
        (false, Flags::default()),
        (true, Flags::default()),
        (true, STAMPS),
    ] {
        let h = start(ServerConfig {
            batch_replies: batch,
            ..cfg(Arch::Epoll, 1)
        });
        let mut c = TcpClient::connect(h.local_addr());
        let mut bytes = Vec::new();
        for id in 0..N {
            nullrpc::encode_request(&mut bytes, id, 0, DEFAULT_REQUEST_LEN, flags).unwrap();
        }
        c.s.write_all(&bytes).unwrap();
        let mut ids = Vec::new();
        let mut t5 = std::collections::BTreeMap::new();
        let mut t6 = 0;
        while ids.len() < N as usize || (flags.want_tx_stamp && t6 < N) {
            let (hd, ok, stamps, tx) = c.next_frame();
            match hd.kind {
                nullrpc::Kind::Response => {
                    assert!(ok, "payload of {} not echoed", hd.id);
                    ids.push(hd.id);
                    if let Some(s) = stamps {
                        t5.insert(hd.id, s.0[4]);
                    }
                }
                nullrpc::Kind::TxStamp => {
                    let t = tx.expect("T6");
                    assert!(t + SLACK_NS >= t5[&hd.id], "T6 before T5 for {}", hd.id);
                    t6 += 1;
                }
                k => panic!("unexpected {k:?}"),
            }
        }
        // In order, every one once.
        assert_eq!(ids, (0..N).collect::<Vec<_>>(), "batch {batch}");
        let counters = h.shutdown().unwrap();
        assert_eq!(counters.served, N);
        let replies_only = counters.reply_writes;
        if !batch {
            assert_eq!(replies_only, N, "one write per reply");
        } else {
            // ~8 KB in one write arrives in at most a few reads (each ≥ 4 KiB); with stamps,
            // each reply write is followed by a write of its follow-ups.
            let per_read = if flags.want_tx_stamp { 2 } else { 1 };
            assert!(
                replies_only <= 3 * per_read,
                "{replies_only} writes for {N} pipelined requests"
            );
            assert_eq!(
                counters.tx_stamps_sent,
                if flags.want_tx_stamp { N } else { 0 }
            );
        }
    }
}

#[test]
fn pipelined_stamped_requests_each_get_their_t6() {
    const N: u64 = 30;
    for arch in TCP {
        let h = start(cfg(arch, 2));
        let mut c = TcpClient::connect(h.local_addr());
        let mut bytes = Vec::new();
        for id in 0..N {
            nullrpc::encode_request(&mut bytes, id, 0, DEFAULT_REQUEST_LEN, STAMPS).unwrap();
        }
        c.s.write_all(&bytes).unwrap();
        let mut t5 = std::collections::BTreeMap::new();
        let mut t6 = std::collections::BTreeMap::new();
        while t5.len() < N as usize || t6.len() < N as usize {
            let (hd, _, stamps, tx) = c.next_frame();
            match hd.kind {
                nullrpc::Kind::Response => {
                    let s = stamps.expect("stamps").0;
                    assert!(
                        s[1] <= s[2] && s[2] <= s[3] && s[3] <= s[4],
                        "{arch}: {s:?}"
                    );
                    assert!(t5.insert(hd.id, s[4]).is_none());
                }
                nullrpc::Kind::TxStamp => {
                    assert!(t5.contains_key(&hd.id), "{arch}: T6 before its response");
                    assert!(t6.insert(hd.id, tx.unwrap()).is_none());
                }
                k => panic!("unexpected {k:?}"),
            }
        }
        for (id, t6) in &t6 {
            assert!(t6 + SLACK_NS >= t5[id], "{arch}: T6 before T5 for {id}");
        }
        assert_eq!(h.shutdown().unwrap().tx_stamps_sent, N, "{arch}");
    }
}

#[test]
fn handle_and_config_can_move_between_threads() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<server::ServerHandle>();
    sync::<server::ServerHandle>();
    send::<ServerConfig>();
}
