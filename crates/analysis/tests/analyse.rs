//! The analysis on synthetic records whose answer is known by construction.

use analysis::{analyse, AnalysisConfig, IdealSpec, QueueStructure};
use load::{Outcome, RequestRecord};
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

fn rec(intended: u64, latency: u64, conn: u32) -> RequestRecord {
    let mut r = RequestRecord::scheduled(intended, 0);
    r.sent_ns = intended + 100;
    r.received_ns = intended + latency;
    r.outcome = Outcome::Ok;
    r.conn = conn;
    r
}

fn cfg(ideal: Option<IdealSpec>, warmup_ns: u64) -> AnalysisConfig {
    AnalysisConfig {
        ideal,
        warmup_ns,
        arrival: model::ArrivalSpec::Poisson,
        confidence: 0.95,
        lateness_threshold_ns: 50_000.0,
        seed: 1,
        same_host_start_mono_ns: None,
    }
}

#[test]
fn spaced_arrivals_have_an_ideal_equal_to_the_service_time() {
    // One request every 100 µs, each measured at 80 µs, service 50 µs: nobody queues in the
    // ideal, so ideal = 50 µs at every percentile and the excess is exactly 80/50.
    let recs: Vec<_> = (0..10_000u64)
        .map(|i| rec(i * 100_000, 80_000, (i % 4) as u32))
        .collect();
    let spec = IdealSpec {
        service_ns: 50_000.0,
        workers: 1,
        queues: QueueStructure::Single,
    };
    let a = analyse(&recs, &cfg(Some(spec), 100_000_000)).unwrap();
    // Warm-up: the first 100 ms = 1000 requests are not counted.
    assert_eq!(a.requests, 9_000);
    assert_eq!(a.outcomes.ok, 9_000);
    let ideal = a.ideal.as_ref().unwrap();
    for q in &ideal.quantiles {
        assert_eq!(q.est.value, 50_000.0, "{}", q.key);
    }
    for e in &a.excess {
        assert!((e.value - 1.6).abs() < 1e-9, "{} {}", e.key, e.value);
    }
    // Lateness is the constant 100 ns of `rec`; the achieved rate is 10 000 req/s.
    assert_eq!(a.lateness.get("p99").unwrap().value, 100.0);
    assert!(!a.lateness_flagged);
    assert!((a.achieved_rate_rps - 10_000.0).abs() < 1.0);
}

#[test]
fn per_worker_queues_follow_the_connections() {
    // Two requests at the same instant on connections 0 and 1: with one shared queue and two
    // workers both start at once; with per-worker queues and connections 0,2 on worker 0 they
    // queue. Pairs every 1 ms so that pairs never interact.
    let mut recs = Vec::new();
    for i in 0..2_000u64 {
        recs.push(rec(i * 1_000_000, 60_000, 0));
        recs.push(rec(i * 1_000_000, 60_000, 2));
    }
    let spec = |q| IdealSpec {
        service_ns: 50_000.0,
        workers: 2,
        queues: q,
    };
    let single = analyse(&recs, &cfg(Some(spec(QueueStructure::Single)), 0)).unwrap();
    let split = analyse(&recs, &cfg(Some(spec(QueueStructure::PerWorker)), 0)).unwrap();
    assert_eq!(
        single.ideal.as_ref().unwrap().get("p99").unwrap().value,
        50_000.0
    );
    // Connections 0 and 2 both map to worker 0: one of each pair waits a full service time.
    assert_eq!(
        split.ideal.as_ref().unwrap().get("p99").unwrap().value,
        100_000.0
    );
}

