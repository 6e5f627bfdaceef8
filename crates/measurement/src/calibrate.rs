//! The ideal's service time (Tales of the Tail §3.2): the inverse of the target's peak
//! throughput "at 100 % utilisation", per worker.
//!
//! One calibration, one parameter set ([`CalibrateSpec::default`]). The peak is searched, not
//! assumed: steps with more and more requests in flight — first one per connection over 1,
//! 2, 4, 8, 16 connections (the cost of a request *without* batching), then deeper pipelines
//! on the best number of connections (servers batch what one read brings them) — until the
//! completion rate stops rising. Each step is an open-loop overload through the load engine
//! (the same engine, connections and reply handling as a run): offered well above what the
//! server can do, with at most `connections × depth` in flight, so the server always has work
//! and completes what it can. (A closed loop driven by its own thread measured 14.8k req/s on
//! the built-in server with a 50 µs spin, where the engine's overload completed 17.2k: the
//! ideal must come from the rate the server actually reaches.) A longer overload at the best
//! step then confirms the peak, reported beside it. The search, both figures, the cost
//! without batching and the batching gain are stored with the calibration and shown.
//!
//! The load runs on the generator's CPUs (as a run's does), so that it does not take the
//! server's CPU away while measuring it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use load::{LoadConfig, RecordSink, RequestRecord, StopAt};
use serde::Serialize;
use serde_json::json;

use crate::agent_spec::Agents;
use crate::db::{host_facts, Db};
use crate::error::{invalid, LabError};
use crate::local::LocalEngine;
use crate::observer::Observer;
use crate::source::LoadSource;
use crate::status::RunStatus;
use crate::target::Ready;

use crate::calibration::{Calibration, Step};

/// How a calibration searches the target's peak.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrateSpec {
    /// Most connections and most requests in flight per connection the search tries.
    pub max_connections: usize,
    pub max_depth: usize,
    /// Each step's measured window, after its warm-up.
    pub step: Duration,
    pub step_warmup: Duration,
    /// A step that raises the best completion rate by less than this fraction counts as no
    /// rise; two such steps in a row end a phase of the search.
    pub plateau: f64,
    /// The confirmation: offered at `overload` × the peak for `overload_time`.
    pub overload: f64,
    pub overload_time: Duration,
    /// CPUs of the calibration's generator (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Send every step's load from these agents (their completions added up) instead of
    /// from this process; connections, depth and CPUs then apply to each agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<Agents>,
}

impl Default for CalibrateSpec {
    fn default() -> Self {
        CalibrateSpec {
            max_connections: 16,
            max_depth: 64,
            step: Duration::from_millis(200),
            step_warmup: Duration::from_millis(100),
            plateau: 0.02,
            overload: 1.5,
            overload_time: Duration::from_millis(400),
            cpus: Vec::new(),
            agents: None,
        }
    }
}

impl CalibrateSpec {
    /// Checks the search's bounds and step lengths; the error names the flag.
    pub fn check(&self) -> Result<(), LabError> {
        if self.max_connections == 0 || self.max_depth == 0 {
            return Err(invalid(
                "--max-connections and --max-depth must be at least 1",
            ));
        }
        if self.max_connections > 4096 || self.max_depth > 4096 {
            return Err(invalid(
                "--max-connections and --max-depth must be at most 4096",
            ));
        }
        if self.step.is_zero() {
            return Err(invalid("--duration must be positive"));
        }
        if self.overload_time.is_zero() {
            return Err(invalid("--confirm must be positive"));
        }
        Ok(())
    }

    /// Where the steps' load comes from: the agents, or this process.
    fn source(&self) -> &dyn LoadSource {
        match &self.agents {
            Some(a) => a,
            None => &LocalEngine,
        }
    }
}

/// Counts the successful replies received inside a window (run-relative ns), and tells the
/// step's watchdog when the run's time zero is.
struct WindowCount<'a> {
    from: u64,
    to: u64,
    ok: u64,
    start: &'a AtomicU64,
}

impl RecordSink for WindowCount<'_> {
    fn write(&mut self, _thread: usize, records: &[RequestRecord]) -> Result<(), String> {
        self.ok += records
            .iter()
            .filter(|r| r.outcome == load::Outcome::Ok)
            .filter(|r| (self.from..self.to).contains(&r.received_ns))
            .count() as u64;
        Ok(())
    }

    fn started(&mut self, start_mono_ns: u64) {
        self.start.store(start_mono_ns, Ordering::Relaxed);
    }
}

