//! `tailscope report`, `runs compare` and the HdrHistogram exports, driven as a user drives
//! them and checked with the tools their readers use: a real stored run (the built-in server on
//! 127.0.0.1, port 0), a synthetic three-point experiment stored as a sweep stores one (fixed
//! numbers for exact checks) and a real three-point sweep. The reports are opened in headless
//! Chromium: no console message, no network request, every
//! figure in the DOM and drawn in the screenshot. The HDR log is read back by the reference
//! Python reader. In CI a missing Chromium or Python environment fails; elsewhere it skips.

use crate::browser;
use crate::common;
use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::OnceLock;

use common::{bin, json_of};
use serde_json::{json, Value};
use support::{assert_usage_error, names};

/// The store every test reads: one real run and one synthetic experiment, made once.
struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    run: i64,
    experiment: i64,
}

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn real_run(db: &Path) -> i64 {
    let mut child = bin()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--arch",
            "epoll",
            "--work",
            "det:50us",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut addr = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut addr)
        .unwrap();
    let _served = Served(child);
    let out = bin()
        .arg("run")
        .arg(format!("nullrpc://{}", addr.trim()))
        .args(["--rate", "4000", "--service", "50us", "--duration", "3s"])
        .args(["--warmup", "500ms", "--json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    let v = json_of(&out);
    assert!(
        ["ok", "invalid", "saturated"].contains(&v["status"].as_str().unwrap()),
        "{v}"
    );
    v["run_id"].as_i64().unwrap()
}

/// An experiment as `sweep` stores one: three points at 20, 50 and 80 % of a 50 µs server,
/// each an ordinary run with its records, and the summary's rows and max load.
fn synthetic_experiment(db: &Path) -> i64 {
    let st = store::Store::open(db).unwrap();
    let e = st
        .begin_experiment(&store::NewExperiment {
            kind: "sweep".into(),
            started_at: store::now_rfc3339(),
            config: json!({"target": "nullrpc://127.0.0.1:7000", "loads": ["20%", "50%", "80%"],
                           "slo": "p99<=1ms"}),
        })
        .unwrap();
    let mut rows = Vec::new();
    for (i, pct) in [20.0f64, 50.0, 80.0].into_iter().enumerate() {
        let rate = pct / 100.0 * 20_000.0;
        let (n, seed) = (12_000, 10 + i as u64);
        let mut run = report::synthetic::run(rate, 50_000.0, n, seed).unwrap();
        let id = st
            .begin_run_in(
                &store::NewRun {
                    kind: "sweep-point".into(),
                    target: run.target.clone(),
                    started_at: store::now_rfc3339(),
                    config: json!({"target": run.target, "rate_rps": rate, "load_pct": pct,
                                   "params": {"load_pct": pct}}),
                    host: json!({"hostname": "synthetic", "cpus_online": 2}),
                },
                Some(e),
            )
            .unwrap();
        let recs = report::synthetic::records(rate, 50_000.0, n, seed);
        st.put_columns(id, &lab::records::to_columns(&recs).unwrap())
            .unwrap();
        run.run_id = Some(id);
        let s = run.to_json();
        st.finish_run(id, "ok", &s).unwrap();
        let p99 = s["measured"]["p99"].as_f64().unwrap();
        rows.push(
            json!({"run_id": id, "params": {"load_pct": pct}, "load_pct": pct,
            "offered_rps": rate, "achieved_rps": s["achieved_rate_rps"], "status": "ok",
            "measured": s["measured"], "ideal": s["ideal"], "excess": s["excess"],
            "slo": if p99 <= 1000.0 { "meets" } else { "violates" }}),
        );
    }
    st.finish_experiment(
        e,
        "ok",
        &json!({"experiment_id": e, "rows": rows, "max_load": {"offered_rps": 13_000.0,
            "load_pct": 65.0, "bracket_rps": [12_400.0, 13_600.0], "slo": "p99<=1ms"}}),
    )
    .unwrap();
    e
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        let run = real_run(&db);
        let experiment = synthetic_experiment(&db);
        Fixture {
            _dir: dir,
            db,
            run,
            experiment,
        }
    })
}

fn tailscope(args: &[&str], db: &Path) -> std::process::Output {
    bin().args(args).arg("--db").arg(db).output().unwrap()
}

