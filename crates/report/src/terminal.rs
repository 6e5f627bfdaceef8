//! The terminal view of a run: the user's view against its ideal, then the server's view
//! against its own, the path's decomposition, the generator's lateness and time held, the
//! arrival check, per-class latency, the "why" and the stage breakdown. Written to any
//! `Write`, so the CLI can treat a closed pipe as success and tests can compare text.

use std::io::{self, Write};

use analysis::{Excess, RunAnalysis};
use lab::Run;
use stats::Summary;

/// The mark a percentile's row carries when its view does not stand behind it.
pub const NOT_STOOD_BEHIND: &str = "†";

/// Below a table of several runs whose rows carry [`NOT_STOOD_BEHIND`]: what it means.
pub const NOT_STOOD_BEHIND_NOTE: &str =
    "  †: not the server's alone: the generator's stalls are over 10 % of it (runs show N)";

/// Why each percentile a valid view does not stand behind is not the server's, one line
/// each, to print below that view's table.
pub fn marked_lines(v: &lab::Views, view: lab::View) -> Vec<String> {
    v.unstood(view)
        .into_iter()
        .map(|(k, why)| format!("  {NOT_STOOD_BEHIND} {k}: {why}"))
        .collect()
}

/// A latency for a terminal, "-" when there is none.
pub fn fmt_ns(ns: f64) -> String {
    if ns.is_finite() {
        model::format_duration_ns(ns)
    } else {
        "-".to_string()
    }
}

/// The run, for a person.
pub fn run(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    let a = &run.analysis;
    let id = run
        .run_id
        .map(|i| format!("run {i}"))
        .unwrap_or_else(|| "run (not stored)".into());
    let v = &run.views;
    writeln!(
        w,
        "{id} · {} · {} · headline: {} view · {} requests after warm-up · offered {:.0} req/s, achieved {:.0} req/s",
        run.target, run.status, v.headline, a.requests, run.rate_rps, a.achieved_rate_rps
    )?;
    views(w, run)?;
    if let Some(n) = &run.status_note {
        writeln!(w, "{}: {n}", run.status.as_str().to_uppercase())?;
    }
    if let Some(h) = &run.host_noise {
        writeln!(w, "{}", h.line())?;
    }
    if let Some(t) = &run.load.tls {
        writeln!(w, "{}", t.line())?;
        if let Some(c) = &t.cipher {
            writeln!(w, "TLS cipher suite: {c}")?;
        }
    }
    if let Some(st) = &a.stationarity {
        writeln!(w, "stationarity: {}", st.summary)?;
    }
    if let Some(advice) = &run.reproducibility.advice {
        writeln!(
            w,
            "reproducibility: {} — {advice}",
            run.reproducibility.flags.join("; ")
        )?;
    }
    if !a.interval_method.is_empty() {
        writeln!(
            w,
            "intervals ({:.0} %): {}",
            a.measured.confidence * 100.0,
            a.interval_method
        )?;
    }
    let o = &a.outcomes;
    writeln!(
        w,
        "outcomes: ok {}, error {}, timeout {}, dropped {}, skipped {}",
        o.ok, o.error, o.timeout, o.dropped, o.skipped
    )?;
    if let Some(l) = run.load.error_codes_line() {
        writeln!(w, "{l}")?;
    }
    saturation(w, run)?;
    writeln!(
        w,
        "the user's view (intended send → received){}:",
        mark(run, lab::View::User)
    )?;
    table(w, &a.measured, a.ideal.as_ref(), &a.excess, |k| {
        marked(run, lab::View::User, k)
    })?;
    for l in marked_lines(&run.views, lab::View::User) {
        writeln!(w, "{l}")?;
    }
    ideal_lines(w, a)?;
    server_view(w, run)?;
    lateness(w, a)?;
    if a.lateness_flagged && run.load.generator.threads > 0 {
        generator_catch_up(w, &run.load.generator)?;
    }
    writeln!(
        w,
        "  lateness verdict: {} — {}",
        run.lateness_verdict.cause.as_str(),
        run.lateness_verdict.why
    )?;
    arrivals_and_classes(w, a)?;
    why(w, run)?;
    stages(w, a)?;
    if a.stages.is_some() {
        if let Some(src) = run
            .server
            .t1_stamp
            .as_ref()
            .and_then(|t| t["source"].as_str())
        {
            writeln!(w, "  T1: {src}")?;
        }
    }
    instruments(w, run)?;
    Ok(())
}

