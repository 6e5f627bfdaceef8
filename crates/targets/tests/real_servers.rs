//! Real memcached, nginx and redis from Debian's packages, started, talked to with tiny raw
//! clients, placed, and stopped. A missing server FAILS these tests (the test script
//! installs them): nothing here is skipped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use targets::{find_binary, HttpFiles, Kind, SchedSpec, SpawnConfig, Spawned, TargetError};

fn require(kind: Kind) -> PathBuf {
    find_binary(kind).expect("server missing: apt-get install memcached nginx redis-server")
}

fn last_cpu() -> usize {
    std::thread::available_parallelism().unwrap().get() - 1
}

fn conn(addr: SocketAddr) -> BufReader<TcpStream> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    BufReader::new(s)
}

fn send(c: &mut BufReader<TcpStream>, bytes: &[u8]) {
    c.get_mut().write_all(bytes).unwrap();
}

fn line(c: &mut BufReader<TcpStream>) -> String {
    let mut l = String::new();
    c.read_line(&mut l).unwrap();
    l
}

/// Process gone (reaped, not even a zombie) and its port refusing connections.
fn assert_gone(pids: &[u32], addr: SocketAddr) {
    for p in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{p}")).exists(),
            "pid {p} still exists"
        );
    }
    assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
}

fn cpus_of(s: &Spawned, pid: u32) -> Vec<Vec<usize>> {
    s.placement()
        .into_iter()
        .filter(|t| t.pid == pid)
        .map(|t| t.cpus)
        .collect()
}

#[test]
fn memcached_tcp_and_udp_pinned() {
    require(Kind::Memcached);
    let cpu = last_cpu();
    let mut cfg = SpawnConfig::new(Kind::Memcached);
    cfg.threads = Some(2);
    cfg.udp = true;
    cfg.memory_mb = Some(16);
    cfg.cpus = vec![cpu];
    let s = Spawned::start(&cfg).unwrap();
    assert!(s.version().starts_with("memcached 1."), "{}", s.version());
    assert_eq!(s.url(), format!("memcached+udp://{}", s.addr()));
    assert_eq!(s.udp_addr(), Some(s.addr()));
    assert_eq!(s.worker_threads(), 2);
    let cl = s.command_line().join(" ");
    assert!(
        cl.contains(&format!("-p {0} -U {0} ", s.addr().port())),
        "{cl}"
    );
    assert!(cl.contains("-t 2") && cl.contains("-m 16"), "{cl}");

    let mut c = conn(s.addr());
    send(&mut c, b"version\r\n");
    assert!(line(&mut c).starts_with("VERSION 1."));
    send(&mut c, b"set k 7 0 5\r\nhello\r\nget k\r\n");
    assert_eq!(line(&mut c), "STORED\r\n");
    assert_eq!(line(&mut c), "VALUE k 7 5\r\n");
    assert_eq!(line(&mut c), "hello\r\n");
    assert_eq!(line(&mut c), "END\r\n");

    // UDP on the same port: 8-byte frame header (id 0x0102, seq 0, 1 datagram).
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    u.send_to(b"\x01\x02\x00\x00\x00\x01\x00\x00get k\r\n", s.addr())
        .unwrap();
    let mut buf = [0u8; 1500];
    let n = u.recv(&mut buf).unwrap();
    assert_eq!(&buf[..8], b"\x01\x02\x00\x00\x00\x01\x00\x00");
    assert_eq!(&buf[8..n], b"VALUE k 7 5\r\nhello\r\nEND\r\n");

    // Every thread (2 workers plus housekeeping) inherited the CPU set.
    let threads = s.placement();
    assert_eq!(threads.iter().filter(|t| t.name == "mc-worker").count(), 2);
    assert!(threads.len() > 2);
    for t in &threads {
        assert_eq!(t.cpus, vec![cpu], "{t:?}");
    }
    assert_eq!(s.pids().len(), 1);

    let pids = s.pids();
    let addr = s.addr();
    let dir = s.dir().unwrap();
    let info = s.stop().unwrap();
    assert!(!info.forced);
    assert_gone(&pids, addr);
    assert!(!dir.exists(), "tempdir left behind");
}

