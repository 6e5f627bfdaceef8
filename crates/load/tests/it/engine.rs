//! The open-loop engine against tiny in-test servers on 127.0.0.1:0.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Behaviour, TcpEcho, UdpEcho};
use load::{
    run_open_loop, LoadConfig, LoadError, NullRpc, Outcome, Protocol, RunRecords, StopAt, Target,
    Transport,
};

fn target(addr: std::net::SocketAddr, udp: bool) -> Target {
    let scheme = if udp { "nullrpc+udp" } else { "nullrpc" };
    format!("{scheme}://{addr}").parse().unwrap()
}

fn nullrpc(transport: Transport) -> impl Fn() -> Box<dyn Protocol> {
    move || Box::new(NullRpc::new(transport, 128, true, false)) as Box<dyn Protocol>
}

fn run(cfg: &LoadConfig) -> RunRecords {
    let stop = AtomicBool::new(false);
    run_open_loop(cfg, &nullrpc(cfg.target.transport), &stop, &|_, _| {}).unwrap()
}

/// Deterministic arrivals: the schedule length is known exactly (rate × duration ± 1).
fn det_cfg(t: Target, rate: f64, ms: u64) -> LoadConfig {
    let mut c = LoadConfig::new(t, rate);
    c.arrival = model::ArrivalSpec::Deterministic;
    c.stop = StopAt::Duration(Duration::from_millis(ms));
    c.timeout = Duration::from_millis(500);
    c
}

#[test]
fn low_load_every_request_answered_at_the_target_rate() {
    let server = TcpEcho::start(Behaviour {
        reorder_ns: 200_000,
        ..Default::default()
    });
    let mut cfg = det_cfg(target(server.addr, false), 2000.0, 1000);
    cfg.connections = 4;
    cfg.threads = 2;
    let out = run(&cfg);
    let n = out.records.len() as f64;
    // Schedule length: 2000 requests in 1 s (the first may fall at t≈0 or at one gap).
    assert!((1999.0..=2001.0).contains(&n), "schedule length {n}");
    let ok = out.count(Outcome::Ok) as f64;
    // Achieved rate (a count of answered requests over the schedule) within 5 % of target.
    assert!(
        (ok / 2000.0 - 1.0).abs() < 0.05,
        "ok {ok} of {n}; errors {:?}",
        out.errors
    );
    assert!(!out.interrupted);
    assert!(out
        .records
        .windows(2)
        .all(|w| w[0].intended_ns <= w[1].intended_ns));
    // Replies come back out of order (server holds id%3 × 200 µs); matching by id must
    // pair each record with its own reply: the server's stamps fall inside the record's
    // own send/receive window.
    for r in out.records.iter().filter(|r| r.outcome == Outcome::Ok) {
        let (t3, t5) = (
            r.stamps[2] - out.start_mono_ns,
            r.stamps[4] - out.start_mono_ns,
        );
        assert!(r.sent_ns <= t3 && t3 <= t5 && t5 <= r.received_ns, "{r:?}");
        assert!(r.lateness_ns().is_some());
        assert!(r.latency_ns().unwrap() >= r.received_ns - r.sent_ns);
        assert!((r.conn as usize) < cfg.connections);
    }
    let mut late: Vec<u64> = out.records.iter().filter_map(|r| r.lateness_ns()).collect();
    late.sort_unstable();
    let q = |p: f64| late[((late.len() - 1) as f64 * p) as usize];
    eprintln!(
        "lateness ns: p50 {} p99 {} max {}; kernel rx stamps on {} of {} replies",
        q(0.5),
        q(0.99),
        q(1.0),
        out.records.iter().filter(|r| r.kernel_rx_ns != 0).count(),
        ok
    );
    let conns: std::collections::BTreeSet<u32> = out.records.iter().map(|r| r.conn).collect();
    assert_eq!(conns.len(), 4, "requests are dealt over all connections");
}

#[test]
fn request_count_and_warmup_and_classes() {
    let server = TcpEcho::start(Behaviour::default());
    let mut cfg = LoadConfig::new(target(server.addr, false), 5000.0);
    cfg.stop = StopAt::Requests(600);
    cfg.warmup = Duration::from_millis(40);
    cfg.class_probs = vec![0.5, 0.5];
    cfg.connections = 2;
    cfg.threads = 2;
    cfg.cpus = vec![0];
    let out = run(&cfg);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.warmup_ns, 40_000_000);
    assert_eq!(
        out.measured().count(),
        600,
        "measured requests = StopAt::Requests exactly"
    );
    assert!(out.records.len() > 600, "warm-up requests are recorded too");
    let ones = out.records.iter().filter(|r| r.class == 1).count() as f64;
    let n = out.records.len() as f64;
    // Binomial(n, 1/2): 5 sd.
    assert!(
        (ones - n / 2.0).abs() < 5.0 * (n / 4.0).sqrt(),
        "{ones} of {n}"
    );
}

