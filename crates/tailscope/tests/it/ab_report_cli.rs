//! `tailscope report --experiment ID` of an `ab` comparison: its own page. Built-in servers
//! (spawned by `ab`, or `tailscope serve`) on CPU 1, the generator on CPU 0, loopback only.
//! The page says the answer (the verdicts of the view read first, as `ab` printed them), both
//! arms' specifications, every row, both arms' CCDFs per view (a view invalid in an arm said,
//! not drawn), the per-pair ratios with the carry-over check, and the arms' runs; `--png`
//! writes every figure of the page. A comparison whose candidate was killed still reports, and
//! says why the arm failed. No wall-clock time is asserted.

use crate::browser;
use crate::common;

use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use common::{bin, json_of, serve_at};

/// The tests share two CPUs: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const BASELINE: &str = "nullrpc:// --server-work det:50us --service 50us";
const CANDIDATE: &str = "nullrpc:// --server-work det:80us --service 80us";

/// Short slices: these tests check the page, not the method's power.
const QUICK: [&str; 14] = [
    "--cpus",
    "0",
    "--rate",
    "3000",
    "--slice",
    "200ms",
    "--settle",
    "50ms",
    "--gap",
    "30ms",
    "--warmup",
    "200ms",
    "--no-noise-probe",
    "--json",
];

