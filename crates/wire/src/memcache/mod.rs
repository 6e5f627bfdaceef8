//! The memcached text protocol (the protocol Tales of the Tail §4 drives memcached with):
//! `get`/`set` requests and their replies, pipelined over TCP, and over UDP with the 8-byte
//! frame header and multi-datagram replies (see [`udp`]).
//!
//! Requests: `get KEY\r\n` and `set KEY FLAGS EXPTIME BYTES [noreply]\r\nDATA\r\n`.
//! Replies: `VALUE KEY FLAGS BYTES [CAS]\r\nDATA\r\nEND\r\n` (hit), `END\r\n` (miss),
//! `STORED`, `NOT_STORED`, `EXISTS`, `NOT_FOUND`, `ERROR`, `CLIENT_ERROR msg`,
//! `SERVER_ERROR msg` (each ending in `\r\n`).
//!
//! [`decode`] looks at the front of a receive buffer and is a pure function of the bytes it
//! is given: it answers "need more" on every strict prefix of a reply, so feeding a stream
//! in any split yields the same replies. Lengths are bounded ([`MAX_LINE`], [`MAX_VALUE`]).

pub mod udp;

use thiserror::Error;

/// Longest key memcached accepts.
pub const MAX_KEY: usize = 250;
/// Longest reply line (without its `\r\n`) the decoder accepts.
pub const MAX_LINE: usize = 2048;
/// Largest value either side accepts (memcached's default item limit is 1 MiB; this
/// leaves room for servers started with a larger `-I`).
pub const MAX_VALUE: usize = 64 << 20;

/// Why bytes are not a valid memcached reply, or a request cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum McError {
    /// A key that is empty, longer than [`MAX_KEY`] or holds spaces/control bytes.
    #[error("invalid key of {len} bytes (1..=250 printable bytes, no spaces)")]
    BadKey { len: usize },
    /// A value (to send or announced by the server) above [`MAX_VALUE`].
    #[error("value of {len} bytes exceeds the limit {MAX_VALUE}")]
    ValueTooLarge { len: u64 },
    /// No `\r\n` within [`MAX_LINE`] bytes.
    #[error("reply line longer than {MAX_LINE} bytes")]
    LineTooLong,
    /// A line that is not a known reply.
    #[error("unknown reply line {0:?}")]
    BadLine(String),
    /// The data block of a `VALUE` is not followed by `\r\n`, or no `END` follows it.
    #[error("value block not terminated as announced")]
    BadTerminator,
    /// A UDP datagram whose frame header is short or inconsistent.
    #[error("bad UDP frame: {0}")]
    BadUdp(String),
}

/// One decoded reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response<'a> {
    /// `VALUE ... END`: the key was found.
    Hit {
        key: &'a [u8],
        flags: u32,
        data: &'a [u8],
    },
    /// `END` alone: the key was not found.
    Miss,
    /// `STORED`
    Stored,
    /// `NOT_STORED`
    NotStored,
    /// `EXISTS`
    Exists,
    /// `NOT_FOUND`
    NotFound,
    /// `ERROR`: the server did not understand the command.
    Error,
    /// `CLIENT_ERROR msg`
    ClientError(&'a [u8]),
    /// `SERVER_ERROR msg`
    ServerError(&'a [u8]),
}

impl Response<'_> {
    /// Whether the server reported success (a miss is a successful `get`).
    pub fn is_ok(&self) -> bool {
        matches!(
            self,
            Response::Hit { .. }
                | Response::Miss
                | Response::Stored
                | Response::NotStored
                | Response::Exists
                | Response::NotFound
        )
    }
}

fn check_key(key: &[u8]) -> Result<(), McError> {
    if key.is_empty() || key.len() > MAX_KEY || key.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(McError::BadKey { len: key.len() });
    }
    Ok(())
}