/// Why a saturated run is saturated, and what its figures mean.
fn saturation(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    if let Some(sat) = &run.saturation {
        if run.status == lab::RunStatus::Saturated {
            writeln!(
                w,
                "SATURATED: offered {:.0} req/s (95 % interval from {:.0}), the server completed {:.0} req/s{}{}",
                sat.offered_rps,
                sat.offered_lo_rps,
                sat.completed_rps,
                sat.ideal_capacity_rps
                    .map(|c| format!(" (the ideal's capacity: {c:.0} req/s)"))
                    .unwrap_or_default(),
                if sat.backlog_grew {
                    format!(
                        "; backlog (in flight + held) grew from {:.0} to {:.0}",
                        sat.backlog_start, sat.backlog_end
                    )
                } else {
                    String::new()
                }
            )?;
            writeln!(
                w,
                "  the completion rate is the capacity measured; the backlog drained in {:.2} s after the schedule ended; beyond saturation the percentiles below grow with the run's length",
                sat.drain_s
            )?;
        }
    }
    Ok(())
}

/// The ideal: what it is, why there is none, its transient, and its check.
fn ideal_lines(w: &mut dyn Write, a: &RunAnalysis) -> io::Result<()> {
    if let Some(spec) = &a.ideal_spec {
        writeln!(
            w,
            "ideal: the run's own arrival times through {} worker(s), {} queue(s), deterministic service {}",
            spec.workers,
            match spec.queues {
                analysis::QueueStructure::Single => "one shared",
                analysis::QueueStructure::PerWorker => "per-worker",
            },
            fmt_ns(spec.service_ns)
        )?;
    }
    if let Some(n) = &a.ideal_note {
        writeln!(w, "ideal: {n}")?;
    }
    if let Some(t) = &a.ideal_transient {
        writeln!(
            w,
            "ideal transient for these arrivals: p50 {}, p99 {}, p99.9 {}",
            q(t, "p50"),
            q(t, "p99"),
            q(t, "p99.9")
        )?;
    }
    if let Some(s) = a.stamped_service_ns {
        writeln!(
            w,
            "service time from the server's own stamps at this load (read + work + encode + write): {}",
            fmt_ns(s)
        )?;
    }
    if let Some(c) = &a.ideal_check {
        writeln!(w, "WARNING: {c}")?;
    }
    Ok(())
}

/// The server's view's table and notes.
fn server_view(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    let (a, v) = (&run.analysis, &run.views);
    if let Some(sv) = &a.server_view {
        writeln!(
            w,
            "the server's view (sent → client kernel receive; ideal from the actual send times){}:",
            mark(run, lab::View::Server)
        )?;
        table(w, &sv.measured, sv.ideal.as_ref(), &sv.excess, |k| {
            marked(run, lab::View::Server, k)
        })?;
        for l in marked_lines(v, lab::View::Server) {
            writeln!(w, "{l}")?;
        }
        if let Some(n) = &sv.ideal_note {
            writeln!(w, "server view ideal: {n}")?;
        }
        if a.lateness_flagged {
            writeln!(
                w,
                "  (the generator fell behind: the user's view counts its stalls; this view does not)"
            )?;
        }
        if let Some(s) = v.server.as_ref().filter(|s| !s.valid) {
            writeln!(w, "  (this view is invalid: {})", s.why)?;
        }
    }
    Ok(())
}

/// The arrival check in words: the Anderson–Darling test on the sent gaps, and the
/// schedule's own (terminal, HTML report and the reports of older stored runs alike).
pub(crate) fn arrivals_text(n: f64, a2: f64, p: f64, exponential: bool, schedule_p: f64) -> String {
    let verdict = if exponential {
        "consistent with exponential"
    } else {
        "NOT exponential"
    };
    format!(
        "Anderson–Darling on {n} inter-arrival gaps: A² = {a2:.3}, p = {p:.3} → {verdict} \
         (the schedule's own gaps: p = {schedule_p:.3})"
    )
}

/// The arrival check and the per-class lines.
fn arrivals_and_classes(w: &mut dyn Write, a: &RunAnalysis) -> io::Result<()> {
    if let Some(c) = &a.arrival_check {
        let t = arrivals_text(
            c.n as f64,
            c.statistic,
            c.p_value,
            c.exponential,
            c.schedule_p_value,
        );
        writeln!(w, "arrivals as sent: {t}")?;
    }
    for c in &a.classes {
        let g = |k: &str| q(&c.measured, k);
        writeln!(
            w,
            "class {} ({}): {} requests, p50 {}, p99 {}, p99.9 {}",
            c.class,
            if c.class == 0 {
                "delay-sensitive"
            } else {
                "other"
            },
            c.requests,
            g("p50"),
            g("p99"),
            g("p99.9")
        )?;
    }
    Ok(())
}

