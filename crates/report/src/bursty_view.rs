//! Views of `tailscope model bursty` (the LNS paper's model): a prediction beside its
//! simulation, the validation grid, a fit; as `--json` objects and as text for a person.

use std::io::{self, Write};

use lab::bursty::{
    percentile_text, BurstyPlan, Concurrency, Improved, Predicted, Sweep, MAX_BURST,
};
use model::bursty::{
    BurstyParams, BurstyWorkload, ConcurrencyRow, FitResult, Handover, Prediction, ServerStage,
    StageTimes, ValidationRow,
};
use serde::Serialize;
use stats::Distribution;

use crate::terminal::fmt_ns;

/// What the prediction was made for.
#[derive(Serialize)]
pub struct InputsJson<'a> {
    pub params: &'a BurstyParams,
    pub workload: &'a BurstyWorkload,
    pub stack: &'static str,
}

impl<'a> InputsJson<'a> {
    pub fn of(plan: &'a BurstyPlan) -> Self {
        InputsJson {
            params: &plan.params,
            workload: &plan.workload,
            stack: plan.stack.name(),
        }
    }
}

/// What `--simulate` adds.
#[derive(Serialize)]
pub struct SimulatedJson {
    pub simulated_us: f64,
    pub error_pct: Option<f64>,
    pub simulated_sensitive: Option<Distribution>,
    pub simulated_all: Distribution,
    pub entropy_bits: Option<f64>,
}

/// `model bursty --json`.
#[derive(Serialize)]
pub struct PredictionJson<'a> {
    pub inputs: InputsJson<'a>,
    pub prediction: &'a Prediction,
    pub predicted_us: f64,
    pub best_workers: Option<u32>,
    #[serde(flatten)]
    pub simulated: Option<SimulatedJson>,
}

impl<'a> PredictionJson<'a> {
    pub fn of(plan: &'a BurstyPlan, r: &'a Predicted) -> Self {
        let simulated = r.simulated.as_ref().map(|s| SimulatedJson {
            simulated_us: s.latency_ns / 1e3,
            error_pct: r.error_pct(),
            simulated_sensitive: s.report.sensitive.as_ref().map(|s| s.distribution()),
            simulated_all: s.report.all.distribution(),
            entropy_bits: s.entropy_bits(),
        });
        PredictionJson {
            inputs: InputsJson::of(plan),
            prediction: &r.prediction,
            predicted_us: r.prediction.latency_ns / 1e3,
            best_workers: r.best_workers,
            simulated,
        }
    }
}

/// `model bursty --concurrency T --json`.
#[derive(Serialize)]
pub struct ConcurrencyJson<'a> {
    pub inputs: InputsJson<'a>,
    pub target_us: f64,
    pub workers: u32,
    pub best_workers: Option<u32>,
    /// The largest burst searched: a row at it met the target at every N up to it.
    pub max_burst: u32,
    pub rows: &'a [ConcurrencyRow],
}

impl<'a> ConcurrencyJson<'a> {
    pub fn of(plan: &'a BurstyPlan, c: &'a Concurrency) -> Self {
        ConcurrencyJson {
            inputs: InputsJson::of(plan),
            target_us: c.target_ns / 1e3,
            workers: plan.workload.workers,
            best_workers: c.best_workers,
            max_burst: MAX_BURST,
            rows: &c.rows,
        }
    }
}

