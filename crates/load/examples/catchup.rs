//! The catch-up benchmark's driver (`bench/catchup.sh`): one open-loop Poisson run of the
//! null-RPC protocol from one generator thread, with the pauses of `TAILSCOPE_TESTING_PAUSE`
//! injected into it, printing how fast each pause's backlog was sent.
//!
//! Usage: `catchup URL RATE SECONDS CONNECTIONS CPU` (set `TAILSCOPE_TESTING_PAUSE` =
//! `EVERY_US:LENGTH_US`, and `TAILSCOPE_TESTING_WRITES=per-request` for one write per request).
//! Prints one line of `key=value` pairs: the pauses, the median and largest catch-up ÷ pause,
//! the median catch-up, pause and backlog, and the run's sends, writes and lateness p99.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use load::{run_open_loop, LoadConfig, NullRpc, Outcome, Protocol, StopAt, Target};

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 5 {
        eprintln!("usage: catchup URL RATE SECONDS CONNECTIONS CPU");
        std::process::exit(2);
    }
    let target: Target = args[0].parse()?;
    let rate: f64 = args[1].parse()?;
    let secs: f64 = args[2].parse()?;
    let mut cfg = LoadConfig::new(target.clone(), rate);
    cfg.stop = StopAt::Duration(Duration::from_secs_f64(secs));
    cfg.connections = args[3].parse()?;
    cfg.threads = 1;
    cfg.cpus = vec![args[4].parse()?];
    // Room for a 10 ms backlog at 100k req/s on any connection count: nothing is held.
    cfg.max_outstanding_per_conn = 4096;
    cfg.validate()?;
    let transport = target.transport;
    let factory = move || Box::new(NullRpc::new(transport, 128, false, false)) as Box<dyn Protocol>;
    let stop = AtomicBool::new(false);
    let run = run_open_loop(&cfg, &factory, &stop, &|_, _| {})?;
    let g = &run.summary.generator;
    let p = &g.injected_pauses;
    let (ratio_median, max_ratio) = g.injected_ratios().unwrap_or((f64::NAN, f64::NAN));
    let us = |f: &dyn Fn(&load::InjectedPause) -> u64| {
        median(p.iter().map(|x| f(x) as f64 / 1e3).collect())
    };
    let mut late: Vec<f64> = run
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .map(|r| r.sent_ns.saturating_sub(r.intended_ns) as f64 / 1e3)
        .collect();
    late.sort_by(f64::total_cmp);
    let p99 = late.get(late.len() * 99 / 100).copied().unwrap_or(f64::NAN);
    let ok = run
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .count();
    println!(
        "pauses={} ratio_median={:.4} ratio_max={:.4} catch_up_us={:.1} pause_us={:.1} due={:.0} sends={} writes={} ok={} requests={} lateness_p99_us={:.1}",
        p.len(),
        ratio_median,
        max_ratio,
        us(&|x| x.catch_up_ns),
        us(&|x| x.pause_ns),
        median(p.iter().map(|x| x.due as f64).collect()),
        g.sends,
        g.writes,
        ok,
        run.records.len(),
        p99,
    );
    Ok(())
}
