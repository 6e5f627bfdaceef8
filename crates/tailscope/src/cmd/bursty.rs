//! `tailscope model bursty`: the LNS paper's model of a tandem server under bursty traffic —
//! prediction (formulas 1–12), tandem simulation and formula 15's error, the validation grid,
//! and the fit of the service-time laws from the basic tests of Table 3.

use model::bursty::{
    self, fit, predict, simulate_tandem, tandem_for, BasicTest, BurstyParams, BurstyWorkload,
    Dispatch, FitSpec, Prediction, Stack, TandemReport, ValidationGrid,
};
use serde::Deserialize;
use serde_json::json;

use crate::cli::BurstyArgs;
use crate::exit::{usage, OrUsage};
use crate::limits;
use crate::output::{self, fmt_ns, outln};

/// A time parameter of the model: a per-request service time, bounded as the model's are.
fn ns(flag: &str, s: &str) -> anyhow::Result<f64> {
    limits::service_ns(flag, s)
}

/// One basic test as written in a --fit file.
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

pub fn run(a: &BurstyArgs) -> anyhow::Result<i32> {
    if a.validate {
        return run_validate(a);
    }
    if let Some(path) = &a.fit {
        return run_fit(a, path);
    }
    check_ranges(a)?;
    let params = BurstyParams {
        t0_ns: ns("--t0", &a.t0)?,
        mt_ns_per_byte: ns("--mt", &a.mt)?,
        r0_ns: ns("--r0", &a.r0)?,
        mr_ns: ns("--mr", &a.mr)?,
        m_ns: ns("--m", &a.m)?,
    };
    let w = BurstyWorkload {
        n: a.n,
        alpha: a.alpha,
        payload_bytes: a.payload,
        workers: a.workers,
        spacing_ns: ns("--spacing", &a.spacing)?,
        percentile: a.percentile,
    };
    let stack: Stack = a.stack.parse().or_usage()?;
    let entropy_bin = a
        .entropy_bin
        .as_deref()
        .map(|s| ns("--entropy-bin", s))
        .transpose()?;
    let p = predict(&params, &w, stack).or_usage()?;
    let best = params.best_workers(a.payload);
    let sim = if a.simulate {
        Some(simulate(a, &params, &w, stack, &p, entropy_bin)?)
    } else {
        None
    };
    if a.json {
        let mut v = json!({
            "inputs": {"params": params, "workload": w, "stack": stack.name()},
            "prediction": p,
            "predicted_us": p.latency_ns / 1e3,
            "best_workers": best,
        });
        if let Some((r, m)) = &sim {
            v["simulated_us"] = json!(m / 1e3);
            v["error_pct"] = json!(bursty::formulas::relative_error_pct(*m, p.latency_ns));
            v["simulated_sensitive"] = json!(r.sensitive.as_ref().map(|s| s.distribution_json()));
            v["simulated_all"] = json!(r.all.distribution_json());
            v["entropy_bits"] = json!(r.sensitive_entropy_bits.or(r.all_entropy_bits));
        }
        output::print_json(&v)?;
        return Ok(0);
    }
    print_prediction(a, &w, stack, &p, best, sim.as_ref())?;
    Ok(0)
}

/// The flags' ranges (exit 2 on the first out of range).
fn check_ranges(a: &BurstyArgs) -> anyhow::Result<()> {
    limits::in_range("--n", a.n, 1, limits::MAX_BURST)?;
    limits::in_range("--workers", a.workers, 1, limits::MAX_BURSTY_WORKERS)?;
    if !(a.alpha > 0.0 && a.alpha <= 1.0) {
        return Err(usage(format!("--alpha must be in (0, 1], got {}", a.alpha)));
    }
    if !(a.payload >= 0.0 && a.payload <= limits::MAX_PAYLOAD_BYTES) {
        return Err(usage(format!(
            "--payload must be between 0 and {:e} bytes, got {:e}",
            limits::MAX_PAYLOAD_BYTES,
            a.payload
        )));
    }
    if !(a.percentile > 0.0 && a.percentile < 100.0) {
        return Err(usage(format!(
            "--percentile must be in (0, 100), got {}",
            a.percentile
        )));
    }
    limits::in_range("--bursts", a.bursts, 1, limits::MAX_BURSTS)?;
    if a.simulate && u64::from(a.n) * a.bursts > limits::MAX_TANDEM_REQUESTS {
        return Err(usage(format!(
            "--n × --bursts must be at most {} with --simulate, got {} × {}",
            limits::MAX_TANDEM_REQUESTS,
            a.n,
            a.bursts
        )));
    }
    Ok(())
}

/// The tandem simulation of the workload (`--simulate`) and its simulated percentile (the
/// delay-sensitive requests' at `--percentile`, else their p99, else all requests' p99).
fn simulate(
    a: &BurstyArgs,
    params: &BurstyParams,
    w: &BurstyWorkload,
    stack: Stack,
    p: &Prediction,
    entropy_bin: Option<f64>,
) -> anyhow::Result<(TandemReport, f64)> {
    // The simulated M is T + R + the constant stage: give the constant stage what M
    // leaves beyond the two queueing stages' service times.
    let constant = (params.m_ns - p.t_ns - p.r_ns).max(0.0);
    let mut cfg = tandem_for(
        params,
        w,
        stack,
        constant,
        Dispatch::RoundRobin,
        a.bursts,
        a.seed,
    );
    cfg.entropy_bin_ns = entropy_bin;
    let r = simulate_tandem(&cfg).or_usage()?;
    lab::check_not_saturated(r.all.max_ns).map_err(super::target::lab_err)?;
    let sim_p = r
        .sensitive
        .as_ref()
        .and_then(|s| s.get(&format!("p{}", trim(a.percentile))))
        .map(|e| e.value);
    let measured = sim_p.or(r.sensitive_p99_ns).unwrap_or(r.all_p99_ns);
    Ok((r, measured))
}

