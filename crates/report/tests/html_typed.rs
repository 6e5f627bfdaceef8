//! The HTML section of a run drawn from its typed form ([`lab::Run`], by field) is the one
//! drawn from its JSON summary alone (the fallback for runs stored without a typed form):
//! one page, whichever the store had.

use report::html::{runs_page, Context};
use report::stored::StoredRun;

fn row(run: &lab::Run) -> store::RunRow {
    store::RunRow {
        id: 7,
        kind: "run".into(),
        status: run.status.into(),
        target: run.target.clone(),
        started_at: "2026-11-21T21:00:00.000Z".into(),
        finished_at: None,
        config: run.config.to_json(),
        host: serde_json::json!({"hostname": "synthetic", "cpus_online": 2, "governor": null}),
        summary: Some(run.to_json()),
        requests: None,
    }
}

/// Both pages of `run`: from its fields, and from its summary with the same curves.
fn pages(run: &lab::Run) -> (String, String) {
    let ctx = Context {
        db: "runs.db".into(),
        generated_at: "2026-11-21T21:00:00.000Z".into(),
    };
    let typed = StoredRun::typed(row(run), run.clone());
    let mut legacy = StoredRun::without_curves(row(run), "unused");
    legacy.curves = typed.curves.clone();
    let a = runs_page(&[typed], &ctx).unwrap().html;
    let b = runs_page(&[legacy], &ctx).unwrap().html;
    (a, b)
}

fn assert_same(a: &str, b: &str) {
    if a != b {
        let line = a
            .lines()
            .zip(b.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        panic!(
            "the pages differ, first at line {}:\ntyped:   {:?}\nsummary: {:?}",
            line + 1,
            a.lines().nth(line),
            b.lines().nth(line)
        );
    }
}

#[test]
fn an_ok_run_reads_the_same_by_field_and_by_path() {
    let run = report::synthetic::run(12_000.0, 50_000.0, 20_000, 3).unwrap();
    let (a, b) = pages(&run);
    assert_same(&a, &b);
    // The page says what the run says.
    assert!(a.contains("measured against"), "headline");
    assert!(a.contains("softirqs on CPU 1"), "why");
    assert!(a.contains("attribution sampler"), "instruments");
    assert!(a.contains("run-7-ccdf"), "the curves the run carries");
}

#[test]
fn a_saturated_run_with_stages_and_notes_reads_the_same_by_field_and_by_path() {
    let mut run = report::synthetic::run(16_000.0, 50_000.0, 20_000, 4).unwrap();
    run.status = lab::RunStatus::Saturated;
    run.status_note = Some("generator also late: <stalls> & more".into());
    run.saturation = Some(lab::Saturation {
        offered_rps: 16_000.0,
        offered_lo_rps: 15_800.0,
        completed_rps: 15_100.0,
        ideal_capacity_rps: Some(20_000.0),
        backlog_start: 3.0,
        backlog_end: 90.0,
        completion_short: true,
        backlog_grew: true,
        drain_s: 0.4,
    });
    run.analysis.ideal_check = Some("the measured median is below the ideal's".into());
    run.analysis.ideal_note = Some("a note on the ideal".into());
    run.analysis.stages = Some(analysis::StageBreakdown {
        slow_requests: 200,
        median_requests: 2_000,
        rows: vec![analysis::StageRow {
            stage: "T3→T4 work".into(),
            slow_p50_us: 61.0,
            slow_p99_us: 90.5,
            median_p50_us: 50.2,
            median_p99_us: 55.0,
        }],
    });
    run.analysis.classes = vec![analysis::ClassMeasured {
        class: 0,
        requests: 1_234,
        measured: run.analysis.measured.clone(),
    }];
    run.ideal_source = Some(lab::IdealSource {
        from: "stored calibration".into(),
        calibration_run: Some(3),
        batching_gain: Some(1.6),
        unbatched_per_worker_service_ns: Some(80_000.0),
    });
    if let Some(w) = run.why.as_mut() {
        w.sources.push(attrib::SourceFinding {
            source: "steal time".into(),
            kind: attrib::SourceKind::Background,
            lift: f64::NAN,
            p_value: 0.5,
            evidence: "none".into(),
            mitigation: "a dedicated host".into(),
            tradeoff: "cost".into(),
        });
    }
    // The host's time lost in the first windows (the timeline's third panel).
    run.window_host = run
        .analysis
        .windows
        .iter()
        .take(3)
        .enumerate()
        .map(|(i, w)| lab::timeline::WindowHost {
            start_s: w.start_s,
            end_s: w.end_s,
            lost_us: [("steal time".to_string(), 100.0 * (i + 1) as f64)]
                .into_iter()
                .collect(),
        })
        .collect();
    let (a, b) = pages(&run);
    assert_same(&a, &b);
    assert!(a.contains("Latency over time"), "the timeline");
    assert!(a.contains("SATURATED: offered 16,000 req/s"), "{a}");
    assert!(a.contains("generator also late: &lt;stalls&gt; &amp; more"));
    assert!(a.contains("Where the time goes: stages"));
    assert!(a.contains("Batching: the ideal uses"));
    assert!(a.contains("class 0 (delay-sensitive)"));
}

/// Issue 36: the page's first line quotes the headline view's figures and names it; a user
/// view declared invalid is never the one quoted (its p99 is not on that line).
#[test]
fn the_headline_quotes_the_headline_view_and_names_it() {
    let mut run = report::synthetic::run(12_000.0, 50_000.0, 20_000, 5).unwrap();
    let sv = run.analysis.server_view.clone().expect("a server view");
    let server_p99 = sv.measured.get("p99").unwrap().value / 1e3;
    let user_p99 = run.analysis.measured.get("p99").unwrap().value / 1e3;
    run.views.user.valid = false;
    run.views.user.why = "lateness p99 8.74 ms".into();
    run.views.headline = lab::View::Server;
    let (a, b) = pages(&run);
    assert_same(&a, &b);
    let lede = a
        .lines()
        .find(|l| l.contains("class=\"lede\"") && l.contains("measured"))
        .unwrap();
    let shown = |us: f64| format!("<b>{}</b>", report::figure::fmt_us(us));
    assert!(lede.contains("server view: p99"), "{lede}");
    assert!(lede.contains(&shown(server_p99)), "{lede}");
    assert_ne!(shown(server_p99), shown(user_p99));
    assert!(!lede.contains(&shown(user_p99)), "{lede}");
    // Both views invalid: the one quoted says so.
    run.views.server.as_mut().unwrap().valid = false;
    let (a, _) = pages(&run);
    assert!(a.contains("server view (not valid: see Validity): p99"));
}