#[test]
fn latency_counts_from_intended_time_and_covers_service() {
    // 300 µs of known work per request; 1 connection, 1 outstanding: the generator is
    // forced to queue requests in its backlog when arrivals bunch up, so lateness appears.
    let server = TcpEcho::start(Behaviour {
        spin_ns: 300_000,
        ..Default::default()
    });
    let mut cfg = LoadConfig::new(target(server.addr, false), 2000.0);
    cfg.stop = StopAt::Requests(400);
    cfg.max_outstanding_per_conn = 1;
    cfg.timeout = Duration::from_secs(2);
    let out = run(&cfg);
    assert_eq!(out.count(Outcome::Ok), 400, "errors: {:?}", out.errors);
    let mut late = 0;
    for r in &out.records {
        let lat = r.latency_ns().unwrap();
        // Sent − intended: the generator's own lateness plus the time held in its backlog
        // (a wait for the one connection's slot is held, not lateness: see `held_ns`).
        let delay = r.send_delay_ns().unwrap();
        assert!(lat >= 300_000, "latency {lat} below the server's work");
        assert!(
            lat >= delay + 300_000,
            "latency includes the send delay: {r:?}"
        );
        if delay > 300_000 {
            late += 1;
        }
    }
    // Poisson at ρ = 0.6 with one request at a time: P(wait > 300 µs) is large (≈ 0.3);
    // at least a few of 400 must have waited in the backlog.
    assert!(late >= 10, "only {late} requests sent late");
}

#[test]
fn stop_flag_ends_early_with_partial_records() {
    let server = TcpEcho::start(Behaviour::default());
    let mut cfg = det_cfg(target(server.addr, false), 1000.0, 60_000);
    cfg.timeout = Duration::from_millis(200);
    let stop = AtomicBool::new(false);
    let calls = std::sync::atomic::AtomicU64::new(0);
    let progress = |done: u64, total: u64| {
        assert!(done <= total);
        // Interrupt once progress has been reported twice (≈ 0.5 s into a 60 s run).
        if calls.fetch_add(1, Ordering::Relaxed) >= 1 {
            stop.store(true, Ordering::Relaxed);
        }
    };
    let out = run_open_loop(&cfg, &nullrpc(Transport::Tcp), &stop, &progress).unwrap();
    assert!(out.interrupted);
    assert!(out.records.len() > 100, "{}", out.records.len());
    assert!(out.records.len() < 60_000 / 2, "{}", out.records.len());
    assert!(out.count(Outcome::Ok) > 100);
}

#[test]
fn killed_server_fails_requests_and_run_returns() {
    let mut server = TcpEcho::start(Behaviour::default());
    let mut cfg = det_cfg(target(server.addr, false), 1000.0, 1500);
    cfg.connections = 2;
    cfg.timeout = Duration::from_millis(100);
    let done = std::sync::atomic::AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let killer = s.spawn(|| {
            // Kill once a third of the schedule is done (progress is reported by count).
            while done.load(Ordering::Relaxed) < 500 {
                std::thread::sleep(Duration::from_millis(10));
            }
            server.kill();
        });
        let out = run_open_loop(&cfg, &nullrpc(Transport::Tcp), &stop, &|d, _| {
            done.store(d, Ordering::Relaxed)
        })
        .unwrap();
        killer.join().unwrap();
        let n = out.records.len();
        assert!(
            (1499..=1501).contains(&n),
            "every scheduled request has a record: {n}"
        );
        let ok = out.count(Outcome::Ok);
        eprintln!(
            "killed server: ok {ok} error {} timeout {} dropped {}; errors {:?}",
            out.count(Outcome::Error),
            out.count(Outcome::Timeout),
            out.count(Outcome::Dropped),
            out.errors
        );
        let failed =
            out.count(Outcome::Error) + out.count(Outcome::Timeout) + out.count(Outcome::Dropped);
        assert_eq!(ok + failed, n);
        assert!(ok >= 400, "ok {ok}");
        assert!(failed >= 400, "failed {failed}");
        assert!(!out.errors.is_empty());
        // Nothing after the kill succeeded, and never-sent requests have no send time.
        for r in &out.records {
            if r.outcome == Outcome::Dropped {
                assert_eq!(r.sent_ns, 0);
            }
        }
    });
}

