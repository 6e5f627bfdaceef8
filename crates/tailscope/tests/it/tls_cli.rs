//! Issue 38: TLS targets against Debian's nginx — spawned by tailscope with a certificate of
//! its own throwaway CA (`https:///`, `h2:///`), and started by the test with a certificate
//! of a CA made by Debian's openssl, which no system root trusts. A missing nginx or openssl
//! fails these tests; it never skips them.

use crate::common;

use common::{bin, json_of};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A server tailscope starts on CPU 1, two connections to it.
const SPAWNED: [&str; 5] = ["--spawn", "--server-cpus", "1", "--connections", "2"];

/// One at a time: these tests share two CPUs with the servers they start.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(url: &str, extra: &[&str], db: &Path) -> Output {
    bin()
        .args(["run", url, "--cpus", "0", "--duration", "1s"])
        .args(["--warmup", "300ms", "--lateness-threshold", "5ms"])
        .args(["--no-noise-probe", "--json", "--db"])
        .arg(db)
        .args(extra)
        .output()
        .unwrap()
}

use common::stderr;

/// `h2://` against the test's nginx `n` at 1,000 req/s (40 µs of service), trusting its CA.
fn run_h2(n: &Nginx, extra: &[&str], db: &Path) -> Output {
    let ca = n.dir.path().join("ca.pem");
    let url = format!("h2://127.0.0.1:{}/", n.port);
    let load = [
        "--rate",
        "1000",
        "--service",
        "40us",
        "--ca",
        ca.to_str().unwrap(),
    ];
    run(&url, &[&load[..], extra].concat(), db)
}

/// `runs show` of the run `v` printed: its screen.
fn shown(db: &Path, v: &serde_json::Value) -> String {
    let id = v["run_id"].as_i64().unwrap().to_string();
    let out = bin()
        .args(["runs", "show", &id, "--db"])
        .arg(db)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A measured TLS run: every request answered, the offered load sent, and the handshakes
/// counted apart from the requests, one per connection, over TLS 1.3 with `alpn` (none: "").
fn assert_tls_run(out: &Output, connections: u64, alpn: &str) -> serde_json::Value {
    let v = json_of(out);
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", stderr(out));
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["outcomes"]["error"], 0, "{v}");
    assert_eq!(v["connection_errors"], serde_json::json!([]), "{v}");
    common::assert_offered_sent(&v);
    let tls = &v["tls"];
    assert_eq!(tls["handshakes"], connections, "{tls}");
    assert_eq!(tls["version"], "TLSv1_3", "{tls}");
    if alpn.is_empty() {
        assert!(tls.get("alpn").is_none(), "no ALPN offered: {tls}");
    } else {
        assert_eq!(tls["alpn"], alpn, "{tls}");
    }
    assert_eq!(tls["insecure"], false, "{tls}");
    let mean = tls["handshake_ns_total"].as_f64().unwrap() / connections as f64;
    assert!(
        mean > 0.0 && tls["handshake_ns_max"].as_f64().unwrap() >= mean,
        "{tls}"
    );
    // A handshake is not a request: every request is one the server answered.
    assert_eq!(
        v["outcomes"]["ok"].as_u64().unwrap(),
        v["requests"].as_u64().unwrap(),
        "{v}"
    );
    v
}

/// `https:///` and `h2:///` with `--spawn`: nginx with TLS (and HTTP/2 by ALPN) and a
/// certificate its throwaway CA signed, which the client verifies; 2 connections, 2
/// handshakes, the offered load sent within 1 %, and the screen says what was agreed.
#[test]
fn spawned_nginx_over_https_and_h2_verifies_its_certificate_and_counts_the_handshakes() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let load = ["--rate", "2000", "--service", "40us", "--files", "20"];
    let https = run("https:///", &[&SPAWNED[..], &load[..]].concat(), &db);
    let v = assert_tls_run(&https, 2, "http/1.1");
    assert!(v["url"].as_str().unwrap().starts_with("https://"), "{v}");
    let h2 = run("h2:///", &[&SPAWNED[..], &load[..]].concat(), &db);
    let v = assert_tls_run(&h2, 2, "h2");
    assert!(v["url"].as_str().unwrap().starts_with("h2://"), "{v}");
    // The screen: one line says what TLS agreed and what the handshakes cost.
    let text = shown(&db, &v);
    let line = text
        .lines()
        .find(|l| l.starts_with("TLS: "))
        .unwrap_or_else(|| panic!("no TLS line:\n{text}"));
    assert!(
        line.contains("TLSv1_3, ALPN h2") && line.contains("2 handshake(s) apart"),
        "{line}"
    );
    // --detail says it too, with the cipher suite.
    let id = v["run_id"].as_i64().unwrap().to_string();
    let detail = bin()
        .args(["runs", "show", &id, "--detail", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let detail = String::from_utf8_lossy(&detail.stdout);
    assert!(
        detail.contains("TLS: TLSv1_3, ALPN h2") && detail.contains("TLS cipher suite: TLS13_"),
        "{detail}"
    );
}

/// A TLS target's load from two agents: each gets the spawned server's CA and name with its
/// job, shakes hands on its own connections, and the run adds up their handshakes.
#[test]
fn two_local_agents_speak_tls_with_the_spawned_servers_ca() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let agents = ["--agent", "local", "--agent", "local"];
    let load = ["--rate", "1000", "--service", "40us"];
    let out = run(
        "https:///",
        &[&SPAWNED[..], &load[..], &agents[..]].concat(),
        &db,
    );
    let v = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", stderr(&out));
    assert_eq!(v["outcomes"]["error"], 0, "{v}");
    assert_eq!(v["agents"].as_array().map(Vec::len), Some(2), "{v}");
    common::assert_offered_sent(&v);
    let tls = &v["tls"];
    // Two connections for each of the two agents, each verified against the start's CA.
    assert_eq!(tls["handshakes"], 4, "{tls}");
    assert_eq!(tls["alpn"], "http/1.1", "{tls}");
    assert_eq!(tls["insecure"], false, "{tls}");
}

