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
        window_ns: 0,
        extra_quantiles: Vec::new(),
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

/// One request every 100 µs: sent 1 µs after its intended time, through the network and a
/// 50 µs server to the client's kernel, woken 5 µs later. With `stall`, a 1 ms stall of the
/// generator sends the ten requests due in it together at its end.
fn two_view_records(stall: bool) -> Vec<RequestRecord> {
    (0..20_000u64)
        .map(|i| {
            let intended = i * 100_000;
            let mut r = RequestRecord::scheduled(intended, 0);
            let stalled = stall && (1_000_000_000..1_001_000_000).contains(&intended);
            r.seen_ns = if stalled {
                1_001_000_000
            } else {
                intended + 1_000
            };
            r.sent_ns = r.seen_ns;
            r.kernel_rx_ns = r.sent_ns + 50_000;
            r.received_ns = r.kernel_rx_ns + 5_000;
            r.outcome = Outcome::Ok;
            r
        })
        .collect()
}

fn spec50() -> IdealSpec {
    IdealSpec {
        service_ns: 50_000.0,
        workers: 1,
        queues: QueueStructure::Single,
    }
}

/// A scripted 1 ms generator stall: the user's view counts it (the stalled requests'
/// latency grows by up to 1 ms), the server's view does not (each request still spent 50 µs
/// between its send and the client's kernel), and the generator's lateness shows it.
#[test]
fn a_generator_stall_grows_the_users_view_not_the_servers() {
    let calm = analyse(&two_view_records(false), &cfg(Some(spec50()), 0)).unwrap();
    let stalled = analyse(&two_view_records(true), &cfg(Some(spec50()), 0)).unwrap();
    let sv = |a: &analysis::RunAnalysis| a.server_view.clone().unwrap();
    assert_eq!(
        sv(&calm).measured.quantiles,
        sv(&stalled).measured.quantiles
    );
    assert_eq!(sv(&stalled).measured.max_ns, 50_000.0);
    assert_eq!(sv(&stalled).kernel_stamped_fraction, 1.0);
    assert_eq!(calm.measured.max_ns, 56_000.0);
    // The request due at the stall's start waited the whole millisecond.
    assert_eq!(stalled.measured.max_ns, 1_000_000.0 + 55_000.0);
    assert!(stalled.measured.get("p99.99").unwrap().value > 500_000.0);
    assert_eq!(stalled.lateness.max_ns, 1_000_000.0);
    let d = stalled.decomposition.unwrap();
    assert_eq!(d.lateness.max_ns, 1_000_000.0);
    assert_eq!(d.network_server.max_ns, 50_000.0);
    assert_eq!(d.client_wakeup.unwrap().max_ns, 5_000.0);
    assert!(stalled.held_in_client.unwrap().requests == 0);
    // At the top percentile the excess is the client's: its stall, not the server (whose
    // scripted 50 µs beat even its ideal for the bunched sends, so its share is negative).
    let top = stalled
        .excess_split
        .iter()
        .find(|e| e.key == "p99.99")
        .unwrap();
    assert!(top.total_us > 500.0 && top.server_us <= 0.0, "{top:?}");
    assert!((top.client_us - (top.total_us - top.server_us)).abs() < 1e-6);
    // In the calm run the client adds its constant 6 µs (1 µs send delay + 5 µs wake-up).
    for e in &calm.excess_split {
        assert!((e.client_us - 6.0).abs() < 1e-9, "{e:?}");
    }
}

/// The server view's ideal is fed the actual send times: equal to the intended-arrival ideal
/// when every request is sent a constant 1 µs late, different when a stall bunches them
/// (ten requests at one instant queue behind each other at the ideal server too).
#[test]
fn the_server_views_ideal_differs_exactly_when_sends_are_bunched() {
    let calm = analyse(&two_view_records(false), &cfg(Some(spec50()), 0)).unwrap();
    let sv_ideal = calm.server_view.as_ref().unwrap().ideal.clone().unwrap();
    assert_eq!(sv_ideal.quantiles, calm.ideal.clone().unwrap().quantiles);
    let stalled = analyse(&two_view_records(true), &cfg(Some(spec50()), 0)).unwrap();
    let user = stalled.ideal.clone().unwrap();
    let server = stalled.server_view.unwrap().ideal.unwrap();
    assert_eq!(user.max_ns, 50_000.0, "the schedule itself never queues");
    // Ten arrivals at once: the tenth waits for nine services (500 µs response), and the
    // request sent 1 µs later waits for the tenth: 499 + 50 µs.
    assert_eq!(server.max_ns, 549_000.0);
    assert!(server.get("p99.99").unwrap().value > user.get("p99.99").unwrap().value);
}

/// Requests held in the client (seen on time, sent when a slot freed) are `held_in_client`,
/// not lateness.
#[test]
fn held_requests_are_not_lateness() {
    let recs: Vec<_> = (0..1_000u64)
        .map(|i| {
            let mut r = rec(i * 100_000, 300_000, 0);
            r.seen_ns = r.intended_ns + 500;
            r.sent_ns = r.seen_ns + if i % 2 == 0 { 200_000 } else { 0 };
            r
        })
        .collect();
    let a = analyse(&recs, &cfg(None, 0)).unwrap();
    assert_eq!(a.lateness.max_ns, 500.0);
    assert!(!a.lateness_flagged);
    let h = a.held_in_client.unwrap();
    assert_eq!(h.requests, 500);
    assert_eq!(h.fraction, 0.5);
    assert_eq!(h.held.max_ns, 200_000.0);
}

