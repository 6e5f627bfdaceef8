//! `tailscope model`: the ideal latency distribution of an A/S/c queue, by simulation or, with
//! `--analytic`, from the closed forms that apply (each naming its source and exactness).

use std::path::Path;

use anyhow::Context;

use model::analytic::{self, ArrivalKind, ClosedForm, Query, ServiceKind};
use model::{ArrivalSpec, Discipline, ServiceSpec, SimConfig, TimeUnit};
use serde_json::{json, Value};
use stats::Summary;

use crate::cli::ModelArgs;
use crate::exit::{usage, OrUsage};
use crate::limits;
use crate::output::{self, fmt_ns, out, outln, us};
use lab::SimResult;

/// A validated model request: everything checked before any work starts.
pub struct Built {
    pub cfg: SimConfig,
    /// Mean arrival rate (req/s) that the simulation uses.
    pub rate_per_s: f64,
    /// Offered load per worker, ρ = λ·E[S]/c.
    pub rho: f64,
    pub kendall: String,
    pub query: Option<Query>,
    /// Above this many kept requests a streaming histogram replaces exact quantiles.
    pub exact_limit: u64,
}

/// The most a trace or samples file may hold: some 50 million lines, more than the simulator
/// and the generator take from a file in reasonable time; `/dev/zero` is refused outright.
const MAX_INPUT_BYTES: u64 = 1 << 30;

/// A trace or samples file (`what` names it in errors), read with a bound.
fn read_input(path: &str, what: &str) -> anyhow::Result<String> {
    lab::read_bounded(std::path::Path::new(path), MAX_INPUT_BYTES, what)
        .map_err(super::common::lab_err)
}

pub fn parse_unit(s: &str) -> anyhow::Result<TimeUnit> {
    match s.to_ascii_lowercase().as_str() {
        "ns" => Ok(TimeUnit::Ns),
        "us" | "µs" => Ok(TimeUnit::Us),
        other => Err(usage(format!(
            "--trace-unit must be ns or us, got '{other}'"
        ))),
    }
}

/// Parses `--arrival`, reading a trace file for `trace:PATH`.
pub fn parse_arrival(text: &str, unit: TimeUnit) -> anyhow::Result<ArrivalSpec> {
    match text.split_once(':') {
        Some((kind, path)) if kind.eq_ignore_ascii_case("trace") => {
            let body = read_input(path, "trace file")?;
            let t = model::parse_trace(&body, unit).or_usage_ctx(&format!("trace {path}"))?;
            Ok(ArrivalSpec::Trace(t))
        }
        _ => text.parse::<ArrivalSpec>().or_usage(),
    }
}

/// Parses `--service`, reading the file for `empirical:PATH`.
pub fn parse_service(text: &str) -> anyhow::Result<ServiceSpec> {
    match text.split_once(':') {
        Some((kind, path))
            if kind.eq_ignore_ascii_case("empirical") || kind.eq_ignore_ascii_case("trace") =>
        {
            let body = read_input(path, "service samples file")?;
            model::parse_empirical(&body).or_usage_ctx(&format!("service samples {path}"))
        }
        _ => text.parse::<ServiceSpec>().or_usage(),
    }
}

/// `--classes`: probabilities that are non-negative and sum to 1, at most 255 of them (the
/// simulator's class labels are bytes).
fn parse_probs(s: &str) -> anyhow::Result<Vec<f64>> {
    let v = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .map_err(|_| usage(format!("--classes: '{p}' is not a number")))
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    let sum: f64 = v.iter().sum();
    if v.iter().any(|p| !(p.is_finite() && *p >= 0.0)) || (sum - 1.0).abs() > 1e-9 {
        return Err(usage(format!(
            "--classes must be non-negative probabilities that sum to 1, got {s}"
        )));
    }
    if v.len() > 255 {
        return Err(usage(format!(
            "--classes must name at most 255 classes, got {}",
            v.len()
        )));
    }
    Ok(v)
}

fn arrival_letter(a: &ArrivalSpec) -> &'static str {
    match a {
        ArrivalSpec::Poisson => "M",
        ArrivalSpec::Deterministic => "D",
        ArrivalSpec::Lognormal { .. } => "LN",
        ArrivalSpec::Pareto { .. } => "Pareto",
        ArrivalSpec::GenPareto { .. } => "GPD",
        ArrivalSpec::Trace(_) => "Trace",
        ArrivalSpec::Bursty { .. } => "Burst",
    }
}