/// `--tls-handshake-per-request`: every request on a connection of its own with a full
/// handshake (none resumed), the handshakes' percentiles reported and the screen saying that
/// the latencies include them. 80 req/s: a full handshake costs this VM's nginx ~5 ms of its
/// CPU (its one worker saturates near 220/s), so the server keeps up whatever the hour.
#[test]
fn a_handshake_per_request_opens_a_connection_each_and_resumes_none() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let args = [
        "--spawn",
        "--server-cpus",
        "1",
        "--connections",
        "4",
        "--rate",
        "80",
        "--service",
        "40us",
        "--tls-handshake-per-request",
    ];
    let out = run("https:///", &args, &db);
    let v = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", stderr(&out));
    assert_eq!(v["outcomes"]["error"], 0, "{v}");
    assert_eq!(v["connection_errors"], serde_json::json!([]), "{v}");
    let tls = &v["tls"];
    // Every request had its own connection and handshake: the four connections opened before
    // the run are closed as it starts (churn), and each request opens one.
    let (records, connects) = (
        v["records"].as_u64().unwrap(),
        v["connects"].as_u64().unwrap(),
    );
    assert!(connects + 4 >= records && connects <= records, "{v}");
    let handshakes = tls["handshakes"].as_u64().unwrap();
    assert!(handshakes >= records && handshakes <= 4 + connects, "{tls}");
    assert_eq!(tls["resumed"], 0, "{tls}");
    assert_eq!(tls["per_request"], true, "{tls}");
    let (p50, p99) = (
        tls["handshake_us"]["p50"].as_f64().unwrap(),
        tls["handshake_us"]["p99"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p99 >= p50, "{tls}");
    assert!(
        p99 <= tls["handshake_ns_max"].as_f64().unwrap() / 1e3 * 1.01,
        "{tls}"
    );
    let text = shown(&db, &v);
    assert!(
        text.contains("TLS: a connection and full handshake per request; each latency includes")
            && text.contains(" resumed: p50 "),
        "{text}"
    );
}

/// `memcached+tls:///` (memcached -Z) and `rediss:///` (redis's TLS port) with `--spawn`: the
/// items preloaded over TLS, then the run's gets and sets inside one session per connection,
/// verified against the start's CA, the handshakes counted apart.
#[test]
fn spawned_memcached_and_redis_over_tls_preload_and_measure() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let load = ["--rate", "2000", "--service", "20us", "--items", "2000"];
    let args = [&SPAWNED[..], &load[..]].concat();
    for (url, shown) in [
        ("memcached+tls://", "memcached+tls://"),
        ("rediss://", "rediss://"),
    ] {
        let out = run(url, &args, &db);
        let v = assert_tls_run(&out, 2, "");
        assert!(v["url"].as_str().unwrap().starts_with(shown), "{v}");
        // The preload stored every item: the gets found them.
        assert_eq!(v["misses"], 0, "{url}: {v}");
        // The server's own counters were read inside TLS too (it has no plaintext port).
        let s = &v["server"];
        assert_eq!(s["evictions_during_run"], 0, "{url}: {s}");
        assert!(s["evictions_total"].is_u64(), "{url}: {s}");
    }
}

/// nginx started by the test (HTTPS only, no HTTP/2) with a certificate of its own CA.
struct Nginx {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs Debian's openssl with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (Debian's openssl package) makes the test's certificates");
    assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
}

