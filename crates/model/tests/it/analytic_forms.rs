//! `closed_forms`: which forms apply, in what order, and how bad input is refused.

use model::analytic::{
    closed_forms, md1, AnalyticError, ArrivalKind, ClosedForm, Query, ServiceKind,
};

const D: f64 = 50e-6;

fn query(rho: f64, workers: u32, arrival: ArrivalKind, service: ServiceKind) -> Query {
    Query {
        lambda: rho * f64::from(workers) / D,
        mean_service_s: D,
        workers,
        arrival,
        service,
        class_probs: Vec::new(),
        preemptive: false,
    }
}

fn models(forms: &[ClosedForm]) -> Vec<(&str, bool)> {
    forms.iter().map(|f| (f.model.as_str(), f.exact)).collect()
}

fn exact_first(forms: &[ClosedForm]) {
    let first_approx = forms.iter().position(|f| !f.exact).unwrap_or(forms.len());
    assert!(forms[first_approx..].iter().all(|f| !f.exact));
}

#[test]
fn md1_lists_exact_then_kingman_then_allen_cunneen() {
    let forms = closed_forms(&query(
        0.7,
        1,
        ArrivalKind::Poisson,
        ServiceKind::Deterministic,
    ))
    .unwrap();
    assert_eq!(
        models(&forms),
        vec![
            ("M/D/1", true),
            ("Kingman G/G/1", false),
            ("Allen-Cunneen G/G/1", false)
        ]
    );
    let exact = &forms[0];
    let keys: Vec<&str> = exact
        .response_quantiles
        .iter()
        .map(|(k, _, _)| k.as_str())
        .collect();
    assert_eq!(keys, ["p50", "p90", "p99", "p99.9", "p99.99"]);
    let direct = md1::response_quantile(0.7 / D, D, 0.99).unwrap();
    assert_eq!(exact.response_quantiles[2].2, direct);
    // PK mean, also what Kingman gives for Poisson arrivals.
    let pk = 0.7 * D / 0.6;
    assert!((exact.mean_wait_s.unwrap() - pk).abs() < 1e-12 * pk);
    assert!((forms[1].mean_wait_s.unwrap() - pk).abs() < 1e-12 * pk);
    // Quantiles increase with the level.
    for f in &forms {
        for w in f.wait_quantiles.windows(2) {
            assert!(w[0].2 <= w[1].2, "{}: {:?}", f.model, f.wait_quantiles);
        }
    }
    // The heavy-traffic tail is an approximation: it overstates M/D/1's p99.9 wait.
    assert!(forms[1].wait_quantiles[3].2 > exact.wait_quantiles[3].2);
}

#[test]
fn each_model_gets_its_forms() {
    let cases = [
        (ArrivalKind::Poisson, ServiceKind::Deterministic, 4, "M/D/4"),
        (ArrivalKind::Poisson, ServiceKind::Exponential, 1, "M/M/1"),
        (ArrivalKind::Poisson, ServiceKind::Exponential, 3, "M/M/3"),
        (
            ArrivalKind::Poisson,
            ServiceKind::General { cs2: 2.0 },
            1,
            "M/G/1",
        ),
        (
            ArrivalKind::Deterministic,
            ServiceKind::Deterministic,
            2,
            "D/D/2",
        ),
    ];
    for (a, s, c, name) in cases {
        let forms = closed_forms(&query(0.8, c, a, s)).unwrap();
        assert_eq!(forms[0].model, name);
        assert!(forms[0].exact);
        exact_first(&forms);
        assert!(forms.iter().any(|f| f.model.starts_with("Allen-Cunneen")));
        for f in &forms {
            assert!(!f.source.is_empty());
            let m = f.mean_wait_s.unwrap();
            assert!(m.is_finite() && m >= 0.0);
            assert!((f.mean_response_s.unwrap() - m - D).abs() < 1e-15);
        }
    }
    let forms = closed_forms(&query(
        0.8,
        2,
        ArrivalKind::General { ca2: 0.5 },
        ServiceKind::General { cs2: 0.3 },
    ))
    .unwrap();
    assert_eq!(models(&forms), vec![("Allen-Cunneen G/G/2", false)]);
}

