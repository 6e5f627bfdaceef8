//! Configuration checks, trace replay by hand-computed example, and the collector's warm-up
//! and streaming paths.

use model::{
    parse_trace, simulate, ArrivalSpec, Collector, Completion, Discipline, ModelError, ServiceSpec,
    SimConfig, TimeUnit,
};

fn base() -> SimConfig {
    let service = ServiceSpec::Deterministic { mean_ns: 50_000.0 };
    SimConfig {
        arrival: ArrivalSpec::Poisson,
        rate_per_s: Some(SimConfig::rate_for_load(0.5, 1, &service).unwrap()),
        service,
        workers: 1,
        discipline: Discipline::Fifo,
        class_probs: Vec::new(),
        connections: None,
        requests: 1000,
        warmup_fraction: 0.0,
        seed: 0,
    }
}

fn err(cfg: SimConfig) -> String {
    simulate(&cfg, &mut |_: &Completion| {})
        .unwrap_err()
        .to_string()
}

#[test]
fn rate_for_load() {
    let s = ServiceSpec::Deterministic { mean_ns: 50_000.0 };
    assert!((SimConfig::rate_for_load(0.7, 4, &s).unwrap() - 56_000.0).abs() < 1e-6);
    for bad in [0.0, 1.0, 1.2, -0.1, f64::NAN] {
        assert!(matches!(
            SimConfig::rate_for_load(bad, 1, &s),
            Err(ModelError::Utilisation(_))
        ));
    }
    assert_eq!(
        SimConfig::rate_for_load(1.2, 1, &s)
            .unwrap_err()
            .to_string(),
        "utilisation must be in (0, 1), got 1.2"
    );
}

#[test]
fn bad_configs_are_rejected_with_one_line_messages() {
    assert_eq!(
        err(SimConfig {
            workers: 0,
            ..base()
        }),
        "workers must be at least 1"
    );
    assert_eq!(
        err(SimConfig {
            rate_per_s: Some(20_000.0),
            ..base()
        }),
        "utilisation must be in (0, 1), got 1"
    );
    assert!(err(SimConfig {
        warmup_fraction: 1.0,
        ..base()
    })
    .starts_with("warm-up fraction"));
    assert!(err(SimConfig {
        class_probs: vec![0.5, 0.6],
        ..base()
    })
    .starts_with("class probabilities"));
    assert!(err(SimConfig {
        discipline: Discipline::Priority,
        ..base()
    })
    .contains("needs between 2 and 255 classes, got 1"));
    assert!(err(SimConfig {
        rate_per_s: None,
        ..base()
    })
    .starts_with("arrival rate"));
    assert!(err(SimConfig {
        rate_per_s: Some(-3.0),
        ..base()
    })
    .starts_with("arrival rate"));
    assert!(err(SimConfig {
        requests: 0,
        ..base()
    })
    .contains("requests"));
    assert!(err(SimConfig {
        connections: Some(0),
        ..base()
    })
    .contains("connections"));
    assert!(err(SimConfig {
        service: ServiceSpec::Exponential { mean_ns: -1.0 },
        ..base()
    })
    .contains("mean"));
    for e in [
        SimConfig {
            workers: 0,
            ..base()
        },
        SimConfig {
            warmup_fraction: -0.5,
            ..base()
        },
    ] {
        assert!(!err(e).contains('\n'));
    }
    assert!("fast-lane".parse::<Discipline>().is_err());
    for name in [
        "fifo",
        "lifo",
        "random",
        "random-worker",
        "round-robin",
        "priority",
        "priority-preemptive",
    ] {
        assert_eq!(name.parse::<Discipline>().unwrap().name(), name);
    }
}

#[test]
fn trace_replay_by_hand() {
    // Arrivals at 0, 10, 20, 60 µs (absolute 1000 + ...), service 15 µs, one worker:
    // starts 0, 15, 30, 60 → waits 0, 5, 10, 0 µs; responses 15, 20, 25, 15 µs.
    let trace = parse_trace("1000\n1010\n1020\n1060\n", TimeUnit::Us).unwrap();
    let cfg = SimConfig {
        arrival: ArrivalSpec::Trace(trace.clone()),
        rate_per_s: None,
        service: ServiceSpec::Deterministic { mean_ns: 15_000.0 },
        requests: u64::MAX,
        ..base()
    };
    let mut got = Vec::new();
    let out = simulate(&cfg, &mut |c: &Completion| {
        got.push((c.index, c.wait_ns, c.response_ns))
    })
    .unwrap();
    assert_eq!(
        got,
        vec![
            (0, 0.0, 15_000.0),
            (1, 5_000.0, 20_000.0),
            (2, 10_000.0, 25_000.0),
            (3, 0.0, 15_000.0)
        ]
    );
    assert_eq!(out.requests, 4);
    assert_eq!(out.simulated_ns, 75_000.0);
    // Trace rate 3 arrivals / 60 µs = 50 000/s; ρ = 50 000 · 15 µs = 0.75.
    assert!((out.offered_load - 0.75).abs() < 1e-12);
    assert!((out.busy_fraction - 60.0 / 75.0).abs() < 1e-12);

    // The same trace at twice its recorded rate: gaps halve, ρ = 1.5 is rejected.
    let fast = SimConfig {
        rate_per_s: Some(100_000.0),
        ..cfg.clone()
    };
    assert!(matches!(
        simulate(&fast, &mut |_: &Completion| {}),
        Err(ModelError::Utilisation(_))
    ));

    // LIFO on the same trace: at 15 µs only request 1 waits; at 30 µs request 2. Same as FIFO.
    let lifo = SimConfig {
        discipline: Discipline::Lifo,
        ..cfg
    };
    let mut waits = Vec::new();
    simulate(&lifo, &mut |c: &Completion| waits.push(c.wait_ns)).unwrap();
    assert_eq!(waits, vec![0.0, 5_000.0, 10_000.0, 0.0]);
}