/// In `d`: a CA made here (`ca.pem`), which no system root vouches for, and a certificate for
/// 127.0.0.1 and localhost signed by it (`cert.pem`, its key `key.pem`).
pub fn private_ca_certificate(d: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        d,
        &[
            &["req", "-x509", "-days", "1", "-subj", "/CN=test CA"][..],
            &ec[..],
            &["-keyout", "ca.key", "-out", "ca.pem"][..],
        ]
        .concat(),
    );
    openssl(
        d,
        &[
            &["req", "-subj", "/CN=localhost"][..],
            &ec[..],
            &["-keyout", "key.pem", "-out", "req.csr"][..],
        ]
        .concat(),
    );
    std::fs::write(
        d.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "req.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "san.ext",
            "-out",
            "cert.pem",
        ],
    );
}

/// A server that resets some streams mid-run (nginx's `return 444` over HTTP/2): each reset
/// request is an error reply counted by its code, every other one answered, nothing lost;
/// the run fails on its error replies and says which.
#[test]
fn reset_streams_are_counted_errors_and_the_rest_is_answered() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let n = nginx_with_a_private_ca(true, 10_000);
    let out = run_h2(&n, &["--files", "4"], &db);
    let v = json_of(&out);
    // More than 0.1 % error replies fail a run (exit 1), with what the server answered.
    assert_eq!(out.status.code(), Some(1), "{v}\n{}", stderr(&out));
    assert_eq!(v["status"], "failed", "{v}");
    let note = v["status_note"].as_str().unwrap();
    assert!(
        note.contains("error replies") && note.contains("RST_STREAM "),
        "{note}"
    );
    let o = &v["outcomes"];
    let (ok, errors) = (o["ok"].as_u64().unwrap(), o["error"].as_u64().unwrap());
    assert_eq!(
        ok + errors,
        v["requests"].as_u64().unwrap(),
        "nothing lost: {v}"
    );
    assert_eq!(o["timeout"], 0, "{v}");
    // A quarter of the paths is reset: between 15 % and 35 % of ~1,000 requests.
    let share = errors as f64 / (ok + errors) as f64;
    assert!((0.15..0.35).contains(&share), "{share}: {v}");
    let codes = v["error_codes"].as_object().unwrap();
    assert_eq!(codes.len(), 1, "{v}");
    let (code, n) = codes.iter().next().unwrap();
    assert!(code.starts_with("RST_STREAM "), "{code}");
    // The warm-up's resets are counted too.
    assert!(n.as_u64().unwrap() >= errors, "{v}");
    assert_eq!(v["connection_errors"], serde_json::json!([]), "{v}");
}

