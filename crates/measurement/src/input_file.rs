//! Reading what a user points tailscope at: a file read whole but bounded ([`read_bounded`]:
//! experiment files, `--agents`, `--fit`, traces), and a TOML error said in one line with
//! its line and key ([`toml_message`]).

use std::io::Read;
use std::path::Path;

use crate::error::{clip, clip_to, invalid, LabError, QUOTE_CHARS};

/// The largest experiment file read: far above any real one (a few hundred bytes), far below
/// what would hurt (a file that is `/dev/zero` is refused, not read until memory runs out).
pub const MAX_EXPERIMENT_BYTES: u64 = 1 << 20;

/// `n` bytes as people write them: 1 MiB, 64 KiB, 512 bytes.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n.is_multiple_of(1 << 10) => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The text of an input file of at most `max` bytes. `what` names it in errors ("experiment
/// file", "--agents"). Anything but a regular file (a directory, `/dev/zero`, a FIFO) is
/// refused before it is opened, and no more than `max + 1` bytes are ever read (a file under
/// /proc says it is empty and is not).
pub fn read_bounded(path: &Path, max: u64, what: &str) -> Result<String, LabError> {
    let p = path.display().to_string();
    let p = clip(&p);
    let meta =
        std::fs::metadata(path).map_err(|e| invalid(format!("{what} {p}: cannot read it: {e}")))?;
    if !meta.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        let kind = if t.is_dir() {
            "a directory"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(invalid(format!(
            "{what} {p}: {kind}, not a regular file (give the path of a file)"
        )));
    }
    let too_big = |n: u64| {
        invalid(format!(
            "{what} {p}: {n} bytes or more, larger than the {} such a file may hold",
            bytes(max)
        ))
    };
    if meta.len() > max {
        return Err(too_big(meta.len()));
    }
    let f = std::fs::File::open(path)
        .map_err(|e| invalid(format!("{what} {p}: cannot read it: {e}")))?;
    let mut buf = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| invalid(format!("{what} {p}: cannot read it: {e}")))?;
    if buf.len() as u64 > max {
        return Err(too_big(buf.len() as u64));
    }
    String::from_utf8(buf).map_err(|e| {
        invalid(format!(
            "{what} {p}: not UTF-8 text (byte {} is not)",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Line (from 1) of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(at)
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The key a line sets (`duration = true` → `duration`), when it reads as `key = …`.
pub(crate) fn key_on_line(text: &str, at: usize) -> Option<&str> {
    let before = text.get(..at.min(text.len())).unwrap_or("");
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text.get(start..).unwrap_or("").lines().next().unwrap_or("");
    let (k, _) = line.split_once('=')?;
    let k = k.trim();
    let bare = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    (!k.is_empty() && k.chars().all(bare)).then_some(k)
}

/// A toml error as one line: the line it is on, the key, what is wrong. With `keys`, an
/// unknown key is said with it instead of serde's list of every known one.
pub fn toml_message(name: &str, text: &str, e: &toml::de::Error, keys: Option<&str>) -> String {
    let mut msg = e.message().trim().replace('\n', " ");
    // serde's "unknown field `x`, expected one of `a`, `b`, … (70 names)": named shortly.
    if let (Some(rest), Some(keys)) = (msg.strip_prefix("unknown field `"), keys) {
        let key = rest.split('`').next().unwrap_or("").to_string();
        let hint = if key.contains('_') {
            format!(" (keys are written with '-': {})", key.replace('_', "-"))
        } else {
            String::new()
        };
        msg = format!("unknown key '{}'{hint}: {keys}", clip(&key));
    }
    let msg = clip_to(&msg, 2 * QUOTE_CHARS).into_owned();
    match e.span() {
        Some(span) => {
            let line = line_of(text, span.start);
            match key_on_line(text, span.start) {
                // Named unless the message quotes it already ("unknown key 'x'").
                Some(k) if !msg.contains(&format!("'{k}'")) && !msg.contains(&format!("`{k}`")) => {
                    format!("{name} line {line}: {k}: {msg}")
                }
                _ => format!("{name} line {line}: {msg}"),
            }
        }
        None => format!("{name}: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_regular_files_are_read() {
        let e = read_bounded(Path::new("/dev/zero"), 1024, "experiment file").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(e.is_invalid());
        let e = read_bounded(Path::new("/"), 1024, "experiment file").unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; 2048]).unwrap();
        let e = read_bounded(&big, 1024, "experiment file").unwrap_err();
        assert!(e.to_string().contains("1 KiB"), "{e}");
        let ok = dir.path().join("ok.toml");
        std::fs::write(&ok, "a = 1\n").unwrap();
        assert_eq!(read_bounded(&ok, 1024, "x").unwrap(), "a = 1\n");
        std::fs::write(&ok, [0xff, 0xfe]).unwrap();
        assert!(read_bounded(&ok, 1024, "x")
            .unwrap_err()
            .to_string()
            .contains("UTF-8"));
        let e = read_bounded(&dir.path().join("none"), 1024, "x").unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
