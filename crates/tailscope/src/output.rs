//! Printing helpers shared by the commands: writing to stdout (a reader that went away is
//! success), microsecond formatting, the DESIGN.md distribution objects, and checking and
//! writing the CCDF CSV / SVG (or PNG) files a command was asked for.

use std::ffi::CString;
use std::fmt;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{json, Map, Value};

use crate::cli::OutputArgs;
use crate::exit::usage;

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

/// Writes what `f` writes to stdout (buffered), with the rule of [`write_stdout`].
pub fn print_with(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let mut w = io::BufWriter::new(Stdout);
    f(&mut w).and_then(|()| w.flush()).map_err(stdout_error)?;
    Ok(())
}

/// The directory a file `path` would be created in ("." for a bare name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL byte"))
}

/// access(2) with the effective ids, the ones open(2) and creat(2) check.
fn may(path: &Path, mode: libc::c_int) -> io::Result<()> {
    let c = c_path(path)?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let rc = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mode, libc::AT_EACCESS) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Kernel filesystems whose directories take no new regular files and whose files are kernel
/// interfaces, not output files. root passes access(2) on them, so it cannot tell.
const PSEUDO_FILESYSTEMS: [(libc::c_long, &str); 9] = [
    (libc::PROC_SUPER_MAGIC, "proc"),
    (libc::SYSFS_MAGIC, "sysfs"),
    (libc::CGROUP_SUPER_MAGIC, "cgroup"),
    (libc::CGROUP2_SUPER_MAGIC, "cgroup2"),
    (libc::DEBUGFS_MAGIC, "debugfs"),
    (libc::TRACEFS_MAGIC, "tracefs"),
    (libc::SECURITYFS_MAGIC, "securityfs"),
    (libc::DEVPTS_SUPER_MAGIC, "devpts"),
    (libc::BPF_FS_MAGIC, "bpf"),
];

/// The name of the pseudo filesystem `path` is on, if it is on one.
fn pseudo_filesystem(path: &Path) -> Option<&'static str> {
    let c = c_path(path).ok()?;
    // SAFETY: an all-zero `statfs` is a valid value of this plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is a valid, writable `statfs`.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    PSEUDO_FILESYSTEMS
        .iter()
        .find(|(magic, _)| st.f_type == *magic)
        .map(|(_, name)| *name)
}

/// Checks, before any work starts and without creating anything, that the file `path` named by
/// `flag` can be written: an existing target is a regular file (or a character device or FIFO,
/// such as /dev/null or a shell's `>(…)`) that we may write; a new one goes into an existing
/// directory in which we may create files. Kernel filesystems such as /proc are refused.
pub fn check_writable(flag: &str, path: &Path) -> anyhow::Result<()> {
    let bad = |why: String| usage(format!("{flag} {}: {why}", path.display()));
    match std::fs::metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            if t.is_dir() {
                return Err(bad("is a directory".into()));
            }
            if !(t.is_file() || t.is_char_device() || t.is_fifo()) {
                return Err(bad("is not a regular file".into()));
            }
            may(path, libc::W_OK).map_err(|e| bad(format!("cannot write it: {e}")))?;
            if let Some(fs) = pseudo_filesystem(path) {
                return Err(bad(format!("is a kernel interface ({fs} filesystem)")));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A dangling symbolic link: writing creates the file it points to.
            let target = match std::fs::read_link(path) {
                Ok(t) => dir_of(path).join(t),
                Err(_) => path.to_path_buf(),
            };
            let dir = dir_of(&target);
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(bad(format!("{} is not a directory", dir.display()))),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(bad(format!("directory {} does not exist", dir.display())))
                }
                Err(e) => return Err(bad(format!("{}: {e}", dir.display()))),
            }
            may(dir, libc::W_OK | libc::X_OK)
                .map_err(|e| bad(format!("cannot create files in {}: {e}", dir.display())))?;
            if let Some(fs) = pseudo_filesystem(dir) {
                return Err(bad(format!(
                    "cannot create files in {} ({fs} filesystem)",
                    dir.display()
                )));
            }
        }
        Err(e) => return Err(bad(e.to_string())),
    }
    Ok(())
}

/// `path` with symbolic links and `..` resolved, also when it does not exist yet (its
/// directory resolved, its name kept), so that two names of one file compare equal.
pub fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    match (std::fs::canonicalize(dir_of(path)), path.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// Whether `a` and `b` name one file: the same resolved path, or (hard links) the same inode.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if resolved(a) == resolved(b) {
        return true;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Checks the output files of `out` before any work starts (see [`check_writable`]), and that
/// they are two files, not one written twice.
pub fn check_outputs(out: &OutputArgs) -> anyhow::Result<()> {
    for (flag, p) in [("--ccdf", &out.ccdf), ("--plot", &out.plot)] {
        if let Some(p) = p {
            check_writable(flag, p)?;
        }
    }
    if let (Some(c), Some(p)) = (&out.ccdf, &out.plot) {
        let device = std::fs::metadata(c).is_ok_and(|m| m.file_type().is_char_device());
        if !device && same_file(c, p) {
            return Err(usage(format!(
                "--ccdf and --plot name the same file {}",
                c.display()
            )));
        }
    }
    Ok(())
}

/// Writes the CCDF CSV and/or SVG plot the user asked for; returns the paths written. On a
/// failure the files this call created are removed again: no partial output is left.
pub fn write_ccdf_outputs(
    out: &OutputArgs,
    title: &str,
    series: &[report::Series],
) -> anyhow::Result<Vec<String>> {
    let mut created = Vec::new();
    let r = write_ccdf_files(out, title, series, &mut created);
    if r.is_err() {
        for p in created {
            let _ = std::fs::remove_file(p);
        }
    }
    r
}

fn write_ccdf_files(
    out: &OutputArgs,
    title: &str,
    series: &[report::Series],
    created: &mut Vec<PathBuf>,
) -> anyhow::Result<Vec<String>> {
    let mut written = Vec::new();
    if let Some(p) = &out.ccdf {
        if !p.exists() {
            created.push(p.clone());
        }
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        );
        report::ccdf_csv(&mut f, series)?;
        std::io::Write::flush(&mut f)?;
        written.push(p.display().to_string());
    }
    if let Some(p) = &out.plot {
        if !p.exists() {
            created.push(p.clone());
        }
        report::ccdf_plot(p, title, series)?;
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
