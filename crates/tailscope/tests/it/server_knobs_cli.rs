//! The server knobs of the isolation and colocation experiments through the real binary:
//! memcached's item memory and the evictions it causes, scale-out over several instances (the
//! ideal sees one queue per worker of every instance), nginx's open_file_cache with file
//! sizes from a distribution, a stressor beside a run, and the host facts stored with it.
//! A run on this shared 2-CPU host may be `invalid` (its generator fell behind); these tests
//! check what was measured and stored, not the verdict.

use crate::common;

use std::path::Path;

use common::{bin, json_of};

fn last_cpu() -> String {
    (std::thread::available_parallelism().unwrap().get() - 1).to_string()
}

fn run(db: &Path, url: &str, extra: &[&str]) -> serde_json::Value {
    let out = bin()
        .args([
            "run",
            "--no-noise-probe",
            url,
            "--spawn",
            "--server-cpus",
            &last_cpu(),
            "--cpus",
            "0",
        ])
        .args([
            "--rate",
            "2000",
            "--duration",
            "1500ms",
            "--warmup",
            "200ms",
            "--service",
            "20us",
        ])
        .args(extra)
        .arg("--db")
        .arg(db)
        .arg("--json")
        .env("XDG_STATE_HOME", db.parent().unwrap().join("state"))
        .output()
        .unwrap();
    let v = json_of(&out);
    let status = v["status"].as_str().unwrap_or("");
    assert!(
        ["ok", "invalid", "saturated"].contains(&status),
        "{status}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["outcomes"]["error"], 0);
    v
}

#[test]
fn a_full_memcached_reports_its_evictions_beside_a_stressor_and_the_host_is_stored() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let v = run(
        &db,
        "memcached://",
        &[
            "--server-threads",
            "1",
            "--server-memory-mb",
            "4",
            "--items",
            "20000",
            "--value-size",
            "1000",
            "--stress",
            "cpu@0.2",
        ],
    );
    let s = &v["server"];
    assert!(
        s["command_line"].to_string().contains("\"-m\",\"4\""),
        "{s}"
    );
    assert!(
        s["evictions_total"].as_u64().unwrap() > 1000,
        "20 MB of items in 4 MB: {s}"
    );
    assert!(s["evictions_during_run"].is_u64());
    let st = &s["colocated_stress"];
    assert_eq!(st["kind"], "cpu");
    assert_eq!(
        st["cpus"],
        serde_json::json!([last_cpu().parse::<usize>().unwrap()]),
        "the server's CPU, not the generator's"
    );
    assert!(st["iterations"].as_u64().unwrap() > 0);
    let id = v["run_id"].as_i64().unwrap().to_string();
    let shown = json_of(
        &bin()
            .args(["runs", "show", &id, "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap(),
    );
    let h = &shown["host"];
    for k in [
        "arch",
        "cpu_model",
        "llc",
        "smt_siblings",
        "threads_per_core",
        "numa_nodes",
        "kernel",
        "virtualisation",
        "hostname",
        "cpus_online",
    ] {
        assert!(h.get(k).is_some(), "host facts lack {k}: {h}");
    }
}

#[test]
fn scale_out_spreads_the_connections_and_the_ideal_has_a_queue_per_worker() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let v = run(
        &db,
        "memcached://",
        &[
            "--server-threads",
            "1",
            "--server-instances",
            "2",
            "--connections",
            "4",
            "--items",
            "500",
        ],
    );
    let s = &v["server"];
    assert_eq!(s["instances"], 2);
    assert_eq!(s["instance_addresses"].as_array().unwrap().len(), 2);
    assert_eq!(s["pids"].as_array().unwrap().len(), 2);
    assert_eq!(v["ideal_spec"]["workers"], 2);
    assert_eq!(v["ideal_spec"]["queues"], "per-worker");
    assert!(v["outcomes"]["ok"].as_u64().unwrap() > 1000);
}

#[test]
fn nginx_with_open_file_cache_serves_files_of_drawn_sizes() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let v = run(
        &db,
        "http://",
        &[
            "--open-file-cache",
            "--files",
            "50",
            "--file-size",
            "lognormal:4096,1",
        ],
    );
    assert!(v["outcomes"]["ok"].as_u64().unwrap() > 1000);
    assert_eq!(v["server"]["kind"], "nginx");
}

