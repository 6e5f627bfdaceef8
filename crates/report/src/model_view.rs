//! Views of the ideal alone: `tailscope model` (a simulation beside the closed forms, or the
//! closed forms alone) and `model figure` (a figure of Tales of the Tail re-derived), as the
//! documented `--json` objects and as text for a person.

use std::collections::BTreeMap;
use std::io::{self, Write};

use lab::figures::{agrees, SERVICE_NS};
use lab::model_query::Modelled;
use lab::SimResult;
use model::analytic::ClosedForm;
use model::query::ModelPlan;
use serde::Serialize;
use stats::{Distribution, Summary};

use crate::paper_figure::Figure;
use crate::terminal::fmt_ns;
use crate::Series;

fn us(ns: f64) -> f64 {
    ns / 1e3
}

/// `(key, q, seconds)` quantiles of a closed form as a distribution in µs.
fn seconds_dist(v: &[(String, f64, f64)]) -> Distribution {
    v.iter()
        .map(|(k, _, s)| (k.clone(), s * 1e9 / 1e3))
        .collect()
}

/// A quantile and its interval, µs.
#[derive(Serialize)]
pub struct IntervalUs {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

/// `{"p50": {"value", "lo", "hi"}, …}` in µs.
pub fn intervals(s: &Summary) -> BTreeMap<String, IntervalUs> {
    s.quantiles
        .iter()
        .map(|q| {
            let i = IntervalUs {
                value: us(q.est.value),
                lo: us(q.est.lo),
                hi: us(q.est.hi),
            };
            (q.key.clone(), i)
        })
        .collect()
}

/// The query as checked: `inputs` of both `model` objects.
#[derive(Serialize)]
pub struct Inputs<'a> {
    pub arrival: &'a str,
    pub service: &'a str,
    pub workers: u32,
    pub load: f64,
    pub rate_rps: f64,
    pub mean_service_us: f64,
    pub discipline: &'a str,
    pub classes: &'a [f64],
    pub connections: Option<u32>,
    pub requests: u64,
    pub warmup_fraction: f64,
    pub seed: u64,
    pub replications: u32,
}

impl<'a> Inputs<'a> {
    pub fn of(p: &'a ModelPlan) -> Self {
        Inputs {
            arrival: &p.arrival_text,
            service: &p.service_text,
            workers: p.cfg.workers,
            load: p.rho,
            rate_rps: p.rate_per_s,
            mean_service_us: us(p.mean_service_ns()),
            discipline: &p.discipline_text,
            classes: &p.cfg.class_probs,
            connections: p.cfg.connections,
            requests: p.cfg.requests,
            warmup_fraction: p.cfg.warmup_fraction,
            seed: p.cfg.seed,
            replications: p.replications,
        }
    }
}

/// One closed form.
#[derive(Serialize)]
pub struct FormView<'a> {
    pub model: &'a str,
    pub quantity: &'a str,
    pub source: &'a str,
    pub exact: bool,
    pub mean_wait_us: Option<f64>,
    pub mean_response_us: Option<f64>,
    pub wait: Option<Distribution>,
    pub response: Option<Distribution>,
    pub per_class_mean_wait_us: Vec<f64>,
    pub note: Option<&'a str>,
}

/// The closed forms as `closed_forms` lists them.
pub fn forms(forms: &[ClosedForm]) -> Vec<FormView<'_>> {
    let dist = |v: &[(String, f64, f64)]| (!v.is_empty()).then(|| seconds_dist(v));
    forms
        .iter()
        .map(|f| FormView {
            model: &f.model,
            quantity: &f.quantity,
            source: f.source,
            exact: f.exact,
            mean_wait_us: f.mean_wait_s.map(|s| s * 1e6),
            mean_response_us: f.mean_response_s.map(|s| s * 1e6),
            wait: dist(&f.wait_quantiles),
            response: dist(&f.response_quantiles),
            per_class_mean_wait_us: f.per_class_mean_wait_s.iter().map(|s| s * 1e6).collect(),
            note: f.note.as_deref(),
        })
        .collect()
}

/// `model --analytic --json`.
#[derive(Serialize)]
pub struct AnalyticJson<'a> {
    pub model: &'a str,
    pub inputs: Inputs<'a>,
    pub closed_forms: Vec<FormView<'a>>,
}

/// One priority class of a simulation.
#[derive(Serialize)]
pub struct ClassJson {
    pub class: usize,
    pub requests: u64,
    pub response: Distribution,
    pub mean_us: f64,
}

