//! `tailscope tune` on the built-in server it starts, with the host's /proc and /sys read and
//! written under a fixture root: every step run or skipped with its reason, host changes
//! reverted after the walk.

mod common;

use common::{bin, json_of};

/// A host with one NIC interrupt, two CPUs, no NUMA, no cpuidle, no cpufreq.
fn fixture(root: &std::path::Path) {
    let w = |p: &str, s: &str| {
        let f = root.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, s).unwrap();
    };
    w(
        "proc/interrupts",
        "           CPU0       CPU1\n 38:        100        200   PCI-MSI 1-edge      eth0\n",
    );
    w("proc/irq/38/smp_affinity_list", "0-1\n");
    w("sys/devices/system/cpu/online", "0-1\n");
    std::fs::create_dir_all(root.join("sys/class/net/eth0")).unwrap();
}

#[test]
fn the_walk_runs_or_skips_every_step_and_reverts_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fixture(&root);
    let state = dir.path().join("state");
    let db = dir.path().join("runs.db");
    let out = bin()
        .args([
            "tune",
            "nullrpc://",
            "--spawn",
            "--server-work",
            "det:100us",
        ])
        .args([
            "--server-cpus",
            "1",
            "--cpus",
            "0",
            "--service",
            "110us",
            "--rate",
            "30%",
        ])
        .args([
            "--duration",
            "1500ms",
            "--warmup",
            "300ms",
            "--lateness-threshold",
            "1ms",
        ])
        .args([
            "--root",
            root.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .args(["--db", db.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = v["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["baseline", "rt", "udp", "irq", "numa", "cstate", "governor"]
    );
    let step = |n: &str| steps.iter().find(|s| s["name"] == n).unwrap();
    for run in ["baseline", "rt", "udp", "irq"] {
        assert!(
            step(run)["run_id"].as_i64().is_some(),
            "{run}: {}",
            step(run)
        );
        assert!(step(run)["skipped"].is_null());
        assert!(step(run)["measured"]["p99"].as_f64().unwrap() > 0.0);
    }
    assert!(step("rt")["changes"][0].as_str().unwrap().contains("FIFO"));
    assert!(step("udp")["changes"][0]
        .as_str()
        .unwrap()
        .contains("dispatcher"));
    let irq = step("irq")["changes"][0].as_str().unwrap();
    assert!(
        irq.contains("smp_affinity_list") && irq.contains("→ 0"),
        "{irq}"
    );
    for (skip, why) in [
        ("numa", "NUMA"),
        ("cstate", "cpuidle"),
        ("governor", "cpufreq"),
    ] {
        assert!(
            step(skip)["skipped"].as_str().unwrap().contains(why),
            "{skip}: {}",
            step(skip)
        );
    }
    // The IRQ's affinity is back as it was, and the journal holds nothing to revert.
    assert_eq!(
        std::fs::read_to_string(root.join("proc/irq/38/smp_affinity_list")).unwrap(),
        "0-1\n"
    );
    let leftover = std::fs::read_dir(&state)
        .map(|d| {
            d.flatten()
                .filter(|e| e.metadata().map(|m| m.len() > 0).unwrap_or(false))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(leftover, 0, "journal entries left in {}", state.display());
    // The walk is one experiment holding the four runs.
    let e = v["experiment_id"].as_i64().unwrap();
    let listed = json_of(
        &bin()
            .args([
                "runs",
                "list",
                "--json",
                "--experiment",
                &e.to_string(),
                "--db",
            ])
            .arg(&db)
            .output()
            .unwrap(),
    );
    assert_eq!(listed["runs"].as_array().unwrap().len(), 4);
}
