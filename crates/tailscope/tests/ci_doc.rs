//! docs/ci.md's pipeline, run as far as it can be without a CI service: the script both
//! documented jobs run (`docs/ci-latency.sh`, which must equal the block in docs/ci.md) starts
//! the built-in server, sweeps it with an SLO and repeats, and writes the JUnit file, the
//! Markdown summary and the HTML report. Its exit code must agree with what the sweep found:
//! 0 exactly when every point (its repeats combined) meets the SLO, 3 otherwise.

mod common;

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
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("latency");
    let out = Command::new("bash")
        .arg(root().join("docs/ci-latency.sh"))
        .env("TS", env!("CARGO_BIN_EXE_tailscope"))
        .env("OUT", &out_dir)
        .env("DURATION", "1500ms")
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
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("latency-ab");
    let out = Command::new("bash")
        .arg(root().join("docs/ci-ab.sh"))
        .env("TS", env!("CARGO_BIN_EXE_tailscope"))
        .env("OUT", &out_dir)
        .env("RATE", "2500")
        .env("MAX", "20s")
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
