//! The LNS paper's model of a tandem server under bursty traffic as an experiment of its own
//! (`tailscope model bursty`): the workload's bounds, the prediction beside a tandem
//! simulation (formula 15's error), the validation grid, and the fit of the service-time laws
//! to basic tests read from a file.

use std::path::Path;

use model::bursty::{
    self, concurrency_rows, fit, predict, simulate_tandem, tandem_for, tandem_for_stages,
    BasicTest, BurstyParams, BurstyWorkload, ConcurrencyRow, Dispatch, FitResult, FitSpec,
    Improvement, Prediction, Stack, StageTimes, TandemReport, ValidationGrid, ValidationRow,
};
use model::ModelError;
use serde::{Deserialize, Serialize};

use crate::simulate::check_not_saturated;
use measurement::error::{invalid, LabError};
use measurement::read_bounded;

/// Requests per burst (N).
pub const MAX_BURST: u32 = 1_000_000;
/// Worker threads (k); the tandem simulation scans them at every arrival.
pub const MAX_BURSTY_WORKERS: u32 = 10_000;
/// Bursts simulated.
pub const MAX_BURSTS: u64 = 1_000_000;
/// Requests simulated in all (N × bursts).
pub const MAX_TANDEM_REQUESTS: u64 = 1_000_000_000;
/// Payload length L in bytes.
pub const MAX_PAYLOAD_BYTES: f64 = 1e9;
/// Shares α in one `--concurrency` table.
pub const MAX_ALPHAS: usize = 100;
/// A file of basic tests holds a few kilobytes; 16 MiB is far above any real one.
const MAX_FIT_FILE_BYTES: u64 = 16 << 20;

/// A bursty query, checked by [`BurstyPlan::check`].
#[derive(Clone, Debug)]
pub struct BurstyPlan {
    pub params: BurstyParams,
    pub workload: BurstyWorkload,
    pub stack: Stack,
    /// Bin width of the latency entropy (formulas 13–14).
    pub entropy_bin_ns: Option<f64>,
    /// Simulate the tandem too, over this many bursts.
    pub simulate: bool,
    pub bursts: u64,
    pub seed: u64,
}

#[cfg(any(test, feature = "test-fixtures"))]
impl BurstyPlan {
    /// A test query: `tailscope model bursty`'s defaults (a server shaped like the LNS
    /// paper's priority stack, N = 1000, α = 0.05, 512 B, 29 workers, p99), unsimulated, with
    /// 20 bursts should a test simulate it.
    pub fn example() -> BurstyPlan {
        BurstyPlan {
            params: BurstyParams {
                t0_ns: 4_000.0,
                mt_ns_per_byte: 0.0,
                r0_ns: 45_000.0,
                mr_ns: 500.0,
                m_ns: 70_000.0,
            },
            workload: BurstyWorkload {
                n: 1000,
                alpha: 0.05,
                payload_bytes: 512.0,
                workers: 29,
                spacing_ns: 1_000.0,
                percentile: 99.0,
            },
            stack: Stack::Priority,
            entropy_bin_ns: None,
            simulate: false,
            bursts: 20,
            seed: 1,
        }
    }
}

fn in_range<T: PartialOrd + std::fmt::Display>(
    what: &str,
    v: T,
    min: T,
    max: T,
) -> Result<(), LabError> {
    model::query::in_range(what, v, min, max).map_err(invalid)
}

/// The tandem simulation of a plan and its simulated percentile (the delay-sensitive
/// requests' at the workload's percentile, else their p99, else all requests' p99).
#[derive(Clone, Debug)]
pub struct Simulated {
    pub report: TandemReport,
    pub latency_ns: f64,
}

impl Simulated {
    /// Latency entropy in bits (of the delay-sensitive requests, else of all).
    pub fn entropy_bits(&self) -> Option<f64> {
        self.report
            .sensitive_entropy_bits
            .or(self.report.all_entropy_bits)
    }
}

/// A prediction, the best worker count (formula 16) and, when asked, the simulation.
#[derive(Clone, Debug)]
pub struct Predicted {
    pub prediction: Prediction,
    pub best_workers: Option<u32>,
    pub simulated: Option<Simulated>,
}

impl Predicted {
    /// Formula 15's relative error of the prediction against the simulation, %.
    pub fn error_pct(&self) -> Option<f64> {
        let s = self.simulated.as_ref()?;
        Some(bursty::formulas::relative_error_pct(
            s.latency_ns,
            self.prediction.latency_ns,
        ))
    }
}