/// Fig. 7 for a person: per α, the largest burst meeting the target at k and at k_t.
pub fn concurrency(w: &mut dyn Write, plan: &BurstyPlan, c: &Concurrency) -> io::Result<()> {
    let wl = &plan.workload;
    writeln!(
        w,
        "concurrency (LNS Fig. 7): the largest burst N whose predicted p{} stays within {} · {} stack, U = {}, L = {} B · T = {}",
        percentile_text(wl.percentile),
        fmt_ns(c.target_ns),
        plan.stack.name(),
        fmt_ns(wl.spacing_ns),
        wl.payload_bytes,
        fmt_ns(plan.params.t_ns(wl.payload_bytes)),
    )?;
    let best = c
        .best_workers
        .map_or("k_t undefined".to_string(), |k| format!("k_t = {k}"));
    writeln!(
        w,
        "{:>8} {:>14} {:>14} {:>8}",
        "α",
        format!("k = {}", wl.workers),
        best,
        "gain"
    )?;
    let n = |v: Option<u32>| match v {
        None => "none".to_string(),
        Some(n) if n >= MAX_BURST => format!("≥ {n}"),
        Some(n) => n.to_string(),
    };
    for r in &c.rows {
        let gain = r.gain.map_or("-".into(), |g| format!("{g:.2}×"));
        writeln!(
            w,
            "{:>8} {:>14} {:>14} {:>8}",
            r.alpha,
            n(r.at_workers),
            n(r.at_best),
            gain
        )?;
    }
    if c.rows.iter().any(|r| {
        r.at_workers.is_some_and(|n| n >= MAX_BURST) || r.at_best.is_some_and(|n| n >= MAX_BURST)
    }) {
        writeln!(
            w,
            "(\"≥ {MAX_BURST}\": every burst searched meets the target — the delay-sensitive requests are in formula 7's steady regime, where N does not matter)"
        )?;
    }
    Ok(())
}

/// One stage's cut in `model bursty --improve --json`.
#[derive(Serialize)]
pub struct CutJson<'a> {
    pub stage: ServerStage,
    pub label: &'static str,
    /// The stage's time before and after the cut.
    pub before_us: f64,
    pub after_us: f64,
    pub predicted_us: f64,
    pub reduction_pct: f64,
    /// The bottleneck with the cut.
    pub bottleneck: ServerStage,
    /// For the bottleneck stage: the cut beyond which another stage is the bottleneck.
    pub handover: Option<&'a Handover>,
    pub prediction: &'a Prediction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_reduction_pct: Option<f64>,
}

/// M split into the stages' times, µs.
#[derive(Serialize)]
pub struct StagesJson {
    pub tcp_ip_us: f64,
    pub dispatcher_us: f64,
    pub workers_us: f64,
    pub rest_us: f64,
    pub m_us: f64,
}

impl StagesJson {
    fn of(s: &StageTimes) -> Self {
        StagesJson {
            tcp_ip_us: s.tcp_ip_ns / 1e3,
            dispatcher_us: s.dispatcher_ns / 1e3,
            workers_us: s.workers_ns / 1e3,
            rest_us: s.rest_ns / 1e3,
            m_us: s.m_ns() / 1e3,
        }
    }
}

/// `model bursty --improve --json`: LNS Improvement 2.
#[derive(Serialize)]
pub struct ImprovementJson<'a> {
    pub inputs: InputsJson<'a>,
    /// The share of each stage's time removed, %.
    pub by_pct: f64,
    pub stages: StagesJson,
    pub predicted_us: f64,
    pub bottleneck: ServerStage,
    pub baseline: &'a Prediction,
    pub cuts: Vec<CutJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_us: Option<f64>,
}

impl<'a> ImprovementJson<'a> {
    pub fn of(plan: &'a BurstyPlan, r: &'a Improved) -> Self {
        let i = &r.improvement;
        let sim = r.simulated.as_ref();
        let cuts = i
            .cuts
            .iter()
            .enumerate()
            .map(|(n, c)| CutJson {
                stage: c.stage,
                label: c.stage.label(),
                before_us: c.before_ns / 1e3,
                after_us: c.after_ns / 1e3,
                predicted_us: c.prediction.latency_ns / 1e3,
                reduction_pct: c.reduction_pct,
                bottleneck: c.bottleneck,
                handover: c.handover.as_ref(),
                prediction: &c.prediction,
                simulated_us: sim.and_then(|s| s.cuts_ns.get(n)).map(|v| v / 1e3),
                simulated_reduction_pct: sim.and_then(|s| s.reduction_pct(n)),
            })
            .collect();
        ImprovementJson {
            inputs: InputsJson::of(plan),
            by_pct: i.fraction * 100.0,
            stages: StagesJson::of(&i.stages),
            predicted_us: i.baseline.latency_ns / 1e3,
            bottleneck: i.baseline_bottleneck,
            baseline: &i.baseline,
            cuts,
            simulated_us: sim.map(|s| s.baseline_ns / 1e3),
        }
    }
}

/// A percentage with three significant digits (0.00168, 0.100, 64.9), so that the small
/// reductions of the non-bottleneck stages stay readable.
fn pct_text(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let decimals = (2.0 - x.abs().log10().floor()).clamp(0.0, 12.0) as usize;
    format!("{x:.decimals$}")
}

