//! Bursty arrivals: the gap pattern, the mean rate, parsing and validation.

use model::{ArrivalGen, ArrivalSpec};

#[test]
fn parses_and_validates() {
    assert_eq!(
        "bursty:10,1ms,5us".parse::<ArrivalSpec>().unwrap(),
        ArrivalSpec::Bursty {
            n: 10,
            period_ns: 1e6,
            spacing_ns: 5e3
        }
    );
    for bad in [
        "bursty",
        "bursty:10,1ms",
        "bursty:0,1ms,5us",
        "bursty:-3,1ms,5us",
        "bursty:10,1ms,0us",
        "bursty:10,1ms,-5us",
        "bursty:10,40us,5us", // N·U = 50 µs ≥ period
        "bursty:10,1ms,5us,1",
    ] {
        let e = bad.parse::<ArrivalSpec>().unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn gaps_repeat_the_burst_pattern() {
    let spec = ArrivalSpec::Bursty {
        n: 4,
        period_ns: 100_000.0,
        spacing_ns: 5_000.0,
    };
    let mut g = ArrivalGen::new(&spec, None, 0).unwrap();
    let gaps: Vec<f64> = (0..9).map(|_| g.next_gap_ns().unwrap()).collect();
    // Bursts at 0 and 100 µs: 0, 5, 10, 15 µs then 100, 105, … µs.
    assert_eq!(gaps, vec![0.0, 5e3, 5e3, 5e3, 85e3, 5e3, 5e3, 5e3, 85e3]);
    assert_eq!(g.remaining(), None);

    // One request per burst degenerates to a deterministic process of period gaps.
    let one = ArrivalSpec::Bursty {
        n: 1,
        period_ns: 1e3,
        spacing_ns: 1.0,
    };
    let mut g = ArrivalGen::new(&one, None, 0).unwrap();
    let gaps: Vec<f64> = (0..3).map(|_| g.next_gap_ns().unwrap()).collect();
    assert_eq!(gaps, vec![0.0, 1e3, 1e3]);
}

#[test]
fn mean_rate_is_n_over_period_and_a_rate_rescales_the_period() {
    let spec: ArrivalSpec = "bursty:10,1ms,5us".parse().unwrap();
    // Over whole bursts the time is exactly bursts · period (the first gap is 0, so count
    // the gap into the next burst).
    let mut g = ArrivalGen::new(&spec, None, 0).unwrap();
    let total: f64 = (0..1001).map(|_| g.next_gap_ns().unwrap()).sum();
    assert!((total - 100.0 * 1e6).abs() < 1e-3, "{total}");
    // 20 000 req/s → period = 10/20000 s = 500 µs; spacing stays 5 µs.
    let mut g = ArrivalGen::new(&spec, Some(20_000.0), 0).unwrap();
    let gaps: Vec<f64> = (0..12).map(|_| g.next_gap_ns().unwrap()).collect();
    assert_eq!(gaps[1], 5e3);
    assert_eq!(gaps[10], 500e3 - 9.0 * 5e3);
    // A rate whose period cannot hold the burst is refused: 10 · 5 µs ≥ 10/1e6 s.
    assert!(ArrivalGen::new(&spec, Some(1e6), 0).is_err());
    assert!(ArrivalGen::new(&spec, Some(-1.0), 0).is_err());
}
