//! HTTP/1.1 client side, as far as a GET load generator needs it (Tales of the Tail §4.3
//! drives nginx with static files): encode a GET, frame the response.
//!
//! The response head is parsed by `httparse`. The body is framed by `Content-Length` or
//! by the chunked transfer coding; httparse only offers a chunk-size line parser, so the
//! walk over chunks and trailers is written here. [`decode`] is a pure function of the
//! front of the buffer (it re-walks chunk headers, not chunk data, on every call), so any
//! split of the stream gives the same responses. Bodies are counted, not returned.

use thiserror::Error;

/// Largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// Most headers in one response.
pub const MAX_HEADERS: usize = 64;
/// Largest body accepted (Content-Length or the sum of chunks).
pub const MAX_BODY: u64 = 1 << 30;
/// Longest chunk-size line or trailer line.
const MAX_CHUNK_LINE: usize = 4096;

/// Why bytes are not a valid response, or a request cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The response head is not valid HTTP/1.x.
    #[error("bad response head: {0}")]
    BadHead(String),
    /// The head is longer than [`MAX_HEAD`].
    #[error("response head longer than {MAX_HEAD} bytes")]
    HeadTooLong,
    /// Content-Length is missing where needed, repeated inconsistently, or not a number.
    #[error("bad body framing: {0}")]
    BadFraming(String),
    /// The body is larger than [`MAX_BODY`].
    #[error("body of {0} bytes exceeds the limit")]
    BodyTooLarge(u64),
    /// A malformed chunk size line or chunk terminator.
    #[error("bad chunked encoding: {0}")]
    BadChunk(String),
    /// A host or path that would break the request line or headers.
    #[error("invalid {what} {value:?}")]
    BadRequest { what: &'static str, value: String },
}

/// A framed response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// Status code (200, 404, 503, ...).
    pub status: u16,
    /// The server will close the connection after this response.
    pub close: bool,
    /// Body length in bytes (decoded length for chunked bodies).
    pub body_len: u64,
    /// The body was chunked.
    pub chunked: bool,
}

impl Response {
    /// 2xx and 3xx count as success; 4xx and 5xx do not.
    pub fn is_ok(&self) -> bool {
        (200..400).contains(&self.status)
    }
}

fn check(what: &'static str, v: &str, extra_bad: &[u8]) -> Result<(), HttpError> {
    if v.is_empty()
        || v.bytes()
            .any(|b| b <= b' ' || b == 0x7f || extra_bad.contains(&b))
    {
        return Err(HttpError::BadRequest {
            what,
            value: v.chars().take(64).collect(),
        });
    }
    Ok(())
}

/// Appends `GET path HTTP/1.1` with `Host`, and `Connection: close` unless `keep_alive`.
pub fn encode_get(
    out: &mut Vec<u8>,
    host: &str,
    path: &str,
    keep_alive: bool,
) -> Result<(), HttpError> {
    check("host", host, b"/")?;
    check("path", path, b"")?;
    if !path.starts_with('/') {
        return Err(HttpError::BadRequest {
            what: "path",
            value: path.chars().take(64).collect(),
        });
    }
    out.extend_from_slice(b"GET ");
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(if keep_alive {
        b"\r\n\r\n".as_slice()
    } else {
        b"\r\nConnection: close\r\n\r\n".as_slice()
    });
    Ok(())
}