/// nginx with a certificate for 127.0.0.1 and localhost signed by a CA made here (`ca.pem` in
/// the returned directory), which no system root vouches for: HTTPS only, or also HTTP/2 by
/// ALPN with `http2`; each connection closed (HTTP/2: a graceful GOAWAY) after
/// `per_connection` requests.
fn nginx_with_a_private_ca(http2: bool, per_connection: u32) -> Nginx {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    private_ca_certificate(d);
    std::fs::create_dir_all(d.join("www")).unwrap();
    std::fs::write(d.join("www/index.html"), "hello\n").unwrap();
    // /f1../f3 are files; /f0 is reset (`return 444`: over HTTP/2 nginx resets the stream).
    for f in ["f1", "f2", "f3"] {
        std::fs::write(d.join("www").join(f), "hello\n").unwrap();
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = d.display();
    let h2 = if http2 { " http2" } else { "" };
    // One process (master_process off): nothing is left behind when the test kills it.
    let conf = format!(
        "daemon off;\nmaster_process off;\nuser root;\npid {p}/nginx.pid;\nerror_log stderr warn;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {p}/tmp;\n  proxy_temp_path {p}/tmp;\n\
           fastcgi_temp_path {p}/tmp;\n  uwsgi_temp_path {p}/tmp;\n  scgi_temp_path {p}/tmp;\n\
           keepalive_requests {per_connection};\n\
           server {{\n    listen 127.0.0.1:{port} ssl{h2};\n    ssl_certificate {p}/cert.pem;\n\
             ssl_certificate_key {p}/key.pem;\n    root {p}/www;\n\
             location = /f0 {{ return 444; }}\n  }}\n}}\n"
    );
    std::fs::write(d.join("nginx.conf"), conf).unwrap();
    let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("nginx (Debian's nginx package)");
    let child = Command::new(nginx)
        .arg("-c")
        .arg(d.join("nginx.conf"))
        .arg("-p")
        .arg(d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nginx did not listen"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Nginx { child, port, dir }
}

/// A certificate no root vouches for, a name the certificate does not hold, and ALPN without
/// h2: each a clear one-line failure before the load starts (exit 1); the CA given with
/// `--ca` verifies it; `--insecure` measures it and says the certificate was not checked.
#[test]
fn an_untrusted_certificate_or_no_h2_by_alpn_fails_clearly_and_insecure_says_so() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let n = nginx_with_a_private_ca(false, 100_000);
    let ca = n.dir.path().join("ca.pem");
    let ca = ca.to_str().unwrap();
    let https = format!("https://127.0.0.1:{}/", n.port);
    let h2 = format!("h2://127.0.0.1:{}/", n.port);
    let load = ["--rate", "500", "--service", "40us", "--connections", "1"];
    let fails = |url: &str, extra: &[&str], needle: &str| {
        let out = run(url, &[&load[..], extra].concat(), &db);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{url} {extra:?}: {err}");
        assert!(err.contains(needle), "{url} {extra:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    };
    // The system's roots do not hold the test's CA.
    fails(&https, &[], "certificate");
    // Its CA trusted, but the name checked is not the certificate's.
    fails(
        &https,
        &["--ca", ca, "--sni", "other.example"],
        "certificate",
    );
    // nginx here offers HTTP/1.1 only.
    fails(&h2, &["--ca", ca], "did not agree to h2 by ALPN");
    // Its CA trusted, by address and by name (SNI localhost).
    for extra in [&["--ca", ca][..], &["--ca", ca, "--sni", "localhost"][..]] {
        let out = run(&https, &[&load[..], extra].concat(), &db);
        let v = json_of(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?}: {v}\n{}",
            stderr(&out)
        );
        assert_eq!(v["tls"]["insecure"], false, "{v}");
        assert_eq!(v["tls"]["handshakes"], 1, "{v}");
        assert_eq!(v["tls"]["alpn"], "http/1.1", "{v}");
        assert_eq!(v["outcomes"]["error"], 0, "{v}");
    }
    let out = run(&https, &[&load[..], &["--insecure"]].concat(), &db);
    let v = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", stderr(&out));
    assert_eq!(v["tls"]["insecure"], true, "{v}");
    assert_eq!(v["outcomes"]["error"], 0, "{v}");
    let text = shown(&db, &v);
    assert!(
        text.contains("certificate was NOT checked (--insecure)"),
        "{text}"
    );
}

/// Bad TLS input: exit 2, one line naming the flag, nothing written.
#[test]
fn bad_tls_flags_exit_2_and_write_nothing() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let junk = junk.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["http://127.0.0.1:9/", "--insecure"], "TLS targets"),
        (&["nullrpc://127.0.0.1:9", "--sni", "x"], "TLS targets"),
        (
            &["https://127.0.0.1:9/", "--ca", "/nonexistent.pem"],
            "/nonexistent.pem",
        ),
        (
            &["https://127.0.0.1:9/", "--ca", junk],
            "no PEM certificate",
        ),
        (
            &["https://127.0.0.1:9/", "--insecure", "--ca", junk],
            "exclude",
        ),
        (&["h2://127.0.0.1:9/", "--sni", "bad name!"], "server name"),
        (&["https+udp://127.0.0.1:9/"], "udp"),
        (&["http+tls://127.0.0.1:9/"], "https://"),
        (
            &["http://127.0.0.1:9/", "--tls-handshake-per-request"],
            "TLS targets",
        ),
        (
            &[
                "https://127.0.0.1:9/",
                "--tls-handshake-per-request",
                "--churn",
                "2,4",
            ],
            "drop --churn",
        ),
    ];
    for (args, needle) in cases {
        let out = bin()
            .arg("run")
            .args(*args)
            .args(["--rate", "10", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} wrote the store");
    }
}

/// HTTP/2 over TLS against an nginx that ends every connection with a graceful GOAWAY after
/// 150 requests: the connection is reopened (a resumed handshake, counted apart), the
/// requests it had not answered are sent again, and nothing is lost or failed.
#[test]
fn h2_goaway_mid_run_reopens_resumes_the_session_and_loses_nothing() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let n = nginx_with_a_private_ca(true, 150);
    let out = run_h2(&n, &["--connections", "1"], &db);
    let v = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", stderr(&out));
    assert_eq!(v["outcomes"]["error"], 0, "{v}");
    assert_eq!(v["outcomes"]["timeout"], 0, "{v}");
    let requests = v["requests"].as_u64().unwrap();
    assert_eq!(v["outcomes"]["ok"].as_u64().unwrap(), requests, "{v}");
    // ~1,300 requests at 150 a connection: at least 7 reopened connections.
    let connects = v["connects"].as_u64().unwrap();
    assert!(
        connects >= 7,
        "{connects} reconnects for {requests} requests: {v}"
    );
    let tls = &v["tls"];
    assert_eq!(tls["handshakes"].as_u64(), Some(1 + connects), "{tls}");
    assert!(
        tls["resumed"].as_u64().unwrap() >= 1,
        "no resumed session: {tls}"
    );
    assert_eq!(tls["alpn"], "h2", "{tls}");
}