/// `model --json`: the simulation, the closed forms beside it, the files written.
#[derive(Serialize)]
pub struct SimJson<'a> {
    pub model: &'a str,
    pub inputs: Inputs<'a>,
    pub requests: u64,
    pub simulated_requests: u64,
    pub response: Distribution,
    pub wait: Distribution,
    pub response_ci: BTreeMap<String, IntervalUs>,
    pub wait_ci: BTreeMap<String, IntervalUs>,
    pub mean_us: f64,
    pub mean_wait_us: f64,
    pub offered_load: f64,
    pub busy_fraction: f64,
    pub confidence: f64,
    pub ci_method: &'a str,
    pub exact_quantiles: bool,
    pub classes: Vec<ClassJson>,
    pub closed_forms: Vec<FormView<'a>>,
    pub written: &'a [String],
}

impl<'a> SimJson<'a> {
    pub fn of(p: &'a ModelPlan, m: &'a Modelled, written: &'a [String]) -> Self {
        let r = &m.sim;
        let classes = r
            .class_response
            .iter()
            .enumerate()
            .map(|(k, s)| ClassJson {
                class: k,
                requests: s.count,
                response: s.distribution(),
                mean_us: us(s.mean_ns),
            })
            .collect();
        SimJson {
            model: &p.kendall,
            inputs: Inputs::of(p),
            requests: r.recorded,
            simulated_requests: r.outcome.requests,
            response: r.response.distribution(),
            wait: r.wait.distribution(),
            response_ci: intervals(&r.response),
            wait_ci: intervals(&r.wait),
            mean_us: us(r.mean_response_ns),
            mean_wait_us: us(r.wait.mean_ns),
            offered_load: r.outcome.offered_load,
            busy_fraction: r.outcome.busy_fraction,
            confidence: r.response.confidence,
            ci_method: r.ci_method,
            exact_quantiles: r.response.exact,
            classes,
            closed_forms: forms(&m.forms),
            written,
        }
    }
}

/// The CCDF curves of a simulation: the simulated one, and the exact one (dashed) when theory
/// has it for the discipline.
pub fn series(p: &ModelPlan, m: &Modelled) -> Vec<Series> {
    let label = p.label();
    let mut series = vec![Series::new(
        format!("simulated {label}"),
        m.sim.ccdf.iter().map(|&(x, q)| (us(x), q)).collect(),
    )];
    if let Some(f) = m.exact(&p.cfg.discipline) {
        let points = f
            .response_quantiles
            .iter()
            .map(|(_, q, s)| (s * 1e6, 1.0 - q))
            .collect();
        let mut s = Series::new(format!("exact {} ({})", f.model, f.source), points);
        s.dashed = true;
        series.push(s);
    }
    series
}

/// `model --analytic` for a person: the queue, then its closed forms.
pub fn analytic_text(w: &mut dyn Write, p: &ModelPlan, fs: &[ClosedForm]) -> io::Result<()> {
    writeln!(
        w,
        "{} · ρ = {:.3} · λ = {:.0} req/s · E[S] = {}",
        p.kendall,
        p.rho,
        p.rate_per_s,
        fmt_ns(p.mean_service_ns())
    )?;
    forms_text(w, fs)
}

/// `model` for a person: the simulation (beside the exact distribution when there is one),
/// the closed forms, the files written.
pub fn sim_text(
    w: &mut dyn Write,
    p: &ModelPlan,
    m: &Modelled,
    written: &[String],
) -> io::Result<()> {
    let r = &m.sim;
    let exact = m.exact(&p.cfg.discipline);
    let reps = if r.replications > 1 {
        format!(" · {} replications", r.replications)
    } else {
        String::new()
    };
    writeln!(
        w,
        "{} · {} · ρ = {:.3} (λ = {:.0} req/s, E[S] = {}) · {} requests recorded ({:.1}% warm-up excluded) · seed {}{reps}",
        p.kendall,
        p.discipline_text,
        p.rho,
        p.rate_per_s,
        fmt_ns(p.mean_service_ns()),
        r.recorded,
        p.cfg.warmup_fraction * 100.0,
        p.cfg.seed,
    )?;
    quantile_rows(w, r, exact)?;
    classes_text(w, r)?;
    writeln!(w, "confidence intervals: {}", r.ci_method)?;
    if !m.forms.is_empty() {
        writeln!(w)?;
        forms_text(w, &m.forms)?;
    }
    for f in written {
        writeln!(w, "wrote {f}")?;
    }
    Ok(())
}