/// Writes a report with `args`, checks `--json`'s list and the PNGs, returns the page.
fn report(args: &[&str], dir: &Path) -> PathBuf {
    let f = fixture();
    let html = dir.join("report.html");
    let png = dir.join("png");
    let mut a: Vec<&str> = vec!["report"];
    a.extend(args);
    let (h, p) = (html.to_str().unwrap(), png.to_str().unwrap());
    a.extend(["-o", h, "--png", p, "--json"]);
    let out = tailscope(&a, &f.db);
    let v = json_of(&out);
    let written: Vec<&str> = v["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(written[0], h);
    assert!(written.len() >= 3, "{written:?}");
    for w in &written[1..] {
        let bytes = std::fs::read(w).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{w}");
        assert!(bytes.len() > 10_000, "{w} is {} bytes", bytes.len());
    }
    html
}

/// The checks of a page opened in Chromium: nothing logged, nothing fetched, every expected
/// figure in the DOM with drawn lines, and inked in the screenshot.
fn check_in_chromium(html: &Path, expect: &[&str]) {
    let Some(chromium) = browser::chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = browser::open(&chromium, html, dir.path());
    assert!(page.console.is_empty(), "console: {:#?}", page.console);
    assert!(page.requests.is_empty(), "requests: {:#?}", page.requests);
    let figs = browser::figures(&page.dom);
    let found: Vec<&str> = figs.iter().map(|f| f.0.as_str()).collect();
    for name in expect {
        assert!(found.contains(name), "{name} missing from {found:?}");
    }
    for (name, bx, body) in &figs {
        assert!(body.contains("<svg"), "{name}: no SVG");
        assert!(
            body.matches("<polyline").count() + body.matches("<path").count() >= 3,
            "{name}: nothing drawn"
        );
        assert!(bx[2] > 300 && bx[3] > 200, "{name}: box {bx:?}");
        let (ink, colours) = browser::ink(&page.shot, *bx);
        assert!(
            ink > 0.02 && colours >= 4,
            "{name}: {:.1} % inked, {colours} colours in {bx:?}",
            100.0 * ink
        );
    }
}

#[test]
fn the_report_of_a_real_run_opens_clean_in_chromium() {
    let _g = common::shared();
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let id = f.run.to_string();
    let html = report(&[&id], dir.path());
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.contains("default-src 'none'"));
    assert!(!text.contains("src=\"http") && !text.contains("href=\"http"));
    for needle in [
        "measured against",
        "The server's view",
        "Lateness, time held and validity",
        "Why",
        "Host",
        "tailscope run nullrpc://127.0.0.1:",
        "Latency over time",
    ] {
        assert!(text.contains(needle), "the page lacks {needle}");
    }
    let ccdf = format!("run-{id}-ccdf");
    let server = format!("run-{id}-server-ccdf");
    let stages = format!("run-{id}-stages");
    let timeline = format!("run-{id}-timeline");
    check_in_chromium(&html, &[&ccdf, &server, &stages, &timeline]);
}

#[test]
fn the_report_of_an_experiment_opens_clean_in_chromium() {
    let _g = common::shared();
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let e = f.experiment.to_string();
    let html = report(&["--experiment", &e], dir.path());
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.contains("Highest load meeting"),
        "no max load in the lede"
    );
    assert!(text.contains("Verdicts") && text.matches("badge ok").count() >= 3);
    assert!(text.len() < 600_000, "{} bytes", text.len());
    let load = format!("experiment-{e}-load");
    let ccdf = format!("experiment-{e}-ccdf");
    check_in_chromium(&html, &[&load, &ccdf]);
}

/// A sweep measured here (the built-in server spawned, three loads) and its report opened as
/// the synthetic one is: the page is built from what `sweep` really stores.
#[test]
fn the_report_of_a_real_sweep_opens_clean_in_chromium() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let out = bin()
        .args([
            "sweep",
            "--no-noise-probe",
            "nullrpc://",
            "--spawn",
            "--server-work",
            "det:50us",
        ])
        .args([
            "--service",
            "50us",
            "--loads",
            "20,50,80%",
            "--duration",
            "500ms",
        ])
        .args([
            "--warmup",
            "200ms",
            "--lateness-threshold",
            "1s",
            "--json",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    let v = json_of(&out);
    let e = v["experiment_id"].as_i64().unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    let html = dir.path().join("sweep.html");
    let out = bin()
        .args(["report", "--experiment", &e.to_string(), "-o"])
        .arg(&html)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.contains("Verdicts"));
    for r in rows {
        let id = r["run_id"].as_i64().unwrap();
        assert!(
            text.contains(&format!("Run {id} ")),
            "run {id} has no section"
        );
    }
    check_in_chromium(
        &html,
        &[
            &format!("experiment-{e}-load"),
            &format!("experiment-{e}-ccdf"),
        ],
    );
}