fn service_letter(s: &ServiceSpec) -> &'static str {
    match s {
        ServiceSpec::Deterministic { .. } => "D",
        ServiceSpec::Exponential { .. } => "M",
        ServiceSpec::Lognormal { .. } => "LN",
        ServiceSpec::Pareto { .. } => "Pareto",
        ServiceSpec::Empirical { .. } => "Emp",
    }
}

/// The closed-form query for a configuration, when its arrival process has a finite SCV.
fn query_for(cfg: &SimConfig, rate: f64) -> Option<Query> {
    let arrival = match &cfg.arrival {
        ArrivalSpec::Poisson => ArrivalKind::Poisson,
        ArrivalSpec::Deterministic => ArrivalKind::Deterministic,
        other => ArrivalKind::General { ca2: other.scv()? },
    };
    let service = match &cfg.service {
        ServiceSpec::Deterministic { .. } => ServiceKind::Deterministic,
        ServiceSpec::Exponential { .. } => ServiceKind::Exponential,
        s => {
            let cs2 = s.scv();
            if !cs2.is_finite() {
                return None;
            }
            ServiceKind::General { cs2 }
        }
    };
    let priority = matches!(
        cfg.discipline,
        Discipline::Priority | Discipline::PriorityPreemptive
    );
    Some(Query {
        lambda: rate,
        mean_service_s: cfg.service.mean_ns() / 1e9,
        workers: cfg.workers,
        arrival,
        service,
        class_probs: if priority {
            cfg.class_probs.clone()
        } else {
            Vec::new()
        },
        preemptive: matches!(cfg.discipline, Discipline::PriorityPreemptive),
    })
}

/// The most workers the simulator runs for `d` in reasonable time (see [`limits`]).
fn max_workers(d: &Discipline) -> u32 {
    match d {
        Discipline::Fifo | Discipline::RandomWorker | Discipline::RoundRobin => limits::MAX_WORKERS,
        _ => limits::MAX_SCANNED_WORKERS,
    }
}

/// Refuses a run so long in simulated time that its f64 nanosecond time stamps could no
/// longer resolve its service times: a time stamp resolves 2^-52 of its value, so at the end
/// of a span of simulated time a response time is only known to span · 2^-52. Allowed up to
/// 0.1 % of the mean service time.
fn check_time_resolution(requests: u64, rate: f64, mean_ns: f64) -> anyhow::Result<()> {
    let span_ns = requests as f64 / rate * 1e9;
    let resolution_ns = span_ns * f64::EPSILON;
    if resolution_ns > mean_ns * 1e-3 {
        return Err(usage(format!(
            "--requests {requests} at {rate} req/s span {} of simulated time, where time \
             stamps resolve only {}, too coarse for a mean service time of {}: give fewer \
             --requests or a higher --load or --rate",
            fmt_ns(span_ns),
            fmt_ns(resolution_ns),
            fmt_ns(mean_ns)
        )));
    }
    Ok(())
}

/// `--requests` and `--exact-limit`, with the other bounds of a simulation's size and
/// precision checked (exit 2 on the first out of range).
fn sizes(a: &ModelArgs) -> anyhow::Result<(u64, u64)> {
    let requests = model::parse_count(&a.requests).or_usage_ctx("--requests")?;
    if requests == 0 {
        return Err(usage("--requests must be at least 1"));
    }
    limits::in_range(
        "--replications",
        a.replications,
        1,
        limits::MAX_REPLICATIONS,
    )?;
    if requests.saturating_mul(u64::from(a.replications)) > limits::MAX_REQUESTS {
        return Err(usage(format!(
            "--requests × --replications must be at most {}, got {requests} × {}",
            limits::MAX_REQUESTS,
            a.replications
        )));
    }
    let exact_limit = model::parse_count(&a.exact_limit).or_usage_ctx("--exact-limit")?;
    limits::at_most("--exact-limit", exact_limit, limits::MAX_EXACT_LIMIT)?;
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        return Err(usage(format!(
            "--confidence must be in (0, 1), got {}",
            a.confidence
        )));
    }
    if !(a.warmup >= 0.0 && a.warmup < 1.0) {
        return Err(usage(format!(
            "--warmup must be in [0, 1) (a fraction of --requests), got {}",
            a.warmup
        )));
    }
    if let Some(c) = a.connections {
        limits::in_range("--connections", c, 1, limits::MAX_CONNECTIONS)?;
    }
    Ok((requests, exact_limit))
}