/// Improvement 2 for a person: per stage, its time, the predicted percentile with the cut,
/// the reduction and the bottleneck after; then why.
pub fn improvement(w: &mut dyn Write, plan: &BurstyPlan, r: &Improved) -> io::Result<()> {
    let (wl, i) = (&plan.workload, &r.improvement);
    let p = percentile_text(wl.percentile);
    let s = &i.stages;
    writeln!(
        w,
        "Improvement 2 (LNS §3.2): {} stack · N = {}, U = {}, α = {}, L = {} B, k = {} · each stage's time cut by {}%",
        plan.stack.name(),
        wl.n,
        fmt_ns(wl.spacing_ns),
        wl.alpha,
        wl.payload_bytes,
        wl.workers,
        (i.fraction * 1e8).round() / 1e6,
    )?;
    writeln!(
        w,
        "M = {} = TCP/IP {} + event dispatcher {} + worker threads {} + rest {}",
        fmt_ns(s.m_ns()),
        fmt_ns(s.tcp_ip_ns),
        fmt_ns(s.dispatcher_ns),
        fmt_ns(s.workers_ns),
        fmt_ns(s.rest_ns)
    )?;
    let b = &i.baseline;
    let sim = r.simulated.as_ref();
    writeln!(
        w,
        "predicted p{p}: {} (queueing {} + M), bottleneck {} (B = {}, c_B = {}){}",
        fmt_ns(b.latency_ns),
        fmt_ns(b.wait_ns),
        i.baseline_bottleneck.label(),
        fmt_ns(b.b_ns),
        b.c_b,
        sim.map(|s| format!(" · simulated {}", fmt_ns(s.baseline_ns)))
            .unwrap_or_default()
    )?;
    let sim_head = if sim.is_some() {
        format!(" {:>14} {:>10}", format!("simulated p{p}"), "simulated")
    } else {
        String::new()
    };
    writeln!(
        w,
        "{:<17} {:>10} {:>10} {:>14} {:>10}  {:<17}{sim_head}",
        "stage",
        "time",
        "cut to",
        format!("predicted p{p}"),
        "reduction",
        "bottleneck after"
    )?;
    for (n, c) in i.cuts.iter().enumerate() {
        let sim_cols = match sim {
            Some(s) => format!(
                " {:>14} {:>10}",
                s.cuts_ns.get(n).map_or("-".into(), |v| fmt_ns(*v)),
                s.reduction_pct(n)
                    .map_or("-".into(), |v| format!("{} %", pct_text(v)))
            ),
            None => String::new(),
        };
        writeln!(
            w,
            "{:<17} {:>10} {:>10} {:>14} {:>10}  {:<17}{sim_cols}",
            c.stage.label(),
            fmt_ns(c.before_ns),
            fmt_ns(c.after_ns),
            fmt_ns(c.prediction.latency_ns),
            format!("{} %", pct_text(c.reduction_pct)),
            c.bottleneck.label(),
        )?;
    }
    // Why: the bottleneck's B/c_B is in the queueing term; the others are in M alone.
    if let Some(c) = i.cut(i.baseline_bottleneck) {
        writeln!(
            w,
            "{} is the bottleneck: its time per node B/c_B drives the queueing term w_p (formulas 4, 7, 9), so its cut shrinks w_p as well as M.",
            c.stage.label()
        )?;
        if let Some(h) = &c.handover {
            let moved = c.bottleneck != c.stage;
            writeln!(
                w,
                "Beyond a {} % cut of it, the bottleneck passes to the {} ({} per node), which bounds the gain{}.",
                pct_text(h.at_fraction * 100.0),
                h.to.label(),
                fmt_ns(h.next_per_node_ns),
                if moved { ": this cut goes past that point" } else { "" }
            )?;
        }
        if let Some(o) = i
            .cuts
            .iter()
            .filter(|o| o.stage != c.stage && o.reduction_pct > c.reduction_pct)
            .max_by(|a, b| a.reduction_pct.total_cmp(&b.reduction_pct))
        {
            writeln!(
                w,
                "Here M outweighs the queue (w_p = {} of {}): cutting the {} gains more.",
                fmt_ns(b.wait_ns),
                fmt_ns(b.latency_ns),
                o.stage.label()
            )?;
        }
    }
    writeln!(
        w,
        "The other stages are in M only: a cut reduces the p{p} by the time it removes, no more."
    )?;
    Ok(())
}