/// The prediction for a person (and the simulation's, when made).
fn print_prediction(
    a: &BurstyArgs,
    w: &BurstyWorkload,
    stack: Stack,
    p: &Prediction,
    best: Option<u32>,
    sim: Option<&(TandemReport, f64)>,
) -> anyhow::Result<()> {
    outln!(
        "{} stack · N = {} per burst, U = {}, α = {}, L = {} B, k = {} · T = {}, R = {}, M = {}",
        stack.name(),
        w.n,
        fmt_ns(w.spacing_ns),
        w.alpha,
        w.payload_bytes,
        w.workers,
        fmt_ns(p.t_ns),
        fmt_ns(p.r_ns),
        fmt_ns(p.m_ns)
    )?;
    outln!(
        "bottleneck {:?} (B = {}, c_B = {}), regime {:?}{}",
        p.bottleneck,
        fmt_ns(p.b_ns),
        p.c_b,
        p.regime,
        p.rho.map(|r| format!(", ρ = {r:.3}")).unwrap_or_default()
    )?;
    outln!(
        "predicted p{} of delay-sensitive requests: {} (queueing {} + M; formula 2 bound {})",
        trim(a.percentile),
        fmt_ns(p.latency_ns),
        fmt_ns(p.wait_ns),
        fmt_ns(p.upper_bound_ns)
    )?;
    if let Some(k) = best {
        outln!("best worker count k_t (formula 16): {k}")?;
    }
    if let Some((r, m)) = sim {
        outln!(
            "simulated: {} ({} bursts) → error {:.1}% (formula 15){}",
            fmt_ns(*m),
            a.bursts,
            bursty::formulas::relative_error_pct(*m, p.latency_ns),
            r.sensitive_entropy_bits
                .or(r.all_entropy_bits)
                .map(|e| format!(" · latency entropy {e:.2} bits"))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

fn trim(p: f64) -> String {
    let s = format!("{p}");
    s.trim_end_matches(".0").to_string()
}

fn run_validate(a: &BurstyArgs) -> anyhow::Result<i32> {
    let mut grid = if a.small {
        ValidationGrid::small()
    } else {
        ValidationGrid::paper()
    };
    grid.seed = a.seed;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message("simulating the validation grid…");
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let rows = model::bursty::validate_grid(&grid).or_usage()?;
    bar.finish_and_clear();
    if a.json {
        output::print_json(&json!({ "rows": rows }))?;
        return Ok(0);
    }
    outln!(
        "{:>6} {:>5} {:>6} {:>3} {:<8} {:>12} {:>12} {:>7}",
        "N",
        "α",
        "L",
        "k",
        "stack",
        "formula p99",
        "simulated",
        "err%"
    )?;
    for r in &rows {
        outln!(
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
    outln!(
        "{} rows; worst error {worst:.1}% (the LNS paper reports 0.8-24.4%)",
        rows.len()
    )?;
    Ok(0)
}

fn run_fit(a: &BurstyArgs, path: &std::path::Path) -> anyhow::Result<i32> {
    // A JSON array of basic tests: a few kilobytes; 16 MiB is far above any real one.
    let text = lab::read_bounded(path, 16 << 20, "--fit").map_err(super::target::lab_err)?;
    let rows: Vec<TestRow> = serde_json::from_str(&text).map_err(|e| {
        usage(format!(
            "{}: not a JSON array of basic tests: {e}",
            path.display()
        ))
    })?;
    let stack: Stack = a.stack.parse().or_usage()?;
    let mut tests = Vec::new();
    for r in &rows {
        let s: Stack = r.stack.parse().or_usage()?;
        tests.push(BasicTest {
            workload: BurstyWorkload {
                n: r.n,
                alpha: r.alpha,
                payload_bytes: r.payload,
                workers: r.workers,
                spacing_ns: r.spacing_us * 1e3,
                percentile: a.percentile,
            },
            stack: s,
            measured_ns: r.measured_p99_us * 1e3,
        });
    }
    let f = fit(&tests, &FitSpec::for_stack(stack)).or_usage()?;
    if a.json {
        output::print_json(
            &json!({ "params": f.params, "residuals_ns": f.residuals_ns, "rms_relative": f.rms_relative }),
        )?;
        return Ok(0);
    }
    let p = f.params;
    outln!(
        "fitted from {} tests ({} stack): T0 = {}, mT = {:.3} ns/B, R0 = {}, mR = {}, M = {}; rms relative residual {:.1}%",
        tests.len(),
        stack.name(),
        fmt_ns(p.t0_ns),
        p.mt_ns_per_byte,
        fmt_ns(p.r0_ns),
        fmt_ns(p.mr_ns),
        fmt_ns(p.m_ns),
        f.rms_relative * 100.0
    )?;
    Ok(0)
}
