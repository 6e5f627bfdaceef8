//! docs/ci.md's pipeline, run as far as it can be without a CI service: the script both
//! documented jobs run (`docs/ci-latency.sh`, which must equal the block in docs/ci.md) starts
//! the built-in server, sweeps it with an SLO and repeats, and writes the JUnit file, the
//! Markdown summary and the HTML report. Its exit code must agree with what the sweep found:
//! 0 exactly when every point (its repeats combined) meets the SLO, 3 otherwise.

use crate::common;

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("the workspace root")
}

#[test]
fn the_documented_script_is_the_one_in_the_docs() {
    let _g = common::shared();
    let doc = std::fs::read_to_string(root().join("docs/ci.md")).unwrap();
    let script = std::fs::read_to_string(root().join("docs/ci-latency.sh")).unwrap();
    let start = doc
        .find("```sh\n#!/usr/bin/env bash\n# ci-latency.sh")
        .expect("the script block in docs/ci.md")
        + "```sh\n".len();
    let end = start + doc[start..].find("```").unwrap();
    assert_eq!(
        &doc[start..end],
        script,
        "docs/ci.md and docs/ci-latency.sh differ"
    );
}

#[test]
fn the_documented_pipeline_runs_and_its_exit_code_matches_its_junit() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("latency");
    let out = Command::new("bash")
        .arg(root().join("docs/ci-latency.sh"))
        .env("TS", env!("CARGO_BIN_EXE_tailscope"))
        .env("OUT", &out_dir)
        .env("DURATION", "600ms")
        .env_remove("TAILSCOPE_DB")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 3, "exit {code}: {stderr}");
    for f in ["junit.xml", "summary.md", "report.html", "sweep.json"] {
        assert!(out_dir.join(f).is_file(), "{f} missing: {stderr}");
    }
    // The JUnit file through a real XML parser: its failures decide the exit code.
    let parsed = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, xml.etree.ElementTree as ET\n\
             r = ET.parse(sys.argv[1]).getroot()\n\
             cases = r.findall('.//testcase')\n\
             failed = [c for c in cases if c.find('failure') is not None or c.find('error') is not None]\n\
             print(len(cases), len(failed))",
        )
        .arg(out_dir.join("junit.xml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&parsed.stdout);
    let counts: Vec<usize> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(
        counts.len(),
        2,
        "{text} {}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    // One test case per condition and point (two loads, their three repeats combined each):
    // the JUnit file says what the exit code says.
    let sweep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("sweep.json")).unwrap())
            .unwrap();
    let rows = sweep["rows"].as_array().unwrap().len();
    assert_eq!(rows, 6, "{sweep}");
    let verdicts: Vec<&str> = sweep["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["slo"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts.len(), 2);
    assert_eq!(counts[0], verdicts.len(), "{text}");
    let not_met = verdicts.iter().filter(|v| **v != "meets").count();
    assert_eq!(counts[1], not_met, "{text} with points {verdicts:?}");
    // The exit code is the points' (their repeats combined): 3 exactly when one of them does
    // not meet the SLO (undecided fails by default).
    assert_eq!(
        code == 3,
        not_met > 0,
        "exit {code} with points {verdicts:?}"
    );
    let md = std::fs::read_to_string(out_dir.join("summary.md")).unwrap();
    assert!(md.contains("| ") && md.contains("p99"), "{md}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("<html"), "the report is not a page");
}

#[test]
fn the_documented_ab_script_is_the_one_in_the_docs() {
    let _g = common::shared();
    let doc = std::fs::read_to_string(root().join("docs/ci.md")).unwrap();
    let script = std::fs::read_to_string(root().join("docs/ci-ab.sh")).unwrap();
    let start = doc
        .find("```sh\n#!/usr/bin/env bash\n# ci-ab.sh")
        .expect("the ab script block in docs/ci.md")
        + "```sh\n".len();
    let end = start + doc[start..].find("```").unwrap();
    assert_eq!(
        &doc[start..end],
        script,
        "docs/ci.md and docs/ci-ab.sh differ"
    );
}

/// The ab pipeline with the same server build on both sides (two built-in servers at
/// det:50us): never `worse`, so exit 0, and the JUnit file (read by a real XML parser) has no
/// failure; the comparison is stored and reported.
#[test]
fn the_documented_ab_pipeline_runs_and_its_junit_agrees_with_its_exit_code() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("latency-ab");
    let out = Command::new("bash")
        .arg(root().join("docs/ci-ab.sh"))
        .env("TS", env!("CARGO_BIN_EXE_tailscope"))
        .env("OUT", &out_dir)
        .env("RATE", "2500")
        .env("MAX", "10s")
        .env_remove("TAILSCOPE_DB")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for f in ["junit.xml", "summary.md", "report.html", "ab.json"] {
        assert!(out_dir.join(f).is_file(), "{f} missing: {stderr}");
    }
    let ab: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("ab.json")).unwrap()).unwrap();
    assert_eq!(ab["counts"]["worse"], 0, "{ab}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let parsed = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, xml.etree.ElementTree as ET\n\
             r = ET.parse(sys.argv[1]).getroot()\n\
             cases = r.findall('.//testcase')\n\
             failed = [c for c in cases if c.find('failure') is not None]\n\
             print(len(cases), len(failed))",
        )
        .arg(out_dir.join("junit.xml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&parsed.stdout);
    let rows = ab["rows"].as_array().unwrap().len();
    assert_eq!(text.trim(), format!("{rows} 0"), "{text}");
}

/// The `tailscope …` commands of a Markdown text's code blocks (continued lines joined, a
/// trailing `# comment`, a pipe or a redirection cut off), with the file they came from.
fn documented_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let t = line.trim_start();
        if !in_block || !t.starts_with("tailscope ") {
            continue;
        }
        let mut cmd = t.to_string();
        while cmd.trim_end().ends_with('\\') {
            let next = lines.next().unwrap_or("");
            cmd = format!("{} {}", cmd.trim_end().trim_end_matches('\\'), next.trim());
        }
        out.push(cmd);
    }
    out
}