/// The slowest requests' stages against the median ones'.
fn stages(w: &mut dyn Write, a: &RunAnalysis) -> io::Result<()> {
    if let Some(s) = &a.stages {
        writeln!(
            w,
            "stages (µs): slowest 1% ({} requests) vs median requests ({}):",
            s.slow_requests, s.median_requests
        )?;
        writeln!(
            w,
            "  {:<34} {:>10} {:>10} {:>10} {:>10}",
            "stage", "slow p50", "slow p99", "med p50", "med p99"
        )?;
        for r in &s.rows {
            writeln!(
                w,
                "  {:<34} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                r.stage, r.slow_p50_us, r.slow_p99_us, r.median_p50_us, r.median_p99_us
            )?;
        }
    }
    Ok(())
}

/// Each instrument and what it cost.
fn instruments(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    for i in &run.instruments {
        writeln!(
            w,
            "instrument: {} — {}{}; {} samples ({} skipped), {} each on average",
            i.name,
            i.mode,
            if i.cpus.is_empty() {
                String::new()
            } else {
                format!(" on CPU {:?}", i.cpus)
            },
            i.samples,
            i.skipped,
            fmt_ns(i.cost_per_sample_ns)
        )?;
        // The stage collector's note says how many requests the stage table rests on (a
        // share of them when its programs were attached in windows) and what it cost.
        if i.name == "eBPF stage collector" {
            if let Some(note) = &i.note {
                writeln!(w, "  {note}")?;
            }
        }
    }
    threads(w, run)
}

/// tailscope's threads early in the run: each one's CPUs (issue 37: none on the server's,
/// but the stage collector's window thread, whose toggles the server's budget pays for).
fn threads(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    let t = &run.load.threads;
    if t.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = t
        .iter()
        .map(|t| format!("{} on {}", t.name, host::probe::format_cpu_list(&t.allowed)))
        .collect();
    writeln!(
        w,
        "threads (the CPUs each may run on): {}",
        listed.join("; ")
    )
}

/// One line per view: valid or not and why, then which is the headline.
fn views(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    let v = &run.views;
    let word = |valid: bool| if valid { "valid" } else { "INVALID" };
    let behind = |view: lab::View| {
        v.stands_behind(view)
            .map_or(String::new(), |s| format!(" It stands behind {s}."))
    };
    writeln!(
        w,
        "user view {}: {}.{}",
        word(v.user.valid),
        v.user.why,
        behind(lab::View::User)
    )?;
    match &v.server {
        Some(s) => writeln!(
            w,
            "server view {}: {}.{}",
            word(s.valid),
            s.why,
            behind(lab::View::Server)
        )?,
        None => writeln!(w, "server view: none (no send and receive stamps)")?,
    }
    writeln!(
        w,
        "headline: {} view (--view {}: {})",
        v.headline, v.asked, v.headline_why
    )
}

/// The mark a view's table title carries: headline, and invalid.
fn mark(run: &Run, view: lab::View) -> String {
    let mut m = Vec::new();
    if run.views.headline == view {
        m.push("HEADLINE");
    }
    if !run.views.is_valid(view) {
        m.push("INVALID");
    }
    if m.is_empty() {
        String::new()
    } else {
        format!(" [{}]", m.join(", "))
    }
}

/// A valid view that does not stand behind percentile `k` (its row is marked).
fn marked(run: &Run, view: lab::View, k: &str) -> bool {
    run.views.is_valid(view) && !run.views.percentile_valid(view, k)
}

fn q(s: &Summary, k: &str) -> String {
    s.get(k).map(|e| fmt_ns(e.value)).unwrap_or_default()
}

