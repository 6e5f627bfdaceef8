//! The `tailscope model` command line, driven as a user drives it: JSON shapes, agreement with
//! exact theory, and bad input (exit 2, one line naming the problem, nothing written).

use std::path::Path;
use std::process::{Command, Output};

fn ts(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailscope"))
        .args(args)
        .env_remove("TAILSCOPE_DB")
        .output()
        .expect("run tailscope")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

/// Runs a bad command and checks: exit 2, exactly one line on stderr containing `needle`,
/// nothing on stdout, and the requested plot not written.
fn rejects(args: &[&str], needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("p.svg");
    let mut a: Vec<&str> = args.to_vec();
    let plot_s = plot.to_str().unwrap().to_string();
    a.extend(["--plot", &plot_s]);
    let out = ts(&a);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line expected: {err}");
    assert!(
        err.to_lowercase().contains(&needle.to_lowercase()),
        "{args:?}: '{err}' should name '{needle}'"
    );
    assert!(out.stdout.is_empty());
    assert!(!plot.exists(), "nothing may be written on bad input");
}

#[test]
fn json_has_the_documented_shape_and_matches_mm1_theory() {
    let _g = crate::common::shared();
    // M/M/1 at ρ = 0.5 with E[S] = 50 µs: response ~ Exp(μ − λ) = Exp(1/100 µs), so the
    // p-quantile is −100 µs · ln(1 − p). 4 replications of 400k give an honest CI.
    let out = ts(&[
        "model",
        "--arrival",
        "poisson",
        "--service",
        "exp:50us",
        "--workers",
        "1",
        "--load",
        "0.5",
        "--requests",
        "400k",
        "--replications",
        "4",
        "--seed",
        "3",
        "--json",
    ]);
    let v = json(&out);
    for k in [
        "response",
        "wait",
        "mean_us",
        "requests",
        "inputs",
        "closed_forms",
        "response_ci",
    ] {
        assert!(v.get(k).is_some(), "missing key {k}");
    }
    for (key, p) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        let exact = -100.0 * (1.0f64 - p).ln();
        let ci = &v["response_ci"][key];
        let (lo, hi) = (ci["lo"].as_f64().unwrap(), ci["hi"].as_f64().unwrap());
        // Tolerance: the 95 % replication CI, widened by 1 % for the warm-up bias.
        assert!(
            lo * 0.99 <= exact && exact <= hi * 1.01,
            "{key}: exact {exact} not in [{lo}, {hi}]"
        );
    }
    let mean = v["mean_us"].as_f64().unwrap();
    assert!(
        (mean / 100.0 - 1.0).abs() < 0.03,
        "mean response {mean} µs, exact 100 µs"
    );
    assert_eq!(v["inputs"]["workers"], 1);
    // The exact M/M/1 form is listed first and names its source.
    assert_eq!(v["closed_forms"][0]["exact"], true);
    assert!(v["closed_forms"][0]["source"].as_str().unwrap().len() > 3);
}