/// `cmd` split into words as a shell would (quotes, no expansion), up to a comment, pipe or
/// redirection; None for a line that is a template rather than a command (`[…]`, `$VAR`).
fn words(cmd: &str) -> Option<Vec<String>> {
    let (mut out, mut cur, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    for c in cmd.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, ' ' | '\t') => {
                if started || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                started = false;
            }
            (None, '#' | '|' | '>') if cur.is_empty() && !started => break,
            (None, c) => cur.push(c),
        }
    }
    if !cur.is_empty() || started {
        out.push(cur);
    }
    let template = |w: &String| w.starts_with('[') || w.contains('$') || w.contains('…');
    (!out.iter().any(template)).then_some(out)
}

/// Issue 36: every `tailscope …` command that README.md, docs/ and experiments/README.md show
/// parses as the CLI reads it, and each sweep of an experiment file passes every check of
/// `--dry-run` (nothing started), so a documented example cannot exit 2 on a reader.
#[test]
fn the_documents_commands_parse_and_experiment_sweeps_check() {
    let _g = common::shared();
    let mut files = vec![
        root().join("README.md"),
        root().join("experiments/README.md"),
    ];
    for e in std::fs::read_dir(root().join("docs")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            files.push(e.path());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut parsed, mut checked) = (0, 0);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for cmd in documented_commands(&text) {
            let Some(w) = words(&cmd) else { continue };
            let out = common::bin()
                .args(&w[1..])
                .env("TAILSCOPE_TEST_PARSE_ONLY", "1")
                .env("TAILSCOPE_DB", dir.path().join("parse.db"))
                .current_dir(root())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: `{cmd}` does not parse: {}",
                f.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            parsed += 1;
            if w.get(1).map(String::as_str) == Some("sweep")
                && w.get(2).is_some_and(|t| t.ends_with(".toml"))
            {
                let out = common::bin()
                    .args(&w[1..])
                    .arg("--dry-run")
                    .env("TAILSCOPE_DB", dir.path().join("dry.db"))
                    .current_dir(root())
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}: `{cmd} --dry-run`: {}",
                    f.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                checked += 1;
            }
        }
    }
    assert!(parsed >= 40, "only {parsed} documented commands found");
    assert!(checked >= 2, "only {checked} experiment sweeps checked");
    assert!(!dir.path().join("parse.db").exists());
}