/// `95` → "95", `99.9` → "99.9": a percentile as its quantile key writes it.
pub fn percentile_text(p: f64) -> String {
    format!("{p}").trim_end_matches(".0").to_string()
}

impl BurstyPlan {
    /// The workload's ranges (the first out of range is the error).
    pub fn check(&self) -> Result<(), LabError> {
        let w = &self.workload;
        in_range("--n", w.n, 1, MAX_BURST)?;
        in_range("--workers", w.workers, 1, MAX_BURSTY_WORKERS)?;
        if !(w.alpha > 0.0 && w.alpha <= 1.0) {
            return Err(invalid(format!(
                "--alpha must be in (0, 1], got {}",
                w.alpha
            )));
        }
        if !(w.payload_bytes >= 0.0 && w.payload_bytes <= MAX_PAYLOAD_BYTES) {
            return Err(invalid(format!(
                "--payload must be between 0 and {MAX_PAYLOAD_BYTES:e} bytes, got {:e}",
                w.payload_bytes
            )));
        }
        if !(w.percentile > 0.0 && w.percentile < 100.0) {
            return Err(invalid(format!(
                "--percentile must be in (0, 100), got {}",
                w.percentile
            )));
        }
        in_range("--bursts", self.bursts, 1, MAX_BURSTS)?;
        if self.simulate && u64::from(w.n) * self.bursts > MAX_TANDEM_REQUESTS {
            return Err(invalid(format!(
                "--n × --bursts must be at most {MAX_TANDEM_REQUESTS} with --simulate, got {} × {}",
                w.n, self.bursts
            )));
        }
        Ok(())
    }

    /// Checks the plan, predicts, and simulates when asked.
    pub fn run(&self) -> Result<Predicted, LabError> {
        self.check()?;
        let prediction = predict(&self.params, &self.workload, self.stack).map_err(invalid)?;
        let simulated = if self.simulate {
            Some(self.simulate(&prediction)?)
        } else {
            None
        };
        Ok(Predicted {
            prediction,
            best_workers: self.params.best_workers(self.workload.payload_bytes),
            simulated,
        })
    }

    fn simulate(&self, p: &Prediction) -> Result<Simulated, LabError> {
        // The simulated M is T + R + the constant stage: give the constant stage what M
        // leaves beyond the two queueing stages' service times.
        let constant = (self.params.m_ns - p.t_ns - p.r_ns).max(0.0);
        let (w, stack) = (&self.workload, self.stack);
        let mut cfg = tandem_for(
            &self.params,
            w,
            stack,
            constant,
            Dispatch::RoundRobin,
            self.bursts,
            self.seed,
        );
        cfg.entropy_bin_ns = self.entropy_bin_ns;
        let r = simulate_tandem(&cfg).map_err(invalid)?;
        check_not_saturated(r.all.max_ns)?;
        let latency_ns = simulated_percentile(&r, w.percentile);
        Ok(Simulated {
            report: r,
            latency_ns,
        })
    }
}

/// The delay-sensitive requests' simulated percentile `p`, else their p99, else all
/// requests' p99.
fn simulated_percentile(r: &TandemReport, p: f64) -> f64 {
    let key = format!("p{}", percentile_text(p));
    let at = r
        .sensitive
        .as_ref()
        .and_then(|s| s.get(&key))
        .map(|e| e.value);
    at.or(r.sensitive_p99_ns).unwrap_or(r.all_p99_ns)
}

/// The event dispatcher's time per request when `--dispatcher` is not given: 1 µs, an
/// illustrative value (the LNS paper measures it by instrumentation and does not publish it;
/// with the other defaults, removing it cuts the paper's scenario's p99 by 0.0017 %, the
/// paper's figure).
pub const DEFAULT_DISPATCHER_NS: f64 = 1_000.0;

/// Improvement 2 ([`BurstyPlan::improve`]) and, when the plan simulates, the simulated
/// percentiles.
#[derive(Clone, Debug)]
pub struct Improved {
    pub improvement: Improvement,
    pub simulated: Option<ImproveSimulated>,
}

/// The simulated percentile of the baseline and of each cut (in the order of the cuts), ns:
/// the paper's network (TCP/IP, dispatcher, workers, a constant) with the same seed in every
/// run, so that the runs differ by the cut alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ImproveSimulated {
    pub baseline_ns: f64,
    pub cuts_ns: Vec<f64>,
}