/// The simulated quantiles with their intervals, the exact ones beside them, the means.
fn quantile_rows(w: &mut dyn Write, r: &SimResult, exact: Option<&ClosedForm>) -> io::Result<()> {
    let ci = format!("{:.0}% CI", r.response.confidence * 100.0);
    match exact {
        Some(f) => writeln!(
            w,
            "{:<16} {:>10}  {ci:<26} {:>10}   (exact: {})",
            "", "simulated", "exact", f.source
        ),
        None => writeln!(w, "{:<16} {:>10}  {ci:<26}", "", "simulated"),
    }?;
    for (name, s, ex) in [
        (
            "response",
            &r.response,
            exact.map(|f| &f.response_quantiles),
        ),
        ("wait", &r.wait, exact.map(|f| &f.wait_quantiles)),
    ] {
        for q in &s.quantiles {
            let ci = format!("[{}, {}]", fmt_ns(q.est.lo), fmt_ns(q.est.hi));
            let exact_v = ex
                .and_then(|v| v.iter().find(|(k, _, _)| k == &q.key))
                .map(|(_, _, sec)| fmt_ns(sec * 1e9));
            writeln!(
                w,
                "{:<16} {:>10}  {:<26} {:>10}",
                format!("{name} {}", q.key),
                fmt_ns(q.est.value),
                ci,
                exact_v.unwrap_or_default()
            )?;
        }
    }
    let exact_mean = exact
        .and_then(|f| f.mean_response_s)
        .map(|s| format!("   (exact {})", fmt_ns(s * 1e9)))
        .unwrap_or_default();
    writeln!(
        w,
        "mean response    {:>10}{exact_mean}",
        fmt_ns(r.mean_response_ns)
    )
}

fn classes_text(w: &mut dyn Write, r: &SimResult) -> io::Result<()> {
    let at = |s: &Summary, k: &str| s.get(k).map(|e| fmt_ns(e.value)).unwrap_or_default();
    for (k, s) in r.class_response.iter().enumerate() {
        writeln!(
            w,
            "class {k}: {} requests, mean {}, p50 {}, p99 {}, p99.9 {}",
            s.count,
            fmt_ns(s.mean_ns),
            at(s, "p50"),
            at(s, "p99"),
            at(s, "p99.9")
        )?;
    }
    Ok(())
}

/// The closed forms for a person, each with its source and whether it is exact.
pub fn forms_text(w: &mut dyn Write, forms: &[ClosedForm]) -> io::Result<()> {
    writeln!(w, "closed forms:")?;
    let secs = |s: f64| fmt_ns(s * 1e9);
    for f in forms {
        let kind = if f.exact { "exact" } else { "approximate" };
        writeln!(w, "  {} — {} [{kind}; {}]", f.model, f.quantity, f.source)?;
        if let Some(m) = f.mean_wait_s {
            write!(w, "    mean wait {}", secs(m))?;
            if let Some(r) = f.mean_response_s {
                write!(w, ", mean response {}", secs(r))?;
            }
            writeln!(w)?;
        }
        if !f.response_quantiles.is_empty() {
            let parts: Vec<String> = f
                .response_quantiles
                .iter()
                .map(|(k, _, s)| format!("{k} {}", secs(*s)))
                .collect();
            writeln!(w, "    response {}", parts.join(", "))?;
        }
        if !f.per_class_mean_wait_s.is_empty() {
            let parts: Vec<String> = f
                .per_class_mean_wait_s
                .iter()
                .enumerate()
                .map(|(k, s)| format!("class {k} {}", secs(*s)))
                .collect();
            writeln!(w, "    mean wait per class: {}", parts.join(", "))?;
        }
        if let Some(n) = &f.note {
            writeln!(w, "    note: {n}")?;
        }
    }
    Ok(())
}

/// The simulated CCDF of every curve of a figure.
pub fn figure_series(f: &Figure) -> Vec<Series> {
    f.curves
        .iter()
        .zip(&f.results)
        .map(|(c, r)| {
            let points = r.ccdf.iter().map(|&(x, p)| (us(x), p)).collect();
            Series::new(c.label.clone(), points)
        })
        .collect()
}