#[test]
fn outcomes_are_counted_and_only_ok_requests_have_latency() {
    let mut recs: Vec<_> = (0..1_000u64).map(|i| rec(i * 10_000, 20_000, 0)).collect();
    recs[10].outcome = Outcome::Timeout;
    recs[11].outcome = Outcome::Error;
    recs[12].outcome = Outcome::Dropped;
    recs[12].sent_ns = 0;
    let a = analyse(&recs, &cfg(None, 0)).unwrap();
    assert_eq!(
        (
            a.outcomes.ok,
            a.outcomes.error,
            a.outcomes.timeout,
            a.outcomes.dropped
        ),
        (997, 1, 1, 1)
    );
    assert_eq!(a.measured.count, 997);
    assert!(a.ideal.is_none() && a.excess.is_empty());
}

#[test]
fn an_overloaded_schedule_has_no_ideal_and_says_why() {
    let recs: Vec<_> = (0..1_000u64).map(|i| rec(i * 10_000, 20_000, 0)).collect();
    let spec = IdealSpec {
        service_ns: 20_000.0,
        workers: 1,
        queues: QueueStructure::Single,
    };
    let a = analyse(&recs, &cfg(Some(spec), 0)).unwrap();
    assert!(a.ideal.is_none());
    assert!(a.ideal_note.as_ref().unwrap().contains(">= 1"));
}

#[test]
fn the_arrival_check_separates_the_schedule_from_the_generator() {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
    let exp = Exp::new(1.0 / 100_000.0).unwrap();
    let mut t = 0.0;
    let mut recs = Vec::new();
    let mut last_sent = 0u64;
    for _ in 0..50_000 {
        t += exp.sample(&mut rng);
        let intended = t as u64;
        let mut r = rec(intended, 30_000, 0);
        // A generator that cannot send closer than 20 µs apart.
        r.sent_ns = intended.max(last_sent + 20_000);
        last_sent = r.sent_ns;
        r.received_ns = r.sent_ns + 30_000;
        recs.push(r);
    }
    let a = analyse(&recs, &cfg(None, 0)).unwrap();
    let c = a.arrival_check.unwrap();
    assert!(
        c.schedule_p_value > 0.001,
        "the schedule is Poisson: p = {}",
        c.schedule_p_value
    );
    assert!(!c.exponential, "achieved gaps >= 20 µs are not exponential");
    assert_eq!(c.min_sent_gap_ns, 20_000);
    // P(Exp(mean 100 µs) < 20 µs) = 1 − e^−0.2 = 0.181.
    assert!(
        (c.scheduled_below_min_fraction - 0.181).abs() < 0.01,
        "{}",
        c.scheduled_below_min_fraction
    );
}

#[test]
fn stage_breakdown_points_at_the_stage_that_grew() {
    let mut recs = Vec::new();
    for i in 0..10_000u64 {
        let mut r = rec(i * 100_000, 0, 0);
        // Every 50th request waits 500 µs between kernel receive and wake-up.
        let wake = if i % 50 == 0 { 500_000 } else { 5_000 };
        let t1 = 1_000_000_000 + r.sent_ns + 2_000;
        let t2 = t1 + wake;
        let t3 = t2 + 1_000;
        let t4 = t3 + 50_000;
        let t5 = t4 + 100;
        r.stamps = [t1, t2, t3, t4, t5, 0];
        r.received_ns = t5 + 10_000 - 1_000_000_000;
        recs.push(r);
    }
    let mut c = cfg(None, 0);
    c.same_host_start_mono_ns = Some(1_000_000_000);
    let a = analyse(&recs, &c).unwrap();
    let s = a.stages.unwrap();
    let wake = s.rows.iter().find(|r| r.stage.contains("T1→T2")).unwrap();
    assert_eq!(wake.slow_p50_us, 500.0);
    assert_eq!(wake.median_p50_us, 5.0);
    let work = s.rows.iter().find(|r| r.stage.contains("T3→T4")).unwrap();
    assert_eq!(work.slow_p50_us, 50.0);
    let net = s.rows.iter().find(|r| r.stage.contains("sent→T1")).unwrap();
    assert_eq!(net.median_p50_us, 2.0);
}