impl ImproveSimulated {
    /// The simulated reduction of cut `i`, %.
    pub fn reduction_pct(&self, i: usize) -> Option<f64> {
        let after = self.cuts_ns.get(i)?;
        Some((self.baseline_ns - after) / self.baseline_ns * 100.0)
    }
}

impl BurstyPlan {
    /// LNS Improvement 2: each stage's time cut by `fraction` (in (0, 1]) with the dispatcher
    /// taking `dispatcher_ns` per request; simulated too when the plan simulates. Bad input
    /// names its flag: `--by`, `--dispatcher`, `--m` below T + D + R.
    pub fn improve(&self, fraction: f64, dispatcher_ns: f64) -> Result<Improved, LabError> {
        self.check()?;
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(invalid(format!(
                "--by must be above 0 and at most 100 %, got {fraction}"
            )));
        }
        let improvement = bursty::improve(
            &self.params,
            dispatcher_ns,
            &self.workload,
            self.stack,
            fraction,
        )
        .map_err(|e| match &e {
            ModelError::Invalid { name: "M", .. } => invalid(format!(
                "--m: {e} (--t0/--mt, --dispatcher and --r0/--mr at --workers {})",
                self.workload.workers
            )),
            ModelError::Invalid {
                name: "event dispatcher time D",
                ..
            } => invalid(format!("--dispatcher: {e}")),
            _ => invalid(e),
        })?;
        let simulated = if self.simulate {
            let run = |stages: &StageTimes| -> Result<f64, LabError> {
                let cfg = tandem_for_stages(
                    stages,
                    &self.workload,
                    self.stack,
                    Dispatch::RoundRobin,
                    self.bursts,
                    self.seed,
                );
                let r = simulate_tandem(&cfg).map_err(invalid)?;
                check_not_saturated(r.all.max_ns)?;
                Ok(simulated_percentile(&r, self.workload.percentile))
            };
            let stages = &improvement.stages;
            Some(ImproveSimulated {
                baseline_ns: run(stages)?,
                cuts_ns: improvement
                    .cuts
                    .iter()
                    .map(|c| run(&stages.with(c.stage, c.after_ns)))
                    .collect::<Result<_, _>>()?,
            })
        } else {
            None
        };
        Ok(Improved {
            improvement,
            simulated,
        })
    }
}

/// Fig. 7 of the LNS paper: at each share α, the largest burst (up to [`MAX_BURST`]) whose
/// predicted latency stays within `target_ns`, at the plan's workers and at k_t.
#[derive(Clone, Debug)]
pub struct Concurrency {
    pub target_ns: f64,
    /// k_t (formula 16) for the plan's payload; None when the worker stage is always the
    /// bottleneck.
    pub best_workers: Option<u32>,
    pub rows: Vec<ConcurrencyRow>,
}

impl BurstyPlan {
    /// [`Concurrency`] over `alphas` (each in (0, 1], at most [`MAX_ALPHAS`]); the plan's own
    /// α and N are not used.
    pub fn concurrency(&self, target_ns: f64, alphas: &[f64]) -> Result<Concurrency, LabError> {
        let mut probe = self.clone();
        probe.workload.n = 1;
        probe.check()?;
        if !(target_ns.is_finite() && target_ns > 0.0) {
            return Err(invalid(
                "--concurrency must be a positive duration (e.g. 50ms)",
            ));
        }
        if alphas.is_empty() || alphas.len() > MAX_ALPHAS {
            return Err(invalid(format!(
                "--alphas must list 1 to {MAX_ALPHAS} shares, got {}",
                alphas.len()
            )));
        }
        if let Some(a) = alphas.iter().find(|a| !(**a > 0.0 && **a <= 1.0)) {
            return Err(invalid(format!(
                "--alphas: each must be in (0, 1], got {a}"
            )));
        }
        let (best_workers, rows) = concurrency_rows(
            &self.params,
            &self.workload,
            self.stack,
            target_ns,
            alphas,
            MAX_BURST,
        )
        .map_err(invalid)?;
        Ok(Concurrency {
            target_ns,
            best_workers,
            rows,
        })
    }
}

/// Points of one `--sweep`.
pub const MAX_SWEEP_POINTS: usize = 100;

/// The factor a sweep varies (LNS Figs. 5–6: (a) N, (b) L, (c) α, (d) k).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Factor {
    N,
    Payload,
    Alpha,
    Workers,
}

impl Factor {
    pub fn name(self) -> &'static str {
        match self {
            Factor::N => "n",
            Factor::Payload => "payload",
            Factor::Alpha => "alpha",
            Factor::Workers => "workers",
        }
    }
}

