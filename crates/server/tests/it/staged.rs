//! The staged (LNS tandem) server end to end on 127.0.0.1: ids, stage costs, the order of
//! completion under FCFS and under full-stack priority, shutdown.

use crate::common;

use std::collections::BTreeSet;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use host::tstamp::mono_now_ns;
use server::staged::{set_request_class, DELAY_SENSITIVE_CLASS};
use server::{Arch, ServerConfig, StagedConfig};
use wire::nullrpc::{self, Flags, Kind};

const INSENSITIVE: u8 = 1;

fn staged(s: StagedConfig) -> ServerConfig {
    ServerConfig {
        arch: Arch::Staged,
        staged: s,
        ..ServerConfig::default()
    }
}

/// Appends request `id` of total length `len`, labelled `class`.
fn labelled(out: &mut Vec<u8>, id: u64, len: usize, class: u8, flags: Flags) {
    let at = out.len();
    nullrpc::encode_request(out, id, id ^ 0xabcd, len, flags).unwrap();
    assert!(set_request_class(&mut out[at..], class));
}

/// Reads `n` responses; their ids in order of arrival.
fn completion_order(c: &mut TcpClient, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let (h, _, _, _) = c.next_frame();
            assert_eq!(h.kind, Kind::Response);
            assert_eq!(h.client_ts, h.id ^ 0xabcd);
            h.id
        })
        .collect()
}

#[test]
fn every_request_is_answered_with_its_id() {
    const CLIENTS: u64 = 3;
    const PER_CLIENT: u64 = 120;
    for priority in [false, true] {
        let h = start(staged(StagedConfig {
            t0_ns: 2_000.0,
            mt_ns_per_byte: 5.0,
            r0_ns: 3_000.0,
            mr_ns_per_worker: 500.0,
            workers: 3,
            priority,
            worker_sleep: false,
        }));
        let addr = h.local_addr();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                std::thread::spawn(move || {
                    let mut cl = TcpClient::connect(addr);
                    let mut ids = BTreeSet::new();
                    // Pipelined in groups of 10, mixed labels and lengths.
                    for g in 0..PER_CLIENT / 10 {
                        let mut bytes = Vec::new();
                        let mut sent = BTreeSet::new();
                        for i in g * 10..g * 10 + 10 {
                            let id = c << 32 | i;
                            let len = 33 + (i as usize * 13) % 400;
                            labelled(&mut bytes, id, len, (i % 3) as u8, Flags::default());
                            sent.insert(id);
                        }
                        cl.s.write_all(&bytes).unwrap();
                        let got: BTreeSet<u64> =
                            completion_order(&mut cl, 10).into_iter().collect();
                        assert_eq!(got, sent, "priority {priority}");
                        ids.extend(got);
                    }
                    ids
                })
            })
            .collect();
        let mut all = BTreeSet::new();
        for t in clients {
            all.extend(t.join().unwrap());
        }
        assert_eq!(all.len() as u64, CLIENTS * PER_CLIENT);
        let c = h.shutdown().unwrap();
        assert_eq!(c.served, CLIENTS * PER_CLIENT);
        assert_eq!(c.connections_accepted, CLIENTS);
        assert_eq!(c.malformed_closed, 0);
    }
}

#[test]
fn an_isolated_request_pays_both_stage_costs() {
    isolated_requests_pay_both_stage_costs(false);
}

#[test]
fn sleeping_workers_pay_their_cost_too() {
    isolated_requests_pay_both_stage_costs(true);
}

fn isolated_requests_pay_both_stage_costs(worker_sleep: bool) {
    let s = StagedConfig {
        worker_sleep,
        t0_ns: 200_000.0,
        mt_ns_per_byte: 10.0,
        r0_ns: 300_000.0,
        mr_ns_per_worker: 50_000.0,
        workers: 2,
        priority: true,
    };
    let len = 128;
    let stack_ns = s.stack_cost_ns(len - nullrpc::HEADER_LEN);
    let worker_ns = s.worker_cost_ns();
    assert_eq!((stack_ns, worker_ns), (200_960, 400_000));
    let h = start(staged(s));
    let mut c = TcpClient::connect(h.local_addr());
    let flags = Flags {
        want_stamps: true,
        want_tx_stamp: false,
    };
    for id in 0..6 {
        // One at a time: nothing else is queued, so the latency is the two costs plus
        // overheads, never less.
        let mut req = Vec::new();
        labelled(&mut req, id, len, (id % 2) as u8, flags);
        let sent = mono_now_ns();
        c.s.write_all(&req).unwrap();
        let (hd, _, stamps, _) = c.next_frame();
        let rtt = mono_now_ns() - sent;
        assert_eq!(hd.id, id);
        assert!(rtt >= stack_ns + worker_ns, "rtt {rtt} ns below the costs");
        let t = stamps.expect("stamps were asked for").0;
        assert!(t[1] > 0 && t[5] == 0);
        assert!(
            t.windows(2).take(4).all(|w| w[0] <= w[1] || w[0] == 0),
            "{t:?}"
        );
        assert!(t[2] - t[1] >= stack_ns, "T3 - T2 = {} ns", t[2] - t[1]);
        assert!(t[3] - t[2] >= worker_ns, "T4 - T3 = {} ns", t[3] - t[2]);
    }
    assert_eq!(h.shutdown().unwrap().served, 6);
}

