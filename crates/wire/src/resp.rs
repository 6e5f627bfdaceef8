//! RESP2, the Redis protocol: commands as arrays of bulk strings, and an incremental
//! reply parser (simple strings, errors, integers, bulk strings including null, arrays
//! including null, nested up to [`MAX_DEPTH`]).
//!
//! [`decode`] is a pure function of the front of the buffer: "need more" on every strict
//! prefix of a reply, so any split of the stream gives the same replies. Sizes are bounded
//! ([`MAX_BULK`], [`MAX_ARRAY`], [`MAX_LINE`]).

use thiserror::Error;

/// Largest bulk string accepted (Redis' own proto-max-bulk-len default is 512 MiB; a load
/// generator has no use for more than this).
pub const MAX_BULK: usize = 64 << 20;
/// Most elements in one array reply.
pub const MAX_ARRAY: usize = 1 << 20;
/// Deepest array nesting accepted.
pub const MAX_DEPTH: usize = 16;
/// Longest `+`, `-` or `:` line or length header (without `\r\n`).
pub const MAX_LINE: usize = 4096;

/// Why bytes are not a valid RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RespError {
    /// The first byte is not one of `+ - : $ *`.
    #[error("unknown reply type byte {0:#04x}")]
    BadType(u8),
    /// A length or integer that is not a number.
    #[error("bad number {0:?}")]
    BadNumber(String),
    /// No `\r\n` within [`MAX_LINE`] bytes.
    #[error("line longer than {MAX_LINE} bytes")]
    LineTooLong,
    /// A bulk string or array above the limits, or nested too deep.
    #[error("{0} exceeds the limit")]
    TooLarge(&'static str),
    /// A bulk string not followed by `\r\n`.
    #[error("bulk string not terminated by CRLF")]
    BadTerminator,
}

/// One reply value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// `+OK`
    Simple(&'a [u8]),
    /// `-ERR message`
    Error(&'a [u8]),
    /// `:42`
    Integer(i64),
    /// `$n` then n bytes; `None` for `$-1` (nil, e.g. a GET miss).
    Bulk(Option<&'a [u8]>),
    /// `*n` then n values; `None` for `*-1`.
    Array(Option<Vec<Value<'a>>>),
}

impl Value<'_> {
    /// Whether the reply is not an error (errors nested in arrays count as errors).
    pub fn is_ok(&self) -> bool {
        match self {
            Value::Error(_) => false,
            Value::Array(Some(v)) => v.iter().all(Value::is_ok),
            _ => true,
        }
    }
}

/// Appends a command as an array of bulk strings.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends `GET key`.
pub fn encode_get(out: &mut Vec<u8>, key: &[u8]) {
    encode_command(out, &[b"GET", key]);
}

/// Appends `SET key value`.
pub fn encode_set(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    encode_command(out, &[b"SET", key, value]);
}

/// Appends the encoding of a reply value (used by tests and fake servers).
pub fn encode_value(out: &mut Vec<u8>, v: &Value<'_>) {
    match v {
        Value::Simple(s) => line(out, b'+', s),
        Value::Error(s) => line(out, b'-', s),
        Value::Integer(i) => line(out, b':', i.to_string().as_bytes()),
        Value::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
        Value::Bulk(Some(b)) => {
            line(out, b'$', b.len().to_string().as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Value::Array(None) => out.extend_from_slice(b"*-1\r\n"),
        Value::Array(Some(items)) => {
            line(out, b'*', items.len().to_string().as_bytes());
            for i in items {
                encode_value(out, i);
            }
        }
    }
}

fn line(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// Decodes one reply from the front of `buf`: `Ok(None)` = need more bytes.
pub fn decode(buf: &[u8]) -> Result<Option<(usize, Value<'_>)>, RespError> {
    value(buf, 0, 0)
}

fn read_line(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, RespError> {
    let rest = &buf[at..];
    let window = &rest[..rest.len().min(MAX_LINE + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(i) => Ok(Some((&rest[..i], at + i + 2))),
        None if window.len() == MAX_LINE + 2 => Err(RespError::LineTooLong),
        None => Ok(None),
    }
}

fn int(s: &[u8]) -> Result<i64, RespError> {
    std::str::from_utf8(s)
        .ok()
        .filter(|t| !t.starts_with('+'))
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| RespError::BadNumber(String::from_utf8_lossy(&s[..s.len().min(32)]).into()))
}

/// The value starting at `at`; returns the position after it.
fn value(buf: &[u8], at: usize, depth: usize) -> Result<Option<(usize, Value<'_>)>, RespError> {
    let Some(&tag) = buf.get(at) else {
        return Ok(None);
    };
    if !matches!(tag, b'+' | b'-' | b':' | b'$' | b'*') {
        return Err(RespError::BadType(tag));
    }
    let Some((l, mut pos)) = read_line(buf, at + 1)? else {
        return Ok(None);
    };
    let v = match tag {
        b'+' => Value::Simple(l),
        b'-' => Value::Error(l),
        b':' => Value::Integer(int(l)?),
        b'$' => {
            let n = int(l)?;
            if n == -1 {
                Value::Bulk(None)
            } else if n < 0 {
                return Err(RespError::BadNumber(n.to_string()));
            } else if n as u64 > MAX_BULK as u64 {
                return Err(RespError::TooLarge("bulk string"));
            } else {
                let end = pos + n as usize;
                if buf.len() < end + 2 {
                    let seen = &buf[end.min(buf.len())..];
                    if !b"\r\n".starts_with(seen) {
                        return Err(RespError::BadTerminator);
                    }
                    return Ok(None);
                }
                if &buf[end..end + 2] != b"\r\n" {
                    return Err(RespError::BadTerminator);
                }
                let data = &buf[pos..end];
                pos = end + 2;
                Value::Bulk(Some(data))
            }
        }
        _ => {
            let n = int(l)?;
            if n == -1 {
                Value::Array(None)
            } else if n < 0 {
                return Err(RespError::BadNumber(n.to_string()));
            } else if n as u64 > MAX_ARRAY as u64 {
                return Err(RespError::TooLarge("array"));
            } else if depth >= MAX_DEPTH {
                return Err(RespError::TooLarge("array nesting"));
            } else {
                let n = n as usize;
                // Every element needs at least 3 bytes: never reserve for what cannot be there.
                let mut items = Vec::with_capacity(n.min((buf.len() - pos) / 3 + 1));
                for _ in 0..n {
                    let Some((next, v)) = value(buf, pos, depth + 1)? else {
                        return Ok(None);
                    };
                    items.push(v);
                    pos = next;
                }
                Value::Array(Some(items))
            }
        }
    };
    Ok(Some((pos, v)))
}

#[cfg(test)]
#[path = "resp_tests.rs"]
mod tests;
