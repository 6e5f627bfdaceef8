//! A run split over processes (`LoadConfig::share`): the shares together are the run of one
//! process with all their lanes.

use std::time::Duration;

use super::*;

fn cfg(arrival: model::ArrivalSpec, rate: f64, stop: StopAt, threads: usize) -> LoadConfig {
    let mut c = LoadConfig::new("nullrpc://127.0.0.1:9".parse().unwrap(), rate);
    c.arrival = arrival;
    c.stop = stop;
    c.threads = threads;
    c.connections = threads;
    c
}

fn drain(s: &mut ThreadSchedule) -> Vec<Item> {
    std::iter::from_fn(|| s.next_item()).collect()
}

fn merged(c: &LoadConfig) -> Vec<u64> {
    let mut v: Vec<u64> = plan(c)
        .unwrap()
        .threads
        .iter_mut()
        .flat_map(|t| drain(t).into_iter().map(|i| i.intended_ns))
        .collect();
    v.sort_unstable();
    v
}

/// Every share's items, merged: the run as the shares together send it.
fn merged_shares(c: &LoadConfig, shares: u32) -> Vec<(u64, u8)> {
    let mut v = Vec::new();
    for i in 0..shares {
        let mut s = c.clone();
        s.share = (i, shares);
        for t in &mut plan(&s).unwrap().threads {
            v.extend(drain(t).into_iter().map(|it| (it.intended_ns, it.class)));
        }
    }
    v.sort_unstable();
    v
}

#[test]
fn shares_together_are_the_run_of_one_process_with_their_lanes() {
    // 3 shares × 2 threads draw exactly what one process with 6 threads draws: the same
    // lanes (streams, class labels, quotas), so the split is exact for every process.
    for arrival in [
        model::ArrivalSpec::Poisson,
        model::ArrivalSpec::Deterministic,
        model::ArrivalSpec::Lognormal { sigma: 1.0 },
    ] {
        for stop in [
            StopAt::Requests(3_001),
            StopAt::Duration(Duration::from_millis(300)),
        ] {
            let mut one = cfg(arrival.clone(), 10_000.0, stop, 6);
            one.warmup = Duration::from_millis(50);
            one.class_probs = vec![0.3, 0.7];
            let mut split = one.clone();
            split.threads = 2;
            split.connections = 2;
            let whole: Vec<(u64, u8)> = {
                let mut v: Vec<_> = plan(&one)
                    .unwrap()
                    .threads
                    .iter_mut()
                    .flat_map(|t| {
                        drain(t)
                            .into_iter()
                            .map(|it| (it.intended_ns, it.class))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                v.sort_unstable();
                v
            };
            assert_eq!(merged_shares(&split, 3), whole, "{arrival:?} {stop:?}");
            if let StopAt::Requests(n) = stop {
                let measured = whole.iter().filter(|x| x.0 >= 50_000_000).count();
                assert_eq!(measured as u64, n, "{arrival:?}");
            }
        }
    }
}

#[test]
fn a_share_draws_its_part_of_the_rate() {
    let mut c = cfg(
        model::ArrivalSpec::Poisson,
        4_000.0,
        StopAt::Duration(Duration::from_secs(10)),
        2,
    );
    c.share = (1, 2);
    let p = plan(&c).unwrap();
    assert_eq!(p.expected, 20_000);
    let n = merged(&c).len() as f64;
    // Poisson(20000): sd ≈ 141; allow 5 sd.
    assert!((n - 20_000.0).abs() < 5.0 * 141.5, "{n}");
    let mut bad = c.clone();
    bad.share = (2, 2);
    assert!(bad.validate().is_err());
    bad.share = (0, 0);
    assert!(bad.validate().is_err());
}

#[test]
fn trace_connections_are_numbered_share_by_share() {
    // 2 shares × 4 connections × 2 threads: trace connection c is the run's connection
    // c mod 8, held by share (c mod 8) / 4 as its local connection (c mod 8) mod 4.
    let trace = model::Trace {
        times_ns: (0..80).map(|i| i * 1_000).collect(),
        conn: Some((0..80).map(|i| (i % 10) as u32).collect()),
    };
    let mut c = cfg(
        model::ArrivalSpec::Trace(trace.clone()),
        0.0,
        StopAt::Requests(1_000),
        2,
    );
    c.connections = 4;
    let mut n = 0;
    for share in 0..2u32 {
        c.share = (share, 2);
        for (t, s) in plan(&c).unwrap().threads.iter_mut().enumerate() {
            for it in drain(s) {
                let k = (it.intended_ns / 1_000) as usize;
                let global = trace.conn.as_ref().unwrap()[k] as usize % 8;
                assert_eq!(global / 4, share as usize);
                let local = it.forced_conn.unwrap() as usize;
                assert_eq!(local, global % 4);
                assert_eq!(local % 2, t);
                n += 1;
            }
        }
    }
    assert_eq!(n, 80);
}