/// The arrival rate: from `--load` (the utilisation per worker), `--rate`, or a trace's own
/// (`None`); 70 % load when none is given.
fn rate_of(
    a: &ModelArgs,
    arrival: &ArrivalSpec,
    service: &ServiceSpec,
) -> anyhow::Result<Option<f64>> {
    Ok(match (a.load, a.rate) {
        (Some(load), _) => {
            if !(load > 0.0 && load < 1.0) {
                return Err(usage(format!(
                    "--load must be in (0, 1) (the utilisation per worker), got {load}"
                )));
            }
            Some(SimConfig::rate_for_load(load, a.workers, service).or_usage_ctx("--load")?)
        }
        (None, Some(r)) => {
            if !(r.is_finite() && r > 0.0) {
                return Err(usage(format!("--rate must be positive, got {r}")));
            }
            Some(r)
        }
        (None, None) => match arrival {
            ArrivalSpec::Trace(_) => None,
            _ => Some(SimConfig::rate_for_load(0.7, a.workers, service).or_usage()?),
        },
    })
}

/// Validates the arguments into a simulation configuration.
pub fn build(a: &ModelArgs) -> anyhow::Result<Built> {
    let unit = parse_unit(&a.trace_unit)?;
    let arrival = parse_arrival(&a.arrival, unit).context("--arrival")?;
    let service = parse_service(&a.service).context("--service")?;
    if a.workers == 0 {
        return Err(usage("--workers must be at least 1"));
    }
    let discipline: Discipline = a.discipline.parse().or_usage_ctx("--discipline")?;
    if a.workers > max_workers(&discipline) {
        return Err(usage(format!(
            "--workers must be at most {} with --discipline {}, got {}",
            max_workers(&discipline),
            a.discipline,
            a.workers
        )));
    }
    let class_probs = match &a.classes {
        Some(s) => parse_probs(s)?,
        None if matches!(
            discipline,
            Discipline::Priority | Discipline::PriorityPreemptive
        ) =>
        {
            return Err(usage(
                "priority disciplines need --classes (e.g. --classes 0.2,0.8)",
            ))
        }
        None => Vec::new(),
    };
    let (mut requests, exact_limit) = sizes(a)?;
    let mean_s = service.mean_ns() / 1e9;
    let rate = rate_of(a, &arrival, &service)?;
    if let ArrivalSpec::Trace(t) = &arrival {
        requests = requests.min(t.times_ns.len() as u64);
    }
    let effective_rate = match (&arrival, rate) {
        (_, Some(r)) => r,
        (ArrivalSpec::Trace(t), None) => model::mean_rate_of_trace(t)
            .ok_or_else(|| usage("trace needs at least two distinct timestamps to have a rate"))?,
        (_, None) => unreachable_rate()?,
    };
    check_time_resolution(requests, effective_rate, service.mean_ns())?;
    let rho = effective_rate * mean_s / f64::from(a.workers);
    let cfg = SimConfig {
        arrival,
        rate_per_s: rate,
        service,
        workers: a.workers,
        discipline,
        class_probs,
        connections: a.connections,
        requests,
        warmup_fraction: a.warmup,
        seed: a.seed,
    };
    cfg.validate().or_usage()?;
    let kendall = format!(
        "{}/{}/{}",
        arrival_letter(&cfg.arrival),
        service_letter(&cfg.service),
        cfg.workers
    );
    let query = query_for(&cfg, effective_rate);
    Ok(Built {
        cfg,
        rate_per_s: effective_rate,
        rho,
        kendall,
        query,
        exact_limit,
    })
}

fn unreachable_rate() -> anyhow::Result<f64> {
    Err(usage("give --load or --rate"))
}

