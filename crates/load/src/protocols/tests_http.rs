//! HTTP codec, churn and calibration against fake servers.

use super::*;

fn http_split(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn http_answer(k: usize, req: &[u8], close_every: usize) -> (Vec<u8>, bool) {
    let path = req.split(|&b| b == b' ').nth(1).unwrap_or(b"/");
    let status = if path == b"/err" { 503 } else { 200 };
    let close = close_every > 0 && (k + 1).is_multiple_of(close_every);
    let mut out = Vec::new();
    let body = vec![b'x'; 100 + 10 * k];
    // Alternate Content-Length and chunked bodies.
    wire::http1::encode_response(
        &mut out,
        status,
        &body,
        if k.is_multiple_of(2) { 0 } else { 33 },
        close,
    );
    (out, close)
}

pub(super) fn http_workload() -> HttpWorkload {
    HttpWorkload {
        paths: vec!["/a".into(), "/b.html".into(), "/err".into()],
        popularity: Popularity::Uniform,
    }
}

#[test]
fn http_content_length_chunked_and_5xx() {
    let fake = tcp_server(http_split, Arc::new(|_, k, r| http_answer(k, r, 0)));
    let w = http_workload();
    let n = 300;
    let r = run(
        &format!("http://{}/", fake.addr),
        &Workload::Http(w.clone()),
        n,
        |_| {},
    );
    let mut g = PathGen::new(&w, mix_seed(5, 0)).unwrap();
    let errs = (0..n).filter(|_| g.next_path() == "/err").count();
    assert!(errs > 50);
    assert_eq!(r.count(Outcome::Error), errs);
    assert_eq!(r.count(Outcome::Ok), n as usize - errs);
}

#[test]
fn churn_opens_one_connection_per_quota() {
    let fake = tcp_server(http_split, Arc::new(|_, k, r| http_answer(k, r, 0)));
    let w = Workload::Http(HttpWorkload {
        paths: vec!["/a".into()],
        popularity: Popularity::Uniform,
    });
    let (n, q) = (23u64, 5u32);
    let r = run(&format!("http://{}/a", fake.addr), &w, n, |c| {
        c.churn = Some((q, q))
    });
    assert_eq!(r.count(Outcome::Ok), n as usize);
    assert_eq!(r.connects, n.div_ceil(q as u64));
    // The server saw the pre-run connection (no requests), then full quotas and the rest.
    assert_eq!(*fake.per_conn.lock().unwrap(), [0, 5, 5, 5, 5, 3]);

    // Tales §4.3: 20..=40 requests per connection over 3 connections.
    let fake = tcp_server(http_split, Arc::new(|_, k, r| http_answer(k, r, 0)));
    let r = run(&format!("http://{}/a", fake.addr), &w, 600, |c| {
        c.churn = Some((20, 40));
        c.connections = 3;
    });
    assert_eq!(r.count(Outcome::Ok), 600);
    let per = fake.per_conn.lock().unwrap().clone();
    assert_eq!(per.len() as u64, 3 + r.connects);
    // Every connection but the last of each slot carried a whole quota.
    let full = per.iter().filter(|&&k| (20..=40).contains(&k)).count();
    assert!(full as u64 >= r.connects - 3, "{per:?}");
    assert!(per.iter().all(|&k| k <= 40));
}

#[test]
fn server_announced_close_reopens_without_errors() {
    let fake = tcp_server(http_split, Arc::new(|_, k, r| http_answer(k, r, 4)));
    let w = Workload::Http(HttpWorkload {
        paths: vec!["/a".into()],
        popularity: Popularity::Uniform,
    });
    let r = run(&format!("http://{}/a", fake.addr), &w, 40, |c| {
        c.rate_per_s = 5_000.0;
        c.max_outstanding_per_conn = 1;
    });
    assert_eq!(r.count(Outcome::Ok), 40, "{:?}", r.errors);
    // Closed after requests 4, 8, ..., 40: reopened for 5, 9, ..., 37.
    assert_eq!(r.connects, 9);

    // Pipelined (a burst of 40 at once): the requests queued behind a closing reply were
    // never processed; they are sent again on the reopened connection.
    let fake = tcp_server(http_split, Arc::new(|_, k, r| http_answer(k, r, 4)));
    let r = run(&format!("http://{}/a", fake.addr), &w, 40, |c| {
        c.arrival = model::ArrivalSpec::Deterministic;
        c.rate_per_s = crate::MAX_RATE;
    });
    assert_eq!(r.count(Outcome::Ok), 40, "{:?}", r.errors);
    assert_eq!(r.connects, 9);
    assert_eq!(*fake.per_conn.lock().unwrap(), [4; 10]);
}

#[test]
fn calibrate_works_for_real_targets() {
    let store = Arc::new(Mutex::new(HashMap::new()));
    let s2 = store.clone();
    let fake = tcp_server(
        mc_split,
        Arc::new(move |_, _, r| (mc_answer(&s2, r), false)),
    );
    let (uaddr, _) = udp_server();
    // The HTTP server closes after every 50 replies (like nginx's keepalive_requests).
    let hfake = tcp_server(http_split, Arc::new(|_, k, r| http_answer(k % 50, r, 50)));
    let kv = Workload::Kv(KvWorkload {
        value_size: SizeDist::Fixed(50),
        ..kv_workload()
    });
    for (url, w) in [
        (format!("memcached://{}", fake.addr), kv.clone()),
        (format!("memcached+udp://{uaddr}"), kv.clone()),
        (format!("http://{}/a", hfake.addr), kv),
    ] {
        let t: Target = url.parse().unwrap();
        let f = protocol_factory(&t, &w, 1).unwrap();
        let c = crate::calibrate(
            &t,
            &*f,
            2,
            4,
            Duration::from_millis(100),
            Duration::from_millis(20),
            &AtomicBool::new(false),
        )
        .unwrap();
        assert!(c.requests > 0 && c.peak_rps > 0.0, "{url}: {c:?}");
    }
    // Calibration rode through the HTTP server's closes (2 connections, reopened).
    assert!(hfake.per_conn.lock().unwrap().len() > 2);
}

#[test]
fn churn_against_a_vanished_server_fails_cleanly() {
    // Accepts the pre-run connection, then stops listening: every churn reconnect is
    // refused, the connection is given up after its retries, the rest is dropped.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = std::thread::spawn(move || l.accept().map(|(s, _)| s));
    let w = Workload::Http(HttpWorkload {
        paths: vec!["/a".into()],
        popularity: Popularity::Uniform,
    });
    let target: Target = format!("http://{addr}/a").parse().unwrap();
    let mut cfg = LoadConfig::new(target.clone(), 1_000.0);
    cfg.stop = StopAt::Requests(20);
    cfg.churn = Some((5, 5));
    cfg.timeout = Duration::from_millis(50);
    let f = protocol_factory(&target, &w, 1).unwrap();
    let first = std::thread::spawn(move || {
        run_open_loop(&cfg, &*f, &AtomicBool::new(false), &|_, _| {}).unwrap()
    });
    drop(accepted.join().unwrap());
    let r = first.join().unwrap();
    assert_eq!(r.records.len(), 20);
    assert_eq!(r.count(Outcome::Ok), 0);
    assert!(r.count(Outcome::Error) >= 1);
    assert_eq!(r.count(Outcome::Error) + r.count(Outcome::Dropped), 20);
    assert!(
        r.errors.iter().any(|e| e.contains("refused")),
        "{:?}",
        r.errors
    );
}
