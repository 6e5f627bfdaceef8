//! The collector against the real kernel: a small echo server on threads of this process
//! (traced by thread id), a client in another thread, every request matched. Needs root and
//! a kernel with BTF (CI runs as root): a host without them fails this test, it does not
//! skip it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::time::Duration;

use ebpf::{Collector, CollectorConfig, Joiner, Proto, Request};

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

const N: usize = 200;

/// The kernel turns receive stamping on from a workqueue after the first socket asks (the
/// collector's does): datagrams to a stamped socket until one arrives stamped.
fn wait_for_rx_stamping() {
    use std::os::fd::AsRawFd;
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    host::tstamp::enable(rx.as_raw_fd(), true, false).unwrap();
    for _ in 0..200 {
        tx.send_to(b"w", rx.local_addr().unwrap()).unwrap();
        let mut b = [0u8; 4];
        if host::tstamp::recv_from_with_stamp(rx.as_raw_fd(), &mut b, 0)
            .unwrap()
            .2
            .is_some()
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the kernel never stamped a received packet");
}

#[test]
fn tcp_and_udp_echo_requests_are_all_matched() {
    ebpf::support::check().expect("this host must support the eBPF collector (root, BTF, tracefs)");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (tport, uport) = (
        l.local_addr().unwrap().port(),
        u.local_addr().unwrap().port(),
    );
    let (tx, rx) = mpsc::channel();
    // The server: one thread, TCP echo then UDP echo (blocking reads: no epoll, T2 = T1).
    let server = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        for _ in 0..N {
            s.read_exact(&mut buf[..16]).unwrap();
            s.write_all(&buf[..16]).unwrap();
        }
        for _ in 0..N {
            let (n, from) = u.recv_from(&mut buf).unwrap();
            u.send_to(&buf[..n], from).unwrap();
        }
    });
    let tid = rx.recv().unwrap();
    let mut c = Collector::start(&CollectorConfig {
        tids: vec![tid],
        ports: vec![tport, uport],
        ring_bytes: 1 << 20,
        ..CollectorConfig::default()
    })
    .unwrap();
    wait_for_rx_stamping();
    let mut reqs = Vec::new();
    let mut t = TcpStream::connect(("127.0.0.1", tport)).unwrap();
    t.set_nodelay(true).unwrap();
    let cport = t.local_addr().unwrap().port();
    let mut buf = [0u8; 16];
    for k in 0..N {
        let sent = mono_ns();
        t.write_all(&[k as u8; 16]).unwrap();
        t.read_exact(&mut buf).unwrap();
        reqs.push((Proto::Tcp, cport, sent, mono_ns(), None));
        std::thread::sleep(Duration::from_micros(200));
    }
    let cu = UdpSocket::bind("127.0.0.1:0").unwrap();
    cu.connect(("127.0.0.1", uport)).unwrap();
    let ucport = cu.local_addr().unwrap().port();
    for k in 0..N {
        // A memcached-like frame header: the request id first.
        let rid = k as u16;
        let mut d = [0u8; 16];
        d[..2].copy_from_slice(&rid.to_be_bytes());
        let sent = mono_ns();
        cu.send(&d).unwrap();
        cu.recv(&mut buf).unwrap();
        reqs.push((Proto::Udp, ucport, sent, mono_ns(), Some(rid)));
        std::thread::sleep(Duration::from_micros(200));
    }
    server.join().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let mut events = Vec::new();
    c.drain(&mut events).unwrap();
    let counters = c.counters();
    assert_eq!(counters.dropped, 0);
    assert_eq!(counters.events as usize, events.len());
    let mut j = Joiner::new(1 << 20);
    for e in events {
        j.push(e);
    }
    let mut matched = 0;
    let mut stack_ns = Vec::new();
    for (i, &(proto, port, sent, received, rid)) in reqs.iter().enumerate() {
        let next_sent = reqs.get(i + 1).filter(|n| n.0 == proto).map_or(0, |n| n.2);
        let r = Request {
            proto,
            port,
            sent,
            received,
            next_sent,
            rid,
        };
        if let Some(m) = j.join(&r) {
            let s = m.stamps;
            assert!(sent <= s[0], "{proto:?} request {i}: T1 before the send");
            assert!(s.windows(2).all(|w| w[0] <= w[1]), "{s:?}");
            // The packet's receive stamp (the stack's entry) is T1; the data-ready (the
            // stack's end, Tales' T2) lies between it and the reader's wake-up.
            assert!(
                s[0] <= m.stack && m.stack <= s[1],
                "{proto:?} request {i}: T1 {} stack end {} T2 {}",
                s[0],
                m.stack,
                s[1]
            );
            stack_ns.push(m.stack - s[0]);
            assert!(
                s[4] <= received,
                "{proto:?} request {i}: the write after the receive"
            );
            matched += 1;
        }
    }
    assert_eq!(matched, 2 * N, "{:?}", j.stats());
    assert_eq!(j.stats().t1_missing, 0, "{:?}", j.stats());
    // Every packet carried its receive stamp, and the stack takes time.
    assert_eq!(j.stats().stack_entry_missing, 0, "{:?}", j.stats());
    stack_ns.sort_unstable();
    assert!(stack_ns[stack_ns.len() / 2] > 0, "median stack time 0");
    drop(c);
}