/// Ten delay-insensitive requests (ids 0..10) then ten delay-sensitive ones (ids 10..20),
/// all in one write: stage 1 (the bottleneck here) decodes them together.
#[test]
fn stack_bottleneck_burst_priority_vs_fcfs() {
    for priority in [false, true] {
        let h = start(staged(StagedConfig {
            t0_ns: 200_000.0,
            workers: 1,
            priority,
            worker_sleep: false,
            ..StagedConfig::default()
        }));
        let mut c = TcpClient::connect(h.local_addr());
        let mut bytes = Vec::new();
        for id in 0..20 {
            let class = if id < 10 {
                INSENSITIVE
            } else {
                DELAY_SENSITIVE_CLASS
            };
            labelled(&mut bytes, id, 64, class, Flags::default());
        }
        c.s.write_all(&bytes).unwrap();
        let order = completion_order(&mut c, 20);
        let expected: Vec<u64> = if priority {
            (10..20).chain(0..10).collect()
        } else {
            (0..20).collect()
        };
        assert_eq!(order, expected, "priority {priority}");
        assert_eq!(h.shutdown().unwrap().served, 20);
    }
}

/// The worker is the bottleneck: it is busy with a first request while ten delay-insensitive
/// then ten delay-sensitive requests arrive one by one (so stage 1 mostly sees them singly
/// and the reordering, if any, happens in the queues behind it). The only timing assumption
/// is that 20 sends 300 µs apart reach the workers' queue within the first request's 30 ms.
#[test]
fn worker_bottleneck_burst_priority_vs_fcfs() {
    for priority in [false, true] {
        let h = start(staged(StagedConfig {
            r0_ns: 30e6,
            workers: 1,
            priority,
            worker_sleep: false,
            ..StagedConfig::default()
        }));
        let mut c = TcpClient::connect(h.local_addr());
        let mut plug = Vec::new();
        labelled(&mut plug, 100, 64, INSENSITIVE, Flags::default());
        c.s.write_all(&plug).unwrap();
        for id in 0..20 {
            std::thread::sleep(Duration::from_micros(300));
            let class = if id < 10 {
                INSENSITIVE
            } else {
                DELAY_SENSITIVE_CLASS
            };
            let mut req = Vec::new();
            labelled(&mut req, id, 64, class, Flags::default());
            c.s.write_all(&req).unwrap();
        }
        let order = completion_order(&mut c, 21);
        let expected: Vec<u64> = if priority {
            [100].into_iter().chain(10..20).chain(0..10).collect()
        } else {
            [100].into_iter().chain(0..20).collect()
        };
        assert_eq!(order, expected, "priority {priority}");
        assert_eq!(h.shutdown().unwrap().served, 21);
    }
}

#[test]
fn shutdown_joins_with_requests_in_flight() {
    let h = start(staged(StagedConfig {
        t0_ns: 1e6,
        r0_ns: 20e6,
        workers: 2,
        priority: true,
        worker_sleep: false,
        ..StagedConfig::default()
    }));
    let addr = h.local_addr();
    let mut c = TcpClient::connect(addr);
    let mut bytes = Vec::new();
    for id in 0..50 {
        labelled(&mut bytes, id, 64, (id % 2) as u8, Flags::default());
    }
    c.s.write_all(&bytes).unwrap();
    // The first answer proves every stage is running; the rest are still queued.
    assert_eq!(completion_order(&mut c, 1).len(), 1);
    let counters = h.shutdown().unwrap();
    assert!((1..50).contains(&counters.served), "{counters:?}");
    assert_eq!(counters.connections_accepted, 1);
    // Every thread has exited: the listener is closed and the connection shut down.
    assert!(TcpStream::connect(addr).is_err());
    assert!(c.is_closed_by_server());
    // An idle server stops too.
    let h = start(staged(StagedConfig::default()));
    assert_eq!(h.shutdown().unwrap().served, 0);
}

#[test]
fn staged_arch_is_parsed_and_validated() {
    assert_eq!("staged".parse::<Arch>().unwrap(), Arch::Staged);
    let bad = staged(StagedConfig {
        workers: 0,
        ..StagedConfig::default()
    });
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(server::Server::start_tcp(l, bad).is_err());
    let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    assert!(server::Server::start_udp(u, staged(StagedConfig::default())).is_err());
}
