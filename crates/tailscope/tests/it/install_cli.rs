//! `tailscope completions SHELL` and `tailscope man`: generated from the command line's own
//! definitions, accepted by the shells and by groff.

use crate::common;
use crate::support;

use std::process::Command;

use common::bin;
use support::assert_usage_error;

fn stdout_of(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_bash_completion_parses_and_completes_the_subcommands() {
    let _g = common::shared();
    let script = stdout_of(&["completions", "bash"]);
    for sub in ["sweep", "runs", "export", "completions", "man"] {
        assert!(script.contains(sub), "no '{sub}' in the completion");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tailscope.bash");
    std::fs::write(&path, &script).unwrap();
    let checked = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        checked.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    // Sourced, it completes `tailscope sw` to `sweep`.
    let complete = Command::new("bash")
        .arg("-c")
        .arg(format!(
            ". {}; COMP_WORDS=(tailscope sw); COMP_CWORD=1; COMP_LINE='tailscope sw'; \
             COMP_POINT=12; _tailscope tailscope sw tailscope; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display()
        ))
        .output()
        .unwrap();
    let replies = String::from_utf8_lossy(&complete.stdout);
    assert_eq!(
        replies.trim(),
        "sweep",
        "{}",
        String::from_utf8_lossy(&complete.stderr)
    );
}

#[test]
fn zsh_and_fish_completions_name_the_subcommands() {
    let _g = common::shared();
    for shell in ["zsh", "fish"] {
        let script = stdout_of(&["completions", shell]);
        assert!(script.contains("sweep"), "{shell}");
        assert!(
            script.contains("openmetrics") || script.contains("export"),
            "{shell}"
        );
    }
    let out = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_usage_error(&out, &["tcsh"]);
    assert!(out.stdout.is_empty());
}

#[test]
fn the_man_page_renders_in_groff() {
    let _g = common::shared();
    let page = stdout_of(&["man"]);
    assert!(
        page.contains(".TH tailscope 1"),
        "{}",
        &page[..page.len().min(400)]
    );
    assert!(page.contains("sweep"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tailscope.1");
    std::fs::write(&path, &page).unwrap();
    let rendered = Command::new("groff")
        // -k: preconv, as man(1) runs it, for the help texts' µ, ≤ and ….
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .arg(&path)
        .output()
        .expect("groff (Debian package groff-base; scripts/deps.sh installs it)");
    assert!(
        rendered.status.success() && rendered.stderr.is_empty(),
        "groff: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let text = Command::new("groff")
        .args(["-k", "-man", "-Tutf8"])
        .arg(&path)
        .output()
        .unwrap();
    // grotty's bold is "X\bX" and it justifies with extra spaces: read it as plain words.
    let mut plain = String::new();
    for c in String::from_utf8_lossy(&text.stdout).chars() {
        if c == '\u{8}' {
            plain.pop();
        } else {
            plain.push(c);
        }
    }
    let words = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("NAME tailscope - A tail-latency lab for network services"),
        "{words}"
    );
    assert!(words.contains("SUBCOMMANDS"), "{words}");
}

#[test]
fn man_out_writes_one_page_per_command_and_refuses_a_missing_directory() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let names = support::names(dir.path());
    for page in [
        "tailscope.1",
        "tailscope-sweep.1",
        "tailscope-runs-export.1",
    ] {
        assert!(names.iter().any(|n| n == page), "{page} not in {names:?}");
    }
    let missing = dir.path().join("nope");
    let out = bin().args(["man", "--out"]).arg(&missing).output().unwrap();
    assert_usage_error(&out, &["--out", "not an existing directory"]);
    assert!(!missing.exists());
}