/// `--sweep KEY=V1,V2,…`: the factor and its values, as given.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    pub factor: Factor,
    pub values: Vec<f64>,
}

impl std::str::FromStr for Sweep {
    type Err = String;

    fn from_str(s: &str) -> Result<Sweep, String> {
        let (k, vs) = s.split_once('=').ok_or_else(|| {
            format!(
                "'{}': want KEY=V1,V2,… (KEY: n, payload, alpha, workers)",
                measurement::clip(s)
            )
        })?;
        let factor = match k.trim() {
            "n" => Factor::N,
            "payload" => Factor::Payload,
            "alpha" => Factor::Alpha,
            "workers" | "k" => Factor::Workers,
            other => {
                return Err(format!(
                    "unknown factor '{}' (n, payload, alpha or workers)",
                    measurement::clip(other)
                ))
            }
        };
        let values = vs
            .split(',')
            .map(|v| {
                let v = v.trim();
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .or_else(|| model::parse_count(v).ok().map(|c| c as f64))
                    .ok_or_else(|| format!("'{}' is not a number", measurement::clip(v)))
            })
            .collect::<Result<Vec<f64>, String>>()?;
        if values.is_empty() || values.len() > MAX_SWEEP_POINTS {
            return Err(format!(
                "1 to {MAX_SWEEP_POINTS} values, got {}",
                values.len()
            ));
        }
        Ok(Sweep { factor, values })
    }
}

impl BurstyPlan {
    /// The plan with `factor` set to `v` (a count must be a whole number).
    fn with(&self, factor: Factor, v: f64) -> Result<BurstyPlan, LabError> {
        let whole = |what: &str| -> Result<u32, LabError> {
            if v.fract() == 0.0 && v >= 0.0 && v <= f64::from(u32::MAX) {
                Ok(v as u32)
            } else {
                Err(invalid(format!(
                    "--sweep {what}: {v} is not a whole number"
                )))
            }
        };
        let mut p = self.clone();
        match factor {
            Factor::N => p.workload.n = whole("n")?,
            Factor::Workers => p.workload.workers = whole("workers")?,
            Factor::Payload => p.workload.payload_bytes = v,
            Factor::Alpha => p.workload.alpha = v,
        }
        Ok(p)
    }

    /// LNS Figs. 5–6: the plan at each value of one factor, every point checked before any
    /// is computed; each point predicted, and simulated (with its entropy) when the plan
    /// simulates.
    pub fn sweep(&self, sweep: &Sweep) -> Result<Vec<(f64, Predicted)>, LabError> {
        let plans = sweep
            .values
            .iter()
            .map(|&v| {
                let p = self.with(sweep.factor, v)?;
                p.check()
                    .map_err(|e| invalid(format!("--sweep {}={v}: {e}", sweep.factor.name())))?;
                Ok((v, p))
            })
            .collect::<Result<Vec<_>, LabError>>()?;
        plans.into_iter().map(|(v, p)| Ok((v, p.run()?))).collect()
    }
}

/// The validation grid (the paper's, or a small one), simulated.
pub fn validate(small: bool, seed: u64) -> Result<Vec<ValidationRow>, LabError> {
    let mut grid = if small {
        ValidationGrid::small()
    } else {
        ValidationGrid::paper()
    };
    grid.seed = seed;
    bursty::validate_grid(&grid).map_err(invalid)
}

/// One basic test as written in a fit file.
#[derive(Deserialize)]
struct TestRow {
    n: u32,
    alpha: f64,
    payload: f64,
    workers: u32,
    spacing_us: f64,
    stack: String,
    measured_p99_us: f64,
}

