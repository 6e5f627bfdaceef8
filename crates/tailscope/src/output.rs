//! Printing helpers shared by the commands: writing to stdout (a reader that went away is
//! success), microsecond formatting, the DESIGN.md distribution objects, and checking and
//! writing the CCDF CSV / SVG files a command was asked for.

use std::fmt;
use std::io::{self, Write};
use std::path::Path;

use anyhow::Context;
use serde_json::{json, Map, Value};

use crate::cli::OutputArgs;

/// Ends the process with 0 when `r` failed because stdout's reader went away (`tailscope runs
/// list | head -1`): the output nobody reads is not a failure, as in ripgrep. Rust ignores
/// SIGPIPE, so the write fails with EPIPE instead of killing us, and `println!` would panic.
fn exit_if_closed<T>(r: io::Result<T>) -> io::Result<T> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => r,
    }
}

fn stdout_error(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot write to stdout: {e}"))
}

/// Writes to stdout; what [`outln!`] and [`out!`] expand to. A closed stdout ends the process
/// at once with exit code 0; any other failure (a full disk behind a redirection) is returned.
pub fn write_stdout(args: fmt::Arguments<'_>) -> io::Result<()> {
    exit_if_closed(io::stdout().lock().write_fmt(args)).map_err(stdout_error)
}

/// Flushes stdout, with the rule of [`write_stdout`].
pub fn flush_stdout() -> io::Result<()> {
    exit_if_closed(io::stdout().lock().flush()).map_err(stdout_error)
}

/// Writes `text` to stdout, ignoring a reader that went away instead of exiting: for a
/// command that must go on after printing (`doctor --apply` holds mitigations that only its
/// own exit path reverts).
pub fn write_stdout_ignoring_closed(text: &str) -> io::Result<()> {
    let mut o = io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(stdout_error),
    }
}

/// stdout as an [`io::Write`] for streaming exporters, with the rule of [`write_stdout`].
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        exit_if_closed(io::stdout().lock().write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        exit_if_closed(io::stdout().lock().flush())
    }
}

/// `println!` for commands: a closed stdout exits 0 (see [`write_stdout`]); evaluates to an
/// `io::Result<()>` to be `?`-ed.
macro_rules! outln {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for commands; see [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}

pub(crate) use {out, outln};

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
    outln!("{s}")?;
    Ok(())
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
