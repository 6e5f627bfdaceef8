//! Per-request server stages from eBPF (issue 14), end to end through `lab::measure`: the
//! built-in server's own stamps against the kernel's, and spawned memcached (TCP and UDP),
//! nginx and Redis with every answered request matched. These need root, kernel BTF and
//! Linux 6.3 (CI runs as root); a host without them fails here, it does not skip.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

use analysis::{IdealSpec, QueueStructure};
use lab::{Db, Quiet, RunPlan, SpawnSpec, StagesMode, TargetPlan, TargetSpec, WorkloadSpec};
use load::{LoadConfig, NullRpcWorkload, Outcome, StopAt};
use server::{Arch, ServerConfig};

/// One measurement at a time: they share the host's two CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

fn plan(rate: f64, ms: u64, connections: usize) -> RunPlan {
    let mut load = LoadConfig::new("nullrpc://127.0.0.1:1".parse().unwrap(), rate);
    load.stop = StopAt::Duration(Duration::from_millis(ms));
    load.warmup = Duration::from_millis(200);
    load.connections = connections;
    RunPlan {
        precision: None,
        extra_quantiles: Vec::new(),
        kind: "run".into(),
        load,
        ideal: Some(IdealSpec {
            service_ns: 20_000.0,
            workers: 1,
            queues: QueueStructure::Single,
        }),
        ideal_source: Some(lab::IdealSource::given()),
        confidence: 0.95,
        // Unpinned on a shared test host: the stages are under test, not the lateness.
        lateness_threshold_ns: 1e9,
        attribution: false,
        server_cpus: Vec::new(),
        extra_pids: Vec::new(),
        config: lab::RunConfig::default(),
        experiment: None,
        stages: StagesMode::Ebpf,
        // Every request joined: the join is under test.
        stages_budget: lab::StagesBudget::All,
        agents: None,
    }
}

/// The eBPF collector's entry in the run's instruments.
fn collector(run: &lab::Run) -> &lab::Instrument {
    run.instruments
        .iter()
        .find(|i| i.name == "eBPF stage collector")
        .expect("the run reports its eBPF stage collector")
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Runs `plan` against `target`; checks what every eBPF run must show, and returns the run.
fn run_checked(target: TargetPlan, plan: &RunPlan) -> lab::Run {
    ebpf::support::check().expect("this host must run the eBPF collector (root, BTF, tracefs)");
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("runs.db")).unwrap();
    let stop = AtomicBool::new(false);
    let ready = target.start(&stop, &Quiet).unwrap();
    let run = lab::measure(plan, &ready, &db, &stop, &Quiet).unwrap();
    ready.stop().unwrap();
    let ins = collector(&run);
    let d = ins.detail.as_ref().unwrap();
    assert_eq!(d["source"], "ebpf");
    assert_eq!(d["kernel_dropped"], 0, "{d}");
    assert_eq!(d["malformed"], 0, "{d}");
    // Every answered request matched to its kernel events — sampled, every one a window
    // saw whole: the others are counted as outside the windows or at their edges.
    let answered = d["answered"].as_u64().unwrap();
    assert!(answered > 500, "{d}");
    let sampling = &d["sampling"];
    let (outside, edge) = match plan.stages_budget {
        lab::StagesBudget::All => {
            assert!(sampling.is_null(), "{d}");
            (0, 0)
        }
        lab::StagesBudget::Share(_) => (
            sampling["answered_outside_windows"].as_u64().unwrap(),
            sampling["answered_at_window_edges"].as_u64().unwrap(),
        ),
    };
    let matched = d["matched"].as_u64().unwrap();
    assert_eq!(matched + outside + edge, answered, "{}: {d}", run.target);
    // Its user-space cost is reported.
    assert!(ins.samples >= 1 && ins.cpu_ns.unwrap() > 0, "{ins:?}");
    // Each stamped record: the server's stages lie inside the client's send → receive, in
    // order; the stages' medians are positive where something must take time.
    let start = run.load.start_mono_ns;
    let (mut stamped, mut ok) = (0u64, 0u64);
    let mut stage: [Vec<u64>; 3] = Default::default();
    let (mut stack, mut no_stack) = (Vec::new(), 0u64);
    lab::records::StoredRecords::new(&db.store, run.run_id.unwrap())
        .for_each(&mut |r| {
            if r.outcome != Outcome::Ok {
                return;
            }
            ok += 1;
            let t = r.stamps;
            if t.contains(&0) {
                return;
            }
            stamped += 1;
            assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
            // The protocol stack's end (Tales' T2), when the packet carried its receive
            // stamp: between T1 (the stack's entry) and T2 (the reader awake).
            if r.stack_ns == 0 {
                no_stack += 1;
            } else {
                assert!(t[0] <= r.stack_ns && r.stack_ns <= t[1], "stack end: {r:?}");
                stack.push(r.stack_ns - t[0]);
            }
            assert!(start + r.sent_ns <= t[0], "T1 before the send: {r:?}");
            assert!(t[4] <= start + r.received_ns, "T5 after the receive: {r:?}");
            stage[0].push(t[2] - t[1]); // read
            stage[1].push(t[3] - t[2]); // the application: read done → write
            stage[2].push(t[5] - t[4]); // write → transmit
        })
        .unwrap();
    assert_eq!(stamped, matched, "every matched request carries T1..T6");
    assert!(ok >= stamped);
    for (name, v) in ["read", "application", "write"]
        .iter()
        .zip(stage.iter_mut())
    {
        assert!(median(v) > 0, "{}: median {name} stage is 0", run.target);
    }
    // Requests without the stack's end are those the join counted: their packet carried no
    // receive stamp (the kernel switches stamping on lazily, after the first socket asks).
    assert_eq!(
        d["join"]["stack_entry_missing"].as_u64(),
        Some(no_stack),
        "{d}"
    );
    assert!(
        no_stack * 100 <= stamped,
        "{no_stack} of {stamped} without the stack's end"
    );
    assert!(
        median(&mut stack) > 0,
        "{}: median protocol stack is 0",
        run.target
    );
    // The stage table (slowest 1 % vs median) is built from them, the stack split from the
    // wake-up in the paper's numbering.
    let rows = &run.analysis.stages.as_ref().unwrap().rows;
    assert!(rows.iter().any(|r| r.stage.starts_with("read")));
    for name in [
        "protocol stack (T1→queued)",
        "queueing + wake-up (queued→T2)",
    ] {
        assert!(
            rows.iter().any(|r| r.stage == name),
            "no row {name}: {rows:?}"
        );
    }
    run
}