/// A run longer than the exact limit: the distributions switch to histograms (3 significant
/// digits) and agree with the exact values; the second pass hands out exactly the slowest
/// 1 % for the attribution.
#[test]
fn long_runs_stream_with_bounded_recorders() {
    let n = 3 * analysis::EXACT_LIMIT;
    let recs: Vec<_> = (0..n)
        .map(|i| rec(i * 10_000, 10_000 + (i * 7919) % 100_000, 0))
        .collect();
    let mut slow = Vec::new();
    let a = analysis::analyse_records(
        &mut &recs[..],
        &cfg(None, 0),
        Some(&mut |t, l| slow.push((t, l))),
    )
    .unwrap();
    assert!(!a.measured.exact);
    // Latencies 10 µs + (i·7919 mod 100 µs): uniform on 10..110 µs in 1 ns steps.
    let p50 = a.measured.get("p50").unwrap().value;
    assert!((p50 - 60_000.0).abs() < 60.0, "{p50}");
    // The threshold is a histogram value (within 0.1 % of 109 µs, i.e. ±~60 ns of a 1 µs
    // wide top 1 %): the share handed out is 1 % within a few percent of itself.
    let k = slow.len() as f64 / n as f64;
    assert!((0.0095..0.0105).contains(&k), "{k}");
    assert!(slow.iter().all(|&(_, l)| l >= 108_800));
}

/// The self-check: an ideal whose service time is longer than the server's (a stale
/// calibration) is not a lower bound, and the run says so; a right one stays quiet.
#[test]
fn an_ideal_slower_than_the_server_is_called_out() {
    let recs: Vec<_> = (0..5_000u64)
        .map(|i| rec(i * 200_000, 30_000 + i % 7, 0))
        .collect();
    let stale = IdealSpec {
        service_ns: 50_000.0,
        workers: 1,
        queues: QueueStructure::Single,
    };
    let a = analyse(&recs, &cfg(Some(stale), 0)).unwrap();
    let note = a.ideal_check.unwrap();
    assert!(note.contains("not a lower bound"), "{note}");
    let right = IdealSpec {
        service_ns: 25_000.0,
        workers: 1,
        queues: QueueStructure::Single,
    };
    assert!(analyse(&recs, &cfg(Some(right), 0))
        .unwrap()
        .ideal_check
        .is_none());
}

/// The per-window figures: 2 s of requests every 100 µs give twenty 100 ms windows of 1 000
/// requests; the stall's window shows it in the user view only (the server view, by sent
/// time, stays at its scripted 50 µs), and the ideal for the schedule never queues.
#[test]
fn windows_show_the_stall_where_it_happened() {
    let a = analyse(&two_view_records(true), &cfg(Some(spec50()), 0)).unwrap();
    assert_eq!(a.windows.len(), 20);
    for (k, w) in a.windows.iter().enumerate() {
        assert!((w.start_s - k as f64 * 0.1).abs() < 1e-9, "{w:?}");
        assert_eq!(w.count, 1_000);
        assert_eq!(w.server_p50_us, Some(50.0));
        assert_eq!(w.server_p99_us, Some(50.0));
        assert_eq!(w.ideal_p99_us, Some(50.0));
        if k == 10 {
            assert_eq!(w.max_us, 1_055.0);
            // 10 of 1 000 late by 100..1000 µs: the p99 interpolates into them (type 7)
            assert!(w.lateness_p99_us > 1.5, "{w:?}");
        } else {
            assert_eq!(w.max_us, 56.0);
            assert_eq!(w.lateness_p99_us, 1.0);
        }
    }
    // Ten bunched sends queue at the server view's ideal in the stall's window only (by sent
    // time: they went out at 1.001 s); 10 of 1 000 queued lift its p99 above the service time.
    for (k, w) in a.windows.iter().enumerate() {
        let p = w.server_ideal_p99_us.unwrap();
        assert!(if k == 10 { p > 50.0 } else { p == 50.0 }, "{k}: {p}");
    }
    // 10 stalled requests of 1 000 barely move the window's p99 (57 µs against 55 µs): the
    // stall is in the max, not the tail that stationarity judges.
    let s = a.stationarity.unwrap();
    assert!(s.steady, "{}", s.summary);
    assert!(a.windows[10].p99_us < 60.0);
}

#[test]
fn a_runs_latency_entropy_is_that_of_its_measured_latencies() {
    // Exponential latencies (mean 50 µs) after a warm-up: the run's entropy at each
    // distinction is formula 14 on exactly the measured latencies.
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let exp = Exp::new(1.0 / 50_000.0).unwrap();
    let lat: Vec<u64> = (0..20_000)
        .map(|_| exp.sample(&mut rng) as u64 + 1)
        .collect();
    let recs: Vec<_> = lat
        .iter()
        .enumerate()
        .map(|(i, &l)| rec(i as u64 * 200_000, l, 0))
        .collect();
    let a = analyse(&recs, &cfg(None, 100_000_000)).unwrap();
    let measured: Vec<f64> = lat[500..].iter().map(|&l| l as f64).collect();
    assert_eq!(a.entropy.len(), analysis::ENTROPY_BINS_NS.len());
    for (e, u) in a.entropy.iter().zip(analysis::ENTROPY_BINS_NS) {
        let want = stats::latency_entropy(&measured, u).unwrap();
        assert_eq!(e.bin_ns, u);
        assert!(e.exact);
        assert!((e.bits - want).abs() < 1e-9, "u={u}: {} vs {want}", e.bits);
    }
    // A smooth spread gains about log2(10) bits per decade of finer distinction.
    let gain = a.entropy[0].bits - a.entropy[1].bits;
    assert!((gain - 10f64.log2()).abs() < 0.2, "{gain}");
}