#[test]
fn redis_ping_set_get_with_nice() {
    require(Kind::Redis);
    let mut cfg = SpawnConfig::new(Kind::Redis);
    cfg.threads = Some(2);
    cfg.memory_mb = Some(32);
    cfg.sched = Some(SchedSpec::Other { nice: 5 });
    cfg.cpus = vec![0];
    let s = Spawned::start(&cfg).unwrap();
    assert!(
        s.version().starts_with("Redis server v="),
        "{}",
        s.version()
    );
    assert_eq!(s.url(), format!("redis://{}", s.addr()));
    assert_eq!(s.udp_addr(), None);
    assert_eq!(s.worker_threads(), 1);
    assert!(s.command_line().join(" ").contains("--io-threads 2"));

    let mut c = conn(s.addr());
    send(&mut c, b"*1\r\n$4\r\nPING\r\n");
    assert_eq!(line(&mut c), "+PONG\r\n");
    send(&mut c, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nabc\r\n");
    assert_eq!(line(&mut c), "+OK\r\n");
    send(&mut c, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    assert_eq!(line(&mut c), "$3\r\n");
    assert_eq!(line(&mut c), "abc\r\n");
    send(
        &mut c,
        b"*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$9\r\nmaxmemory\r\n",
    );
    assert_eq!(line(&mut c), "*2\r\n");
    let _ = (line(&mut c), line(&mut c), line(&mut c));
    assert_eq!(line(&mut c), (32u64 << 20).to_string() + "\r\n");

    let threads = s.placement();
    assert!(threads.iter().any(|t| t.name == "io_thd_1"), "{threads:?}");
    for t in &threads {
        assert_eq!(t.cpus, vec![0], "{t:?}");
        assert_eq!(t.sched, Some(SchedSpec::Other { nice: 5 }), "{t:?}");
    }
    let (pids, addr) = (s.pids(), s.addr());
    s.stop().unwrap();
    assert_gone(&pids, addr);
}

/// A server bound to node 0 (real on any host with NUMA support, this one-node VM included)
/// allocates under that policy: `numa_maps` names it on every mapping, where an unbound
/// server shows `default`.
#[test]
fn memcached_bound_to_node_0_shows_it_in_numa_maps() {
    require(Kind::Memcached);
    let plain = Spawned::start(&SpawnConfig::new(Kind::Memcached)).unwrap();
    let before = plain.memory_policies();
    plain.stop().unwrap();
    if before.is_empty() {
        // No numa_maps: a kernel without NUMA support, which CI's host is not.
        assert!(std::env::var("CI").is_err(), "CI host without numa_maps");
        return;
    }
    assert_eq!(before, vec!["default".to_string()]);
    let mut cfg = SpawnConfig::new(Kind::Memcached);
    cfg.numa = Some(host::numa::NumaPolicy::Bind(0));
    let s = Spawned::start(&cfg).unwrap();
    assert_eq!(s.memory_policies(), vec!["bind:0".to_string()]);
    s.stop().unwrap();
}

/// Reads one HTTP/1.1 response with Content-Length from a kept-alive connection.
fn http_get(c: &mut BufReader<TcpStream>, path: &str) -> (String, Vec<u8>) {
    send(
        c,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes(),
    );
    let status = line(c);
    let mut len = None;
    loop {
        let h = line(c);
        if h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = Some(v.trim().parse::<usize>().unwrap());
        }
    }
    let mut body = vec![0u8; len.expect("Content-Length")];
    c.read_exact(&mut body).unwrap();
    (status, body)
}

#[test]
fn nginx_serves_generated_files_with_pinned_workers() {
    require(Kind::Nginx);
    let all: Vec<usize> = (0..=last_cpu()).collect();
    let mut cfg = SpawnConfig::new(Kind::Nginx);
    cfg.threads = Some(2);
    cfg.cpus = all.clone();
    cfg.http_files = Some(HttpFiles::with_sizes(vec![10, 0, 200_000]));
    let s = Spawned::start(&cfg).unwrap();
    assert!(s.version().contains("nginx/"), "{}", s.version());
    assert_eq!(s.url(), format!("http://{}/", s.addr()));
    assert_eq!(s.worker_threads(), 2);
    assert_eq!(s.http_paths()[2], ("/f2".to_string(), 200_000));

    // Two requests on one persistent connection, then a missing file.
    let mut c = conn(s.addr());
    let (st, body) = http_get(&mut c, "/f2");
    assert!(st.starts_with("HTTP/1.1 200"), "{st}");
    assert_eq!(body.len(), 200_000);
    assert_eq!(&body[..3], b"abc");
    let (st, body) = http_get(&mut c, "/f1");
    assert!(st.starts_with("HTTP/1.1 200"), "{st}");
    assert!(body.is_empty());
    let (st, _) = http_get(&mut c, "/f3");
    assert!(st.starts_with("HTTP/1.1 404"), "{st}");

    // Master keeps the whole set; worker i is pinned to all[i % len]: together they cover
    // the first min(2, len) CPUs, one CPU each.
    let pids = s.pids();
    assert_eq!(pids.len(), 3, "master + 2 workers: {pids:?}");
    assert_eq!(cpus_of(&s, pids[0]), vec![all.clone()]);
    let mut worker_cpus: Vec<usize> = pids[1..]
        .iter()
        .map(|&p| {
            let c = cpus_of(&s, p);
            assert_eq!(c.len(), 1, "nginx workers are single-threaded");
            assert_eq!(c[0].len(), 1, "worker {p} not pinned: {c:?}");
            c[0][0]
        })
        .collect();
    worker_cpus.sort_unstable();
    let mut want: Vec<usize> = (0..2).map(|i| all[i % all.len()]).collect();
    want.sort_unstable();
    assert_eq!(worker_cpus, want);

    let addr = s.addr();
    let info = s.stop().unwrap();
    assert!(!info.forced);
    assert_gone(&pids, addr);
}

#[test]
fn drop_stops_the_server() {
    require(Kind::Redis);
    let s = Spawned::start(&SpawnConfig::new(Kind::Redis)).unwrap();
    let (pids, addr, dir) = (s.pids(), s.addr(), s.dir().unwrap());
    assert!(TcpStream::connect(addr).is_ok());
    drop(s);
    assert_gone(&pids, addr);
    assert!(!dir.exists());
}

#[test]
fn drop_stops_the_server_while_a_panic_unwinds() {
    require(Kind::Memcached);
    let (tx, rx) = std::sync::mpsc::channel();
    let r = std::thread::spawn(move || {
        let s = Spawned::start(&SpawnConfig::new(Kind::Memcached)).unwrap();
        tx.send((s.pids(), s.addr())).unwrap();
        panic!("the run failed");
    })
    .join();
    assert!(r.is_err());
    let (pids, addr) = rx.recv().unwrap();
    assert_gone(&pids, addr);
}

#[test]
fn two_instances_at_once_get_different_ports() {
    require(Kind::Memcached);
    let cfg = SpawnConfig::new(Kind::Memcached);
    let a = std::thread::spawn({
        let cfg = cfg.clone();
        move || Spawned::start(&cfg).unwrap()
    });
    let b = Spawned::start(&cfg).unwrap();
    let a = a.join().unwrap();
    assert_ne!(a.addr(), b.addr());
    for s in [&a, &b] {
        let mut c = conn(s.addr());
        send(&mut c, b"version\r\n");
        assert!(line(&mut c).starts_with("VERSION"));
    }
    // `a` was started on a thread that has exited since: the server must still be up
    // (PR_SET_PDEATHSIG is armed from the long-lived spawner thread).
    std::thread::sleep(Duration::from_millis(100));
    let mut c = conn(a.addr());
    send(&mut c, b"version\r\n");
    assert!(line(&mut c).starts_with("VERSION"));
}

#[test]
fn bad_binary_paths_are_clear_errors() {
    let cfg = SpawnConfig::new(Kind::Redis);
    let e =
        Spawned::start_with(&cfg, "/no/such/redis".as_ref(), Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, TargetError::BadBinary { .. }), "{e}");
    assert!(e.to_string().contains("/no/such/redis"), "{e}");
    // An executable that is not the server: its version output is empty.
    let e = Spawned::start_with(&cfg, "/bin/true".as_ref(), Duration::from_secs(5)).unwrap_err();
    assert!(e.to_string().contains("not redis-server"), "{e}");
}

