//! Printing helpers shared by the commands: microsecond formatting, the DESIGN.md distribution
//! objects, and writing the CCDF CSV / SVG files a command was asked for.

use std::path::Path;

use anyhow::Context;
use serde_json::{json, Map, Value};

use crate::cli::OutputArgs;

/// Microseconds from nanoseconds.
pub fn us(ns: f64) -> f64 {
    ns / 1e3
}

/// A latency for a terminal (model's formatting), "-" when there is none.
pub fn fmt_ns(ns: f64) -> String {
    if ns.is_finite() {
        model::format_duration_ns(ns)
    } else {
        "-".to_string()
    }
}

/// `{"p50": µs, ...}` from (key, ns) pairs, as DESIGN.md specifies a distribution.
pub fn dist_json<'a>(pairs: impl IntoIterator<Item = (&'a str, f64)>) -> Value {
    let mut m = Map::new();
    for (k, ns) in pairs {
        m.insert(k.to_string(), json!(us(ns)));
    }
    Value::Object(m)
}

/// Prints one JSON object on stdout.
pub fn print_json(v: &Value) -> anyhow::Result<()> {
    let s = serde_json::to_string_pretty(v).context("cannot encode JSON")?;
    println!("{s}");
    Ok(())
}

/// Writes what `f` writes to stdout; a reader that went away (`| head`) ends the process
/// with exit code 0, as ripgrep does, instead of an error.
pub fn print_with(
    f: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let r = f(&mut w).and_then(|()| std::io::Write::flush(&mut w));
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => Ok(r?),
    }
}

/// Checks, before any work starts, that the requested output files can be created: their
/// directories exist. (Nothing is written until the work succeeds.)
pub fn check_outputs(out: &OutputArgs) -> anyhow::Result<()> {
    for p in [&out.ccdf, &out.plot].into_iter().flatten() {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(crate::exit::usage(format!(
                "cannot write {}: directory {} does not exist",
                p.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Writes the CCDF CSV and/or SVG plot the user asked for; returns the paths written.
pub fn write_ccdf_outputs(
    out: &OutputArgs,
    title: &str,
    series: &[report::Series],
) -> anyhow::Result<Vec<String>> {
    let mut written = Vec::new();
    if let Some(p) = &out.ccdf {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        );
        report::ccdf_csv(&mut f, series)?;
        std::io::Write::flush(&mut f)?;
        written.push(p.display().to_string());
    }
    if let Some(p) = &out.plot {
        report::ccdf_svg(p, title, series)?;
        written.push(p.display().to_string());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_pick_a_fitting_unit() {
        assert_eq!(fmt_ns(50_000.0), "50.0 µs");
        assert_eq!(fmt_ns(123_456.0), "123 µs");
        assert_eq!(fmt_ns(1_500_000.0), "1.50 ms");
        assert_eq!(fmt_ns(800.0), "800 ns");
    }

    #[test]
    fn distributions_are_in_microseconds() {
        let v = dist_json([("p50", 50_000.0), ("p99", 1_000.0)]);
        assert_eq!(v["p50"], json!(50.0));
        assert_eq!(v["p99"], json!(1.0));
    }
}