#[test]
fn the_hdr_log_reads_back_in_the_reference_python_reader() {
    let _g = common::shared();
    let Some(python) = browser::hdr_python() else {
        return;
    };
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.hlog");
    let id = f.run.to_string();
    let out = tailscope(
        &[
            "runs",
            "export",
            &id,
            "--format",
            "hdr",
            "-o",
            log.to_str().unwrap(),
        ],
        &f.db,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("#[Histogram log format version 1.3]\n"));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/read_hdr.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = json_of(&tailscope(&["runs", "show", &id, "--json"], &f.db));
    let s = &run["summary"];
    // The log holds every measured request and every scheduled one's ideal.
    assert_eq!(read["measured"]["count"], s["outcomes"]["ok"]);
    assert_eq!(read["ideal"]["count"], s["requests"]);
    // The exact measured latencies, from the records: the nearest-rank value the histogram
    // reports (rank round(q·n)) is known exactly, beside the JSON's interpolated one.
    let csv = tailscope(&["runs", "export", &id, "--format", "csv"], &f.db);
    let warmup = s["warmup_ns"].as_u64().unwrap();
    let mut exact: Vec<f64> = String::from_utf8(csv.stdout)
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let c: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
            // intended_ns, sent_ns, received_ns, kernel_rx_ns, conn, class, outcome, …
            (c[6] == 0 && c[2] != 0 && c[0] >= warmup).then(|| (c[2] - c[0]) as f64 / 1e3)
        })
        .collect();
    exact.sort_by(f64::total_cmp);
    assert_eq!(exact.len() as u64, s["outcomes"]["ok"].as_u64().unwrap());
    // 3 significant digits: a value's bucket is at most 2^-10 of it wide, and a histogram
    // reports its bucket's highest value.
    let precision = 2f64.powi(-9);
    for (tag, dist, ci) in [
        ("measured", "measured", "measured_ci"),
        ("ideal", "ideal", "ideal_ci"),
    ] {
        for (key, q) in [("p50", 0.5f64), ("p99", 0.99), ("p99.9", 0.999)] {
            let hdr = read[tag][key].as_f64().unwrap();
            let json = s[dist][key].as_f64().unwrap();
            let (lo, hi) = (
                s[ci][key]["lo"].as_f64().unwrap(),
                s[ci][key]["hi"].as_f64().unwrap(),
            );
            assert!(
                hdr >= lo * (1.0 - precision) && hdr <= hi * (1.0 + precision),
                "{tag} {key}: HDR {hdr} µs outside the JSON's interval [{lo}, {hi}]"
            );
            if tag == "measured" {
                let r = ((q * exact.len() as f64 + 0.5).floor() as usize).max(1);
                let nearest = exact[r - 1];
                assert!(
                    (hdr - nearest).abs() <= precision * nearest,
                    "{tag} {key}: HDR {hdr} µs, the exact value at its rank {nearest} µs"
                );
                // Equal to the JSON within the precision, up to the gap between the two
                // definitions of a quantile (nearest rank, interpolated), which the data shows.
                assert!(
                    (hdr - json).abs() <= precision * json + (json - nearest).abs(),
                    "{tag} {key}: HDR {hdr} µs, JSON {json} µs, exact {nearest} µs"
                );
            }
        }
    }
    assert!(read["lateness"]["count"].as_u64().unwrap() > 0);
    assert!(read["server"]["count"].as_u64().unwrap() > 0);
}

#[test]
fn hgrm_is_the_spectrum_of_the_measured_latency() {
    let _g = common::shared();
    let f = fixture();
    let id = f.run.to_string();
    let out = tailscope(&["runs", "export", &id, "--format", "hgrm"], &f.db);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"));
    let run = json_of(&tailscope(&["runs", "show", &id, "--json"], &f.db));
    let total = format!(
        "Total count    = {:>12}]",
        run["summary"]["outcomes"]["ok"].as_u64().unwrap()
    );
    assert!(text.contains(&total), "{text}");
}

