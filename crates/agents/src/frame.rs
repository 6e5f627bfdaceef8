//! The frames coordinator and agents exchange over the agent's stdin and stdout.
//!
//! A frame is `"TS"`, one kind byte, a little-endian `u32` payload length, the payload. The
//! magic is there because the channel is whatever the user's remote execution gives: a login
//! script that prints a banner on stdout would otherwise be read as a length, so garbage is
//! recognised at its first bytes and quoted in the error. Lengths are bounded
//! ([`MAX_PAYLOAD`]), a truncated frame is an error, and nothing here panics on bytes an agent
//! (or a broken channel) sends.
//!
//! Control messages are JSON; the hot ones (clock pings, record chunks, histograms) are
//! binary, little-endian, read with [`Reader`], which fails on a short payload.

use std::io::{self, Read, Write};

/// Largest payload accepted: a chunk of records is well under a megabyte compressed; a trace
/// sent to the agents (the one large control message) must fit too.
pub const MAX_PAYLOAD: u32 = 64 << 20;

const MAGIC: [u8; 2] = *b"TS";
const HEADER: usize = 7;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// JSON [`crate::job::Hello`], both ways: versions checked before anything else.
    Hello = 1,
    /// JSON `{"message": …}`: the agent cannot go on (it ends after sending it).
    Error = 2,
    /// Coordinator → agent: `u64 seq, u64 t1` (the coordinator's CLOCK_MONOTONIC at send).
    Ping = 3,
    /// Agent → coordinator: `u64 seq, u64 t1, u64 t2, u64 t3` (agent's clock at receipt and
    /// at reply).
    Pong = 4,
    /// Coordinator → agent: JSON [`crate::job::Job`], the share to run and when to start.
    Start = 5,
    /// Coordinator → agent: stop now (Ctrl-C, or another agent failed); empty.
    Stop = 6,
    /// Agent → coordinator: `u64 done, u64 total` requests, about every second (also a
    /// heartbeat: an agent silent for long has hung).
    Progress = 7,
    /// Agent → coordinator: one generator thread's histograms of (its records so far in) one
    /// interval of intended time, see [`crate::hist::Interval`].
    Interval = 8,
    /// Agent → coordinator: `u32 thread, u32 seq, u32 records`, then a chunk of raw records
    /// in the store's blob encoding (`store::encode_chunk`).
    Chunk = 9,
    /// Agent → coordinator: JSON [`crate::job::Done`], its last frame.
    Done = 10,
}

impl Kind {
    fn of(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::Error,
            3 => Kind::Ping,
            4 => Kind::Pong,
            5 => Kind::Start,
            6 => Kind::Stop,
            7 => Kind::Progress,
            8 => Kind::Interval,
            9 => Kind::Chunk,
            10 => Kind::Done,
            _ => return None,
        })
    }
}

/// Why the bytes on the channel are not a frame (the caller names the agent).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("reading: {0}")]
    Io(#[from] io::Error),
    #[error("the stream ended inside a frame ({0})")]
    Truncated(&'static str),
    #[error("not a tailscope agent frame: it starts {0:?} (does a login script print to stdout?)")]
    Garbage(String),
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("frame of {0} bytes exceeds the {MAX_PAYLOAD}-byte limit")]
    TooLarge(u64),
    #[error("bad {kind:?} frame: {why}")]
    Payload { kind: Kind, why: String },
}

impl FrameError {
    pub fn payload(kind: Kind, why: impl std::fmt::Display) -> FrameError {
        FrameError::Payload {
            kind,
            why: why.to_string(),
        }
    }
}

/// Reads until `buf` is full; Ok(false) at a clean end of stream before its first byte.
fn fill(r: &mut dyn Read, buf: &mut [u8], what: &'static str) -> Result<bool, FrameError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(FrameError::Truncated(what)),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// The next frame, or None at a clean end of stream (between frames).
pub fn read_frame(r: &mut dyn Read) -> Result<Option<(Kind, Vec<u8>)>, FrameError> {
    let mut h = [0u8; HEADER];
    if !fill(r, &mut h, "its header")? {
        return Ok(None);
    }
    if h[..2] != MAGIC {
        // Only what was read is quoted: reading on for more could block on a channel that
        // sends nothing further.
        return Err(FrameError::Garbage(String::from_utf8_lossy(&h).into()));
    }
    let kind = Kind::of(h[2]).ok_or(FrameError::UnknownKind(h[2]))?;
    let len = u32::from_le_bytes([h[3], h[4], h[5], h[6]]);
    if len > MAX_PAYLOAD {
        return Err(FrameError::TooLarge(u64::from(len)));
    }
    let mut payload = vec![0u8; len as usize];
    if !fill(r, &mut payload, "its payload")? && len > 0 {
        return Err(FrameError::Truncated("its payload"));
    }
    Ok(Some((kind, payload)))
}

/// Writes one frame and flushes it (frames are messages: none may wait in a buffer).
pub fn write_frame(w: &mut dyn Write, kind: Kind, payload: &[u8]) -> Result<(), FrameError> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&l| l <= MAX_PAYLOAD)
        .ok_or(FrameError::TooLarge(payload.len() as u64))?;
    let mut h = [0u8; HEADER];
    h[..2].copy_from_slice(&MAGIC);
    h[2] = kind as u8;
    h[3..].copy_from_slice(&len.to_le_bytes());
    w.write_all(&h)?;
    w.write_all(payload)?;
    w.flush()?;
    Ok(())
}