/// Measured vs ideal vs excess per percentile, with intervals: the table's lines, its header
/// first. `brief` (the default screen's): no interval for the ideal, "%" interval headers and
/// × for the excess. A row whose percentile the view does not stand behind (`marked`) ends in
/// [`NOT_STOOD_BEHIND`].
pub(crate) fn table_lines(
    measured: &Summary,
    ideal: Option<&Summary>,
    excess: &[Excess],
    marked: impl Fn(&str) -> bool,
    brief: bool,
) -> Vec<String> {
    let conf = measured.confidence * 100.0;
    let iv = |lo: f64, hi: f64| format!("[{}, {}]", fmt_ns(lo), fmt_ns(hi));
    let mut lines = vec![if brief {
        format!(
            "  {:<7} {:>9} {:<22} {:>9} {:>8} {:<16}",
            "",
            "measured",
            format!("{conf:.0} % interval"),
            "ideal",
            "excess",
            "interval"
        )
    } else {
        format!(
            "{:<8} {:>10} {:<24} {:>10} {:<24} {:>8} {:<16}",
            "",
            "measured",
            format!("{conf:.0}% CI"),
            "ideal",
            format!("{conf:.0}% CI"),
            "excess",
            "CI"
        )
    }];
    for x in &measured.quantiles {
        let i = ideal.and_then(|s| s.get(&x.key));
        let e = excess.iter().find(|e| e.key == x.key);
        let value = fmt_ns(x.est.value);
        let interval = iv(x.est.lo, x.est.hi);
        let ideal = i.map_or_else(|| "-".into(), |e| fmt_ns(e.value));
        let excess_iv = e
            .map(|e| format!("[{:.2}, {:.2}]", e.lo, e.hi))
            .unwrap_or_default();
        let row = if brief {
            let excess = e.map_or_else(|| "-".into(), |e| format!("{:.2}×", e.value));
            format!(
                "  {:<7} {value:>9} {interval:<22} {ideal:>9} {excess:>8} {excess_iv:<16}",
                x.key
            )
        } else {
            let ideal_iv = i.map(|e| iv(e.lo, e.hi)).unwrap_or_default();
            let excess = e.map_or_else(|| "-".into(), |e| format!("{:.2}x", e.value));
            format!(
                "{:<8} {value:>10} {interval:<24} {ideal:>10} {ideal_iv:<24} {excess:>8} \
                 {excess_iv:<16}",
                x.key
            )
        };
        let mark = if marked(&x.key) { NOT_STOOD_BEHIND } else { "" };
        lines.push(format!("{}{mark}", row.trim_end()));
    }
    lines
}

/// [`table_lines`] in full.
fn table(
    w: &mut dyn Write,
    measured: &Summary,
    ideal: Option<&Summary>,
    excess: &[Excess],
    marked: impl Fn(&str) -> bool,
) -> io::Result<()> {
    for l in table_lines(measured, ideal, excess, marked, false) {
        writeln!(w, "{l}")?;
    }
    Ok(())
}

/// When the lateness is high, what it came from: the host's stalls of the generator's loop
/// (and the requests due during them), and how long sending each stall's backlog took.
fn generator_catch_up(w: &mut dyn Write, g: &load::GeneratorCost) -> io::Result<()> {
    let ms = |ns: u64| ns as f64 / 1e6;
    writeln!(
        w,
        "  host stalls {} (longest {:.1} ms, {:.1} ms in all; {} requests due during them), catch-up longest {:.2} ms ({} catch-ups, {:.1} ms in all); the generator's work {} per request (ceiling {} per core)",
        g.stalls,
        ms(g.longest_stall_ns),
        ms(g.stalled_ns),
        g.due_in_stalls,
        ms(g.longest_catch_up_ns),
        g.catch_ups,
        ms(g.catch_up_ns),
        g.busy_per_request_ns()
            .map_or("-".into(), |c| format!("{:.1} µs", c / 1e3)),
        g.ceiling_per_core_rps()
            .map_or("-".into(), |c| format!("{c:.0} req/s")),
    )
}

fn lateness(w: &mut dyn Write, a: &RunAnalysis) -> io::Result<()> {
    let l = |k: &str| q(&a.lateness, k);
    writeln!(
        w,
        "generator lateness (its own: due → seen by its loop): p50 {}, p99 {}, p99.9 {}{}",
        l("p50"),
        l("p99"),
        l("p99.9"),
        if a.lateness_flagged {
            "  — FLAGGED: the generator fell behind its schedule"
        } else {
            ""
        }
    )?;
    if let Some(h) = &a.held_in_client {
        if h.requests > 0 {
            writeln!(
                w,
                "held in the client (every connection at --max-outstanding): {} requests ({:.1} %), p50 {}, p99 {}",
                h.requests,
                100.0 * h.fraction,
                q(&h.held, "p50"),
                q(&h.held, "p99")
            )?;
        }
    }
    if let Some(d) = &a.decomposition {
        let row = |s: &Summary| {
            format!(
                "p50 {:>9} p99 {:>9} p99.9 {:>9}",
                q(s, "p50"),
                q(s, "p99"),
                q(s, "p99.9")
            )
        };
        writeln!(w, "path of each request:")?;
        writeln!(
            w,
            "  generator (intended → sent)       {}",
            row(&d.lateness)
        )?;
        writeln!(
            w,
            "  network + server (sent → kernel)  {}",
            row(&d.network_server)
        )?;
        if let Some(c) = &d.client_wakeup {
            writeln!(w, "  client wake-up (kernel → user)    {}", row(c))?;
        }
    }
    Ok(())
}