/// The built-in server stamps T2..T5 itself in user space; the kernel's boundaries must
/// agree: the read's return comes before the server's post-read stamp, the write's entry
/// after its pre-write stamp, each within [`TOL_US`] at the median (a system call's entry or
/// return path, plus the decoding: a few µs).
///
/// A server thread preempted between the kernel's boundary and its own stamp widens the
/// gap by the preemption: on a host whose CPUs are contended (seen in CI beside a build:
/// T3 median 36 µs) the bound cannot hold. A run whose bound fails is measured again only
/// when its own evidence shows the contention — the server's threads waited for a CPU
/// (run-queue wait p99 over 50 µs) — and at most three times; causality is checked on
/// every run.
#[test]
fn builtin_server_stamps_agree_with_the_kernel() {
    const TOL_US: f64 = 10.0;
    const CONTENDED_RUNQUEUE_P99_US: f64 = 50.0;
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for attempt in 1..=3 {
        let cfg = ServerConfig {
            arch: Arch::Epoll,
            workers: 1,
            work: Some(model::ServiceSpec::Deterministic { mean_ns: 20_000.0 }),
            ..ServerConfig::default()
        };
        let target = TargetPlan::builtin(cfg, NullRpcWorkload::default()).unwrap();
        let run = run_checked(target, &plan(5_000.0, 1_500, 4));
        let d = collector(&run).detail.clone().unwrap();
        let agree = d["agreement"].as_array().unwrap();
        assert_eq!(agree.len(), 4, "{d}");
        let mut wide = Vec::new();
        for a in agree {
            let stamp = a["stamp"].as_str().unwrap();
            let p50 = a["p50_abs_us"].as_f64().unwrap();
            if p50 > TOL_US {
                wide.push(format!("{stamp}: median |kernel − server| {p50} µs: {a}"));
            }
            let first = a["kernel_first_fraction"].as_f64().unwrap();
            match stamp {
                // Causality: the read returned before the server stamped after it…
                "T3" => assert!(first >= 0.99, "{a}"),
                // …and the server stamped before it entered the write (T4: the work's end).
                "T4" | "T5" => assert!(first <= 0.01, "{a}"),
                _ => {}
            }
        }
        if wide.is_empty() {
            return;
        }
        let rq_p99 = d["runqueue_wait_us"]["p99"].as_f64().unwrap_or(0.0);
        assert!(
            rq_p99 > CONTENDED_RUNQUEUE_P99_US,
            "{wide:?} with no sign of CPU contention (run-queue wait p99 {rq_p99} µs): {d}"
        );
        assert!(
            attempt < 3,
            "contended in 3 runs: {wide:?}; run-queue wait p99 {rq_p99} µs"
        );
        eprintln!("attempt {attempt}: {wide:?}; run-queue wait p99 {rq_p99} µs: again");
    }
}