#[test]
fn trace_connections_pin_workers() {
    // Two workers, connection ids 0,0,1: requests 0 and 1 share worker 0 (the second waits
    // 10 µs), request 2 runs on worker 1 at once.
    let trace = parse_trace("0 0\n5 0\n5 1\n1000 1\n", TimeUnit::Us).unwrap();
    let cfg = SimConfig {
        arrival: ArrivalSpec::Trace(trace),
        rate_per_s: None,
        service: ServiceSpec::Deterministic { mean_ns: 15_000.0 },
        workers: 2,
        discipline: Discipline::RoundRobin,
        requests: 3,
        ..base()
    };
    let mut waits = Vec::new();
    let out = simulate(&cfg, &mut |c: &Completion| waits.push(c.wait_ns)).unwrap();
    assert_eq!(waits, vec![0.0, 10_000.0, 0.0]);
    assert_eq!(out.requests, 3, "the request limit stops the trace early");
}

#[test]
fn preemption_by_hand() {
    // Arrivals at 0 and 5 µs (and 200 µs, to keep the trace's ρ low), service 15 µs, one
    // worker. Pick a seed whose class draws are (1, 0, _): a low-priority job is in service
    // when a high-priority one arrives.
    let trace = parse_trace("0\n5\n200\n", TimeUnit::Us).unwrap();
    let cfg = |discipline, seed| SimConfig {
        arrival: ArrivalSpec::Trace(trace.clone()),
        rate_per_s: None,
        service: ServiceSpec::Deterministic { mean_ns: 15_000.0 },
        discipline,
        class_probs: vec![0.5, 0.5],
        requests: 3,
        seed,
        ..base()
    };
    let run = |discipline, seed| {
        let mut got = Vec::new();
        simulate(&cfg(discipline, seed), &mut |c: &Completion| {
            got.push((c.index, c.class, c.wait_ns, c.response_ns))
        })
        .unwrap();
        got.sort_by_key(|g| g.0);
        got
    };
    let seed = (0..1000)
        .find(|s| {
            let g = run(Discipline::Priority, *s);
            g[0].1 == 1 && g[1].1 == 0
        })
        .expect("some seed draws classes 1 then 0");
    // Preemptive-resume: request 1 preempts at 5 µs and finishes at 20; request 0 resumes
    // with 10 µs left and finishes at 30 (waited 15 µs in total).
    let pre = run(Discipline::PriorityPreemptive, seed);
    assert_eq!(
        &pre[..2],
        &[(0, 1, 15_000.0, 30_000.0), (1, 0, 0.0, 15_000.0)]
    );
    assert_eq!((pre[2].2, pre[2].3), (0.0, 15_000.0));
    // Non-preemptive: request 1 waits for request 0 to finish at 15 µs, done at 30.
    let non = run(Discipline::Priority, seed);
    assert_eq!(
        &non[..2],
        &[(0, 1, 0.0, 15_000.0), (1, 0, 10_000.0, 25_000.0)]
    );
}

#[test]
fn collector_warmup_and_streaming() {
    let cfg = SimConfig {
        requests: 20_000,
        warmup_fraction: 0.25,
        ..base()
    };
    let mut exact = Collector::new(cfg.requests, cfg.warmup_fraction, 1, u64::MAX);
    let mut streaming = Collector::new(cfg.requests, cfg.warmup_fraction, 1, 0);
    simulate(&cfg, &mut exact).unwrap();
    simulate(&cfg, &mut streaming).unwrap();
    assert_eq!(exact.recorded(), 15_000);
    assert_eq!(exact.response().len(), 15_000);
    assert!(exact.response().is_exact());
    assert!(!streaming.response().is_exact());
    assert_eq!(streaming.recorded(), 15_000);
    assert_eq!(exact.mean_response_ns(), streaming.mean_response_ns());
    // 3 significant digits: quantiles agree within 0.1 %.
    let p = stats::Quantile::new(0.99).unwrap();
    let (a, b) = (
        exact.response().quantile(p).unwrap(),
        streaming.response().quantile(p).unwrap(),
    );
    assert!((a / b - 1.0).abs() < 1e-3, "{a} vs {b}");
    assert!(exact.class_response(0).is_some());
    assert!(exact.class_response(1).is_none());
    // Deterministic service: the minimum response is the service time itself.
    assert_eq!(
        exact.response().values().unwrap().iter().min(),
        Some(&50_000)
    );
}

#[test]
fn class_labels_follow_the_probabilities() {
    // 100 000 draws from (0.2, 0.8, 0): the class-0 share is within 4 binomial standard
    // errors (0.5 %) of 0.2, and the zero-probability class never appears.
    let cfg = SimConfig {
        class_probs: vec![0.2, 0.8, 0.0],
        requests: 100_000,
        ..base()
    };
    let mut counts = [0u64; 3];
    simulate(&cfg, &mut |c: &Completion| {
        counts[usize::from(c.class)] += 1
    })
    .unwrap();
    assert_eq!(counts[2], 0);
    let share = counts[0] as f64 / 100_000.0;
    assert!((share - 0.2).abs() < 0.005, "class-0 share {share}");
}