#[test]
fn udp_lost_datagrams_time_out() {
    let server = UdpEcho::start(10);
    let mut cfg = det_cfg(target(server.addr, true), 2000.0, 500);
    cfg.connections = 2;
    cfg.timeout = Duration::from_millis(300); // generous: only lost datagrams may time out
    let out = run(&cfg);
    let n = out.records.len() as u64;
    let dropped_by_server = server.dropped.load(Ordering::Relaxed);
    assert_eq!(
        dropped_by_server,
        n / 10,
        "server drops every 10th datagram"
    );
    assert_eq!(out.count(Outcome::Timeout) as u64, dropped_by_server);
    assert_eq!(out.count(Outcome::Ok) as u64, n - dropped_by_server);
    assert!(out
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .all(|r| r.stamps[2] != 0));
}

#[test]
fn refused_connection_is_reported_before_the_run() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let cfg = det_cfg(target(addr, false), 1000.0, 100);
    let stop = AtomicBool::new(false);
    let err = run_open_loop(&cfg, &nullrpc(Transport::Tcp), &stop, &|_, _| {}).unwrap_err();
    match &err {
        LoadError::Connect { addr: a, .. } => assert_eq!(*a, addr),
        e => panic!("expected Connect, got {e}"),
    }
    assert!(err.to_string().contains(&addr.to_string()));
}

#[test]
fn invalid_configs_are_rejected() {
    let t = target("127.0.0.1:9".parse().unwrap(), false);
    let stop = AtomicBool::new(false);
    let check = |c: LoadConfig, needle: &str| {
        let e = run_open_loop(&c, &nullrpc(Transport::Tcp), &stop, &|_, _| {}).unwrap_err();
        assert!(e.to_string().contains(needle), "{e}");
    };
    check(LoadConfig::new(t.clone(), 0.0), "rate must be positive");
    let mut c = LoadConfig::new(t.clone(), 10.0);
    c.connections = 0;
    check(c, "connections");
    let mut c = LoadConfig::new(t.clone(), 10.0);
    c.class_probs = vec![0.5, 0.6];
    check(c, "sum to 1");
    let mut c = LoadConfig::new(t.clone(), 10.0);
    c.cpus = vec![100_000];
    check(c, "cpu 100000");
    // A UDP codec against a TCP target.
    let c = LoadConfig::new(t, 10.0);
    let e = run_open_loop(&c, &nullrpc(Transport::Udp), &stop, &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("protocol speaks udp"), "{e}");
}

#[test]
fn trace_replay_keeps_times_and_connections() {
    let server = TcpEcho::start(Behaviour::default());
    // 300 arrivals 1 ms apart (as recorded), connection ids cycling 0..5 over 3 connections.
    let text: String = (0..300)
        .map(|i| format!("{} {}\n", 1000 + i * 1000, i % 5))
        .collect();
    let trace = model::parse_trace(&text, model::TimeUnit::Us).unwrap();
    let mut cfg = LoadConfig::new(target(server.addr, false), 0.0);
    cfg.arrival = model::ArrivalSpec::Trace(trace);
    cfg.stop = StopAt::Duration(Duration::from_secs(10));
    cfg.connections = 3;
    cfg.threads = 2;
    let out = run(&cfg);
    assert_eq!(out.records.len(), 300);
    assert_eq!(out.count(Outcome::Ok), 300, "{:?}", out.errors);
    for (i, r) in out.records.iter().enumerate() {
        // Rebased so the first arrival is at 0; gaps as recorded.
        assert_eq!(r.intended_ns, i as u64 * 1_000_000);
        assert_eq!(r.conn, (i % 5 % 3) as u32, "request {i}");
        // Nothing goes out before its time, not even the request scheduled at 0.
        assert!(
            r.stamps[2] >= out.start_mono_ns + r.sent_ns,
            "request {i} sent early: {r:?}"
        );
        assert!(r.sent_ns >= r.intended_ns);
    }
}

#[test]
fn tx_stamp_follow_ups_fill_t6() {
    let server = TcpEcho::start(Behaviour::default());
    let mut cfg = det_cfg(target(server.addr, false), 2000.0, 200);
    cfg.yield_when_far = false; // the pure spinning path
    let factory = || Box::new(NullRpc::new(Transport::Tcp, 64, true, true)) as Box<dyn Protocol>;
    let stop = AtomicBool::new(false);
    let out = run_open_loop(&cfg, &factory, &stop, &|_, _| {}).unwrap();
    assert_eq!(out.count(Outcome::Ok), out.records.len());
    for r in &out.records {
        // T6 arrives in a separate frame after the reply, and is after T5.
        assert!(r.stamps[5] >= r.stamps[4] && r.stamps[4] != 0, "{r:?}");
    }
}