/// `tailscope report --experiment ID -o DIR/page.html --png DIR/png --json`: exit 0, the
/// files it lists written (the page, then PNGs), returned as (page text, PNG paths).
fn report(db: &Path, id: i64, dir: &Path) -> (String, Vec<String>) {
    let html = dir.join("page.html");
    let png = dir.join("png");
    let out = bin()
        .args(["report", "--experiment", &id.to_string(), "-o"])
        .arg(&html)
        .arg("--png")
        .arg(&png)
        .arg("--json")
        .arg("--db")
        .arg(db)
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    let written: Vec<String> = v["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    assert_eq!(written[0], html.to_str().unwrap(), "{v}");
    let pngs = written[1..].to_vec();
    for p in &pngs {
        assert!(Path::new(p).starts_with(&png), "{p}");
        let bytes = std::fs::read(p).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{p}");
        assert!(bytes.len() > 5_000, "{p} is {} bytes", bytes.len());
    }
    (std::fs::read_to_string(&html).unwrap(), pngs)
}

/// The page's text without its tags (so a line reads as a reader reads it).
fn text_of(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
        .replace("&#39;", "'")
        .replace("&quot;", "\"")
}

/// The figures of the page by name (`data-figure`).
fn figure_names(html: &str) -> Vec<String> {
    html.split("<figure class=\"fig\" data-figure=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect()
}

fn ab(args: &[&str], db: &Path) -> Output {
    bin()
        .arg("ab")
        .args(args)
        .arg("--db")
        .arg(db)
        .output()
        .unwrap()
}

#[test]
fn an_ab_experiment_has_its_own_page_with_the_answer_rows_ccdfs_and_pairs() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = ab(
        &[
            &[BASELINE, CANDIDATE][..],
            &["--spawn", "--server-cpus", "1", "--pairs", "8"],
            &QUICK,
        ]
        .concat(),
        &db,
    );
    let v = json_of(&out);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{v}");
    let id = v["experiment"].as_i64().unwrap();
    let (html, pngs) = report(&db, id, dir.path());
    let text = text_of(&html);

    // The answer first: the verdicts of the view read first, at its decide percentiles, as
    // `ab` printed them; before the rows table.
    let view = v["decided_view"].as_str().unwrap();
    let answer_at = text
        .find(&format!("{view} view:"))
        .unwrap_or_else(|| panic!("no {view} view answer in {text}"));
    for p in v["decide"].as_array().unwrap() {
        let p = p.as_str().unwrap();
        let row = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["view"] == view && r["percentile"] == p)
            .unwrap();
        let verdict = row["verdict"].as_str().unwrap();
        let expect = match row["ratio"].as_object() {
            Some(r) => format!(
                "{p} {verdict} ×{:.3} [{:.3}, {:.3}]",
                r["value"].as_f64().unwrap(),
                r["lo"].as_f64().unwrap(),
                r["hi"].as_f64().unwrap()
            ),
            None => format!("{p} {verdict}"),
        };
        let at = text
            .find(&expect)
            .unwrap_or_else(|| panic!("the page lacks '{expect}'"));
        assert!(at >= answer_at, "'{expect}' is not in the answer");
    }
    let rows_at = text.find("All rows").unwrap();
    assert!(answer_at < rows_at, "the answer comes before the rows");
    // The design and why it stopped.
    assert!(text.contains("8 pairs of 0.200 s slices"), "{text}");
    assert!(text.contains(v["stopped"].as_str().unwrap()));
    // Both arms' specifications, and their runs' ids.
    for (arm, spec) in [("baseline", BASELINE), ("candidate", CANDIDATE)] {
        assert!(text.contains(spec), "the page lacks {arm}'s {spec}");
        let run = v[arm]["run_id"].as_i64().unwrap();
        assert!(text.contains(&format!("run {run}")), "no run {run}");
    }
    // Every row in the table.
    let table = html
        .split("<table class=\"ab-rows\">")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("the rows table");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(table.matches("<tr").count(), rows.len() + 1, "{table}");
    for r in rows {
        // A percentile an arm's run does not stand behind is marked † (and said why below).
        let mark = if r["unstood"].is_string() { "†" } else { "" };
        let cells = format!(
            "{}</td><td class=\"l\">{}{mark}</td>",
            r["view"].as_str().unwrap(),
            r["percentile"].as_str().unwrap()
        );
        assert!(table.contains(&cells), "no row {cells}");
        if !mark.is_empty() {
            assert!(html.contains("<p class=\"note\">† "), "no note for {cells}");
        }
    }
    // The figures: the per-pair ratios, a CCDF per view whose arms are valid (else the page
    // says it is not drawn), each also written as PNG.
    let names = figure_names(&html);
    let pairs = format!("experiment-{id}-pairs");
    assert!(names.contains(&pairs), "{names:?}");
    assert!(html.contains("candidate ÷ baseline per pair"));
    assert!(text.contains("Carry-over check"));
    let carry = v["carry_over"].as_array().unwrap();
    for c in carry {
        let line = format!(
            "{} {}: candidate first ×{:.3}, baseline first ×{:.3}",
            c["view"].as_str().unwrap(),
            c["percentile"].as_str().unwrap(),
            c["candidate_first"].as_f64().unwrap(),
            c["baseline_first"].as_f64().unwrap()
        );
        assert!(text.contains(&line), "no carry-over line {line}");
    }
    let mut ccdfs = 0;
    for view in ["user", "server"] {
        let name = format!("experiment-{id}-{view}-ccdf");
        if names.contains(&name) {
            ccdfs += 1;
            let fig = html.split(&name).nth(1).unwrap();
            let fig = fig.split("</figure>").next().unwrap();
            assert!(
                fig.contains("baseline: nullrpc://"),
                "{view}: no baseline curve"
            );
            assert!(
                fig.contains("candidate: nullrpc://") || fig.contains("Not drawn: the candidate"),
                "{view}: the candidate is neither drawn nor said"
            );
        } else {
            assert!(
                text.contains(&format!("the {view}'s view is not drawn:")),
                "the {view} view is neither drawn nor said"
            );
        }
    }
    // The server view is valid whenever the offered load was sent: at 3000 req/s it was.
    assert!(ccdfs >= 1, "{names:?}");
    assert_eq!(pngs.len(), names.len(), "{pngs:?} against {names:?}");
    for n in &names {
        assert!(
            pngs.iter().any(|p| p.ends_with(&format!("/{n}.png"))),
            "{n}.png missing from {pngs:?}"
        );
    }
    // The page is self-contained, and opens clean.
    assert!(html.contains("default-src 'none'"));
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    let Some(chromium) = browser::chromium() else {
        return;
    };
    let shot = tempfile::tempdir().unwrap();
    let page = browser::open(&chromium, &dir.path().join("page.html"), shot.path());
    assert!(page.console.is_empty(), "console: {:#?}", page.console);
    assert!(page.requests.is_empty(), "requests: {:#?}", page.requests);
    let figs = browser::figures(&page.dom);
    assert_eq!(figs.len(), names.len());
    for (name, bx, body) in &figs {
        assert!(body.contains("<svg"), "{name}: no SVG");
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
fn a_comparison_whose_candidate_failed_reports_and_says_why() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let server = ["--cpus", "1", "--arch", "epoll", "--work", "det:50us"];
    let base = serve_at("127.0.0.1:0", &server);
    let mut cand = serve_at("127.0.0.1:0", &server);
    let (b, c) = (
        format!("nullrpc://{}", base.addr),
        format!("nullrpc://{}", cand.addr),
    );
    let run = bin()
        .arg("ab")
        .args([b.as_str(), c.as_str(), "--pairs", "40"])
        .args(QUICK)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    cand.child.kill().unwrap();
    let _ = cand.child.wait();
    let out = run.wait_with_output().unwrap();
    let v = json_of(&out);
    assert_eq!(v["status"], "failed", "{v}");
    let id = v["experiment"].as_i64().unwrap();
    let (html, pngs) = report(&db, id, dir.path());
    let text = text_of(&html);
    let err = v["candidate"]["error"].as_str().unwrap();
    assert!(
        text.contains(&format!("The candidate failed: {err}")),
        "the page does not say why the candidate failed: {text}"
    );
    assert!(html.contains("<span class=\"badge bad\">failed</span>"));
    assert!(text.contains(&b) && text.contains(&c));
    // What was measured before the failure is still shown.
    if v["pairs"].as_u64().unwrap() >= 1 {
        assert!(figure_names(&html).contains(&format!("experiment-{id}-pairs")));
        assert!(!pngs.is_empty());
    }
}