fn assert_exits_with(kind: Kind, extra: &[&str], needle: &str) {
    require(kind);
    let mut cfg = SpawnConfig::new(kind);
    cfg.extra_args = extra.iter().map(|s| s.to_string()).collect();
    match Spawned::start(&cfg) {
        Err(TargetError::Exited {
            kind: k, output, ..
        }) => {
            assert_eq!(k, kind);
            assert!(output.contains(needle), "{kind}: {output}");
        }
        other => panic!("{kind}: expected Exited, got {other:?}"),
    }
}

#[test]
fn unparsable_configs_fail_with_the_servers_own_message() {
    assert_exits_with(Kind::Redis, &["--no-such-directive", "1"], "Bad directive");
    assert_exits_with(
        Kind::Nginx,
        &["-g", "no_such_directive on;"],
        "unknown directive",
    );
    assert_exits_with(Kind::Memcached, &["--no-such-option"], "no-such-option");
}

#[test]
fn realtime_policy_is_applied_or_refused_clearly() {
    require(Kind::Redis);
    let mut cfg = SpawnConfig::new(Kind::Redis);
    cfg.sched = Some(SchedSpec::Fifo { prio: 1 });
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match Spawned::start(&cfg) {
        Ok(s) => {
            assert!(root, "FIFO granted without root");
            for t in s.placement() {
                assert_eq!(t.sched, Some(SchedSpec::Fifo { prio: 1 }), "{t:?}");
            }
        }
        Err(e) => {
            assert!(!root, "root was refused FIFO: {e}");
            assert!(matches!(e, TargetError::SchedPermission { .. }), "{e}");
            assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}");
        }
    }
}