/// Appends `get KEY\r\n`.
pub fn encode_get(out: &mut Vec<u8>, key: &[u8]) -> Result<(), McError> {
    check_key(key)?;
    out.extend_from_slice(b"get ");
    out.extend_from_slice(key);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Appends `set KEY FLAGS EXPTIME BYTES [noreply]\r\nDATA\r\n`.
pub fn encode_set(
    out: &mut Vec<u8>,
    key: &[u8],
    flags: u32,
    exptime: u32,
    data: &[u8],
    noreply: bool,
) -> Result<(), McError> {
    check_key(key)?;
    if data.len() > MAX_VALUE {
        return Err(McError::ValueTooLarge {
            len: data.len() as u64,
        });
    }
    out.extend_from_slice(b"set ");
    out.extend_from_slice(key);
    let tail = if noreply { " noreply" } else { "" };
    out.extend_from_slice(format!(" {flags} {exptime} {}{tail}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Appends the reply a server sends for `resp` (used by tests and fake servers).
pub fn encode_response(out: &mut Vec<u8>, resp: &Response<'_>) {
    let line: &[u8] = match resp {
        Response::Hit { key, flags, data } => {
            out.extend_from_slice(b"VALUE ");
            out.extend_from_slice(key);
            out.extend_from_slice(format!(" {flags} {}\r\n", data.len()).as_bytes());
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\nEND\r\n");
            return;
        }
        Response::Miss => b"END",
        Response::Stored => b"STORED",
        Response::NotStored => b"NOT_STORED",
        Response::Exists => b"EXISTS",
        Response::NotFound => b"NOT_FOUND",
        Response::Error => b"ERROR",
        Response::ClientError(m) => {
            out.extend_from_slice(b"CLIENT_ERROR ");
            m
        }
        Response::ServerError(m) => {
            out.extend_from_slice(b"SERVER_ERROR ");
            m
        }
    };
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
}

/// The first line of `buf` without its `\r\n`, and the length including it.
fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, McError> {
    let window = &buf[..buf.len().min(MAX_LINE + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(i) => Ok(Some((&buf[..i], i + 2))),
        None if window.len() == MAX_LINE + 2 => Err(McError::LineTooLong),
        None => Ok(None),
    }
}

fn num<T: std::str::FromStr>(field: Option<&[u8]>, line: &[u8]) -> Result<T, McError> {
    field
        .and_then(|f| std::str::from_utf8(f).ok())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad_line(line))
}

fn bad_line(line: &[u8]) -> McError {
    McError::BadLine(String::from_utf8_lossy(&line[..line.len().min(64)]).into_owned())
}

/// Decodes one reply from the front of `buf`: `Ok(None)` = need more bytes, else the
/// reply and the number of bytes it occupies.
pub fn decode(buf: &[u8]) -> Result<Option<(usize, Response<'_>)>, McError> {
    let Some((l, n)) = line(buf)? else {
        return Ok(None);
    };
    let resp = match l {
        b"END" => Response::Miss,
        b"STORED" => Response::Stored,
        b"NOT_STORED" => Response::NotStored,
        b"EXISTS" => Response::Exists,
        b"NOT_FOUND" => Response::NotFound,
        b"ERROR" => Response::Error,
        _ if l.starts_with(b"CLIENT_ERROR") => {
            Response::ClientError(trim_msg(&l[b"CLIENT_ERROR".len()..]))
        }
        _ if l.starts_with(b"SERVER_ERROR") => {
            Response::ServerError(trim_msg(&l[b"SERVER_ERROR".len()..]))
        }
        _ if l.starts_with(b"VALUE ") => return decode_value(buf, l, n),
        _ => return Err(bad_line(l)),
    };
    Ok(Some((n, resp)))
}

fn trim_msg(m: &[u8]) -> &[u8] {
    m.strip_prefix(b" ").unwrap_or(m)
}

fn decode_value<'a>(
    buf: &'a [u8],
    l: &'a [u8],
    n: usize,
) -> Result<Option<(usize, Response<'a>)>, McError> {
    let mut f = l.split(|&b| b == b' ').filter(|f| !f.is_empty()).skip(1);
    let key = f.next().ok_or_else(|| bad_line(l))?;
    let flags: u32 = num(f.next(), l)?;
    let len: u64 = num(f.next(), l)?;
    // An optional CAS unique, then nothing.
    if let Some(cas) = f.next() {
        num::<u64>(Some(cas), l)?;
    }
    if f.next().is_some() {
        return Err(bad_line(l));
    }
    if len > MAX_VALUE as u64 {
        return Err(McError::ValueTooLarge { len });
    }
    let len = len as usize;
    let data_end = n + len;
    let total = data_end + 2 + b"END\r\n".len();
    if buf.len() < total {
        // Reject a wrong terminator as soon as it is visible, else wait.
        let seen = &buf[data_end.min(buf.len())..];
        let want = b"\r\nEND\r\n";
        if !want.starts_with(seen) {
            return Err(McError::BadTerminator);
        }
        return Ok(None);
    }
    if &buf[data_end..total] != b"\r\nEND\r\n" {
        return Err(McError::BadTerminator);
    }
    Ok(Some((
        total,
        Response::Hit {
            key,
            flags,
            data: &buf[n..data_end],
        },
    )))
}

#[cfg(test)]
mod tests;