#[test]
fn server_dying_with_requests_in_flight_marks_them_error() {
    // 3 ms of work per request at 500/s (ρ = 1.5): a queue builds, so many requests are
    // in flight when the server dies; they become Error, later ones Dropped.
    let mut server = TcpEcho::start(Behaviour {
        spin_ns: 3_000_000,
        ..Default::default()
    });
    let mut cfg = det_cfg(target(server.addr, false), 500.0, 1000);
    cfg.timeout = Duration::from_secs(5);
    let done = std::sync::atomic::AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let killer = s.spawn(|| {
            while server.served.load(Ordering::Relaxed) < 50 {
                std::thread::sleep(Duration::from_millis(5));
            }
            server.kill();
        });
        let out = run_open_loop(&cfg, &nullrpc(Transport::Tcp), &stop, &|d, _| {
            done.store(d, Ordering::Relaxed)
        })
        .unwrap();
        killer.join().unwrap();
        let (ok, err) = (out.count(Outcome::Ok), out.count(Outcome::Error));
        let dropped = out.count(Outcome::Dropped);
        eprintln!("dying server: ok {ok} error {err} dropped {dropped}");
        assert!(ok >= 45, "ok {ok}");
        assert!(err >= 1, "in-flight requests at the kill become Error");
        assert!(dropped >= 1);
        assert_eq!(out.count(Outcome::Timeout), 0);
        assert_eq!(ok + err + dropped, out.records.len());
        for r in out.records.iter().filter(|r| r.outcome == Outcome::Error) {
            assert!(r.sent_ns != 0 && r.received_ns == 0);
        }
    });
}

/// Null-RPC seen through a protocol without ids: replies must be matched in FIFO order.
struct FifoNullRpc(NullRpc);

impl Protocol for FifoNullRpc {
    fn transport(&self) -> Transport {
        self.0.transport()
    }
    fn encode(&mut self, id: u64, class: u8, out: &mut Vec<u8>) {
        self.0.encode(id, class, out)
    }
    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, load::Reply)>, load::ProtoError> {
        Ok(self
            .0
            .decode(buf)?
            .map(|(n, r)| (n, load::Reply { id: None, ..r })))
    }
    fn carries_id(&self) -> bool {
        false
    }
}

#[test]
fn fifo_matching_survives_timeouts() {
    // Every 100th request stalls the (in-order) server for 30 ms, past the 10 ms timeout:
    // it and the requests queued behind it time out, and their late replies must be
    // consumed without shifting later replies onto the wrong requests.
    let server = TcpEcho::start(Behaviour {
        stall_every: 100,
        stall_ns: 30_000_000,
        ..Default::default()
    });
    let mut cfg = det_cfg(target(server.addr, false), 1000.0, 400);
    cfg.timeout = Duration::from_millis(10);
    cfg.max_outstanding_per_conn = 1000;
    let factory = || {
        Box::new(FifoNullRpc(NullRpc::new(Transport::Tcp, 128, true, false))) as Box<dyn Protocol>
    };
    let stop = AtomicBool::new(false);
    let out = run_open_loop(&cfg, &factory, &stop, &|_, _| {}).unwrap();
    let (ok, to) = (out.count(Outcome::Ok), out.count(Outcome::Timeout));
    eprintln!("fifo: ok {ok} timeout {to} errors {:?}", out.errors);
    // 4 stalls, each holding up ~30 requests behind it; the rest are answered in time.
    assert!(to >= 4, "stalled requests time out: {to}");
    assert!(ok >= 100, "ok {ok}");
    for r in out.records.iter().filter(|r| r.outcome == Outcome::Ok) {
        let t3 = r.stamps[2] - out.start_mono_ns;
        assert!(
            r.sent_ns <= t3 && t3 <= r.received_ns,
            "mismatched reply: {r:?}"
        );
    }
}