#[test]
fn runs_compare_sets_runs_side_by_side() {
    let _g = common::shared();
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let st = store::Store::open_existing(&f.db).unwrap().unwrap();
    let ids: Vec<String> = st
        .experiment_runs(f.experiment)
        .unwrap()
        .iter()
        .map(|r| r.id.to_string())
        .collect();
    drop(st);
    let plot = dir.path().join("cmp.png");
    let mut args = vec!["runs", "compare"];
    args.extend(ids.iter().map(String::as_str));
    args.extend(["--json", "--plot", plot.to_str().unwrap()]);
    let v = json_of(&tailscope(&args, &f.db));
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    let p99 = &v["percentiles"][2];
    assert_eq!(p99["key"], "p99");
    assert_eq!(p99["runs"][0]["ratio"], Value::Null);
    // 80 % load against 20 %: clearly slower, and the intervals say so.
    assert!(p99["runs"][2]["ratio"].as_f64().unwrap() > 1.5);
    assert_eq!(p99["runs"][2]["significant"], true);
    assert_eq!(&std::fs::read(&plot).unwrap()[1..4], b"PNG");
    // The terminal table: a column per run, a row per percentile.
    let mut args = vec!["runs", "compare"];
    args.extend(ids.iter().map(String::as_str));
    let out = tailscope(&args, &f.db);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.starts_with('p')).count(),
        5,
        "{text}"
    );
}

#[test]
fn a_plot_whose_name_ends_in_png_is_a_png() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let (svg, png) = (dir.path().join("m.svg"), dir.path().join("m.png"));
    for p in [&svg, &png] {
        let out = bin()
            .args([
                "model",
                "--service",
                "det:50us",
                "--load",
                "0.5",
                "--requests",
                "20k",
            ])
            .arg("--plot")
            .arg(p)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn bad_report_requests_are_refused_before_anything_is_written() {
    let _g = common::shared();
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("r.html");
    let o = o.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["report", "999999", "-o", o], "no run with id 999999"),
        (
            vec!["report", "--experiment", "999", "-o", o],
            "no experiment with id 999",
        ),
        (vec!["report", "1", "-o", "/proc/x.html"], "--output"),
        (
            vec!["report", "1", "-o", o, "--png", "/no/such/dir/png"],
            "--png",
        ),
        (
            vec!["runs", "compare", "1", "999999"],
            "no run with id 999999",
        ),
        (vec!["runs", "export", "1", "--format", "xml"], "--format"),
    ];
    for (args, needle) in cases {
        let out = tailscope(&args, &f.db);
        assert_usage_error(&out, &[needle]);
    }
    // The store itself is never an output.
    let out = tailscope(&["report", "1", "-o", f.db.to_str().unwrap()], &f.db);
    assert_usage_error(&out, &["results store"]);
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    // A report never creates a store.
    let missing = dir.path().join("none.db");
    let out = bin()
        .args(["report", "1", "-o", o, "--db"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_usage_error(&out, &["no results store"]);
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}

#[test]
fn runs_show_reads_a_typed_run_by_field_and_an_older_row_by_its_summary() {
    let _g = common::shared();
    let f = fixture();
    let st = store::Store::open_existing(&f.db).unwrap().unwrap();
    // The real run was stored with its typed form: `runs show` prints the run's screen, the
    // one `tailscope run` prints, and `--detail` its full terminal view.
    let run = lab::load_run(&st, f.run).unwrap().expect("a typed run");
    for (args, full) in [(&[][..], false), (&["--detail"][..], true)] {
        let id = f.run.to_string();
        let mut argv = vec!["runs", "show", id.as_str()];
        argv.extend_from_slice(args);
        let out = tailscope(&argv, &f.db);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        let mut view = Vec::new();
        if full {
            report::terminal::run(&mut view, &run).unwrap();
        } else {
            report::brief::run(&mut view, &run).unwrap();
        }
        let view = String::from_utf8(view).unwrap();
        assert!(text.ends_with(&view), "{text}");
        assert!(view.contains(&format!("run {} · ", f.run)), "{view}");
        assert!(!text.contains("summary:"), "{text}");
    }
    // The synthetic points were stored by `finish_run` alone, as before typed runs: their
    // summary is printed as stored.
    let old = st
        .list_runs()
        .unwrap()
        .into_iter()
        .find(|r| r.kind == "sweep-point")
        .unwrap();
    assert!(lab::load_run(&st, old.id).unwrap().is_none());
    let out = tailscope(&["runs", "show", &old.id.to_string()], &f.db);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("summary: {"), "{text}");
}
