//! Output files a command was asked for: checked writable before any work starts (without
//! creating anything), and the CCDF CSV / plot written with no partial file left on failure.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::{ReportError, Series};

/// Why an output file cannot be (or was not) written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The path given cannot take the output: the user's input is at fault (the CLI exits 2).
    #[error("{0}")]
    Refused(String),
    /// Creating or writing the file failed after the checks passed.
    #[error("cannot create {path}: {source}")]
    Create { path: String, source: io::Error },
    #[error(transparent)]
    Report(#[from] ReportError),
}

impl FileError {
    /// Whether the path given is at fault (not the writing).
    pub fn is_refused(&self) -> bool {
        matches!(self, FileError::Refused(_))
    }
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
pub fn check_writable(flag: &str, path: &Path) -> Result<(), FileError> {
    let bad = |why: String| FileError::Refused(format!("{flag} {}: {why}", path.display()));
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

/// Refuses an output file that is the store itself or one of SQLite's files beside it:
/// writing the export there would destroy the runs being exported.
pub fn check_not_the_store(flag: &str, out: &Path, db: &Path) -> Result<(), FileError> {
    let mut names = vec![db.to_path_buf()];
    // SQLite names its side files after the path it opened and, for a symbolic link, after
    // the link's target: check both spellings.
    let real = resolved(db);
    for base in [db.as_os_str(), real.as_os_str()] {
        for suffix in ["-wal", "-shm", "-journal"] {
            let mut n = base.to_owned();
            n.push(suffix);
            names.push(n.into());
        }
    }
    if names.iter().any(|n| same_file(out, n)) {
        return Err(FileError::Refused(format!(
            "{flag} {} is the results store {} (or a file SQLite keeps beside it); \
             write to another file",
            out.display(),
            db.display()
        )));
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

/// The CCDF files of a command: `--ccdf` (CSV points) and `--plot` (SVG, or PNG by its name).
#[derive(Clone, Debug, Default)]
pub struct CcdfFiles {
    pub ccdf: Option<PathBuf>,
    pub plot: Option<PathBuf>,
}

impl CcdfFiles {
    /// Checks both files before any work starts (see [`check_writable`]), and that they are two
    /// files, not one written twice.
    pub fn check(&self) -> Result<(), FileError> {
        for (flag, p) in [("--ccdf", &self.ccdf), ("--plot", &self.plot)] {
            if let Some(p) = p {
                check_writable(flag, p)?;
            }
        }
        if let (Some(c), Some(p)) = (&self.ccdf, &self.plot) {
            let device = std::fs::metadata(c).is_ok_and(|m| m.file_type().is_char_device());
            if !device && same_file(c, p) {
                return Err(FileError::Refused(format!(
                    "--ccdf and --plot name the same file {}",
                    c.display()
                )));
            }
        }
        Ok(())
    }

    /// Writes the files asked for; returns the paths written. On a failure the files this call
    /// created are removed again: no partial output is left.
    pub fn write(&self, title: &str, series: &[Series]) -> Result<Vec<String>, FileError> {
        let mut created = Vec::new();
        let r = self.write_files(title, series, &mut created);
        if r.is_err() {
            for p in created {
                let _ = std::fs::remove_file(p);
            }
        }
        r
    }

    fn write_files(
        &self,
        title: &str,
        series: &[Series],
        created: &mut Vec<PathBuf>,
    ) -> Result<Vec<String>, FileError> {
        let mut written = Vec::new();
        if let Some(p) = &self.ccdf {
            if !p.exists() {
                created.push(p.clone());
            }
            let file = std::fs::File::create(p).map_err(|source| FileError::Create {
                path: p.display().to_string(),
                source,
            })?;
            let mut f = io::BufWriter::new(file);
            crate::ccdf_csv(&mut f, series)?;
            f.flush().map_err(ReportError::Io)?;
            written.push(p.display().to_string());
        }
        if let Some(p) = &self.plot {
            if !p.exists() {
                created.push(p.clone());
            }
            crate::ccdf_plot(p, title, series)?;
            written.push(p.display().to_string());
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_directories_missing_dirs_and_one_file_twice() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_writable("--plot", dir.path()).unwrap_err();
        assert!(
            e.is_refused() && e.to_string().contains("is a directory"),
            "{e}"
        );
        let e = check_writable("--ccdf", &dir.path().join("no/x.csv")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(check_writable("--ccdf", &dir.path().join("x.csv")).is_ok());
        let same = CcdfFiles {
            ccdf: Some(dir.path().join("a.csv")),
            plot: Some(dir.path().join(".").join("a.csv")),
        };
        let e = same.check().unwrap_err();
        assert!(e.to_string().contains("same file"), "{e}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }

    #[test]
    fn a_failed_write_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let files = CcdfFiles {
            ccdf: Some(dir.path().join("a.csv")),
            plot: Some(dir.path().join("a.svg")),
        };
        // Nothing to plot: the plot fails after the CSV was written, and the CSV goes again.
        let e = files.write("t", &[Series::new("x", vec![])]).unwrap_err();
        assert!(matches!(e, FileError::Report(ReportError::Empty)), "{e}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
        let s = Series::new("x", vec![(1.0, 1.0), (10.0, 0.1)]);
        let w = files.write("t", &[s]).unwrap();
        assert_eq!(w.len(), 2);
    }
}