pub fn run(a: &ModelArgs) -> anyhow::Result<i32> {
    let b = build(a)?;
    output::check_outputs(&a.out)?;
    if a.analytic {
        return run_analytic(a, &b);
    }
    let forms = match &b.query {
        Some(q) => analytic::closed_forms(q).unwrap_or_default(),
        None => Vec::new(),
    };
    let label = format!("{} {}", b.kendall, a.discipline);
    let obs = super::progress::Progress::new(a.out.json);
    let r = lab::simulate(
        &b.cfg,
        a.replications,
        b.exact_limit,
        a.confidence,
        &label,
        &obs,
    )
    .map_err(super::common::lab_err)?;
    // The exact distribution beside the simulation, when theory has one for this discipline.
    let exact = exact_form(&forms, &b.cfg.discipline);
    let mut series = vec![report::Series::new(
        format!("simulated {label}"),
        r.ccdf.iter().map(|&(x, p)| (us(x), p)).collect(),
    )];
    if let Some(f) = exact {
        let mut s = report::Series::new(
            format!("exact {} ({})", f.model, f.source),
            closed_form_ccdf_points(f),
        );
        s.dashed = true;
        series.push(s);
    }
    let title = format!("{label}, ρ = {:.2}", b.rho);
    let written = output::write_ccdf_outputs(&a.out, &title, &series)?;
    if a.out.json {
        let mut v = sim_json(&b, a, &r);
        v["closed_forms"] = forms_json(&forms);
        v["written"] = json!(written);
        output::print_json(&v)?;
    } else {
        print_sim_human(&b, a, &r, exact)?;
        if !forms.is_empty() {
            outln!()?;
            print_forms_human(&forms)?;
        }
        for w in written {
            outln!("wrote {w}")?;
        }
    }
    Ok(0)
}

/// The closed form whose response-time distribution is exact for this discipline (FIFO only:
/// the forms describe first-come-first-served service).
fn exact_form<'a>(forms: &'a [ClosedForm], d: &Discipline) -> Option<&'a ClosedForm> {
    if !matches!(d, Discipline::Fifo) {
        return None;
    }
    forms
        .iter()
        .find(|f| f.exact && !f.response_quantiles.is_empty())
}

fn closed_form_ccdf_points(f: &ClosedForm) -> Vec<(f64, f64)> {
    f.response_quantiles
        .iter()
        .map(|(_, q, s)| (s * 1e6, 1.0 - q))
        .collect()
}

fn run_analytic(a: &ModelArgs, b: &Built) -> anyhow::Result<i32> {
    let Some(q) = &b.query else {
        return Err(usage(format!(
            "no closed form applies to {} (an arrival or service process without a finite \
             coefficient of variation); simulate instead",
            b.kendall
        )));
    };
    let forms = analytic::closed_forms(q).or_usage()?;
    if a.out.json {
        output::print_json(&json!({
            "model": b.kendall,
            "inputs": inputs_json(b, a),
            "closed_forms": forms_json(&forms),
        }))?;
    } else {
        outln!(
            "{} · ρ = {:.3} · λ = {:.0} req/s · E[S] = {}",
            b.kendall,
            b.rho,
            b.rate_per_s,
            fmt_ns(b.cfg.service.mean_ns())
        )?;
        print_forms_human(&forms)?;
    }
    Ok(0)
}

fn inputs_json(b: &Built, a: &ModelArgs) -> Value {
    json!({
        "arrival": a.arrival,
        "service": a.service,
        "workers": b.cfg.workers,
        "load": b.rho,
        "rate_rps": b.rate_per_s,
        "mean_service_us": us(b.cfg.service.mean_ns()),
        "discipline": a.discipline,
        "classes": b.cfg.class_probs,
        "connections": b.cfg.connections,
        "requests": b.cfg.requests,
        "warmup_fraction": b.cfg.warmup_fraction,
        "seed": b.cfg.seed,
        "replications": a.replications,
    })
}

fn summary_dist(s: &Summary) -> Value {
    s.distribution_json()
}

fn sim_json(b: &Built, a: &ModelArgs, r: &SimResult) -> Value {
    let classes: Vec<Value> = r
        .class_response
        .iter()
        .enumerate()
        .map(|(k, s)| {
            json!({
                "class": k,
                "requests": s.count,
                "response": summary_dist(s),
                "mean_us": us(s.mean_ns),
            })
        })
        .collect();
    json!({
        "model": b.kendall,
        "inputs": inputs_json(b, a),
        "requests": r.recorded,
        "simulated_requests": r.outcome.requests,
        "response": summary_dist(&r.response),
        "wait": summary_dist(&r.wait),
        "response_ci": r.response.intervals_json(),
        "wait_ci": r.wait.intervals_json(),
        "mean_us": us(r.mean_response_ns),
        "mean_wait_us": us(r.wait.mean_ns),
        "offered_load": r.outcome.offered_load,
        "busy_fraction": r.outcome.busy_fraction,
        "confidence": r.response.confidence,
        "ci_method": r.ci_method,
        "exact_quantiles": r.response.exact,
        "classes": classes,
    })
}