/// The "why": whose the excess is, the grown stages, the sources that line up with the
/// slowest requests, each with its fix and trade-off.
fn why(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    let a = &run.analysis;
    if !a.excess_split.is_empty() {
        writeln!(
            w,
            "why — whose excess time is it (user view's excess = client + server):"
        )?;
        for e in &a.excess_split {
            let share = if e.total_us.abs() > 1e-9 {
                format!(" ({:.0} % client)", 100.0 * e.client_us / e.total_us)
            } else {
                String::new()
            };
            writeln!(
                w,
                "  {:<7} {:>9.1} µs = client {:>9.1} µs + server {:>9.1} µs{share}",
                e.key, e.total_us, e.client_us, e.server_us
            )?;
        }
    }
    if let Some(src) = &run.ideal_source {
        if let (Some(g), Some(u)) = (src.batching_gain, src.unbatched_per_worker_service_ns) {
            if g > 1.02 {
                writeln!(
                    w,
                    "  batching: the ideal uses the server's batched cost (the peak with requests pipelined, {g:.2}× the rate with one in flight); a request that arrives alone costs {} — up to {g:.2}× of excess at low load is this",
                    fmt_ns(u)
                )?;
            }
        }
    }
    let Some(why) = &run.why else { return Ok(()) };
    writeln!(
        w,
        "why ({} slowest requests; {} of {} sampled intervals held one):",
        why.slow_requests, why.slow_intervals, why.intervals
    )?;
    for s in why.stages.iter().take(3) {
        if s.slow_p50_us > s.median_p50_us + 1.0 {
            writeln!(
                w,
                "  stage {}: {:.1} µs in the slowest 1% vs {:.1} µs for median requests",
                s.stage, s.slow_p50_us, s.median_p50_us
            )?;
        }
    }
    let significant: Vec<_> = why.sources.iter().filter(|s| s.p_value < 0.05).collect();
    if significant.is_empty() {
        writeln!(
            w,
            "  no sampled source lines up with the slowest requests (all p >= 0.05)"
        )?;
    }
    for s in significant.iter().take(4) {
        writeln!(
            w,
            "  {} ({}): {:.1}x more during slow requests, p = {:.3}; {}",
            s.source, s.kind, s.lift, s.p_value, s.evidence
        )?;
        writeln!(
            w,
            "      fix: {}\n      trade-off: {}",
            s.mitigation, s.tradeoff
        )?;
    }
    Ok(())
}

/// A calibration, for a person: the peak and how it was found.
pub fn calibration(w: &mut dyn Write, url: &str, c: &lab::Calibration) -> io::Result<()> {
    writeln!(
        w,
        "{url}: peak {:.0} req/s ({} connections × {} in flight) → {} per request ({} per request per worker with {} worker(s)) (run {})",
        c.peak_rps,
        c.best.connections,
        c.best.depth,
        fmt_ns(c.service_ns),
        fmt_ns(c.per_worker_service_ns),
        c.workers,
        c.run_id
    )?;
    writeln!(
        w,
        "  without batching (one request in flight per connection): {:.0} req/s → {} per request per worker; batching gain {:.2}×",
        c.unbatched_rps,
        fmt_ns(c.unbatched_per_worker_service_ns),
        c.batching_gain
    )?;
    if let Some((lo, hi)) = c.peak_interval_rps {
        writeln!(
            w,
            "  the peak's 95 % interval: [{lo:.0}, {hi:.0}] req/s (±{:.1} %)",
            50.0 * (hi - lo) / c.peak_rps
        )?;
    }
    writeln!(
        w,
        "  the peak is what an open-loop overload at {:.0} req/s completed on the best step; that step made {:.0} req/s in the search (÷ the peak = {:.3})",
        c.overload_offered_rps,
        c.best.rate_rps,
        c.best_vs_confirmation()
    )?;
    if let Some(d) = &c.disagreement {
        writeln!(w, "  WARNING: {d}")?;
    }
    let steps: Vec<String> = c
        .steps
        .iter()
        .map(|s| format!("{}×{}: {:.0}", s.connections, s.depth, s.rate_rps))
        .collect();
    writeln!(
        w,
        "  search (connections×depth: req/s): {}",
        steps.join(", ")
    )
}
