//! A stored run read back for the reports: its row (configuration, host facts, and the summary
//! that [`lab::Run::to_json`] wrote — the JSON shapes of DESIGN.md, which only ever grow), its
//! typed form ([`lab::Run`], when it was stored with one) and the CCDF curves of both views.
//! A typed run carries its curves. For a run stored without one the summary does not keep
//! them: they are recomputed by the same analysis over the stored records, streamed (bounded
//! memory), so that a figure and the stored percentiles beside it come from one computation;
//! the page says when they differ.

use analysis::{AnalysisConfig, IdealSpec, QueueStructure};
use lab::summary::{figure, RunSummary};
use lab::RunStatus;
use stats::{Distribution, P99, STANDARD_QUANTILES};
use store::{RunRow, Store, StoreError};

/// Both distributions of one view, as CCDF points (µs, P[X ≥ x]), with their sample sizes.
#[derive(Clone, Debug, Default)]
pub struct ViewCurves {
    pub measured: Vec<(f64, f64)>,
    pub measured_n: u64,
    pub ideal: Vec<(f64, f64)>,
    pub ideal_n: u64,
}

/// The recomputed curves of a run.
#[derive(Clone, Debug)]
pub struct Curves {
    /// The user's view (intended send → received).
    pub user: ViewCurves,
    /// The server's view (sent → client kernel receive).
    pub server: Option<ViewCurves>,
    /// Whether the recomputed p99 is the stored one (it is, unless the analysis changed since
    /// the run was stored).
    pub agrees: bool,
}

/// One stored run.
#[derive(Clone, Debug)]
pub struct StoredRun {
    pub row: RunRow,
    /// The run by field, when it was stored with a typed form this build reads; else the
    /// views read [`StoredRun::summary`] (runs stored before typed runs, or that failed
    /// before their analysis).
    pub run: Option<lab::Run>,
    /// Why a typed form that was stored could not be read (the views then read the summary).
    pub typed_error: Option<String>,
    /// The stored summary by field (every field empty for a run that never finished).
    pub facts: RunSummary,
    /// The curves, or why there are none (no records kept, nothing answered, …).
    pub curves: Result<Curves, String>,
}

/// `(key, µs)` of a stored distribution, in the standard order (figures that are numbers).
pub fn dist(d: &Distribution) -> Vec<(&'static str, f64)> {
    STANDARD_QUANTILES
        .iter()
        .filter_map(|(k, _)| figure(Some(d), k).map(|x| (*k, x)))
        .collect()
}

impl StoredRun {
    /// Reads run `id` and recomputes its curves from its records; `Ok(None)` when there is no
    /// such run.
    pub fn load(store: &Store, id: i64) -> Result<Option<StoredRun>, StoreError> {
        let Some(row) = store.get_run(id)? else {
            return Ok(None);
        };
        let (run, typed_error) = match lab::load_run(store, id) {
            Ok(run) => (run, None),
            Err(e) => (None, Some(e.to_string())),
        };
        let facts = facts_of(&row);
        let curves = match &run {
            Some(run) => curves_of_run(run),
            None => curves_of(store, &row, &facts),
        };
        Ok(Some(StoredRun {
            row,
            run,
            typed_error,
            facts,
            curves,
        }))
    }

    /// A run without curves (tests; runs that kept no records), read from its summary.
    pub fn without_curves(row: RunRow, why: &str) -> StoredRun {
        StoredRun {
            facts: facts_of(&row),
            row,
            run: None,
            typed_error: None,
            curves: Err(why.to_string()),
        }
    }

    /// A run with its typed form, its curves the ones the run carries (tests).
    pub fn typed(row: RunRow, run: lab::Run) -> StoredRun {
        let curves = curves_of_run(&run);
        StoredRun {
            facts: facts_of(&row),
            row,
            run: Some(run),
            typed_error: None,
            curves,
        }
    }

    pub fn id(&self) -> i64 {
        self.row.id
    }

    /// The run's status: its typed form's, else its summary's, else its row's; `None` for a
    /// run that never finished with one (still running, abandoned).
    pub fn run_status(&self) -> Option<RunStatus> {
        match &self.run {
            Some(run) => Some(run.status),
            None => self
                .facts
                .status
                .or_else(|| RunStatus::of_row(&self.row.status)),
        }
    }

    /// [`StoredRun::run_status`] as a text: the row's ("running", "abandoned") when there is
    /// none.
    pub fn status(&self) -> &str {
        match self.run_status() {
            Some(s) => s.as_str(),
            None => self.row.status.as_str(),
        }
    }
}

/// A row's summary by field.
fn facts_of(row: &RunRow) -> RunSummary {
    row.summary.as_ref().map(RunSummary::of).unwrap_or_default()
}