#[test]
fn priority_forms() {
    let mut q = query(0.8, 1, ArrivalKind::Poisson, ServiceKind::Deterministic);
    q.class_probs = vec![0.25, 0.75];
    let forms = closed_forms(&q).unwrap();
    assert!(forms[0].exact && forms[0].source.contains("Cobham"));
    let w = &forms[0].per_class_mean_wait_s;
    assert_eq!(w.len(), 2);
    assert!(w[0] < w[1]);
    // Non-preemptive, equal service: the class-average wait equals FIFO (conservation law).
    let fifo = 0.8 * D / (2.0 * 0.2);
    assert!((forms[0].mean_wait_s.unwrap() - fifo).abs() < 1e-12 * fifo);
    q.preemptive = true;
    let pre = closed_forms(&q).unwrap();
    assert!(pre[0].per_class_mean_wait_s[0] < w[0]);

    let mut q = query(0.8, 4, ArrivalKind::Poisson, ServiceKind::Exponential);
    q.class_probs = vec![0.5, 0.5];
    let forms = closed_forms(&q).unwrap();
    assert!(forms[0].exact && forms[0].model == "M/M/4 priority");

    let mut q = query(0.8, 4, ArrivalKind::Poisson, ServiceKind::Deterministic);
    q.class_probs = vec![0.5, 0.5];
    let forms = closed_forms(&q).unwrap();
    assert_eq!(forms.len(), 1);
    assert!(!forms[0].exact);
}

#[test]
fn rejects_bad_queries_naming_the_problem() {
    let ok = query(0.5, 2, ArrivalKind::Poisson, ServiceKind::Deterministic);
    let check = |q: Query, needle: &str| {
        let e = closed_forms(&q).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(needle), "'{msg}' should mention '{needle}'");
        e
    };
    let e = check(
        query(1.0, 2, ArrivalKind::Poisson, ServiceKind::Deterministic),
        "utilisation",
    );
    assert!(matches!(e, AnalyticError::Unstable { .. }));
    check(
        query(1.5, 1, ArrivalKind::Poisson, ServiceKind::Exponential),
        "below 1",
    );
    let e = check(
        Query {
            workers: 0,
            ..ok.clone()
        },
        "workers",
    );
    assert_eq!(e, AnalyticError::NoWorkers);
    check(
        Query {
            lambda: f64::NAN,
            ..ok.clone()
        },
        "arrival rate",
    );
    check(
        Query {
            mean_service_s: -1e-6,
            ..ok.clone()
        },
        "mean service time must be positive",
    );
    check(
        Query {
            arrival: ArrivalKind::General { ca2: -0.5 },
            ..ok.clone()
        },
        "ca2",
    );
    check(
        Query {
            service: ServiceKind::General { cs2: f64::INFINITY },
            ..ok.clone()
        },
        "cs2 must be a finite number",
    );
    check(
        Query {
            class_probs: vec![0.5, 0.6],
            ..ok.clone()
        },
        "sum to 1",
    );
    check(
        Query {
            class_probs: vec![1.5, -0.5],
            ..ok.clone()
        },
        "class probability",
    );
}

#[test]
fn heavy_exact_form_is_skipped_not_fatal() {
    // Too close to 1 for the exact M/D/1 solver: the approximations still answer.
    let forms = closed_forms(&query(
        0.999_999,
        1,
        ArrivalKind::Poisson,
        ServiceKind::Deterministic,
    ))
    .unwrap();
    assert!(forms.iter().all(|f| !f.exact));
    assert!(!forms.is_empty());
    let note = forms[0].note.as_deref().unwrap_or("");
    assert!(note.contains("exact M/D/1 form not computed"), "{note}");
}