fn forms_json(forms: &[ClosedForm]) -> Value {
    let conv = |v: &[(String, f64, f64)]| {
        output::dist_json(v.iter().map(|(k, _, s)| (k.as_str(), s * 1e9)))
    };
    Value::Array(
        forms
            .iter()
            .map(|f| {
                json!({
                    "model": f.model,
                    "quantity": f.quantity,
                    "source": f.source,
                    "exact": f.exact,
                    "mean_wait_us": f.mean_wait_s.map(|s| s * 1e6),
                    "mean_response_us": f.mean_response_s.map(|s| s * 1e6),
                    "wait": if f.wait_quantiles.is_empty() { Value::Null } else { conv(&f.wait_quantiles) },
                    "response": if f.response_quantiles.is_empty() { Value::Null } else { conv(&f.response_quantiles) },
                    "per_class_mean_wait_us": f.per_class_mean_wait_s.iter().map(|s| s * 1e6).collect::<Vec<_>>(),
                    "note": f.note,
                })
            })
            .collect(),
    )
}

fn print_sim_human(
    b: &Built,
    a: &ModelArgs,
    r: &SimResult,
    exact: Option<&ClosedForm>,
) -> anyhow::Result<()> {
    outln!(
        "{} · {} · ρ = {:.3} (λ = {:.0} req/s, E[S] = {}) · {} requests recorded ({:.1}% warm-up excluded) · seed {}{}",
        b.kendall,
        a.discipline,
        b.rho,
        b.rate_per_s,
        fmt_ns(b.cfg.service.mean_ns()),
        r.recorded,
        b.cfg.warmup_fraction * 100.0,
        b.cfg.seed,
        if r.replications > 1 {
            format!(" · {} replications", r.replications)
        } else {
            String::new()
        }
    )?;
    let conf = r.response.confidence * 100.0;
    match exact {
        Some(f) => outln!(
            "{:<16} {:>10}  {:<26} {:>10}   (exact: {})",
            "",
            "simulated",
            format!("{conf:.0}% CI"),
            "exact",
            f.source
        ),
        None => outln!(
            "{:<16} {:>10}  {:<26}",
            "",
            "simulated",
            format!("{conf:.0}% CI")
        ),
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
            outln!(
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
    outln!(
        "mean response    {:>10}{exact_mean}",
        fmt_ns(r.mean_response_ns)
    )?;
    for (k, s) in r.class_response.iter().enumerate() {
        outln!(
            "class {k}: {} requests, mean {}, p50 {}, p99 {}, p99.9 {}",
            s.count,
            fmt_ns(s.mean_ns),
            s.get("p50").map(|e| fmt_ns(e.value)).unwrap_or_default(),
            s.get("p99").map(|e| fmt_ns(e.value)).unwrap_or_default(),
            s.get("p99.9").map(|e| fmt_ns(e.value)).unwrap_or_default()
        )?;
    }
    outln!("confidence intervals: {}", r.ci_method)?;
    Ok(())
}

fn print_forms_human(forms: &[ClosedForm]) -> anyhow::Result<()> {
    outln!("closed forms:")?;
    for f in forms {
        let kind = if f.exact { "exact" } else { "approximate" };
        outln!("  {} — {} [{kind}; {}]", f.model, f.quantity, f.source)?;
        if let Some(m) = f.mean_wait_s {
            out!("    mean wait {}", fmt_ns(m * 1e9))?;
            if let Some(r) = f.mean_response_s {
                out!(", mean response {}", fmt_ns(r * 1e9))?;
            }
            outln!()?;
        }
        if !f.response_quantiles.is_empty() {
            let parts: Vec<String> = f
                .response_quantiles
                .iter()
                .map(|(k, _, s)| format!("{k} {}", fmt_ns(s * 1e9)))
                .collect();
            outln!("    response {}", parts.join(", "))?;
        }
        if !f.per_class_mean_wait_s.is_empty() {
            let parts: Vec<String> = f
                .per_class_mean_wait_s
                .iter()
                .enumerate()
                .map(|(k, s)| format!("class {k} {}", fmt_ns(s * 1e9)))
                .collect();
            outln!("    mean wait per class: {}", parts.join(", "))?;
        }
        if let Some(n) = &f.note {
            outln!("    note: {n}")?;
        }
    }
    Ok(())
}

/// Used by `model figure` to read a trace given by path.
pub fn read_trace(path: &Path, unit: TimeUnit) -> anyhow::Result<ArrivalSpec> {
    parse_arrival(&format!("trace:{}", path.display()), unit)
}
