//! The LNS bursty model's formulas on hand-computed values, and its input checks.

use model::bursty::formulas::*;
use model::bursty::{predict, BurstyParams, BurstyWorkload, Regime, Stack};
use model::ModelError;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn bottleneck_follows_definition_2_1() {
    // R/k = 60/29 ≈ 2.07 < T = 5: TCP/IP.
    assert_eq!(bottleneck(5.0, 60.0, 29), (Bottleneck::Tcp, 5.0, 1));
    // R/k = 47/4 = 11.75 > 5: workers.
    assert_eq!(bottleneck(5.0, 47.0, 4), (Bottleneck::Redis, 47.0, 4));
    // A tie goes to the worker stage ("otherwise, B = R").
    assert_eq!(bottleneck(4.0, 8.0, 2), (Bottleneck::Redis, 8.0, 2));
}

#[test]
fn closed_forms_by_hand() {
    // Formula 9: 0.99 · 1000 · (8000 − 1000) = 6 930 000.
    assert!(close(fcfs_wait(99.0, 1000, 8000.0, 1, 1000.0), 6_930_000.0));
    // … with 4 workers: 0.99 · 1000 · (47000/4 − 1000) = 10 642 500.
    assert!(close(
        fcfs_wait(99.0, 1000, 47_000.0, 4, 1000.0),
        10_642_500.0
    ));
    // Spacing beyond B/c: no queue (clamped).
    assert_eq!(fcfs_wait(99.0, 1000, 800.0, 1, 1000.0), 0.0);
    // Formula 4: 0.5·99·1000·8000/100 − 0.99·1000·1000 = 3 960 000 − 990 000.
    assert!(close(
        priority_backlog_wait(99.0, 1000, 0.5, 8000.0, 1, 1000.0),
        2_970_000.0
    ));
    // Formula 7: ρ = 4000/(1000/0.05) = 0.2; ln(100)/(2·0.8) · 4000.
    let w7 = 100f64.ln() / 1.6 * 4000.0;
    assert!(close(priority_utilisation(0.05, 1000.0, 4000.0, 1), 0.2));
    assert!(close(
        priority_steady_wait(99.0, 0.05, 1000.0, 4000.0, 1),
        w7
    ));
    // Formula 6 with η = 2(1 − ρ)/(c_a² + c_s²) is the same thing.
    assert!(close(eta(0.2, 1.0, 0.0), 1.6));
    assert!(close(ecd1_wait(99.0, eta(0.2, 1.0, 0.0), 4000.0), w7));
    // With c_B = 4: c_a² = 1/4, ρ = (47000/4)/20000 = 0.5875.
    let w = priority_steady_wait(99.0, 0.05, 1000.0, 47_000.0, 4);
    assert!(close(w, 100f64.ln() / (2.0 * 0.4125) * 47_000.0 / 4.0));
    assert!(priority_steady_wait(99.0, 0.5, 1000.0, 4000.0, 1).is_infinite());
    // Formulas 1 and 2.
    assert_eq!(decomposition(10.0, 5.0), 15.0);
    assert_eq!(decomposition_bound(10.0, 5.0, 4, 3.0), (15.0, 39.0));
    // Formulas 11, 12, 16.
    assert_eq!(worker_service(45_000.0, 500.0, 4), 47_000.0);
    assert_eq!(tcp_service(6000.0, 4.0, 512.0), 8048.0);
    assert_eq!(transition_workers(45_000.0, 500.0, 4250.0), Some(12));
    assert_eq!(transition_workers(45_000.0, 500.0, 4000.0), Some(13));
    assert_eq!(transition_workers(45_000.0, 500.0, 500.0), None);
    // Formula 15.
    assert!(close(relative_error_pct(100.0, 80.0), 20.0));
    assert!(close(relative_error_pct(100.0, 124.4), 24.4));
    // Formulas 13–14: two equally likely bins → 1 bit; one bin → 0.
    assert!(close(
        latency_entropy_bits(&[1.0, 1.0, 3.0, 3.0], 2.0).unwrap(),
        1.0
    ));
    assert_eq!(latency_entropy_bits(&[1.0, 1.5], 2.0).unwrap(), 0.0);
    assert!(latency_entropy_bits(&[1.0], 0.0).is_err());
}

fn lns() -> BurstyParams {
    BurstyParams {
        t0_ns: 4000.0,
        mt_ns_per_byte: 0.0,
        r0_ns: 45_000.0,
        mr_ns: 500.0,
        m_ns: 60_000.0,
    }
}

