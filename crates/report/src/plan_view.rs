//! The terminal view of a sweep's plan (`sweep --dry-run`).

use std::io::{self, Write};

use lab::DryRun;

/// What the sweep would do: its target, axes, loads and how many runs.
pub fn dry_run(w: &mut dyn Write, p: &DryRun) -> io::Result<()> {
    writeln!(
        w,
        "dry run: {} (nothing started, nothing written)",
        p.target
    )?;
    for a in &p.axes {
        writeln!(w, "  axis {}: {}", a.name, a.values.join(", "))?;
    }
    let loads = if p.loads.is_empty() {
        "-".to_string()
    } else {
        p.loads.join(", ")
    };
    writeln!(w, "  loads: {loads}")?;
    writeln!(
        w,
        "  {} configuration(s), {} grid run(s) (× {} repeat(s)){}{}",
        p.configurations,
        p.grid_runs,
        p.repeat,
        if p.find_max {
            ", then the highest load meeting the SLO per point"
        } else {
            ""
        },
        if p.calibrates {
            "; each server configuration is calibrated first"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_says_what_would_run() {
        let p = DryRun {
            dry_run: true,
            target: "nullrpc://".into(),
            axes: vec![lab::DryAxis {
                name: "connections".into(),
                values: vec!["1".into(), "2".into()],
            }],
            loads: vec!["20%".into()],
            repeat: 3,
            find_max: false,
            configurations: 2,
            grid_runs: 6,
            calibrates: true,
        };
        let mut out = Vec::new();
        dry_run(&mut out, &p).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("dry run: nullrpc:// "), "{text}");
        assert!(text.contains("  axis connections: 1, 2\n"), "{text}");
        assert!(text.contains("  loads: 20%\n"), "{text}");
        assert!(
            text.contains("2 configuration(s), 6 grid run(s) (× 3 repeat(s)); each server"),
            "{text}"
        );
    }
}