/// Child half of `a_server_dies_with_a_killed_parent`: start memcached, print its pid,
/// wait to be killed.
fn orphan_child() {
    let s = Spawned::start(&SpawnConfig::new(Kind::Memcached)).unwrap();
    println!("SERVER {} {}", s.pids()[0], s.addr());
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn a_server_dies_with_a_killed_parent() {
    if std::env::var_os("TARGETS_ORPHAN_CHILD").is_some() {
        return orphan_child();
    }
    require(Kind::Memcached);
    let mut parent = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_server_dies_with_a_killed_parent",
            "--nocapture",
        ])
        .env("TARGETS_ORPHAN_CHILD", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(parent.stdout.take().unwrap());
    let server = out
        .lines()
        .map(|l| l.unwrap())
        .find_map(|l| l.strip_prefix("SERVER ").map(str::to_string))
        .expect("child printed its server");
    let (pid, addr) = server.split_once(' ').unwrap();
    let addr: SocketAddr = addr.parse().unwrap();
    assert!(TcpStream::connect(addr).is_ok());
    parent.kill().unwrap(); // SIGKILL: no Drop runs in the parent
    parent.wait().unwrap();
    // The server is not our child: it is gone once /proc no longer lists it (or it is a
    // zombie waiting for init). Poll; the kernel signals it as the parent exits.
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z')
        })
    };
    for _ in 0..1000 {
        if gone() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(gone(), "memcached {pid} survived its killed parent");
}

#[test]
fn a_full_memcached_evicts_and_its_stats_say_so() {
    require(Kind::Memcached);
    let mut cfg = SpawnConfig::new(Kind::Memcached);
    cfg.threads = Some(1);
    // 2 MB of item memory; 8 MB of values.
    cfg.memory_mb = Some(2);
    let s = Spawned::start(&cfg).unwrap();
    assert_eq!(s.evictions().unwrap(), Some(0));
    let mut c = conn(s.addr());
    let value = vec![b'v'; 1000];
    for i in 0..8000 {
        let mut req = format!("set k{i} 0 0 {}\r\n", value.len()).into_bytes();
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n");
        send(&mut c, &req);
        assert_eq!(line(&mut c), "STORED\r\n");
    }
    let st = s.stats().unwrap();
    assert_eq!(st["limit_maxbytes"], (2u64 << 20).to_string());
    let ev = s.evictions().unwrap().unwrap();
    assert!(ev > 1000, "{ev} evictions of 8000 1 KB items in 2 MB");
    s.stop().unwrap();
}