fn workload(alpha: f64, workers: u32) -> BurstyWorkload {
    BurstyWorkload {
        n: 1000,
        alpha,
        payload_bytes: 512.0,
        workers,
        spacing_ns: 1000.0,
        percentile: 99.0,
    }
}

#[test]
fn predict_picks_the_right_formula() {
    // k = 29: R = 59.5 µs, R/k ≈ 2.05 µs < T = 4 µs → TCP/IP; U/α = 20 µs > 4 µs → case 2.
    let p = predict(&lns(), &workload(0.05, 29), Stack::Priority).unwrap();
    assert_eq!(p.bottleneck, Bottleneck::Tcp);
    assert_eq!(p.regime, Regime::PrioritySteady);
    let w7 = 100f64.ln() / 1.6 * 4000.0;
    assert!(close(p.wait_ns, w7));
    assert!(close(p.latency_ns, w7 + 60_000.0));
    assert!(close(p.upper_bound_ns, w7 + 60_000.0 + 2.0 * 59_500.0));
    assert!(close(p.rho.unwrap(), 0.2));
    // α = 0.5: U/α = 2 µs ≤ 4 µs → case 1 (formula 5).
    let p = predict(&lns(), &workload(0.5, 29), Stack::Priority).unwrap();
    assert_eq!(p.regime, Regime::PriorityBacklog);
    assert!(close(
        p.latency_ns,
        0.5 * 990.0 * 4000.0 - 990.0 * 1000.0 + 60_000.0
    ));
    // FCFS (formula 10) ignores α.
    let p = predict(&lns(), &workload(0.05, 29), Stack::Fcfs).unwrap();
    assert_eq!(p.regime, Regime::Fcfs);
    assert!(close(p.latency_ns, 990.0 * 3000.0 + 60_000.0));
    // k = 4: the workers are the bottleneck, c_B = 4.
    let p = predict(&lns(), &workload(1.0, 4), Stack::Fcfs).unwrap();
    assert_eq!(
        (p.bottleneck, p.b_ns, p.c_b),
        (Bottleneck::Redis, 47_000.0, 4)
    );
    assert_eq!(lns().best_workers(512.0), Some(13));
}

#[test]
fn bad_input_is_a_one_line_error() {
    let bad = |w: BurstyWorkload| {
        let e = predict(&lns(), &w, Stack::Priority).unwrap_err();
        let msg = e.to_string();
        assert!(!msg.contains('\n') && !msg.is_empty(), "{msg}");
        e
    };
    assert_eq!(bad(workload(0.0, 4)), ModelError::Alpha(0.0));
    assert_eq!(bad(workload(1.5, 4)), ModelError::Alpha(1.5));
    assert!(matches!(bad(workload(f64::NAN, 4)), ModelError::Alpha(_)));
    assert_eq!(bad(workload(0.5, 0)), ModelError::NoWorkers);
    for u in [0.0, -1.0, f64::NAN] {
        let e = bad(BurstyWorkload {
            spacing_ns: u,
            ..workload(0.5, 4)
        });
        assert!(e.to_string().contains("spacing U"), "{e}");
    }
    bad(BurstyWorkload {
        n: 0,
        ..workload(0.5, 4)
    });
    bad(BurstyWorkload {
        percentile: 100.0,
        ..workload(0.5, 4)
    });
    let neg = BurstyParams {
        r0_ns: -1.0,
        ..lns()
    };
    assert!(predict(&neg, &workload(0.5, 4), Stack::Fcfs).is_err());
    // Beyond the model's 1e6 s service-time bound: refused, not computed into saturation.
    let long = BurstyParams {
        t0_ns: 1e99,
        ..lns()
    };
    let e = predict(&long, &workload(0.5, 4), Stack::Fcfs).unwrap_err();
    assert!(e.to_string().contains("at most 1e6 s"), "{e}");
    // Parameters within bound whose sum R = R0 + k·mR is not.
    let sum = BurstyParams {
        r0_ns: 1e15,
        mr_ns: 1.0,
        ..lns()
    };
    let e = predict(&sum, &workload(0.5, 4), Stack::Fcfs).unwrap_err();
    assert!(e.to_string().contains("at most 1e6 s"), "{e}");
    assert_eq!("lns".parse::<Stack>().unwrap(), Stack::Priority);
    assert_eq!("fcfs".parse::<Stack>().unwrap(), Stack::Fcfs);
    assert!("lifo".parse::<Stack>().is_err());
}