fn spawned(url: &str, threads: u32) -> TargetPlan {
    TargetPlan::new(&TargetSpec {
        url: url.into(),
        spawn: Some(SpawnSpec {
            threads: Some(threads),
            ..SpawnSpec::default()
        }),
        workload: WorkloadSpec {
            items: 1_000,
            files: Some(20),
            file_size: targets::FileSizes::Fixed(1024),
            ..WorkloadSpec::default()
        },
        churn: None,
        preload: true,
        stress: None,
        tls: Default::default(),
    })
    .unwrap()
}

#[test]
fn memcached_tcp_every_request_has_its_stages() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_checked(spawned("memcached://", 2), &plan(5_000.0, 1_500, 8));
}

#[test]
fn memcached_udp_every_request_has_its_stages() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_checked(spawned("memcached+udp://", 2), &plan(5_000.0, 1_500, 8));
}

#[test]
fn nginx_every_request_has_its_stages() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = run_checked(spawned("http://", 1), &plan(3_000.0, 1_500, 8));
    // nginx answers in two writes (header, then the file by sendfile): both belong to the
    // reply, so its T5→T6 covers them.
    let d = collector(&run).detail.clone().unwrap();
    assert_eq!(d["join"]["no_write"], 0, "{d}");
}

#[test]
fn redis_every_request_has_its_stages() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_checked(spawned("redis://", 1), &plan(5_000.0, 1_500, 8));
}

/// Sampled (the default budget's way, with a budget small enough that the programs must be
/// detached most of the run): several windows, every request a window saw whole matched
/// (checked in `run_checked`), and what the collector spent held to its budget, give or
/// take one window's worth.
fn sampled(url: &str, threads: u32) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = plan(5_000.0, 3_000, 8);
    p.stages_budget = lab::StagesBudget::Share(0.002);
    let run = run_checked(spawned(url, threads), &p);
    let d = collector(&run).detail.clone().unwrap();
    let s = &d["sampling"];
    let elapsed = s["elapsed_ns"].as_f64().unwrap();
    let spent = s["program_ns"].as_f64().unwrap() + s["sampler_cpu_ns"].as_f64().unwrap();
    // Two windows or more, as usually here. One only with the evidence that the budget was
    // spent all the same: right after tracefs is first mounted on a fresh VM, one attach costs
    // the sampler 20–40 ms of CPU (issue 36's CI: 23 ms, 1 window, 5x the 0.2 % allowance).
    let windows = s["windows"].as_u64().unwrap();
    assert!(
        windows >= 2 || (windows == 1 && spent >= 0.7 * 0.002 * elapsed),
        "{s}"
    );
    assert!(s["attached_fraction"].as_f64().unwrap() < 0.5, "{s}");
    assert!(s["answered_outside_windows"].as_u64().unwrap() > 0, "{s}");
    assert!(d["matched"].as_u64().unwrap() >= 100, "{d}");
    // Over by at most one window: its programs (the whole host's system calls, ~20 % of a
    // CPU at most here) for the 50 ms it lasts at least, and its attach and detach.
    let slack =
        0.2 * 50e6 + s["attach_max_ns"].as_f64().unwrap() + s["detach_max_ns"].as_f64().unwrap();
    assert!(
        spent <= 0.002 * elapsed + slack,
        "spent {spent} ns in {elapsed} ns: {s}"
    );
}

#[test]
fn memcached_tcp_sampled_windows_keep_whole_requests() {
    sampled("memcached://", 2);
}

#[test]
fn nginx_sampled_windows_keep_whole_requests() {
    // Two writes per reply: the deal-out at a window's edges is under test.
    sampled("http://", 1);
}