/// Sampled collection against the real kernel: with a budget far below what the programs
/// cost, they are attached in windows; every record drained lies in one, and every request
/// a window saw whole (sent after it opened, answered before it closed) is matched.
#[test]
fn sampled_windows_keep_whole_requests_and_stay_within_the_budget() {
    sampled_echo(Duration::ZERO);
}

/// The same with the first window held back (a run's warm-up): nothing is attached before
/// it, and what accrued meanwhile is spent after it within the same budget.
#[test]
fn a_held_back_first_window_opens_after_its_delay() {
    sampled_echo(Duration::from_millis(300));
}

fn sampled_echo(first_after: Duration) {
    ebpf::support::check().expect("this host must support the eBPF collector (root, BTF, tracefs)");
    const REQS: usize = 12_000;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let tport = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 16];
        for _ in 0..REQS {
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
    });
    let tid = rx.recv().unwrap();
    // 1 % of a CPU: attached, the programs spend ~1.5 % (a few µs per request, a request
    // every ~150 µs), and each window's attach and detach ~3 ms of the sampler's CPU, so
    // the sampler must detach them most of the time.
    let mut sampling = ebpf::Sampling::new(0.01, 1);
    sampling.min_window = Duration::from_millis(20);
    sampling.first_after = first_after;
    let started = mono_ns();
    let mut c = Collector::start(&CollectorConfig {
        tids: vec![tid],
        ports: vec![tport],
        ring_bytes: 1 << 22,
        sampling: Some(sampling),
        ..CollectorConfig::default()
    })
    .unwrap();
    if !first_after.is_zero() {
        // Only the fork follower until the first window.
        assert_eq!(c.attached(), 1, "of {} programs", c.programs());
    }
    let mut t = TcpStream::connect(("127.0.0.1", tport)).unwrap();
    t.set_nodelay(true).unwrap();
    let cport = t.local_addr().unwrap().port();
    let mut buf = [0u8; 16];
    let mut reqs = Vec::with_capacity(REQS);
    for k in 0..REQS {
        let sent = mono_ns();
        t.write_all(&[k as u8; 16]).unwrap();
        t.read_exact(&mut buf).unwrap();
        reqs.push((sent, mono_ns()));
        std::thread::sleep(Duration::from_micros(100));
    }
    server.join().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let mut events = Vec::new();
    c.drain(&mut events).unwrap();
    let windows = c.windows();
    let report = c.sampling().unwrap();
    eprintln!("{report:?} {:?}", c.counters());
    assert!(report.measured, "BPF run-time statistics are on as root");
    assert!(report.error.is_none(), "{report:?}");
    // What was spent over the whole span is the budget give or take one window's cost (the
    // sampler detaches only after it went over): its programs for 20 ms and its toggles.
    let allowed = 0.01 * report.elapsed_ns as f64;
    let spent = (report.program_ns + report.sampler_cpu_ns) as f64;
    // Three windows or more where attaching and detaching cost a few ms of the sampler's CPU
    // (as usually here). Fewer only with the evidence that the budget was spent all the
    // same: on a fresh VM, right after tracefs was first mounted, one toggle cost 20–40 ms
    // (issue 36's CI), and the budget then allows one or two windows in the test's span.
    assert!(
        windows.len() >= 3 || (!windows.is_empty() && spent >= 0.7 * allowed),
        "{} windows, {spent} ns spent of {allowed} allowed: {report:?}",
        windows.len()
    );
    let first = windows[0].start;
    assert!(
        first >= started + first_after.as_nanos() as u64,
        "the first window opened {} ns after the start, before {first_after:?}",
        first - started
    );
    assert!(
        report.duty() < 0.8,
        "attached {:.2} of the time",
        report.duty()
    );
    assert!(events
        .iter()
        .all(|e| ebpf::sampling::inside(&windows, e.ts)));
    assert!(report.outside_events > 0 || report.windows >= 3);
    assert!(
        spent < allowed + 0.1 * 20e6 + report.attach_max_ns as f64 + report.detach_max_ns as f64,
        "spent {spent} ns against {allowed} allowed: {report:?}"
    );
    let mut j = Joiner::new(1 << 20);
    for e in events {
        j.push(e);
    }
    let margin = 2_000_000;
    let (mut whole, mut matched) = (0, 0);
    // Where in their windows the requests without a match were (ms after its start, ms
    // before its end), to tell a window's edge from a window that missed a program.
    let mut unmatched: Vec<(usize, f64, Option<f64>)> = Vec::new();
    for (i, &(sent, received)) in reqs.iter().enumerate() {
        let Some(w) = ebpf::sampling::window_of(&windows, sent) else {
            continue;
        };
        if w.end.is_some_and(|end| received + margin > end) {
            continue;
        }
        // The server's read of this request began after it answered the one before: if that
        // one was sent before the window, the read may have been entered before its program
        // was attached, and a call entered while detached is not followed (the collector
        // forgets every thread's state when it attaches). Seen with a CPU hog beside the test:
        // the window's first request, sent 0.01–0.6 ms after its start, without its read.
        if i == 0 || reqs[i - 1].0 < w.start {
            continue;
        }
        whole += 1;
        let r = Request {
            proto: Proto::Tcp,
            port: cport,
            sent,
            received,
            next_sent: reqs.get(i + 1).map_or(0, |n| n.0),
            rid: None,
        };
        if let Some(m) = j.join(&r) {
            assert!(sent <= m.stamps[0] && m.stamps[4] <= received, "{m:?}");
            matched += 1;
        } else {
            let k = windows.partition_point(|x| x.start <= sent);
            unmatched.push((
                k,
                (sent - w.start) as f64 / 1e6,
                w.end.map(|end| end.saturating_sub(received) as f64 / 1e6),
            ));
        }
    }
    // Over a hundred whole requests, or fewer only with the evidence that the budget was
    // spent all the same (as for the windows above: in a CI where this test took 8 s instead
    // of 2.5 s, one attach took 138 ms and one detach 239 ms of the sampler's CPU, and the
    // budget allowed two windows holding 35 requests).
    assert!(
        (whole > 100 || (whole > 0 && spent >= 0.7 * allowed)) && whole < REQS,
        "{whole} requests inside windows, {spent} ns spent of {allowed} allowed: {report:?}"
    );
    // The kernel's counters name a full ring (records dropped) if that was the cause.
    let shown: Vec<_> = unmatched.iter().take(8).collect();
    assert_eq!(
        matched,
        whole,
        "{:?} {:?}; unmatched (window, ms after its start, ms before its end), first 8 of {}: \
         {shown:?}; windows (start, length ms): {:?}",
        j.stats(),
        c.counters(),
        unmatched.len(),
        windows
            .iter()
            .map(|w| (w.start, w.end.map(|e| (e - w.start) as f64 / 1e6)))
            .collect::<Vec<_>>()
    );
}