/// A JSON payload.
pub fn to_json<T: serde::Serialize>(kind: Kind, v: &T) -> Result<Vec<u8>, FrameError> {
    serde_json::to_vec(v).map_err(|e| FrameError::payload(kind, e))
}

/// A JSON payload back.
pub fn from_json<T: serde::de::DeserializeOwned>(kind: Kind, p: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(p).map_err(|e| FrameError::payload(kind, e))
}

/// Little-endian integers appended to a payload.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) -> Result<(), FrameError> {
    let n = u32::try_from(b.len()).map_err(|_| FrameError::TooLarge(b.len() as u64))?;
    put_u32(out, n);
    out.extend_from_slice(b);
    Ok(())
}

/// Reads a binary payload front to back; every read checks the bytes are there.
pub struct Reader<'a> {
    kind: Kind,
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(kind: Kind, buf: &'a [u8]) -> Self {
        Reader { kind, buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        if self.buf.len() < n {
            return Err(FrameError::payload(self.kind, "shorter than its fields"));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }

    pub fn u32(&mut self) -> Result<u32, FrameError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, FrameError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], FrameError> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// The rest of the payload.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// Fails when bytes are left over (a frame longer than its fields is not trusted).
    pub fn end(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::payload(self.kind, "longer than its fields"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: Kind, p: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        write_frame(&mut v, kind, p).unwrap();
        v
    }

    #[test]
    fn frames_round_trip_and_a_clean_end_is_none() {
        let mut bytes = frame(Kind::Ping, &[1, 2, 3]);
        bytes.extend(frame(Kind::Stop, &[]));
        let mut r = &bytes[..];
        assert_eq!(
            read_frame(&mut r).unwrap(),
            Some((Kind::Ping, vec![1, 2, 3]))
        );
        assert_eq!(read_frame(&mut r).unwrap(), Some((Kind::Stop, vec![])));
        assert!(read_frame(&mut r).unwrap().is_none());
    }

    #[test]
    fn truncation_garbage_and_huge_lengths_are_errors() {
        let bytes = frame(Kind::Chunk, &[7; 100]);
        for cut in 1..bytes.len() {
            let err = read_frame(&mut &bytes[..cut]).unwrap_err();
            assert!(matches!(err, FrameError::Truncated(_)), "cut {cut}: {err}");
        }
        let banner = b"Welcome to host1! Last login: never\n";
        let err = read_frame(&mut &banner[..]).unwrap_err();
        assert!(err.to_string().contains("Welcome"), "{err}");
        let mut huge = bytes.clone();
        huge[3..7].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            read_frame(&mut &huge[..]),
            Err(FrameError::TooLarge(_))
        ));
        let mut unknown = bytes;
        unknown[2] = 99;
        assert!(matches!(
            read_frame(&mut &unknown[..]),
            Err(FrameError::UnknownKind(99))
        ));
    }

    #[test]
    fn a_short_or_long_binary_payload_is_an_error() {
        let mut p = Vec::new();
        put_u64(&mut p, 5);
        put_bytes(&mut p, b"abc").unwrap();
        let mut r = Reader::new(Kind::Interval, &p);
        assert_eq!(r.u64().unwrap(), 5);
        assert_eq!(r.bytes().unwrap(), b"abc");
        r.end().unwrap();
        let mut short = Reader::new(Kind::Interval, &p[..10]);
        assert_eq!(short.u64().unwrap(), 5);
        assert!(short.bytes().is_err());
        let mut long = Reader::new(Kind::Interval, &p);
        long.u64().unwrap();
        assert!(long.end().is_err());
    }
}
