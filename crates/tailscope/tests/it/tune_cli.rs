//! `tailscope tune` on the built-in server it starts, with the host's /proc and /sys read and
//! written under a fixture root: every step run or skipped with its reason, host changes
//! reverted after the walk.

use crate::common;

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
    let _g = common::shared();
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
            "700ms",
            "--warmup",
            "200ms",
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
    for run in ["baseline", "rt", "udp", "irq", "numa"] {
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
    // NUMA binds even on one node (the fixture has no node directory: one node 0).
    let numa = step("numa")["changes"][0].as_str().unwrap();
    assert!(
        numa.contains("NUMA node 0") && numa.contains("MPOL_BIND"),
        "{numa}"
    );
    for (skip, why) in [("cstate", "cpuidle"), ("governor", "cpufreq")] {
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
    // The walk is one experiment holding the five runs.
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
    assert_eq!(listed["runs"].as_array().unwrap().len(), 5);
}

#[test]
fn an_slo_judges_every_step_and_the_tuned_configuration_gates() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fixture(&root);
    let (junit, md) = (dir.path().join("t.xml"), dir.path().join("t.md"));
    let db = dir.path().join("runs.db");
    // An SLO far below the truth: every step falls short, so the tuned one does: exit 3.
    let out = bin()
        .args([
            "tune",
            "nullrpc://",
            "--spawn",
            "--server-work",
            "det:100us",
        ])
        .args(["--server-cpus", "1", "--cpus", "0", "--service", "110us"])
        .args(["--rate", "30%", "--steps", "rt", "--max-steps", "2"])
        .args(["--duration", "700ms", "--warmup", "200ms"])
        .args(["--lateness-threshold", "1s", "--slo", "p50<=1us"])
        .args(["--label", "t1", "--junit", junit.to_str().unwrap()])
        .args(["--markdown", md.to_str().unwrap()])
        .args(["--root", root.to_str().unwrap(), "--state-dir"])
        .arg(dir.path().join("state"))
        .args(["--db", db.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v = json_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(v["status"], "ok", "{v}\n{stderr}");
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(v["tuned"], "rt");
    for s in v["steps"].as_array().unwrap() {
        // Each step judged at the walk's load; 1 µs is below any p50 a view can measure, so
        // the verdict is violates (or undecided when the view read was not valid).
        let verdict = s["slo"]["verdict"].as_str().unwrap();
        assert_ne!(verdict, "meets", "{s}");
        assert_eq!(s["slo"]["conditions"][0]["bound"], 1.0, "{s}");
    }
    // The JUnit file holds what the exit code reads: the tuned configuration, failed; the
    // Markdown every step.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testsuite ").count(), 1, "{xml}");
    assert!(xml.contains("tuned configuration: step rt"), "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(
        table.contains("step baseline") && table.contains("step rt"),
        "{table}"
    );
    // The label is stored with the walk's runs.
    let listed = common::runs_list(&db);
    assert!(
        listed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["label"] == "t1"),
        "{listed}"
    );
}

/// Issue 35: `tune --interleave` measures each step against the step before it in paired,
/// interleaved slices: a step that restarts the server (udp: the dispatcher) with two servers
/// side by side, a host step (irq, under the fixture root) with one server and the setting
/// switched before each slice; each gain a ratio with its interval, each comparison stored
/// as an `ab` experiment of its own, the host reverted after the walk.
#[test]
fn interleaved_steps_give_each_gain_a_paired_interval() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fixture(&root);
    let state = dir.path().join("state");
    let db = dir.path().join("runs.db");
    let out = bin()
        .args(["tune", "nullrpc://", "--spawn", "--server-work", "det:50us"])
        .args(["--server-cpus", "1", "--cpus", "0", "--service", "60us"])
        .args(["--rate", "30%", "--steps", "udp,irq", "--no-attribution"])
        .args(["--duration", "600ms", "--warmup", "150ms"])
        .args(["--lateness-threshold", "1ms"])
        .args(["--interleave", "--pairs", "2", "--slice", "100ms"])
        // Room for pairs while another module's load shares the CPUs (CI runs two test
        // threads): ~0.3 s a pair of 100 ms slices, so ~13 pairs when the host is quiet and
        // at least two when it is not (fewer than 6 leave a row without an interval, below).
        .args(["--interleave-for", "4s"])
        .args(["--root", root.to_str().unwrap()])
        .args(["--state-dir", state.to_str().unwrap()])
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
    assert!(steps[0]["paired"].is_null(), "the baseline has no gain");
    for (name, against, how) in [
        ("udp", "baseline", "two servers"),
        ("irq", "udp", "host setting switched"),
    ] {
        let s = steps.iter().find(|s| s["name"] == name).unwrap();
        let g = &s["paired"];
        assert_eq!(g["against"], against, "{s}");
        assert_eq!(g["candidate"], name, "{s}");
        assert!(g["how"].as_str().unwrap().contains(how), "{g}");
        assert!(g["pairs"].as_u64().unwrap() >= 2, "{g}");
        for p in ["p50", "p99"] {
            let row = g["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["percentile"] == p)
                .unwrap_or_else(|| panic!("no {p} row: {g}"));
            let r = &row["ratio"];
            if r.is_null() {
                // An interval needs three groups of pairs: fewer pairs (a host busy with
                // another test's load) leave the row without one, and say so.
                let why = row["why"].as_str().unwrap_or("");
                assert!(
                    why.contains("too few pairs") && g["pairs"].as_u64().unwrap() < 6,
                    "{row} {g}"
                );
                continue;
            }
            let (lo, x, hi) = (
                r["lo"].as_f64().unwrap(),
                r["value"].as_f64().unwrap(),
                r["hi"].as_f64().unwrap(),
            );
            assert!(0.0 < lo && lo <= x && x <= hi, "{row}");
        }
        // The comparison is an `ab` experiment holding its two arms' runs.
        let e = g["experiment"].as_i64().unwrap();
        let listed = json_of(
            &bin()
                .args(["runs", "list", "--json", "--experiment", &e.to_string()])
                .args(["--db", db.to_str().unwrap()])
                .output()
                .unwrap(),
        );
        let runs = listed["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{listed}");
        assert!(runs.iter().all(|r| r["kind"] == "ab-arm"), "{listed}");
    }
    // Switched on and off slice by slice, the IRQ's affinity ends as it began.
    assert_eq!(
        std::fs::read_to_string(root.join("proc/irq/38/smp_affinity_list")).unwrap(),
        "0-1\n"
    );
    // Without --interleave its options are refused before anything starts.
    let out = bin()
        .args(["tune", "nullrpc://", "--spawn", "--slice", "200ms"])
        .args(["--db", dir.path().join("none.db").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("none.db").exists());
}
