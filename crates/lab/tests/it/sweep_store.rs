//! A real sweep on the built-in server, stored, and its experiment read back typed.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use lab::{
    Axis, CalibrateSpec, Db, Load, Quiet, Role, RunStatus, RunTemplate, Slo, SpawnSpec, SweepPlan,
    SweepResult, TargetSpec, ViewChoice, WorkloadSpec,
};
use load::{LoadConfig, StopAt};

fn plan() -> SweepPlan {
    let target = TargetSpec {
        url: "nullrpc://".into(),
        spawn: Some(SpawnSpec {
            threads: Some(1),
            work: Some(model::ServiceSpec::Deterministic { mean_ns: 50_000.0 }),
            ..SpawnSpec::default()
        }),
        workload: WorkloadSpec::default(),
        churn: None,
        preload: false,
        stress: None,
        tls: Default::default(),
    };
    // The load's target and rate are set per point.
    let mut load = LoadConfig::new("nullrpc://127.0.0.1:1".parse().unwrap(), 1.0);
    load.stop = StopAt::Duration(Duration::from_millis(400));
    load.warmup = Duration::from_millis(100);
    load.connections = 2;
    SweepPlan {
        kind: "sweep".into(),
        template: RunTemplate {
            target,
            load,
            service_ns: Some(50_000.0),
            workers: Some(1),
            queues: None,
            confidence: 0.95,
            lateness_threshold_ns: 50_000.0,
            attribution: false,
            server_cpus: Vec::new(),
            extra_pids: Vec::new(),
            calibrate: CalibrateSpec::default(),
            config: lab::RunConfig::default(),
            precision: None,
            extra_quantiles: Vec::new(),
            agents: None,
        },
        loads: vec![Load::Rps(2_000.0), Load::OfCapacity(0.4)],
        axes: vec![Axis::parse("server-threads=1").unwrap()],
        repeat: 1,
        slo: Some(Slo::parse("p99<=5ms", ViewChoice::Auto).unwrap()),
        find_max: false,
        max_steps: 4,
        experiment: None,
        interleave: None,
    }
}

#[test]
fn a_stored_sweep_loads_back_as_the_same_typed_result() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("runs.db")).unwrap();
    let stop = AtomicBool::new(false);
    let result = lab::sweep(&plan(), &db, &stop, &Quiet).unwrap();
    assert_eq!(result.rows.len(), 2, "{:?}", result.rows);
    for r in &result.rows {
        assert_eq!(r.role, Role::Load);
        assert_ne!(r.status, RunStatus::Failed, "{r:?}");
        let p99 = r.measured.as_ref().and_then(|m| m.get("p99")).unwrap();
        // At least the 50 µs of work each request costs.
        assert!(p99 >= 50.0, "{r:?}");
        assert!(r.excess.is_some(), "{r:?}");
    }
    assert_eq!(result.rows[1].load_pct, Some(40.0));

    // Read back through a reader's connection, as `report` does.
    let reader = store::Store::open_existing(&db.path).unwrap().unwrap();
    let stored = reader
        .get_experiment(result.experiment_id)
        .unwrap()
        .unwrap();
    let back = SweepResult::from_json(stored.summary.as_ref().unwrap()).unwrap();
    // The SLO's condition-by-condition reports are not serialised (the verdicts are).
    let mut want = result.clone();
    want.rows.iter_mut().for_each(|r| r.slo_report = None);
    want.points.iter_mut().for_each(|p| p.slo_report = None);
    assert_eq!(back.rows, want.rows);
    assert_eq!(
        (&back.slo, &back.axes, &back.max_loads, &back.status),
        (&want.slo, &want.axes, &want.max_loads, &want.status)
    );
    // A point of one repeat has no spread: its combined stdev is NaN, which JSON writes as
    // null and reads back as NaN, and NaN is unequal to itself; so points compare by field
    // where they can and otherwise as serialised.
    assert_eq!(back.points.len(), want.points.len());
    for (b, w) in back.points.iter().zip(&want.points) {
        assert_eq!(
            (&b.params, b.load_pct, b.offered_rps, b.achieved_rps, b.slo),
            (&w.params, w.load_pct, w.offered_rps, w.achieved_rps, w.slo)
        );
        assert_eq!(b.result.statuses, w.result.statuses);
        assert_eq!(
            serde_json::to_value(b).unwrap(),
            serde_json::to_value(w).unwrap()
        );
    }
    assert_eq!(back.to_json(), result.to_json());
    assert_eq!(
        stored.status.outcome(),
        Some(result.status.to_string().as_str())
    );

    // A summary of another shape is refused, not read as an empty sweep.
    assert!(SweepResult::from_json(&serde_json::json!({"rows": 3})).is_err());
}