#[test]
fn simulation_agrees_with_exact_md4_beside_it() {
    let _g = crate::common::shared();
    let v = json(&ts(&[
        "model",
        "--service",
        "det:50us",
        "--workers",
        "4",
        "--load",
        "0.8",
        "--requests",
        "2M",
        "--json",
    ]));
    let exact = v["closed_forms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["exact"] == true)
        .expect("an exact M/D/4 form");
    for key in ["p50", "p90", "p99"] {
        let sim = v["response"][key].as_f64().unwrap();
        let ex = exact["response"][key].as_f64().unwrap();
        let ci = &v["response_ci"][key];
        let (lo, hi) = (ci["lo"].as_f64().unwrap(), ci["hi"].as_f64().unwrap());
        assert!(
            lo * 0.99 <= ex && ex <= hi * 1.01,
            "{key}: exact {ex}, sim {sim} [{lo}, {hi}]"
        );
    }
}

#[test]
fn analytic_lists_forms_with_source_and_exactness() {
    let _g = crate::common::shared();
    let v = json(&ts(&[
        "model",
        "--analytic",
        "--service",
        "det:50us",
        "--workers",
        "1",
        "--load",
        "0.7",
        "--json",
    ]));
    let forms = v["closed_forms"].as_array().unwrap();
    assert!(forms
        .iter()
        .any(|f| f["exact"] == true && f["model"].as_str().unwrap().contains("M/D/1")));
    assert!(forms.iter().any(|f| f["exact"] == false));
    // Exact M/D/1 p99 at ρ = 0.7, D = 50 µs: 374.27 µs (Franx's form, checked in model's tests).
    let md1 = forms.iter().find(|f| f["exact"] == true).unwrap();
    let p99 = md1["response"]["p99"].as_f64().unwrap();
    assert!((p99 - 374.27).abs() < 0.05, "{p99}");
}

#[test]
fn figure_2_checks_the_papers_claim() {
    let _g = crate::common::shared();
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("f2.svg");
    let v = json(&ts(&[
        "model",
        "figure",
        "2",
        "--requests",
        "300k",
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ]));
    assert_eq!(v["curves"].as_array().unwrap().len(), 6);
    let claim = &v["claims"][0];
    // Exact M/D/1 theory (the model's exact waiting-time distribution, checked against
    // published values in the model crate's tests): p99 at ρ = 0.95 over p99 at ρ = 0.5.
    // A closed form evaluated in double precision: compared to its value, not to a band.
    let exact = claim["exact"].as_f64().unwrap();
    assert!(
        (exact / 10.593877751658153 - 1.0).abs() < 1e-9,
        "exact p99 ratio {exact}"
    );
    assert!(plot.exists());
}

#[test]
fn figure_4_says_where_the_paper_and_exact_theory_disagree() {
    let _g = crate::common::shared();
    let out = ts(&[
        "model",
        "figure",
        "4",
        "--requests",
        "200k",
        "--plot",
        "/dev/null",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("disagree"), "{text}");
    assert!(text.contains("56.86"), "{text}");
}

#[test]
fn traces_replay_and_bad_traces_are_rejected() {
    let _g = crate::common::shared();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.txt");
    // Arrivals every 100 µs with 50 µs service: nobody waits.
    let body: String = (0..1000).map(|i| format!("{}\n", i * 100)).collect();
    std::fs::write(&good, body).unwrap();
    let v = json(&ts(&[
        "model",
        "--arrival",
        &format!("trace:{}", good.display()),
        "--trace-unit",
        "us",
        "--service",
        "det:50us",
        "--json",
    ]));
    assert_eq!(v["response"]["p99.99"].as_f64().unwrap(), 50.0);
    assert_eq!(v["wait"]["p99"].as_f64().unwrap(), 0.0);

    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "# nothing\n\n").unwrap();
    rejects(
        &["model", "--arrival", &format!("trace:{}", empty.display())],
        "empty",
    );
    let unsorted = dir.path().join("unsorted.txt");
    std::fs::write(&unsorted, "100\n200\n150\n").unwrap();
    rejects(
        &[
            "model",
            "--arrival",
            &format!("trace:{}", unsorted.display()),
        ],
        "not sorted",
    );
    rejects(
        &["model", "--arrival", "trace:/nonexistent/trace.txt"],
        "/nonexistent/trace.txt",
    );
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    let _g = crate::common::shared();
    rejects(&["model", "--load", "1.2"], "utilisation");
    rejects(&["model", "--load", "1"], "utilisation");
    rejects(&["model", "--workers", "0"], "workers");
    rejects(&["model", "--service", "det:-5us"], "-5us");
    rejects(&["model", "--service", "det:fast"], "fast");
    rejects(&["model", "--requests", "lots"], "lots");
    rejects(&["model", "--discipline", "sjf"], "sjf");
    rejects(&["model", "--discipline", "priority"], "classes");
    rejects(
        &["model", "--rate", "30000", "--service", "det:50us"],
        "utilisation",
    );
}

#[test]
fn clap_usage_errors_also_exit_2() {
    let _g = crate::common::shared();
    let out = ts(&["model", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    let out = ts(&["model", "figure", "7", "--plot", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn priority_classes_are_reported_per_class() {
    let _g = crate::common::shared();
    let v = json(&ts(&[
        "model",
        "--service",
        "exp:50us",
        "--load",
        "0.8",
        "--discipline",
        "priority-preemptive",
        "--classes",
        "0.3,0.7",
        "--requests",
        "300k",
        "--json",
    ]));
    let classes = v["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 2);
    let m0 = classes[0]["mean_us"].as_f64().unwrap();
    let m1 = classes[1]["mean_us"].as_f64().unwrap();
    // Preemptive-resume: class 0 sees an M/M/1 with its own load 0.24: mean 50/(1−0.24) µs.
    assert!((m0 / (50.0 / 0.76) - 1.0).abs() < 0.05, "class 0 mean {m0}");
    assert!(m1 > m0);
    let _ = Path::new(".");
}