/// One point of `model bursty --sweep --json`.
#[derive(Serialize)]
pub struct SweepPointJson {
    pub value: f64,
    pub predicted_us: f64,
    pub best_workers: Option<u32>,
    #[serde(flatten)]
    pub simulated: Option<SimulatedJson>,
}

/// `model bursty --sweep KEY=… --json`: LNS Figs. 5 (the percentile) and 6 (the entropy).
#[derive(Serialize)]
pub struct SweepJson<'a> {
    pub inputs: InputsJson<'a>,
    pub factor: &'static str,
    pub points: Vec<SweepPointJson>,
}

impl<'a> SweepJson<'a> {
    pub fn of(plan: &'a BurstyPlan, sweep: &Sweep, rows: &[(f64, Predicted)]) -> Self {
        let points = rows
            .iter()
            .map(|(v, r)| {
                let one = PredictionJson::of(plan, r);
                SweepPointJson {
                    value: *v,
                    predicted_us: one.predicted_us,
                    best_workers: one.best_workers,
                    simulated: one.simulated,
                }
            })
            .collect();
        SweepJson {
            inputs: InputsJson::of(plan),
            factor: sweep.factor.name(),
            points,
        }
    }
}

/// LNS Figs. 5–6 for a person: per value of the factor, the predicted percentile and, when
/// simulated, the simulated one, formula 15's error and the latency entropy.
pub fn sweep(
    w: &mut dyn Write,
    plan: &BurstyPlan,
    sweep: &Sweep,
    rows: &[(f64, Predicted)],
) -> io::Result<()> {
    let p = percentile_text(plan.workload.percentile);
    writeln!(
        w,
        "{} stack, the others as given · LNS Fig. 5 (p{p}) and Fig. 6 (entropy, with --simulate --entropy-bin) over {}",
        plan.stack.name(),
        sweep.factor.name(),
    )?;
    writeln!(
        w,
        "{:>10} {:>14} {:>14} {:>9} {:>14}",
        sweep.factor.name(),
        format!("predicted p{p}"),
        format!("simulated p{p}"),
        "error",
        "entropy (bits)"
    )?;
    for (v, r) in rows {
        let s = r.simulated.as_ref();
        writeln!(
            w,
            "{:>10} {:>14} {:>14} {:>9} {:>14}",
            v,
            fmt_ns(r.prediction.latency_ns),
            s.map_or("-".into(), |s| fmt_ns(s.latency_ns)),
            r.error_pct().map_or("-".into(), |e| format!("{e:.1} %")),
            s.and_then(|s| s.entropy_bits())
                .map_or("-".into(), |b| format!("{b:.2}")),
        )?;
    }
    Ok(())
}

/// `model bursty --validate --json`.
#[derive(Serialize)]
pub struct ValidationJson<'a> {
    pub rows: &'a [ValidationRow],
}

