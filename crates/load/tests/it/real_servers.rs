//! The engine against real servers from the distribution (memcached, redis-server, nginx),
//! which `scripts/test.sh` installs. A missing server fails its test (never a silent skip).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use load::{
    preload, protocol_factory, run_open_loop, HttpWorkload, KvWorkload, LoadConfig, Outcome,
    Popularity, RunRecords, SizeDist, StopAt, Target, Workload,
};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server binary must be there: scripts/test.sh installs it.
fn have(bin: &str) -> bool {
    let found = Command::new("sh")
        .args([
            "-c",
            &format!("command -v {bin} || test -x /usr/sbin/{bin}"),
        ])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{bin} is not installed (scripts/test.sh installs it)"
    );
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(cmd: &mut Command, port: u16) -> Server {
    let s = Server(cmd.stdout(Stdio::null()).spawn().unwrap());
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("server on port {port} did not come up");
}

fn run(url: &str, w: &Workload, n: u64, rate: f64, tweak: impl Fn(&mut LoadConfig)) -> RunRecords {
    let target: Target = url.parse().unwrap();
    let mut cfg = LoadConfig::new(target.clone(), rate);
    cfg.stop = StopAt::Requests(n);
    cfg.connections = 4;
    cfg.threads = 2;
    tweak(&mut cfg);
    let f = protocol_factory(&target, w, cfg.seed).unwrap();
    let r = run_open_loop(&cfg, &*f, &AtomicBool::new(false), &|_, _| {}).unwrap();
    let mut lat: Vec<u64> = r.measured().filter_map(|x| x.latency_ns()).collect();
    lat.sort_unstable();
    let q = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)));
    eprintln!(
        "{url}: ok {} err {} timeout {} dropped {} misses {} connects {}; p50 {:?} ns p99 {:?} ns; errors {:?}",
        r.count(Outcome::Ok),
        r.count(Outcome::Error),
        r.count(Outcome::Timeout),
        r.count(Outcome::Dropped),
        r.misses,
        r.connects,
        q(0.5),
        q(0.99),
        r.errors
    );
    r
}

fn kv(items: u64, value: usize, get_ratio: f64) -> KvWorkload {
    KvWorkload {
        get_ratio,
        key_size: SizeDist::Fixed(64),
        value_size: SizeDist::Fixed(value),
        items,
        popularity: Popularity::Zipf(0.99),
    }
}

#[test]
fn real_memcached_tcp_and_udp() {
    if !have("memcached") {
        return;
    }
    let port = free_port();
    let _s = start(
        Command::new("memcached").args([
            "-l",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            &port.to_string(),
            "-t",
            "2",
            "-m",
            "64",
            "-u",
            "nobody",
        ]),
        port,
    );
    let tcp = format!("memcached://127.0.0.1:{port}");
    let udp = format!("memcached+udp://127.0.0.1:{port}");
    // Tales §4: 64-byte keys, 1024-byte values, 90 % gets.
    let w = Workload::Kv(kv(10_000, 1024, 0.9));
    let stats = preload(
        &tcp.parse().unwrap(),
        &w,
        4,
        &AtomicBool::new(false),
        &|_, _| {},
    )
    .unwrap();
    eprintln!("preload: {stats:?}");
    assert_eq!(stats.stored, 10_000);
    let r = run(&tcp, &w, 20_000, 10_000.0, |_| {});
    assert_eq!(r.count(Outcome::Ok), 20_000);
    assert_eq!(r.misses, 0);
    let r = run(&udp, &w, 20_000, 10_000.0, |_| {});
    assert!(r.count(Outcome::Ok) >= 19_900);
    // Values of 5000 bytes come back in several datagrams.
    let big = Workload::Kv(kv(100, 5000, 1.0));
    preload(
        &tcp.parse().unwrap(),
        &big,
        1,
        &AtomicBool::new(false),
        &|_, _| {},
    )
    .unwrap();
    let r = run(&udp, &big, 5_000, 5_000.0, |_| {});
    assert!(r.count(Outcome::Ok) >= 4_950);
    assert_eq!(r.misses, 0);
}

#[test]
fn real_redis() {
    if !have("redis-server") {
        return;
    }
    let port = free_port();
    let _s = start(
        Command::new("redis-server").args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]),
        port,
    );
    let url = format!("redis://127.0.0.1:{port}");
    let w = Workload::Kv(kv(10_000, 1024, 0.9));
    let stats = preload(
        &url.parse().unwrap(),
        &w,
        4,
        &AtomicBool::new(false),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(stats.stored, 10_000);
    let r = run(&url, &w, 20_000, 10_000.0, |_| {});
    assert_eq!((r.count(Outcome::Ok), r.misses), (20_000, 0));
}

#[test]
fn real_nginx_keepalive_and_churn() {
    if !have("nginx") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    std::fs::create_dir(&root).unwrap();
    let paths: Vec<String> = (0..20).map(|i| format!("/f{i}.html")).collect();
    for (i, p) in paths.iter().enumerate() {
        std::fs::write(root.join(&p[1..]), vec![b'x'; 100 * (i + 1)]).unwrap();
    }
    let port = free_port();
    let d = dir.path().display();
    let conf = format!(
        "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid;\n\
         error_log {d}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{ access_log off; client_body_temp_path {d}/b; proxy_temp_path {d}/p;\n\
         fastcgi_temp_path {d}/f; uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;\n\
         server {{ listen 127.0.0.1:{port}; root {d}/www; }} }}\n"
    );
    let conf_path = dir.path().join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let _s = start(
        Command::new("nginx").args([
            "-p",
            &d.to_string(),
            "-c",
            conf_path.to_str().unwrap(),
            "-e",
            &format!("{d}/error.log"),
        ]),
        port,
    );
    let url = format!("http://127.0.0.1:{port}/");
    let w = Workload::Http(HttpWorkload {
        paths,
        popularity: Popularity::Zipf(1.0),
    });
    let r = run(&url, &w, 20_000, 10_000.0, |_| {});
    assert_eq!(r.count(Outcome::Ok), 20_000);
    // Tales §4.3: every client sends 20-40 requests on a fresh connection.
    let r = run(&url, &w, 20_000, 5_000.0, |c| c.churn = Some((20, 40)));
    assert!(r.count(Outcome::Ok) >= 19_900);
    assert!(r.connects >= 20_000 / 40);
    let missing = Workload::Http(HttpWorkload {
        paths: vec!["/nope".into()],
        popularity: Popularity::Uniform,
    });
    let r = run(&url, &missing, 100, 1_000.0, |_| {});
    assert_eq!(r.count(Outcome::Error), 100);
}