/// The analysis' configuration for a stored run, from its summary: the same ideal, warm-up,
/// seed and clock as when it ran (the arrival check is not needed for curves).
fn config_of(s: &RunSummary) -> Result<AnalysisConfig, String> {
    let ideal = match &s.ideal_spec {
        Some(v) => {
            let queues = match v.queues.as_deref() {
                Some("per-worker") => QueueStructure::PerWorker,
                _ => QueueStructure::Single,
            };
            Some(IdealSpec {
                service_ns: v.service_ns.ok_or("ideal_spec without service_ns")?,
                workers: v
                    .workers
                    .and_then(|w| u32::try_from(w as u64).ok())
                    .ok_or("ideal_spec without workers")?,
                queues,
            })
        }
        None => None,
    };
    let loopback = s.url.as_deref().is_some_and(|u| {
        let host = u.split("://").nth(1).unwrap_or(u);
        host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")
    });
    let start = s.start_mono_ns.map(|v| v as u64);
    Ok(AnalysisConfig {
        window_ns: 0,
        extra_quantiles: Vec::new(),
        ideal,
        warmup_ns: s.warmup_ns.map_or(0, |v| v as u64),
        arrival: model::ArrivalSpec::Deterministic,
        confidence: 0.95,
        lateness_threshold_ns: f64::INFINITY,
        seed: s.seed.map_or(1, |v| v as u64),
        same_host_start_mono_ns: start.filter(|_| loopback),
    })
}

/// The curves a typed run carries: its analysis' own, nothing recomputed.
fn curves_of_run(run: &lab::Run) -> Result<Curves, String> {
    let a = &run.analysis;
    if a.measured_ccdf_us.is_empty() {
        return Err("the run kept no latency curve".into());
    }
    Ok(curves_of_analysis(a, true))
}

/// Both views' measured and ideal curves of an analysis, with their sample counts.
fn curves_of_analysis(a: &analysis::RunAnalysis, agrees: bool) -> Curves {
    Curves {
        user: ViewCurves {
            measured: a.measured_ccdf_us.clone(),
            measured_n: a.measured.count,
            ideal: a.ideal_ccdf_us.clone(),
            ideal_n: a.ideal.as_ref().map_or(0, |i| i.count),
        },
        server: a.server_view.as_ref().map(|sv| ViewCurves {
            measured: sv.measured_ccdf_us.clone(),
            measured_n: sv.measured.count,
            ideal: sv.ideal_ccdf_us.clone(),
            ideal_n: sv.ideal.as_ref().map_or(0, |i| i.count),
        }),
        agrees,
    }
}

fn curves_of(store: &Store, row: &RunRow, s: &RunSummary) -> Result<Curves, String> {
    if row.summary.is_none() {
        return Err("the run never finished: no summary".into());
    }
    if row.requests.is_none() {
        return Err("the run kept no per-request records".into());
    }
    if s.measured.is_none() {
        return Err("the run measured no latency".into());
    }
    let cfg = config_of(s)?;
    let mut records = lab::records::StoredRecords::new(store, row.id);
    let a = analysis::analyse_records(&mut records, &cfg, None).map_err(|e| e.to_string())?;
    let stored_p99 = figure(s.measured.as_ref(), P99);
    let p99 = a.measured.get(P99).map(|e| e.value / 1e3);
    let agrees = match (stored_p99, p99) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-6 * x.abs().max(1.0),
        _ => false,
    };
    Ok(curves_of_analysis(&a, agrees))
}

/// The pointwise 95 % band of a CCDF estimated from `n` values: at each point, the Wilson
/// interval of the binomial proportion P[X ≥ x] (the same order-statistic reasoning as the
/// stored quantile intervals, seen vertically). Returns (µs, P low, P high).
pub fn wilson_band(points: &[(f64, f64)], n: u64) -> Vec<(f64, f64, f64)> {
    if n == 0 {
        return Vec::new();
    }
    let z = 1.959_964f64;
    let nf = n as f64;
    points
        .iter()
        .map(|&(x, p)| {
            let d = 1.0 + z * z / nf;
            let c = (p + z * z / (2.0 * nf)) / d;
            let h = z * (p * (1.0 - p) / nf + z * z / (4.0 * nf * nf)).sqrt() / d;
            (x, (c - h).max(0.0), (c + h).min(1.0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn distributions_read_in_standard_order() {
        let v: Distribution =
            serde_json::from_value(json!({"p99": 2.0, "p50": 1.0, "p99.9": null, "p42": 5.0}))
                .unwrap();
        assert_eq!(dist(&v), vec![("p50", 1.0), ("p99", 2.0)]);
    }

    #[test]
    fn the_band_holds_its_point_and_narrows_with_n() {
        let pts = [(10.0, 0.5), (20.0, 0.01), (30.0, 0.0001)];
        let a = wilson_band(&pts, 10_000);
        let b = wilson_band(&pts, 1_000_000);
        for ((x, lo, hi), (_, p)) in a.iter().zip(pts.iter().map(|p| (p.0, p.1))) {
            assert!(*lo <= p && p <= *hi, "{x}");
        }
        for (wa, wb) in a.iter().zip(&b) {
            assert!(wb.2 - wb.1 < wa.2 - wa.1);
        }
    }

    #[test]
    fn the_analysis_config_comes_from_the_summary() {
        let s = json!({
            "ideal_spec": {"service_ns": 50000.0, "workers": 2, "queues": "per-worker"},
            "warmup_ns": 1000, "seed": 7, "start_mono_ns": 5, "url": "nullrpc://127.0.0.1:7000"
        });
        let c = config_of(&RunSummary::of(&s)).unwrap();
        let i = c.ideal.unwrap();
        assert_eq!((i.workers, i.queues), (2, QueueStructure::PerWorker));
        assert_eq!((c.warmup_ns, c.seed), (1000, 7));
        assert_eq!(c.same_host_start_mono_ns, Some(5));
    }
}