/// The prediction for a person (and the simulation's, when made).
pub fn prediction(w: &mut dyn Write, plan: &BurstyPlan, r: &Predicted) -> io::Result<()> {
    let (wl, p) = (&plan.workload, &r.prediction);
    writeln!(
        w,
        "{} stack · N = {} per burst, U = {}, α = {}, L = {} B, k = {} · T = {}, R = {}, M = {}",
        plan.stack.name(),
        wl.n,
        fmt_ns(wl.spacing_ns),
        wl.alpha,
        wl.payload_bytes,
        wl.workers,
        fmt_ns(p.t_ns),
        fmt_ns(p.r_ns),
        fmt_ns(p.m_ns)
    )?;
    writeln!(
        w,
        "bottleneck {:?} (B = {}, c_B = {}), regime {:?}{}",
        p.bottleneck,
        fmt_ns(p.b_ns),
        p.c_b,
        p.regime,
        p.rho.map(|r| format!(", ρ = {r:.3}")).unwrap_or_default()
    )?;
    writeln!(
        w,
        "predicted p{} of delay-sensitive requests: {} (queueing {} + M; formula 2 bound {})",
        percentile_text(wl.percentile),
        fmt_ns(p.latency_ns),
        fmt_ns(p.wait_ns),
        fmt_ns(p.upper_bound_ns)
    )?;
    if let Some(k) = r.best_workers {
        writeln!(w, "best worker count k_t (formula 16): {k}")?;
    }
    if let (Some(s), Some(e)) = (&r.simulated, r.error_pct()) {
        writeln!(
            w,
            "simulated: {} ({} bursts) → error {e:.1}% (formula 15){}",
            fmt_ns(s.latency_ns),
            plan.bursts,
            s.entropy_bits()
                .map(|e| format!(" · latency entropy {e:.2} bits"))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

/// The validation grid for a person: formula against simulation per row, the worst error.
pub fn validation(w: &mut dyn Write, rows: &[ValidationRow]) -> io::Result<()> {
    writeln!(
        w,
        "{:>6} {:>5} {:>6} {:>3} {:<8} {:>12} {:>12} {:>7}",
        "N", "α", "L", "k", "stack", "formula p99", "simulated", "err%"
    )?;
    for r in rows {
        writeln!(
            w,
            "{:>6} {:>5} {:>6} {:>3} {:<8} {:>12} {:>12} {:>7.2}",
            r.n,
            r.alpha,
            r.payload,
            r.workers,
            r.stack,
            fmt_ns(r.formula_p99_us * 1e3),
            fmt_ns(r.simulated_p99_us * 1e3),
            r.error_pct
        )?;
    }
    let worst = rows.iter().map(|r| r.error_pct.abs()).fold(0.0, f64::max);
    writeln!(
        w,
        "{} rows; worst error {worst:.1}% (the LNS paper reports 0.8-24.4%)",
        rows.len()
    )
}

/// A fit for a person: the parameters and how well they reproduce the `tests` tests.
pub fn fit(w: &mut dyn Write, tests: usize, stack: &str, f: &FitResult) -> io::Result<()> {
    let p = &f.params;
    writeln!(
        w,
        "fitted from {tests} tests ({stack} stack): T0 = {}, mT = {:.3} ns/B, R0 = {}, mR = {}, M = {}; rms relative residual {:.1}%",
        fmt_ns(p.t0_ns),
        p.mt_ns_per_byte,
        fmt_ns(p.r0_ns),
        fmt_ns(p.mr_ns),
        fmt_ns(p.m_ns),
        f.rms_relative * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn improvement_says_which_stage_bounds_the_gain_and_when_m_outweighs_the_queue() {
        assert_eq!(pct_text(64.87), "64.9");
        assert_eq!(pct_text(0.0016815), "0.00168");
        assert_eq!(pct_text(0.1), "0.100");
        assert_eq!(pct_text(0.0), "0");
        // α = 0.05: formula 8's queue is short, and the workers' share of M outweighs it.
        let plan = BurstyPlan::example();
        let r = plan.improve(1.0, 1_000.0).unwrap();
        let mut out = Vec::new();
        improvement(&mut out, &plan, &r).unwrap();
        let text = String::from_utf8(out).unwrap();
        for needle in [
            "TCP/IP is the bottleneck",
            "passes to the worker threads",
            "this cut goes past that point",
            "cutting the worker threads gains more",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        let v = serde_json::to_value(ImprovementJson::of(&plan, &r)).unwrap();
        assert_eq!(v["cuts"].as_array().map(Vec::len), Some(4));
        assert!(v.get("simulated_us").is_none() && v["cuts"][0].get("simulated_us").is_none());
    }

    #[test]
    fn a_prediction_without_simulation_has_no_simulated_keys() {
        let mut plan = BurstyPlan::example();
        plan.workload.percentile = 99.9;
        let r = plan.run().unwrap();
        let v = serde_json::to_value(PredictionJson::of(&plan, &r)).unwrap();
        assert_eq!(v["inputs"]["stack"], "priority");
        assert_eq!(v["predicted_us"], r.prediction.latency_ns / 1e3);
        assert!(v.get("simulated_us").is_none() && v.get("error_pct").is_none());
        let mut out = Vec::new();
        prediction(&mut out, &plan, &r).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("predicted p99.9 of delay-sensitive requests"),
            "{text}"
        );
        assert!(!text.contains("simulated:"));
    }
}
