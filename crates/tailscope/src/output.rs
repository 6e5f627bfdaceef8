//! Printing helpers shared by the commands: writing to stdout (a reader that went away is
//! success) and the output files' checks and writers of `report::files`.

use std::fmt;
use std::io::{self, Write};

use anyhow::Context;
use report::files::CcdfFiles;
use serde::Serialize;

use crate::cli::OutputArgs;

/// Marks a failure because stdout's reader went away (`tailscope runs list | head -1`): the
/// output nobody reads is not a failure, as in ripgrep, so `main` ends with 0 and no message
/// ([`closed_stdout`]). Rust ignores SIGPIPE, so the write fails with EPIPE instead of killing
/// us, and `println!` would panic. The error unwinds like any other, so what the command holds
/// is closed on the way out (a store's connection, which would otherwise leave its `-wal` and
/// `-shm` files beside a store it only read).
fn mark_closed<T>(r: io::Result<T>) -> io::Result<T> {
    r.map_err(|e| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            io::Error::new(io::ErrorKind::BrokenPipe, StdoutClosed)
        } else {
            e
        }
    })
}

/// The reader of stdout went away (see [`mark_closed`]).
#[derive(Debug)]
pub struct StdoutClosed;

impl fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for StdoutClosed {}

/// Whether `e` is stdout's reader going away, anywhere in its chain (also through a store's
/// or exporter's own i/o error).
pub fn closed_stdout(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<StdoutClosed>().is_some()
            || c.downcast_ref::<io::Error>().is_some_and(|io| {
                io.get_ref()
                    .is_some_and(|inner| inner.downcast_ref::<StdoutClosed>().is_some())
            })
    })
}

fn stdout_error(e: io::Error) -> io::Error {
    if e.get_ref().is_some_and(|i| i.is::<StdoutClosed>()) {
        return e;
    }
    io::Error::new(e.kind(), format!("cannot write to stdout: {e}"))
}

/// Writes to stdout; what [`outln!`] and [`out!`] expand to. A closed stdout is returned as
/// [`StdoutClosed`] (the command ends with 0, quietly); any other failure (a full disk behind
/// a redirection) as itself.
pub fn write_stdout(args: fmt::Arguments<'_>) -> io::Result<()> {
    mark_closed(io::stdout().lock().write_fmt(args)).map_err(stdout_error)
}

/// Flushes stdout, with the rule of [`write_stdout`].
pub fn flush_stdout() -> io::Result<()> {
    mark_closed(io::stdout().lock().flush()).map_err(stdout_error)
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
        mark_closed(io::stdout().lock().write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        mark_closed(io::stdout().lock().flush())
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

/// Prints one JSON object on stdout (keys in order, as a `serde_json::Value` prints them).
pub fn print_json(v: &impl Serialize) -> anyhow::Result<()> {
    let v = serde_json::to_value(v).context("cannot encode JSON")?;
    let s = serde_json::to_string_pretty(&v).context("cannot encode JSON")?;
    outln!("{s}")?;
    Ok(())
}

/// Writes what `f` writes to stdout (buffered), with the rule of [`write_stdout`].
pub fn print_with(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let mut w = io::BufWriter::new(Stdout);
    f(&mut w).and_then(|()| w.flush()).map_err(stdout_error)?;
    Ok(())
}

fn ccdf_files(out: &OutputArgs) -> CcdfFiles {
    CcdfFiles {
        ccdf: out.ccdf.clone(),
        plot: out.plot.clone(),
    }
}

/// Checks the output files of `out` before any work starts (see [`CcdfFiles::check`]).
pub fn check_outputs(out: &OutputArgs) -> anyhow::Result<()> {
    Ok(ccdf_files(out).check()?)
}

/// Writes the CCDF CSV and/or plot the user asked for; returns the paths written (none left
/// on a failure).
pub fn write_ccdf_outputs(
    out: &OutputArgs,
    title: &str,
    series: &[report::Series],
) -> anyhow::Result<Vec<String>> {
    Ok(ccdf_files(out).write(title, series)?)
}

/// Prints `v` as JSON with `--json`, else the text `text` writes; exit code 0.
pub fn print_json_or(
    json: bool,
    v: &impl Serialize,
    text: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> anyhow::Result<i32> {
    if json {
        print_json(v)?;
    } else {
        print_with(text)?;
    }
    Ok(0)
}
