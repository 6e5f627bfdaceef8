//! What the tests of runs with agents share: a built-in server (optionally inside a network
//! namespace), the run's exported records and the percentiles recomputed from them, and
//! network namespaces that are removed whatever happens to the test.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::bin;

/// A `tailscope serve` the test started; killed when dropped.
pub struct Served {
    child: Child,
    pub port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tailscope serve --listen LISTEN --arch epoll`, inside network namespace `netns` if given.
pub fn serve(listen: &str, netns: Option<&str>) -> Served {
    let exe = env!("CARGO_BIN_EXE_tailscope");
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, exe]);
            c
        }
        None => Command::new(exe),
    };
    let mut child = cmd
        .args(["serve", "--listen", listen, "--arch", "epoll"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tailscope serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("serve prints its address");
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("serve printed '{line}'"));
    Served { child, port }
}

/// A run's records as `runs export --format csv` gives them, by column name.
pub struct Exported {
    pub header: Vec<String>,
    pub rows: Vec<Vec<i64>>,
}

impl Exported {
    pub fn col(&self, name: &str) -> usize {
        self.header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    }
}

pub fn export(db: &Path, id: i64) -> Exported {
    let out = bin()
        .args(["runs", "export", &id.to_string(), "--format", "csv", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    Exported { header, rows }
}

/// Latencies (µs) of the successful measured requests, recomputed from the raw records:
/// received − intended, for intended ≥ the warm-up.
pub fn latencies_us(e: &Exported, warmup_ns: i64) -> Vec<f64> {
    let (i, r, o) = (e.col("intended_ns"), e.col("received_ns"), e.col("outcome"));
    let mut v: Vec<f64> = e
        .rows
        .iter()
        .filter(|row| row[i] >= warmup_ns && row[o] == 0)
        .map(|row| (row[r] - row[i]) as f64 / 1e3)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The type-7 quantile of sorted values (numpy's default), as the stats crate computes it.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + frac * (sorted[hi] - sorted[lo])
}

pub const KEYS: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("p99.99", 0.9999),
];

/// The run's percentiles are those of its raw records, exactly; the agents' added
/// histograms give them to the histogram's precision (3 significant digits).
pub fn assert_percentiles_match_records(v: &serde_json::Value, db: &Path) {
    let id = v["run_id"].as_i64().unwrap();
    let e = export(db, id);
    let lat = latencies_us(&e, v["warmup_ns"].as_i64().unwrap());
    assert_eq!(lat.len() as u64, v["outcomes"]["ok"].as_u64().unwrap());
    for (k, q) in KEYS {
        let exact = quantile(&lat, q);
        let run = v["measured"][k].as_f64().unwrap();
        assert!(
            (run - exact).abs() <= 1e-6 * exact.max(1.0),
            "{k}: run {run} µs, records {exact} µs"
        );
        let merged = v["agents_merged"]["measured"][k].as_f64().unwrap();
        assert!(
            (merged - exact).abs() <= 2e-3 * exact + 0.01,
            "{k}: added histograms {merged} µs, records {exact} µs"
        );
    }
}

/// The checks every finished run with agents passes: one entry per agent, their requests
/// add up to the run's, each offered its share and sent about it, and the verdict follows
/// from theirs.
pub fn assert_agents_add_up(v: &serde_json::Value, n: usize, rate: f64) {
    let agents = v["agents"].as_array().unwrap();
    assert_eq!(agents.len(), n, "{v}");
    let sum: u64 = agents.iter().map(|a| a["requests"].as_u64().unwrap()).sum();
    assert_eq!(sum, v["requests"].as_u64().unwrap(), "{v}");
    assert_eq!(v["agents_merged"]["requests"].as_u64(), Some(sum));
    for a in agents {
        let share = rate / n as f64;
        assert_eq!(a["offered_rate_rps"].as_f64(), Some(share));
        let achieved = a["achieved_rate_rps"].as_f64().unwrap();
        let requests = a["requests"].as_u64().unwrap();
        assert!(requests > 0);
        // A Poisson share: within 10 % of its rate, or 4 standard deviations of its count
        // where it sent few (a sweep's 20 % point of 0.5 s sent ~80 requests per agent, whose
        // count varies by ±11 %: 145 req/s of 162 was seen).
        let tolerance = (4.0 / (requests as f64).sqrt()).max(0.10);
        assert!(
            (achieved / share - 1.0).abs() < tolerance,
            "agent {}: {achieved} req/s of {share} ({requests} requests)",
            a["agent"]
        );
    }
}

/// Network namespaces (and the veth pairs inside them) the test made; removed when dropped,
/// also when the test fails.
pub struct Netns {
    pub names: Vec<String>,
    /// veth ends made in this namespace (deleting one deletes its peer).
    links: Vec<String>,
}

impl Netns {
    pub fn new() -> Netns {
        Netns {
            names: Vec::new(),
            links: Vec::new(),
        }
    }

    /// A veth pair from namespace `a` (None: this one) to namespace `b`, addresses `addr_a`
    /// and `addr_b` (CIDR).
    pub fn veth(&mut self, name: &str, a: Option<&str>, addr_a: &str, b: &str, addr_b: &str) {
        self.links.push(name.to_string());
        veth(name, a, addr_a, b, addr_b);
    }

    /// A new namespace with its loopback up.
    pub fn add(&mut self, name: &str) {
        ip(&["netns", "add", name]);
        self.names.push(name.to_string());
        ip(&["-n", name, "link", "set", "lo", "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for l in &self.links {
            // Gone already when its pair moved into a namespace deleted below: quietly.
            let _ = Command::new("ip")
                .args(["link", "del", l])
                .stderr(Stdio::null())
                .status();
        }
        for n in self.names.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Runs `ip ARGS`, failing the test (with ip's message) when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("the ip command (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn veth(name: &str, a: Option<&str>, addr_a: &str, b: &str, addr_b: &str) {
    let peer = format!("{name}p");
    ip(&["link", "add", name, "type", "veth", "peer", "name", &peer]);
    ip(&["link", "set", &peer, "netns", b]);
    if let Some(a) = a {
        ip(&["link", "set", name, "netns", a]);
    }
    let on = |ns: Option<&str>, rest: &[&str]| {
        let mut v: Vec<&str> = Vec::new();
        if let Some(ns) = ns {
            v.extend(["-n", ns]);
        }
        v.extend(rest);
        ip(&v);
    };
    on(a, &["addr", "add", addr_a, "dev", name]);
    on(a, &["link", "set", name, "up"]);
    on(Some(b), &["addr", "add", addr_b, "dev", &peer]);
    on(Some(b), &["link", "set", &peer, "up"]);
}

/// A name unique to this test process (namespace and interface names are global).
pub fn unique(tag: &str) -> String {
    format!("ts{}{tag}", std::process::id() % 100_000)
}
