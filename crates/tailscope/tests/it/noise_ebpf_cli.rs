//! `noise --contributors ebpf` on this host: every contributor timed on the probed CPUs and
//! classed by its measured p99.9. Needs root, kernel BTF and the `irq:*` / `sched_switch`
//! tracepoints: in CI (CI=true) a host without them fails this test, unless the evidence
//! shows the kernel truly lacks the feature (no BTF file, no such tracepoint in tracefs).

use std::path::Path;
use std::process::Command;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// CONFIG_HZ from /boot/config-$(uname -r), else /proc/config.gz; Err: the evidence of
/// why it is unknown.
fn config_hz() -> Result<u64, String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("/proc/sys/kernel/osrelease: {e}"))?;
    let boot = format!("/boot/config-{release}");
    let text = match std::fs::read_to_string(&boot) {
        Ok(t) => t,
        Err(e1) => {
            let out = Command::new("gzip")
                .args(["-dc", "/proc/config.gz"])
                .output()
                .map_err(|e2| format!("{boot}: {e1}; gzip -dc /proc/config.gz: {e2}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{boot}: {e1}; /proc/config.gz: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    text.lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "the kernel config has no CONFIG_HZ line".into())
}

/// Whether an unsupported host's reason is a feature the kernel truly lacks, with the
/// evidence checked.
fn truly_lacks(err: &str) -> Option<String> {
    if err.contains("no kernel BTF") && !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("/sys/kernel/btf/vmlinux does not exist".into());
    }
    let tp = err
        .split("no tracepoint ")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let (cat, name) = tp.split_once(':')?;
    let events = Path::new("/sys/kernel/tracing/events");
    (events.is_dir() && !events.join(cat).join(name).exists())
        .then(|| format!("tracefs is mounted and has no {cat}/{name}"))
}

fn class_of(ns: f64) -> u8 {
    if ns < 1_000.0 {
        0
    } else if ns <= 100_000.0 {
        1
    } else {
        2
    }
}

#[test]
fn ebpf_contributors_are_timed_and_classed_by_their_p999() {
    let _g = crate::common::shared();
    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpus = if ncpus > 1 {
        format!("0-{}", ncpus - 1)
    } else {
        "0".into()
    };
    let out = Command::new(env!("CARGO_BIN_EXE_tailscope"))
        .args(["noise", "--cpus", &cpus, "--duration", "1s"])
        .args(["--contributors", "ebpf", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        match (truly_lacks(&err), in_ci()) {
            (Some(evidence), _) => {
                eprintln!("skipped: the kernel lacks a feature ({evidence}): {err}");
                return;
            }
            (None, true) => panic!("CI must support eBPF contributors: {err}"),
            (None, false) => {
                eprintln!("skipped outside CI: {err}");
                return;
            }
        }
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let reports = v["cpus"].as_array().unwrap();
    assert_eq!(reports.len(), ncpus);
    let mut timer_events = 0u64;
    let mut attached_ns = 0u64;
    for r in reports {
        assert_eq!(r["contributor_source"], "ebpf", "{r}");
        assert!(r["contributors_class_rule"]
            .as_str()
            .unwrap()
            .contains("p99.9"));
        let e = &r["contributors_ebpf"];
        assert_eq!(e["no_slot"], 0, "{e}");
        attached_ns = e["attached_ns"].as_u64().unwrap();
        assert!(attached_ns > 0);
        let measured = r["contributors_measured"].as_array().unwrap();
        assert!(!measured.is_empty(), "{r}");
        for c in measured {
            let n = c["count"].as_u64().unwrap();
            assert!(n > 0, "{c}");
            let q = |k: &str| {
                (
                    c[k]["low_ns"].as_u64().unwrap(),
                    c[k]["high_ns"].as_u64().unwrap(),
                )
            };
            let (p50, p99, p999) = (q("p50_ns"), q("p99_ns"), q("p99.9_ns"));
            let max = c["max_ns"].as_u64().unwrap();
            assert!(max > 0 && c["mean_ns"].as_f64().unwrap() > 0.0, "{c}");
            // Each percentile is a bucket [low, high); their order, and the maximum above.
            for (lo, hi) in [p50, p99, p999] {
                assert!(lo < hi && lo <= max, "{c}");
            }
            assert!(p50.0 <= p99.0 && p99.0 <= p999.0 && p999.0 <= max, "{c}");
            // The class follows the thresholds of the p99.9 (exact, so within its bucket's).
            let class = match c["class"].as_str().unwrap() {
                "good" => 0,
                "bad" => 1,
                "ugly" => 2,
                other => panic!("class {other}"),
            };
            assert!(
                class_of(p999.0 as f64) <= class && class <= class_of((p999.1 - 1) as f64),
                "{c}"
            );
            if c["source"] == "vector local_timer" {
                timer_events += n;
            }
        }
    }
    if !cfg!(target_arch = "x86_64") {
        eprintln!("not x86_64: the local timer is a numbered IRQ, not irq_vectors:local_timer");
        return;
    }
    assert!(timer_events > 0, "no local timer contributor: {v}");
    match config_hz() {
        Ok(hz) => {
            // A wide factor: ticks stop on idle or nohz_full CPUs, and the window is the
            // programs' (a little longer than the probe).
            let expect = hz as f64 * attached_ns as f64 / 1e9 * ncpus as f64;
            let got = timer_events as f64;
            eprintln!("local timer: {got} events, HZ={hz} predicts {expect:.0}");
            let nohz =
                std::fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
            if nohz.trim().is_empty() || nohz.trim() == "(null)" {
                assert!(
                    got > expect / 4.0 && got < expect * 4.0,
                    "{got} local timer events, HZ × window × CPUs = {expect:.0}"
                );
            } else {
                eprintln!(
                    "nohz_full CPUs ({}): the tick rate check is not made",
                    nohz.trim()
                );
            }
        }
        Err(evidence) => eprintln!("CONFIG_HZ unknown, tick count not checked: {evidence}"),
    }
}

#[test]
fn without_ebpf_contributors_are_counters_classed_by_nominal_cost_and_auto_says_why() {
    let _g = crate::common::shared();
    // A host tree where nothing is supported (no proc/self/status: not root): `auto` falls
    // back to counters and says why; `ebpf` refuses; `counters` never tries.
    let empty = tempfile::tempdir().unwrap();
    let run = |mode: &str| {
        Command::new(env!("CARGO_BIN_EXE_tailscope"))
            .args([
                "noise",
                "--duration",
                "200ms",
                "--contributors",
                mode,
                "--json",
            ])
            .env("TAILSCOPE_EBPF_ROOT", empty.path())
            .output()
            .unwrap()
    };
    for mode in ["auto", "counters"] {
        let out = run(mode);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let c = &v["cpus"][0];
        assert_eq!(c["contributor_source"], "counters", "{c}");
        assert!(c["contributors_class_rule"]
            .as_str()
            .unwrap()
            .contains("nominal"));
        assert_eq!(c["contributors_measured"].as_array().unwrap().len(), 0);
        let why = c["contributors_reason"].as_str();
        if mode == "auto" {
            assert!(why.is_some_and(|w| w.contains("not root")), "{c}");
        } else {
            assert_eq!(why, None);
        }
    }
    let out = run("ebpf");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not root"));
}