/// A step ends this long after its window (run-relative), so that no reply inside the window
/// is missed.
const STEP_END_SLACK: Duration = Duration::from_millis(2);

/// Ends a step once its counting window is over (sets `step_stop`, the engine's stop flag:
/// what is not yet due leaves the run, what waits for a slot is dropped, and the replies in
/// flight get a short grace), instead of letting the engine send the backlog an overload
/// piles up, which counts for nothing; passes on the user's stop. Returns once `done`.
fn watch(
    user: &AtomicBool,
    step_stop: &AtomicBool,
    done: &AtomicBool,
    start: &AtomicU64,
    end: u64,
) {
    while !done.load(Ordering::Relaxed) {
        let t0 = start.load(Ordering::Relaxed);
        if user.load(Ordering::Relaxed)
            || (t0 != 0 && host::tstamp::mono_now_ns() >= t0.saturating_add(end))
        {
            step_stop.store(true, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Requests waiting for a free slot longer than this are dropped (they only bound the
/// engine's window: with `connections × depth` in flight the server always has work).
const STEP_TIMEOUT: Duration = Duration::from_millis(500);

/// An open-loop overload: offered `rate` with `connections` × `depth` in flight for
/// `warm + time`; returns the completion rate in the window after the warm-up and the
/// replies counted there.
fn overload(
    ready: &Ready,
    spec: &CalibrateSpec,
    at: Step,
    (warm, time): (Duration, Duration),
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<(f64, u64), LabError> {
    let Step {
        connections,
        depth,
        rate_rps: rate,
    } = at;
    let mut cfg = LoadConfig::new(ready.target.clone(), rate.min(load::MAX_RATE));
    cfg.warmup = warm;
    cfg.stop = StopAt::Duration(time);
    cfg.connections = connections;
    cfg.max_outstanding_per_conn = depth;
    cfg.timeout = STEP_TIMEOUT;
    cfg.cpus = spec.cpus.iter().copied().take(1).collect();
    cfg.yield_when_far = false;
    cfg.churn = ready.churn;
    cfg.spread = ready.spread();
    let start = AtomicU64::new(0);
    let mut count = WindowCount {
        from: warm.as_nanos() as u64,
        to: (warm + time).as_nanos() as u64,
        ok: 0,
        start: &start,
    };
    cfg.seed = 1;
    let (step_stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let end = (warm + time + STEP_END_SLACK).as_nanos() as u64;
    std::thread::scope(|sc| {
        sc.spawn(|| watch(stop, &step_stop, &done, &start, end));
        let sent = spec
            .source()
            .send_to(&cfg, ready, &mut count, &step_stop, obs);
        done.store(true, Ordering::Relaxed);
        sent
    })?;
    Ok((count.ok as f64 / time.as_secs_f64(), count.ok))
}

/// The first step's offer: far above what one request in flight can reach on loopback.
const FIRST_OFFER_RPS: f64 = 100_000.0;

/// Searches `ready`'s peak as `spec` says, confirms it with an open-loop overload, and stores
/// the result as a "calibrate" run of the target (a failed calibration is stored as failed).
pub fn calibrate(
    ready: &Ready,
    spec: &CalibrateSpec,
    workers: u32,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Calibration, LabError> {
    let st = &db.store;
    let id = st.begin_run(&store::NewRun {
        kind: "calibrate".into(),
        target: ready.label.clone(),
        started_at: store::now_rfc3339(),
        config: json!({"spec": spec, "url": ready.url, "server": ready.server_json()}),
        host: host_facts(),
    })?;
    match search(ready, spec, workers, stop, obs) {
        Ok(mut cal) => {
            cal.run_id = id;
            cal.interrupted = stop.load(Ordering::Relaxed);
            let status = cal.status();
            st.finish_run(id, status.as_str(), &cal.to_json(&ready.label, &ready.url))?;
            Ok(cal)
        }
        Err(e) => {
            let _ = st.finish_run(
                id,
                RunStatus::Failed.as_str(),
                &json!({"error": e.to_string()}),
            );
            Err(LabError::Failed(format!(
                "calibration of {} failed: {e}",
                ready.url
            )))
        }
    }
}

fn search(
    ready: &Ready,
    spec: &CalibrateSpec,
    workers: u32,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Calibration, LabError> {
    announce(ready, spec, obs);
    let mut steps: Vec<Step> = Vec::new();
    let (mut requests, mut duration_ns) = (0u64, 0u64);
    let mut run_step = |c: usize, d: usize, steps: &mut Vec<Step>| -> Result<f64, LabError> {
        let best = steps.iter().map(|s| s.rate_rps).fold(0.0, f64::max);
        let mut offer = if best > 0.0 {
            3.0 * best
        } else {
            FIRST_OFFER_RPS
        };
        // An offer the server nearly keeps up with is no overload: offer more.
        let mut r = 0.0;
        for _ in 0..4 {
            let at = Step {
                connections: c,
                depth: d,
                rate_rps: offer,
            };
            let (rate, n) = overload(ready, spec, at, (spec.step_warmup, spec.step), stop, obs)?;
            requests += n;
            duration_ns += spec.step.as_nanos() as u64;
            r = rate;
            if rate < 0.8 * offer || offer >= load::MAX_RATE || stop.load(Ordering::Relaxed) {
                break;
            }
            offer *= 4.0;
        }
        obs.note(&format!("  {c} × {d} in flight: {r:.0} req/s"));
        steps.push(Step {
            connections: c,
            depth: d,
            rate_rps: r,
        });
        Ok(r)
    };
    // A phase: steps until two in a row fail to raise the best rate by `plateau`.
    let mut phase = |grid: Vec<(usize, usize)>, steps: &mut Vec<Step>| -> Result<(), LabError> {
        let (mut best, mut flat) = (0.0f64, 0);
        for (c, d) in grid {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let r = run_step(c, d, steps)?;
            if r > best * (1.0 + spec.plateau) {
                flat = 0;
            } else {
                flat += 1;
            }
            best = best.max(r);
            if flat >= 2 {
                break;
            }
        }
        Ok(())
    };
    let powers = |max: usize| -> Vec<usize> {
        std::iter::successors(Some(1usize), |&x| (x * 2 <= max).then_some(x * 2)).collect()
    };
    // Every instance of a scaled-out server needs a connection: the ladder starts at their
    // count (a connection per address), as a run's load does.
    let least = ready.spread().len().max(1);
    let mut ladder: Vec<usize> = powers(spec.max_connections.max(1))
        .into_iter()
        .filter(|&c| c >= least)
        .collect();
    if ladder.is_empty() {
        ladder.push(least);
    }
    phase(ladder.into_iter().map(|c| (c, 1)).collect(), &mut steps)?;
    let unbatched = steps
        .iter()
        .max_by(|a, b| a.rate_rps.total_cmp(&b.rate_rps))
        .cloned()
        .ok_or_else(|| LabError::Failed("the calibration measured nothing".into()))?;
    phase(
        powers(spec.max_depth.max(1))
            .into_iter()
            .skip(1)
            .map(|d| (unbatched.connections, d))
            .collect(),
        &mut steps,
    )?;
    let best = steps
        .iter()
        .max_by(|a, b| a.rate_rps.total_cmp(&b.rate_rps))
        .cloned()
        .unwrap_or_else(|| unbatched.clone());
    // The confirmation, repeated: the spread of its runs, a second or so apart, is what
    // moves the peak between calibrations (the host's noise changes on that scale; slices
    // of one window agreed within ±0.5 % while five calibrations spread ±2 %).
    let mut offered = 0.0;
    let mut runs = Vec::with_capacity(CONFIRMATIONS);
    for _ in 0..CONFIRMATIONS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (o, c) = confirm(ready, spec, &best, stop, obs)?;
        offered = o;
        if c > 0.0 {
            runs.push(c);
        }
    }
    if best.rate_rps <= 0.0 {
        return Err(LabError::Failed(
            "no reply came back during the calibration".into(),
        ));
    }
    Ok(calibration_of(
        Found {
            steps,
            best,
            unbatched,
            offered,
            runs,
            requests,
            duration_ns,
        },
        workers,
        obs,
    ))
}

/// The confirmations of a calibration: their mean is the peak, their spread its interval.
const CONFIRMATIONS: usize = 3;

/// The open-loop confirmation: what completes while `overload` × the peak is offered
/// (nothing once stopped); returns the offered and completed rates.
fn confirm(
    ready: &Ready,
    spec: &CalibrateSpec,
    best: &Step,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<(f64, f64), LabError> {
    let offered = spec.overload * best.rate_rps;
    if stop.load(Ordering::Relaxed) {
        return Ok((offered, 0.0));
    }
    let warm = spec.overload_time / 4;
    let at = Step {
        rate_rps: offered,
        ..best.clone()
    };
    let window = (warm, spec.overload_time - warm);
    let (completed, _) = overload(ready, spec, at, window, stop, obs)?;
    Ok((offered, completed))
}

fn announce(ready: &Ready, spec: &CalibrateSpec, obs: &dyn Observer) {
    obs.note(&format!(
        "calibrating {}: searching the peak (up to {} connections × {} in flight)…",
        ready.url, spec.max_connections, spec.max_depth
    ));
    if let Some(a) = &spec.agents {
        obs.note(&format!(
            "  every step sent by {} agent(s), their replies added up (connections and depth per agent)",
            a.commands.len()
        ));
    }
}

/// What the search found: its steps, the peak and the best without batching, and the
/// open-loop confirmation.
struct Found {
    steps: Vec<Step>,
    best: Step,
    unbatched: Step,
    offered: f64,
    /// What each confirmation completed per second.
    runs: Vec<f64>,
    requests: u64,
    duration_ns: u64,
}

fn calibration_of(f: Found, workers: u32, obs: &dyn Observer) -> Calibration {
    let Found {
        steps,
        best,
        unbatched,
        offered,
        runs,
        requests,
        duration_ns,
    } = f;
    let completed = if runs.is_empty() {
        0.0
    } else {
        runs.iter().sum::<f64>() / runs.len() as f64
    };
    let w = f64::from(workers);
    // The confirmation measures the chosen step again, longer and without choosing: the
    // peak. (The best step is the largest of several short, noisy ones: biased upwards.)
    let (peak, from) = if completed > 0.0 {
        (
            completed,
            format!(
                "{} open-loop confirmations at {offered:.0} req/s on the best step",
                runs.len()
            ),
        )
    } else {
        (
            best.rate_rps,
            "the best step (no confirmation: stopped)".to_string(),
        )
    };
    // Student's t over the confirmations (stats::mean_ci); a rate's interval never reaches
    // zero. None with fewer than two.
    let interval = stats::mean_ci(&runs, CONFIDENCE)
        .ok()
        .map(|e| (e.lo.max(e.value * 0.01), e.hi));
    let shown = interval.map_or(String::new(), |(lo, hi)| format!(" [{lo:.0}, {hi:.0}]"));
    obs.note(&format!("peak {peak:.0} req/s{shown}: {from}"));
    obs.note(&format!(
        "  the best step: {} × {} in flight, {:.0} req/s in the search; without batching {:.0} req/s (gain {:.2}×)",
        best.connections,
        best.depth,
        best.rate_rps,
        unbatched.rate_rps,
        best.rate_rps / unbatched.rate_rps,
    ));
    let disagreement = interval.and_then(|i| disagreement(best.rate_rps, i));
    if let Some(d) = &disagreement {
        obs.note(&format!("  WARNING: {d}"));
    }
    Calibration {
        run_id: 0,
        interrupted: false,
        peak_rps: peak,
        service_ns: 1e9 / peak,
        workers,
        per_worker_service_ns: w * 1e9 / peak,
        unbatched_rps: unbatched.rate_rps,
        unbatched_per_worker_service_ns: w * 1e9 / unbatched.rate_rps,
        batching_gain: best.rate_rps / unbatched.rate_rps,
        overload_offered_rps: offered,
        overload_completed_rps: completed,
        peak_interval_rps: interval,
        disagreement,
        steps,
        best,
        requests,
        duration_ns,
    }
}

/// The confidence of the peak's interval.
const CONFIDENCE: f64 = 0.95;

/// Why the search's best step and the confirmation disagree, when they differ by more than
/// the peak's interval is wide (the best step is the largest of several short, noisy steps:
/// a little above the peak is its bias, not a disagreement).
fn disagreement(best: f64, (lo, hi): (f64, f64)) -> Option<String> {
    let peak = (lo + hi) / 2.0;
    if (best - peak).abs() <= hi - lo {
        return None;
    }
    let how = if best > hi {
        format!(
            "{:.0} % above the top of the peak's interval: its short step took in bursts the server could not keep up with",
            100.0 * (best / hi - 1.0)
        )
    } else if best < lo {
        format!(
            "{:.0} % below the bottom of the peak's interval: the search's steps were held back (a host stall, or too few in flight)",
            100.0 * (1.0 - best / lo)
        )
    } else {
        return None;
    };
    Some(format!(
        "the search's best step ({best:.0} req/s) is {how}; the peak is the confirmation's"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> (AtomicBool, AtomicBool, AtomicBool, AtomicU64) {
        (
            AtomicBool::new(false),
            AtomicBool::new(false),
            AtomicBool::new(false),
            AtomicU64::new(0),
        )
    }

    fn found(runs: &[f64]) -> Found {
        let step = |c, d, r| Step {
            connections: c,
            depth: d,
            rate_rps: r,
        };
        Found {
            steps: vec![step(8, 1, 80_000.0), step(8, 2, 100_000.0)],
            best: step(8, 2, 100_000.0),
            unbatched: step(8, 1, 80_000.0),
            offered: 150_000.0,
            runs: runs.to_vec(),
            requests: 1,
            duration_ns: 1,
        }
    }

    #[test]
    fn the_peak_is_the_confirmations_mean_and_the_best_step_only_without_one() {
        let c = calibration_of(
            found(&[94_000.0, 95_000.0, 96_000.0]),
            2,
            &crate::observer::Quiet,
        );
        assert_eq!(c.peak_rps, 95_000.0);
        // mean ± t(0.975, 2 df) × sd/√3 = 95,000 ± 4.303 × 1,000/√3.
        let (lo, hi) = c.peak_interval_rps.unwrap();
        let half = 4.302_652_7 * 1_000.0 / 3f64.sqrt();
        assert!((lo - (95_000.0 - half)).abs() < 1.0 && (hi - (95_000.0 + half)).abs() < 1.0);
        // The best step (100k) is 5 % above: more than the interval's width (±2.5 %).
        let d = c.disagreement.as_deref().unwrap();
        assert!(d.contains("above the top of the peak's interval"), "{d}");
        assert_eq!(c.service_ns, 1e9 / 95_000.0);
        assert_eq!(c.per_worker_service_ns, 2e9 / 95_000.0);
        // The search's own figures stay as measured: the best step and the batching gain
        // between two steps of the same length.
        assert_eq!(c.best.rate_rps, 100_000.0);
        assert_eq!(c.batching_gain, 1.25);
        let r = c.record("t", "nullrpc://x");
        assert_eq!(r.peak_rate_rps, 95_000.0);
        assert!((r.peak_vs_overload - 100.0 / 95.0).abs() < 1e-12);
        // Within the interval's width of the peak: the best step's usual upward bias.
        let c = calibration_of(
            found(&[97_000.0, 99_000.0, 98_000.0]),
            1,
            &crate::observer::Quiet,
        );
        assert!(c.disagreement.is_none(), "{:?}", c.disagreement);
        // Stopped before the confirmation: the best step is all there is.
        let c = calibration_of(found(&[]), 1, &crate::observer::Quiet);
        assert_eq!(c.peak_rps, 100_000.0);
        assert!(c.peak_interval_rps.is_none() && c.disagreement.is_none());
    }

    #[test]
    fn a_step_is_stopped_once_its_window_is_over() {
        let (user, step, done, start) = flags();
        // The run started 10 ms ago and its window ended 1 ms after it: stop.
        start.store(host::tstamp::mono_now_ns() - 10_000_000, Ordering::Relaxed);
        watch(&user, &step, &done, &start, 1_000_000);
        assert!(step.load(Ordering::Relaxed));
        assert!(!user.load(Ordering::Relaxed));
    }

    #[test]
    fn the_users_stop_stops_the_step_and_an_unstarted_run_is_left_alone() {
        let (user, step, done, start) = flags();
        user.store(true, Ordering::Relaxed);
        watch(&user, &step, &done, &start, u64::MAX);
        assert!(step.load(Ordering::Relaxed));
        // Not started (no time zero yet) and not stopped: the watchdog waits until the step
        // is done, without stopping it.
        let (user, step, done, start) = flags();
        std::thread::scope(|sc| {
            sc.spawn(|| watch(&user, &step, &done, &start, 0));
            std::thread::sleep(Duration::from_millis(5));
            done.store(true, Ordering::Relaxed);
        });
        assert!(!step.load(Ordering::Relaxed));
    }

    #[test]
    fn the_window_counts_ok_replies_received_inside_it_and_notes_the_start() {
        let start = AtomicU64::new(0);
        let mut c = WindowCount {
            from: 100,
            to: 200,
            ok: 0,
            start: &start,
        };
        c.started(42);
        assert_eq!(start.load(Ordering::Relaxed), 42);
        let rec = |received_ns, outcome| RequestRecord {
            received_ns,
            outcome,
            ..RequestRecord::scheduled(0, 0)
        };
        let recs = [
            rec(99, load::Outcome::Ok),
            rec(100, load::Outcome::Ok),
            rec(150, load::Outcome::Error),
            rec(199, load::Outcome::Ok),
            rec(200, load::Outcome::Ok),
        ];
        c.write(0, &recs).unwrap();
        assert_eq!(c.ok, 2);
    }
}