#[test]
fn a_stress_axis_changes_the_stressor_but_keeps_the_server() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = bin()
        .args([
            "sweep",
            "--no-noise-probe",
            "memcached://",
            "--spawn",
            "--server-threads",
            "1",
            "--server-cpus",
            &last_cpu(),
            "--cpus",
            "0",
            "--loads",
            "2000",
            "--service",
            "20us",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--items",
            "200",
            "--param",
            "stress=none;cpu@0.3;cache@0.3",
            "--json",
        ])
        .arg("--db")
        .arg(&db)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .unwrap();
    let v = json_of(&out);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    let mut pids = Vec::new();
    let mut kinds = Vec::new();
    for r in rows {
        let id = r["run_id"].as_i64().unwrap().to_string();
        let shown = json_of(
            &bin()
                .args(["runs", "show", &id, "--json", "--db"])
                .arg(&db)
                .output()
                .unwrap(),
        );
        let server = &shown["summary"]["server"];
        pids.push(server["pids"].clone());
        kinds.push(server["colocated_stress"]["kind"].clone());
    }
    assert_eq!(
        kinds,
        [
            serde_json::Value::Null,
            serde_json::json!("cpu"),
            serde_json::json!("cache")
        ]
    );
    assert!(pids.iter().all(|p| *p == pids[0]), "one server: {pids:?}");
}

/// Tales §4.5's NUMA binding as a sweep axis: the spawned memcached allocates under
/// `bind:0` (real on this one-node VM: the kernel's `numa_maps` says so, and the stored run
/// keeps what it said), and a node the host lacks is refused before anything starts.
#[test]
fn a_numa_axis_binds_the_spawned_server_and_numa_maps_shows_it() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let sweep = |numa: &str| {
        bin()
            .args([
                "sweep",
                "--no-noise-probe",
                "memcached://",
                "--spawn",
                "--server-threads",
                "1",
            ])
            .args(["--server-cpus", &last_cpu(), "--cpus", "0"])
            .args(["--loads", "2000", "--service", "20us", "--duration", "1s"])
            .args(["--warmup", "200ms", "--items", "200", "--param"])
            .arg(format!("server-numa={numa}"))
            .arg("--json")
            .arg("--db")
            .arg(&db)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .output()
            .unwrap()
    };
    let out = sweep("bind:7");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no node 7"), "{err}");
    assert!(!db.exists(), "a refused sweep wrote the store");

    let out = sweep("bind:0");
    let v = json_of(&out);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    let id = rows[0]["run_id"].as_i64().unwrap().to_string();
    let shown = json_of(
        &bin()
            .args(["runs", "show", &id, "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap(),
    );
    let policies = &shown["summary"]["server"]["memory_policies"];
    assert_eq!(*policies, serde_json::json!(["bind:0"]), "{shown}");
}

/// `run --server-numa` is the same binding as the sweep axis: the stored run keeps what
/// numa_maps said; without --spawn, or for a node the host lacks, exit 2 and nothing stored.
#[test]
fn run_server_numa_binds_and_bad_policies_exit_2() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for (args, says) in [
        (
            &["memcached://127.0.0.1:1", "--server-numa", "bind:0"][..],
            "need --spawn",
        ),
        (
            &["memcached://", "--spawn", "--server-numa", "bind:9"][..],
            "no node 9",
        ),
        (
            &["memcached://", "--spawn", "--server-numa", "near"][..],
            "--server-numa",
        ),
    ] {
        let out = bin()
            .arg("run")
            .args(args)
            .args(["--rate", "1000", "--duration", "1s", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} wrote the store");
    }
    let v = run(
        &db,
        "memcached://",
        &["--server-numa", "local", "--items", "200"],
    );
    assert_eq!(
        v["server"]["memory_policies"],
        serde_json::json!(["bind:0"]),
        "{}",
        v["server"]
    );
}

/// `--workload etc` is Facebook's ETC mix in one flag: the stored config names it, the
/// memcached run answers every get and set of its drawn sizes, and it refuses to be mixed with
/// the flags it replaces (exit 2, nothing written).
#[test]
fn the_etc_workload_runs_against_memcached_and_excludes_the_flags_it_sets() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = bin()
        .args([
            "run",
            "--no-noise-probe",
            "memcached://",
            "--spawn",
            "--workload",
            "etc",
            "--key-size",
            "30",
        ])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--workload") && err.contains("--key-size"),
        "{err}"
    );
    assert!(!db.exists());

    let v = run(
        &db,
        "memcached://",
        &["--workload", "etc", "--items", "2000"],
    );
    assert!(
        v["outcomes"]["ok"].as_u64().unwrap() > 1000,
        "{}",
        v["outcomes"]
    );
    let id = v["run_id"].as_i64().unwrap().to_string();
    let shown = json_of(
        &bin()
            .args(["runs", "show", &id, "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap(),
    );
    let c = &shown["config"];
    assert_eq!(c["arrival"], "etc", "{c}");
    let w = c["workload"].as_str().unwrap();
    assert!(
        w.contains("key_size: Etc(Key)") && w.contains("value_size: Etc(Value)"),
        "{w}"
    );
    assert!(w.contains("get_ratio: 0.9677"), "{w}");
}