#[test]
fn redis_stats_and_nginx_without_counters() {
    require(Kind::Redis);
    let s = Spawned::start(&SpawnConfig::new(Kind::Redis)).unwrap();
    assert_eq!(s.evictions().unwrap(), Some(0));
    assert!(s.stats().unwrap().contains_key("redis_version"));
    s.stop().unwrap();
    require(Kind::Nginx);
    let mut cfg = SpawnConfig::new(Kind::Nginx);
    cfg.open_file_cache = true;
    cfg.http_files = Some(targets::FileSizes::Uniform { lo: 10, hi: 5000 }.files(20, 7));
    let n = Spawned::start(&cfg).unwrap();
    assert_eq!(n.evictions().unwrap(), None);
    assert!(n.stats().is_err());
    let sizes = n.http_paths();
    let mut c = conn(n.addr());
    for (path, size) in sizes.iter().take(5) {
        let (head, body) = http_get(&mut c, path);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body.len() as u64, *size);
    }
    assert!(
        sizes.iter().any(|(_, s)| *s != sizes[0].1),
        "drawn sizes differ"
    );
    n.stop().unwrap();
}

fn ns_of(pid: u32, kind: &str) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).unwrap()
}

/// ThunderX Fig. 8's container: memcached started in a network namespace of its own, reached
/// over a veth pair at the namespace's address, with its own mount, UTS and IPC namespaces;
/// the namespace is gone (with its journal line) once the guard drops. Needs root, which CI
/// has; elsewhere the test checks that the refusal says so.
#[test]
fn memcached_in_a_container_answers_over_its_veth_and_the_namespace_is_removed() {
    require(Kind::Memcached);
    let state = tempfile::tempdir().unwrap();
    let journal = host::isolate::IsoJournal::in_dir(state.path());
    let net = match host::isolate::ContainerNet::create(&journal, Some(&[last_cpu()])) {
        Ok(n) => n,
        Err(e) => {
            // SAFETY: geteuid has no preconditions.
            assert_ne!(unsafe { libc::geteuid() }, 0, "root, yet: {e}");
            return;
        }
    };
    let name = net.name().to_string();
    assert_eq!(journal.entries().unwrap().len(), 1);
    let mask = host::isolate::rps_mask(&[last_cpu()]);
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &name, "sh", "-c"])
        .arg("cat /sys/class/net/tsc-*/queues/rx-0/rps_cpus")
        .output()
        .unwrap();
    let hex = |m: &str| u64::from_str_radix(&m.trim().replace(',', ""), 16).unwrap();
    assert_eq!(hex(&String::from_utf8_lossy(&out.stdout)), hex(&mask));
    let mut cfg = SpawnConfig::new(Kind::Memcached);
    cfg.threads = Some(1);
    cfg.container = Some(targets::Containment {
        netns: Some(net.netns_path()),
        listen: net.server_addr(),
    });
    let s = Spawned::start(&cfg).unwrap();
    assert_eq!(s.addr().ip(), std::net::IpAddr::V4(net.server_addr()));
    let me = std::process::id();
    for kind in ["net", "mnt", "uts", "ipc"] {
        assert_ne!(
            ns_of(s.pids()[0], kind),
            ns_of(me, kind),
            "{kind} namespace"
        );
    }
    assert_eq!(ns_of(s.pids()[0], "pid"), ns_of(me, "pid"));
    let mut c = conn(s.addr());
    send(&mut c, b"set k 0 0 2\r\nhi\r\nget k\r\n");
    assert_eq!(line(&mut c), "STORED\r\n");
    assert_eq!(line(&mut c), "VALUE k 0 2\r\n");
    let addr = s.addr();
    drop(c);
    s.stop().unwrap();
    net.remove().unwrap();
    assert!(!std::path::Path::new("/run/netns").join(&name).exists());
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err());
    assert_eq!(journal.entries().unwrap(), vec![]);
}