/// The basic tests of a JSON file (an array of `{n, alpha, payload, workers, spacing_us,
/// stack, measured_p99_us}`), read with a bound, and the service-time laws of `stack` fitted
/// to them.
pub fn fit_file(
    path: &Path,
    stack: Stack,
    percentile: f64,
) -> Result<(usize, FitResult), LabError> {
    let text = read_bounded(path, MAX_FIT_FILE_BYTES, "--fit")?;
    let rows: Vec<TestRow> = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "{}: not a JSON array of basic tests: {e}",
            path.display()
        ))
    })?;
    let mut tests = Vec::new();
    for r in &rows {
        tests.push(BasicTest {
            workload: BurstyWorkload {
                n: r.n,
                alpha: r.alpha,
                payload_bytes: r.payload,
                workers: r.workers,
                spacing_ns: r.spacing_us * 1e3,
                percentile,
            },
            stack: r.stack.parse().map_err(invalid)?,
            measured_ns: r.measured_p99_us * 1e3,
        });
    }
    let f = fit(&tests, &FitSpec::for_stack(stack)).map_err(invalid)?;
    Ok((tests.len(), f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> BurstyPlan {
        BurstyPlan::example()
    }

    #[test]
    fn ranges_name_the_parameter() {
        let mut p = plan();
        p.workload.n = 0;
        assert!(p
            .run()
            .unwrap_err()
            .to_string()
            .starts_with("--n must be between 1"));
        let mut p = plan();
        p.workload.alpha = 1.5;
        assert!(p.check().unwrap_err().to_string().contains("--alpha"));
        let mut p = plan();
        p.simulate = true;
        p.bursts = MAX_BURSTS;
        p.workload.n = 2_000;
        assert!(p
            .check()
            .unwrap_err()
            .to_string()
            .contains("--n × --bursts"));
        assert_eq!(percentile_text(99.0), "99");
        assert_eq!(percentile_text(99.9), "99.9");
    }

    #[test]
    fn the_simulation_lands_near_the_prediction() {
        let mut p = plan();
        p.simulate = true;
        let r = p.run().unwrap();
        let s = r.simulated.as_ref().unwrap();
        assert!(s.latency_ns > 0.0 && s.latency_ns.is_finite());
        let e = r.error_pct().unwrap();
        assert!(e.is_finite());
        assert!(plan().run().unwrap().error_pct().is_none());
    }

    #[test]
    fn a_sweep_varies_one_factor_and_checks_every_point_first() {
        let sw: Sweep = "alpha=0.05,0.5,1".parse().unwrap();
        assert_eq!(sw.factor, Factor::Alpha);
        let rows = plan().sweep(&sw).unwrap();
        assert_eq!(rows.len(), 3);
        for (v, r) in &rows {
            let mut p = plan();
            p.workload.alpha = *v;
            assert_eq!(r.prediction, p.run().unwrap().prediction);
        }
        let sw: Sweep = "n=1k,20k".parse().unwrap();
        assert_eq!(sw.values, [1000.0, 20000.0]);
        // A bad point anywhere refuses the whole sweep, naming it.
        let e = plan().sweep(&"workers=4,0".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("--sweep workers=0"), "{e}");
        let e = plan().sweep(&"n=1.5".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("whole number"), "{e}");
        assert!("speed=1"
            .parse::<Sweep>()
            .unwrap_err()
            .contains("unknown factor"));
        assert!("n".parse::<Sweep>().unwrap_err().contains("KEY=V1"));
    }

    #[test]
    fn improve_names_its_flags_and_simulates_every_cut() {
        let p = plan();
        let i = p.improve(1.0, DEFAULT_DISPATCHER_NS).unwrap();
        assert_eq!(i.improvement.cuts.len(), 4);
        assert!(i.simulated.is_none());
        // T + D + R = 4 + 20 + 59.5 µs > M = 70 µs.
        let e = p.improve(1.0, 20_000.0).unwrap_err();
        assert!(e.is_invalid() && e.to_string().starts_with("--m:"), "{e}");
        let e = p.improve(0.0, 1_000.0).unwrap_err();
        assert!(e.is_invalid() && e.to_string().starts_with("--by"), "{e}");
        let e = p.improve(1.0, f64::NAN).unwrap_err();
        assert!(
            e.is_invalid() && e.to_string().starts_with("--dispatcher"),
            "{e}"
        );
        let mut p = plan();
        p.simulate = true;
        p.bursts = 2;
        p.workload.alpha = 1.0;
        let i = p.improve(0.5, DEFAULT_DISPATCHER_NS).unwrap();
        let s = i.simulated.unwrap();
        assert_eq!(s.cuts_ns.len(), 4);
        for (n, c) in i.improvement.cuts.iter().enumerate() {
            let sim = s.reduction_pct(n).unwrap();
            assert!((sim - c.reduction_pct).abs() < 1.0, "{:?}: {sim}", c.stage);
        }
        assert!(s.reduction_pct(4).is_none());
    }

    #[test]
    fn a_fit_file_that_is_not_tests_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.json");
        std::fs::write(&f, "{\"n\": 1}").unwrap();
        let e = fit_file(&f, Stack::Priority, 99.0).unwrap_err();
        assert!(
            e.is_invalid() && e.to_string().contains("not a JSON array"),
            "{e}"
        );
    }
}
