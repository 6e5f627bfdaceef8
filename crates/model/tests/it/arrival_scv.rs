//! ArrivalSpec::scv, the ca² the closed-form approximations use, against hand values and
//! against the generator's own gaps.

use model::{parse_trace, ArrivalGen, ArrivalSpec, TimeUnit};

#[test]
fn closed_form_scvs() {
    assert_eq!(ArrivalSpec::Poisson.scv(), Some(1.0));
    assert_eq!(ArrivalSpec::Deterministic.scv(), Some(0.0));
    let ln = ArrivalSpec::Lognormal { sigma: 1.0 }.scv().unwrap();
    assert!((ln - (1f64.exp() - 1.0)).abs() < 1e-12);
    assert_eq!(ArrivalSpec::Pareto { shape: 3.0 }.scv(), Some(1.0 / 3.0));
    assert_eq!(ArrivalSpec::Pareto { shape: 1.5 }.scv(), None);
}

#[test]
fn trace_scv_is_the_sample_value() {
    // Gaps 10, 30: mean 20, sample variance 200, SCV 0.5.
    let t = parse_trace("0\n10\n40\n", TimeUnit::Ns).unwrap();
    assert_eq!(ArrivalSpec::Trace(t).scv(), Some(0.5));
    let short = parse_trace("0\n10\n", TimeUnit::Ns).unwrap();
    assert_eq!(ArrivalSpec::Trace(short).scv(), None);
}

#[test]
fn lognormal_scv_matches_generated_gaps() {
    // 200k gaps of lognormal σ = 0.5: sample SCV within 3 % of e^{σ²} − 1 = 0.2840.
    let spec = ArrivalSpec::Lognormal { sigma: 0.5 };
    let mut g = ArrivalGen::new(&spec, Some(1000.0), 7).unwrap();
    let gaps: Vec<f64> = (0..200_000).map(|_| g.next_gap_ns().unwrap()).collect();
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    let var = gaps.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let want = spec.scv().unwrap();
    assert!(
        (var / (mean * mean) / want - 1.0).abs() < 0.03,
        "{} vs {want}",
        var / (mean * mean)
    );
}