/// Whether a comma-separated header value lists `token` (case-insensitive).
fn has_token(v: &[u8], token: &str) -> bool {
    v.split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Decodes one response from the front of `buf`: `Ok(None)` = need more bytes.
pub fn decode(buf: &[u8]) -> Result<Option<(usize, Response)>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Err(HttpError::HeadTooLong)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HttpError::BadHead(e.to_string())),
    };
    if head_len > MAX_HEAD {
        return Err(HttpError::HeadTooLong);
    }
    let status = resp.code.unwrap_or(0);
    let version = resp.version.unwrap_or(1);
    let mut close = version == 0;
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                close = true;
            } else if has_token(h.value, "keep-alive") {
                close = false;
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n: u64 = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| {
                    HttpError::BadFraming(format!(
                        "Content-Length {:?}",
                        String::from_utf8_lossy(&h.value[..h.value.len().min(32)])
                    ))
                })?;
            if content_length.is_some_and(|c| c != n) {
                return Err(HttpError::BadFraming("conflicting Content-Length".into()));
            }
            content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if has_token(h.value, "chunked") {
                chunked = true;
            } else {
                return Err(HttpError::BadFraming(format!(
                    "unsupported Transfer-Encoding {:?}",
                    String::from_utf8_lossy(&h.value[..h.value.len().min(32)])
                )));
            }
        }
    }
    if (100..200).contains(&status) {
        return Err(HttpError::BadHead(format!(
            "interim response {status} to a GET"
        )));
    }
    let body = &buf[head_len..];
    let no_body = status == 204 || status == 304;
    let (used, body_len) = if no_body {
        (0, 0)
    } else if chunked {
        match dechunk(body)? {
            Some(v) => v,
            None => return Ok(None),
        }
    } else if let Some(n) = content_length {
        if n > MAX_BODY {
            return Err(HttpError::BodyTooLarge(n));
        }
        if (body.len() as u64) < n {
            return Ok(None);
        }
        (n as usize, n)
    } else {
        // Body until the server closes: a load generator cannot frame that on a
        // persistent connection, and nginx never sends it for static files.
        return Err(HttpError::BadFraming(
            "response without Content-Length or chunked body".into(),
        ));
    };
    Ok(Some((
        head_len + used,
        Response {
            status,
            close,
            body_len,
            chunked: chunked && !no_body,
        },
    )))
}

/// The line at the front of `buf` without `\r\n`, and its length with it.
fn crlf_line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, HttpError> {
    let window = &buf[..buf.len().min(MAX_CHUNK_LINE + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(i) => Ok(Some((&buf[..i], i + 2))),
        None if window.len() == MAX_CHUNK_LINE + 2 => {
            Err(HttpError::BadChunk("line too long".into()))
        }
        None => Ok(None),
    }
}

/// Walks a chunked body at the front of `buf`: `(bytes used, decoded length)` once the
/// last chunk and the trailers are complete.
pub fn dechunk(buf: &[u8]) -> Result<Option<(usize, u64)>, HttpError> {
    let mut pos = 0usize;
    let mut total = 0u64;
    loop {
        let Some((line, n)) = crlf_line(&buf[pos..])? else {
            return Ok(None);
        };
        // Size in hex, then optional `;extension`s (ignored).
        let size_part = line
            .split(|&b| b == b';')
            .next()
            .unwrap_or(line)
            .trim_ascii();
        if size_part.is_empty()
            || size_part.len() > 15
            || !size_part.iter().all(u8::is_ascii_hexdigit)
        {
            return Err(HttpError::BadChunk(format!(
                "chunk size {:?}",
                String::from_utf8_lossy(&line[..line.len().min(32)])
            )));
        }
        let size = size_part.iter().fold(0u64, |acc, &b| {
            acc * 16 + (b as char).to_digit(16).unwrap_or(0) as u64
        });
        pos += n;
        if size == 0 {
            // Trailer fields, then an empty line.
            loop {
                let Some((t, n)) = crlf_line(&buf[pos..])? else {
                    return Ok(None);
                };
                pos += n;
                if t.is_empty() {
                    return Ok(Some((pos, total)));
                }
            }
        }
        total += size;
        if total > MAX_BODY {
            return Err(HttpError::BodyTooLarge(total));
        }
        let end = pos + size as usize;
        if buf.len() < end + 2 {
            let seen = &buf[end.min(buf.len())..];
            if !b"\r\n".starts_with(seen) {
                return Err(HttpError::BadChunk(
                    "chunk data not followed by CRLF".into(),
                ));
            }
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(HttpError::BadChunk(
                "chunk data not followed by CRLF".into(),
            ));
        }
        pos = end + 2;
    }
}

/// Appends a response with `body`, chunked into pieces of `chunk` bytes when `chunk > 0`,
/// else with Content-Length (used by tests and fake servers).
pub fn encode_response(out: &mut Vec<u8>, status: u16, body: &[u8], chunk: usize, close: bool) {
    out.extend_from_slice(format!("HTTP/1.1 {status} X\r\nServer: t\r\n").as_bytes());
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    if chunk == 0 {
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
        return;
    }
    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
    for c in body.chunks(chunk) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
}

#[cfg(test)]
#[path = "http1_tests.rs"]
mod tests;