/// One curve of `model figure --json`.
#[derive(Serialize)]
pub struct CurveJson<'a> {
    pub label: &'a str,
    pub workers: u32,
    pub load: Option<f64>,
    pub requests: u64,
    pub response: Distribution,
    pub response_ci: BTreeMap<String, IntervalUs>,
    pub mean_us: f64,
    pub exact_response: Option<Distribution>,
}

/// One claim of the paper, against exact theory and the simulation.
#[derive(Serialize)]
pub struct ClaimJson<'a> {
    #[serde(flatten)]
    pub claim: &'a lab::figures::Claim,
    pub paper_agrees_with_exact: Option<bool>,
}

/// `model figure --json`.
#[derive(Serialize)]
pub struct FigureJson<'a> {
    pub figure: u32,
    pub title: &'a str,
    pub service_us: f64,
    pub curves: Vec<CurveJson<'a>>,
    pub claims: Vec<ClaimJson<'a>>,
    pub written: &'a [String],
}

impl<'a> FigureJson<'a> {
    pub fn of(f: &'a Figure, written: &'a [String]) -> Self {
        let curves = f
            .curves
            .iter()
            .zip(&f.results)
            .map(|(c, r)| CurveJson {
                label: &c.label,
                workers: c.cfg.workers,
                load: c
                    .cfg
                    .rate_per_s
                    .map(|l| l * c.cfg.service.mean_ns() / 1e9 / f64::from(c.cfg.workers)),
                requests: r.recorded,
                response: r.response.distribution(),
                response_ci: intervals(&r.response),
                mean_us: us(r.mean_response_ns),
                exact_response: c.exact.as_deref().map(seconds_dist),
            })
            .collect();
        let claims = f
            .claims
            .iter()
            .map(|c| ClaimJson {
                claim: c,
                paper_agrees_with_exact: c.exact.map(|e| agrees(c, e)),
            })
            .collect();
        FigureJson {
            figure: f.number,
            title: &f.title,
            service_us: us(SERVICE_NS),
            curves,
            claims,
            written,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::query::ModelQuery;

    fn plan() -> ModelPlan {
        ModelQuery {
            arrival: model::ArrivalSpec::Poisson,
            arrival_text: "poisson".into(),
            service: "det:50us".parse().unwrap(),
            service_text: "det:50us".into(),
            workers: 1,
            discipline: "fifo".into(),
            classes: None,
            connections: None,
            requests: "10k".into(),
            warmup: 0.0,
            seed: 1,
            replications: 1,
            exact_limit: "20M".into(),
            confidence: 0.95,
            load: Some(0.5),
            rate: None,
        }
        .build()
        .unwrap()
    }

    #[test]
    fn closed_forms_are_in_microseconds_with_null_for_what_they_lack() {
        let p = plan();
        let fs = lab::model_query::closed_forms(&p).unwrap();
        let v = serde_json::to_value(AnalyticJson {
            model: &p.kendall,
            inputs: Inputs::of(&p),
            closed_forms: forms(&fs),
        })
        .unwrap();
        assert_eq!(v["model"], "M/D/1");
        assert_eq!(v["inputs"]["mean_service_us"], 50.0);
        assert_eq!(v["inputs"]["arrival"], "poisson");
        let md1 = &v["closed_forms"][0];
        let mean = fs[0].mean_response_s.unwrap() * 1e6;
        assert!((md1["mean_response_us"].as_f64().unwrap() - mean).abs() < 1e-9);
        // Half the requests find the M/D/1 queue empty at ρ = 0.5: its median response is
        // the service time; its p99 is beyond it.
        let p50 = md1["response"]["p50"].as_f64().unwrap();
        assert!((50.0..50.001).contains(&p50), "{p50}");
        assert!(md1["response"]["p99"].as_f64().unwrap() > 100.0);
        // Allen-Cunneen gives a mean only for a deterministic service: no distribution.
        let forms = v["closed_forms"].as_array().unwrap();
        assert!(forms
            .iter()
            .any(|f| f["exact"] == false && f["response"].is_null()));
    }

    #[test]
    fn the_analytic_text_names_the_queue_and_every_form() {
        let p = plan();
        let fs = lab::model_query::closed_forms(&p).unwrap();
        let mut out = Vec::new();
        analytic_text(&mut out, &p, &fs).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("M/D/1 · ρ = 0.500 · λ = 10000 req/s · E[S] = 50.0 µs\n"));
        assert_eq!(
            text.matches(" [exact; ").count(),
            fs.iter().filter(|f| f.exact).count()
        );
        assert!(text.contains("closed forms:"));
    }
}