#[test]
fn garbage_replies_fail_the_connection_not_the_run() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let quit = std::sync::Arc::new(AtomicBool::new(false));
    let q = quit.clone();
    let garbage = std::thread::spawn(move || {
        while !q.load(Ordering::Relaxed) {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            std::thread::spawn(move || {
                s.set_nonblocking(false).unwrap();
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&[b'Z'; 64]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let mut cfg = det_cfg(target(addr, false), 1000.0, 300);
    cfg.timeout = Duration::from_millis(50);
    let out = run(&cfg);
    quit.store(true, Ordering::Relaxed);
    garbage.join().unwrap();
    assert_eq!(out.count(Outcome::Ok), 0);
    assert!(out.count(Outcome::Error) > 0);
    assert!(
        out.errors.iter().any(|e| e.contains("malformed")),
        "{:?}",
        out.errors
    );
}

/// Records stream to the sink in chunks as the run goes: many chunks for a long schedule,
/// each thread's records in intended order, every scheduled request exactly once.
#[test]
fn records_stream_to_the_sink_in_ordered_chunks() {
    struct Chunks(Vec<(usize, Vec<load::RequestRecord>)>);
    impl load::RecordSink for Chunks {
        fn write(&mut self, thread: usize, r: &[load::RequestRecord]) -> Result<(), String> {
            self.0.push((thread, r.to_vec()));
            Ok(())
        }
    }
    let server = TcpEcho::start(Behaviour::default());
    // 40k requests at 100k/s over two threads: at 8192 records a chunk, at least 4 chunks.
    let mut cfg = det_cfg(target(server.addr, false), 100_000.0, 400);
    cfg.connections = 4;
    cfg.threads = 2;
    let mut sink = Chunks(Vec::new());
    let stop = AtomicBool::new(false);
    let s = load::run_open_loop_into(
        &cfg,
        &nullrpc(Transport::Tcp),
        &stop,
        &|_, _| {},
        &mut sink,
        None,
    )
    .unwrap();
    assert!(sink.0.len() >= 4, "{} chunks", sink.0.len());
    let mut per_thread: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    for (t, c) in &sink.0 {
        per_thread[*t].extend(c.iter().map(|r| r.intended_ns));
    }
    for v in &per_thread {
        assert!(
            v.windows(2).all(|w| w[0] <= w[1]),
            "a thread's records out of order"
        );
    }
    let n: usize = per_thread.iter().map(Vec::len).sum();
    assert_eq!(n as u64, s.records);
    assert_eq!(s.writer.records, s.records);
    assert!((39_999..=40_001).contains(&n), "{n}");
    assert!(s.writer.cpu_ns > 0);
}

/// A server slower than the offered load, one request in flight per connection: requests
/// wait in the client for a free slot. That wait is `held`, not the generator's lateness:
/// the generator saw each request on time (seen − intended small) and the backlog samples
/// show requests held.
#[test]
fn held_in_client_is_told_apart_from_generator_lateness() {
    let server = TcpEcho::start(Behaviour {
        spin_ns: 500_000,
        paced: true,
        ..Default::default()
    });
    // 4,000 req/s offered on one connection that completes one per 500 µs (2,000/s).
    let mut cfg = det_cfg(target(server.addr, false), 4_000.0, 600);
    cfg.max_outstanding_per_conn = 1;
    cfg.timeout = Duration::from_secs(5);
    let out = run(&cfg);
    let sent: Vec<_> = out.records.iter().filter(|r| r.sent_ns > 0).collect();
    assert!(sent.len() > 100);
    let mut held: Vec<u64> = sent.iter().filter_map(|r| r.held_ns()).collect();
    let mut late: Vec<u64> = sent.iter().filter_map(|r| r.lateness_ns()).collect();
    held.sort_unstable();
    late.sort_unstable();
    let med = |v: &[u64]| v[v.len() / 2];
    // Half the capacity: by the end the backlog is ~0.6 s × 2,000/s = 1,200 requests, so the
    // median request waits tens of ms for a slot; the generator itself looks at it on time.
    assert!(med(&held) > 10_000_000, "held median {} ns", med(&held));
    assert!(
        med(&late) < med(&held) / 100,
        "lateness median {} ns vs held {} ns",
        med(&late),
        med(&held)
    );
    assert!(
        out.backlog.iter().any(|b| b.held > 100),
        "backlog samples {:?}",
        &out.backlog[..out.backlog.len().min(5)]
    );

    // Far below capacity, with room on every connection, a request is held only when all
    // 8 slots are taken, i.e. when the server (or the host under it) stalled for about 8
    // gaps of 2 ms: each held request must have that evidence before it, an earlier request
    // still unanswered when the held one was due, sent at least 14 ms before it. On a quiet
    // host nothing is held and each request goes out on the loop's first try (seen = sent).
    let mut calm = det_cfg(target(server.addr, false), 500.0, 300);
    calm.max_outstanding_per_conn = 8;
    let out = run(&calm);
    let sent: Vec<_> = out.records.iter().filter(|r| r.sent_ns > 0).collect();
    assert!(sent.len() > 100);
    let held: Vec<_> = sent.iter().filter(|r| r.held_ns() != Some(0)).collect();
    for h in &held {
        let stalled = sent
            .iter()
            .any(|r| r.sent_ns + 14_000_000 <= h.intended_ns && r.received_ns > h.intended_ns);
        assert!(
            stalled,
            "request due at {} ns held {:?} ns with no stalled request before it",
            h.intended_ns,
            h.held_ns()
        );
    }
    assert!(
        held.len() * 10 <= sent.len(),
        "{} of {} held",
        held.len(),
        sent.len()
    );
}

/// The slack task runs inside generator thread 0 only when the next send is further away
/// than its cost bound, and never delays a send: with a bound far larger than every gap it
/// never runs; with a small bound it runs about as often as it asks.
#[test]
fn slack_task_runs_only_in_slack() {
    struct Task {
        next: u64,
        bound: u64,
        runs: u64,
        at: Vec<u64>,
    }
    impl load::SlackTask for Task {
        fn next_due_ns(&self) -> u64 {
            self.next
        }
        fn cost_bound_ns(&self) -> u64 {
            self.bound
        }
        fn run(&mut self, now: u64) {
            self.runs += 1;
            self.at.push(now);
            self.next = now + 10_000_000; // every 10 ms
        }
    }
    let server = TcpEcho::start(Behaviour::default());
    // Deterministic 2,000/s: every gap is 500 µs.
    let cfg = det_cfg(target(server.addr, false), 2_000.0, 500);
    let stop = AtomicBool::new(false);
    let mut never = Task {
        next: 0,
        bound: 1_000_000, // 1 ms > every 500 µs gap
        runs: 0,
        at: Vec::new(),
    };
    let mut sink = load::VecSink::default();
    let s = load::run_open_loop_into(
        &cfg,
        &nullrpc(Transport::Tcp),
        &stop,
        &|_, _| {},
        &mut sink,
        Some(&mut never),
    )
    .unwrap();
    // Only once the schedule is over (no send left to delay) may it run.
    let last = sink.records.iter().map(|r| r.intended_ns).max().unwrap();
    assert!(never.runs <= 1, "{} runs", never.runs);
    assert!(never.at.iter().all(|&t| t > s.start_mono_ns + last));
    let mut often = Task {
        next: 0,
        bound: 20_000,
        runs: 0,
        at: Vec::new(),
    };
    let mut sink = load::VecSink::default();
    load::run_open_loop_into(
        &cfg,
        &nullrpc(Transport::Tcp),
        &stop,
        &|_, _| {},
        &mut sink,
        Some(&mut often),
    )
    .unwrap();
    // 500 ms at one run per 10 ms: about 50 (the first at once; a noisy host may skip a few).
    assert!((30..=52).contains(&often.runs), "{} runs", often.runs);
}

/// The sink learns the run's time origin before any record, and every connection's local
/// address before the records sent on it — also each reopen of a churning connection (an
/// observer of the server matches its sockets to the run's connections by that port).
#[test]
fn the_sink_learns_the_start_and_each_connections_local_address() {
    #[derive(Default)]
    struct Log {
        start: Option<u64>,
        opens: Vec<(u32, std::net::SocketAddr, u64)>,
        /// Records whose connection had not been reported, at or before their send, before
        /// their chunk.
        unknown: usize,
        records: usize,
        chunk_before_start: bool,
    }
    impl load::RecordSink for Log {
        fn write(&mut self, _t: usize, r: &[load::RequestRecord]) -> Result<(), String> {
            self.chunk_before_start |= self.start.is_none();
            let t0 = self.start.unwrap_or(0);
            for rec in r.iter().filter(|r| r.sent_ns > 0) {
                self.records += 1;
                if !self
                    .opens
                    .iter()
                    .any(|o| o.0 == rec.conn && o.2 <= t0 + rec.sent_ns)
                {
                    self.unknown += 1;
                }
            }
            Ok(())
        }
        fn started(&mut self, t0: u64) {
            assert!(self.start.is_none_or(|s| s == t0), "one time origin");
            self.start = Some(t0);
        }
        fn connected(&mut self, conn: u32, local: std::net::SocketAddr, at: u64) {
            self.opens.push((conn, local, at));
        }
    }
    let server = TcpEcho::start(Behaviour::default());
    let mut cfg = det_cfg(target(server.addr, false), 2_000.0, 300);
    cfg.connections = 4;
    cfg.threads = 2;
    cfg.churn = Some((5, 10));
    let mut sink = Log::default();
    let stop = AtomicBool::new(false);
    let s = load::run_open_loop_into(
        &cfg,
        &nullrpc(Transport::Tcp),
        &stop,
        &|_, _| {},
        &mut sink,
        None,
    )
    .unwrap();
    assert_eq!(sink.start, Some(s.start_mono_ns));
    assert!(!sink.chunk_before_start);
    assert!(sink.records > 500, "{}", sink.records);
    assert_eq!(sink.unknown, 0);
    // The four opened before the run, then a reopen every 5..10 requests.
    assert!(
        sink.opens.len() >= 4 + 600 / 10,
        "{} opens",
        sink.opens.len()
    );
    assert!(sink
        .opens
        .iter()
        .all(|o| o.0 < 4 && o.1.ip().is_loopback() && o.1.port() != 0));
}

#[test]
fn connections_go_round_robin_over_several_addresses() {
    let (a, b) = (
        TcpEcho::start(Behaviour::default()),
        TcpEcho::start(Behaviour::default()),
    );
    let mut cfg = det_cfg(target(a.addr, false), 2000.0, 300);
    cfg.connections = 4;
    cfg.threads = 2;
    cfg.spread = vec![a.addr, b.addr];
    let out = run(&cfg);
    assert_eq!(out.count(Outcome::Ok), out.records.len());
    // Connections 0 and 2 reach a, 1 and 3 reach b; each carries its share.
    let (sa, sb) = (
        a.served.load(Ordering::Relaxed),
        b.served.load(Ordering::Relaxed),
    );
    assert_eq!(sa + sb, out.records.len() as u64);
    let to_a = out.records.iter().filter(|r| r.conn % 2 == 0).count() as u64;
    assert_eq!(sa, to_a);
    assert!(sa > 0 && sb > 0);
    // One address per connection at least.
    cfg.connections = 1;
    cfg.threads = 1;
    let e = cfg.validate().unwrap_err();
    assert!(
        e.to_string()
            .contains("at least one connection per address"),
        "{e}"
    );
}

#[test]
fn a_run_starts_at_the_instant_it_is_given_and_refuses_a_passed_one() {
    let server = TcpEcho::start(Behaviour::default());
    let mut cfg = det_cfg(target(server.addr, false), 1000.0, 100);
    let at = host::tstamp::mono_now_ns() + 300_000_000;
    cfg.start_at_mono_ns = Some(at);
    let out = run(&cfg);
    // Time zero is the instant given (other processes started at it too), and no request
    // went out before it.
    assert_eq!(out.start_mono_ns, at);
    assert!(out.records.iter().all(|r| r.sent_ns >= r.intended_ns));
    assert!(out.count(Outcome::Ok) > 90);

    cfg.start_at_mono_ns = Some(host::tstamp::mono_now_ns() - 1);
    let stop = AtomicBool::new(false);
    let err = run_open_loop(&cfg, &nullrpc(Transport::Tcp), &stop, &|_, _| {}).unwrap_err();
    assert!(
        matches!(&err, LoadError::Config(m) if m.contains("common start passed")),
        "{err}"
    );
}

#[test]
fn partial_chunks_reach_the_sink_when_asked_to_flush() {
    struct Count(Vec<usize>);
    impl load::RecordSink for Count {
        fn write(&mut self, _thread: usize, r: &[load::RequestRecord]) -> Result<(), String> {
            self.0.push(r.len());
            Ok(())
        }
    }
    let server = TcpEcho::start(Behaviour::default());
    let mut cfg = det_cfg(target(server.addr, false), 1000.0, 1000);
    let stop = AtomicBool::new(false);
    let f = nullrpc(Transport::Tcp);
    let mut whole = Count(Vec::new());
    load::run_open_loop_into(&cfg, &f, &stop, &|_, _| {}, &mut whole, None).unwrap();
    // 1000 records fit one chunk: without flushing they come at the end, at once.
    assert_eq!(whole.0.len(), 1);
    cfg.flush_every = Some(Duration::from_millis(100));
    let mut partial = Count(Vec::new());
    load::run_open_loop_into(&cfg, &f, &stop, &|_, _| {}, &mut partial, None).unwrap();
    assert!(partial.0.len() >= 5, "{:?}", partial.0);
    assert_eq!(partial.0.iter().sum::<usize>(), whole.0[0]);
}

/// Null-RPC whose `encode` of request `stall_at` sleeps `stall`: a stall of the generator's
/// loop in the middle of a send, as a host that takes the CPU makes one.
struct Stalling {
    inner: NullRpc,
    stall_at: u64,
    stall: Duration,
}

impl Protocol for Stalling {
    fn transport(&self) -> Transport {
        self.inner.transport()
    }
    fn encode(&mut self, id: u64, class: u8, out: &mut Vec<u8>) {
        if id == self.stall_at {
            std::thread::sleep(self.stall);
        }
        self.inner.encode(id, class, out)
    }
    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, load::Reply)>, load::ProtoError> {
        self.inner.decode(buf)
    }
    fn carries_id(&self) -> bool {
        self.inner.carries_id()
    }
}

#[test]
fn a_stall_of_the_loop_is_counted_with_its_backlog_and_catch_up() {
    let server = TcpEcho::start(Behaviour::default());
    // 10k req/s deterministic for 400 ms, one thread, one connection: a 20 ms stall at
    // request 1000 (t = 100 ms) leaves about 200 requests due.
    let mut cfg = det_cfg(target(server.addr, false), 10_000.0, 400);
    cfg.connections = 4;
    cfg.yield_when_far = false;
    let stall = Duration::from_millis(20);
    let factory = move || {
        Box::new(Stalling {
            inner: NullRpc::new(Transport::Tcp, 64, false, false),
            stall_at: 1000,
            stall,
        }) as Box<dyn Protocol>
    };
    let stop = AtomicBool::new(false);
    let out = run_open_loop(&cfg, &factory, &stop, &|_, _| {}).unwrap();
    let g = &out.summary.generator;
    eprintln!("{g:?}");
    assert_eq!(g.threads, 1);
    assert_eq!(g.sends, out.records.len() as u64, "{g:?}");
    assert_eq!(g.replies, out.count(Outcome::Ok) as u64, "{g:?}");
    // The injected stall is one of them (the host may add its own), and the longest.
    assert!(g.stalls >= 1, "{g:?}");
    assert!(g.longest_stall_ns >= stall.as_nanos() as u64, "{g:?}");
    // The requests scheduled during it fell due in it: 20 ms at one per 100 µs.
    assert!(g.due_in_stalls >= 190, "{g:?}");
    assert!(g.catch_ups >= 1 && g.longest_catch_up_ns > 0, "{g:?}");
    // The work's running time is part of the thread's CPU time, which includes spinning.
    assert!(
        g.busy_ns > 0 && g.busy_ns < g.thread_cpu_ns + stall.as_nanos() as u64,
        "{g:?}"
    );
    // The requests due in the stall were sent late by up to its length; the ones before it
    // were not held by it.
    let late = out
        .records
        .iter()
        .filter(|r| r.sent_ns.saturating_sub(r.intended_ns) > 10_000_000)
        .count();
    assert!(late >= 90, "{late} requests more than 10 ms late");
}

#[test]
fn a_stalls_backlog_goes_out_in_one_write_per_connection() {
    let server = TcpEcho::start(Behaviour::default());
    // 10k req/s deterministic, one thread, 4 connections: a 20 ms stall while encoding
    // request 1000 (t = 100 ms) leaves about 200 requests due at once.
    let mut cfg = det_cfg(target(server.addr, false), 10_000.0, 400);
    cfg.connections = 4;
    cfg.yield_when_far = false;
    let stall = Duration::from_millis(20);
    let factory = move || {
        Box::new(Stalling {
            inner: NullRpc::new(Transport::Tcp, 64, false, false),
            stall_at: 1000,
            stall,
        }) as Box<dyn Protocol>
    };
    let stop = AtomicBool::new(false);
    let out = run_open_loop(&cfg, &factory, &stop, &|_, _| {}).unwrap();
    let g = &out.summary.generator;
    assert_eq!(g.sends, out.records.len() as u64, "{g:?}");
    // The ~190 requests due in the stall share the connections' writes.
    assert!(g.writes + 150 <= g.sends, "{g:?}");
    // Those requests (intended well inside the stall) were written in one write per
    // connection and pass: the pass the stall interrupted (the requests it had taken before
    // the stall, when the host made the loop late) and the next one (the rest). At most 8
    // distinct send stamps, each request stamped just before the write that carried it.
    let due: Vec<_> = out
        .records
        .iter()
        .filter(|r| (100_500_000..119_000_000).contains(&r.intended_ns))
        .collect();
    assert!(due.len() >= 180, "{}", due.len());
    let mut stamps: Vec<u64> = due.iter().map(|r| r.sent_ns).collect();
    stamps.sort_unstable();
    stamps.dedup();
    let per: Vec<(u64, usize, Vec<u32>)> = stamps
        .iter()
        .map(|&t| {
            let on: Vec<_> = due.iter().filter(|r| r.sent_ns == t).collect();
            let mut c: Vec<u32> = on.iter().map(|r| r.conn).collect();
            c.dedup();
            (t, on.len(), c)
        })
        .collect();
    assert!((1..=8).contains(&stamps.len()), "{per:?} {g:?}");
    assert!(stamps[0] >= 119_000_000, "{stamps:?}");
    assert!(
        due.iter().all(|r| r.outcome == Outcome::Ok),
        "{:?}",
        out.errors
    );
}
