//! One /proc file opened once and re-read from offset 0 with `pread` into a caller's reused
//! buffer: no open/close and no allocation per sample.
//!
//! Why an open file and not a path: opening costs more than reading the small per-thread files
//! (5 µs against 0.6 µs for a thread's schedstat on the development VM), and an fd stays bound
//! to the task it was opened for — once the thread exits, reads fail with ESRCH even if its id
//! is reused. The price for fixture trees (tests): a file *replaced* (written to a temporary
//! and renamed over, or deleted and re-created) is a new inode that an open fd never sees, so
//! fixture tests rewrite files in place (`std::fs::write` truncates and rewrites the same
//! inode).
//!
//! How much to read: /proc files are seq_files. A file whose text is a single seq_file record
//! (`single_open`: /proc/stat, /proc/softirqs, a task's schedstat and status) is returned whole
//! by one read as long as the buffer is large enough, so a read shorter than the buffer is the
//! whole file and we save the extra read that would return 0. A file of many records
//! (/proc/interrupts, /proc/schedstat) may return one page at a time, so it is read until a
//! read returns 0. A regular file (fixtures) returns everything or reaches its end either way.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Room for every file on a small host in one read; it doubles when a read fills it.
pub(crate) const INITIAL_BUF: usize = 16 * 1024;

/// How the kernel produces the file (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Records {
    /// One seq_file record: a short read is the whole file.
    One,
    /// Many records: read until a read returns 0.
    Many,
}

#[derive(Debug)]
pub(crate) struct ProcFile {
    file: File,
    records: Records,
}

impl ProcFile {
    pub(crate) fn open(path: &Path, records: Records) -> io::Result<ProcFile> {
        Ok(ProcFile {
            file: File::open(path)?,
            records,
        })
    }

    /// The whole file now, as text borrowed from `buf` (whose contents are scratch; it only
    /// grows, so a sampler that reuses it stops allocating after its first samples).
    pub(crate) fn read<'b>(&self, buf: &'b mut Vec<u8>) -> io::Result<&'b str> {
        if buf.len() < INITIAL_BUF {
            buf.resize(INITIAL_BUF, 0);
        }
        let mut n = 0;
        loop {
            if n == buf.len() {
                buf.resize(2 * n, 0);
            }
            let got = match self.file.read_at(&mut buf[n..], n as u64) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            n += got;
            if got == 0 || (self.records == Records::One && n < buf.len()) {
                break;
            }
        }
        std::str::from_utf8(&buf[..n]).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_rewritten_in_place_is_read_again_whole_and_only_its_new_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "a long first text\n").unwrap();
        let mut buf = Vec::new();
        for records in [Records::One, Records::Many] {
            let f = ProcFile::open(&p, records).unwrap();
            std::fs::write(&p, "a long first text\n").unwrap();
            assert_eq!(f.read(&mut buf).unwrap(), "a long first text\n");
            // Shorter: no stale tail of the longer text.
            std::fs::write(&p, "short\n").unwrap();
            assert_eq!(f.read(&mut buf).unwrap(), "short\n");
            // Longer than the buffer: it grows, and the text is whole.
            let big = "x".repeat(3 * INITIAL_BUF + 7);
            std::fs::write(&p, &big).unwrap();
            assert_eq!(f.read(&mut buf).unwrap(), big);
            assert!(buf.len() >= big.len());
        }
    }

    /// Pins the decision in the module doc: fixtures must be rewritten in place.
    #[test]
    fn a_file_replaced_by_rename_is_not_seen() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "old\n").unwrap();
        let f = ProcFile::open(&p, Records::One).unwrap();
        let tmp = dir.path().join("f.new");
        std::fs::write(&tmp, "new\n").unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        let mut buf = Vec::new();
        assert_eq!(f.read(&mut buf).unwrap(), "old\n");
    }

    #[test]
    fn real_proc_files_read_whole() {
        let mut buf = Vec::new();
        let Ok(f) = ProcFile::open(Path::new("/proc/self/status"), Records::One) else {
            return; // no /proc here
        };
        let text = f.read(&mut buf).unwrap();
        assert!(text.contains("nonvoluntary_ctxt_switches:"), "{text}");
        let f = ProcFile::open(Path::new("/proc/interrupts"), Records::Many).unwrap();
        let once = f.read(&mut buf).unwrap().lines().count();
        assert!(once > 1);
        assert_eq!(f.read(&mut buf).unwrap().lines().count(), once);
    }
}
