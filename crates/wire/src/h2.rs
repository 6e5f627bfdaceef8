//! HTTP/2 (RFC 9113) framing as far as a client needs it: the connection preface, every
//! frame's encoder, a decoder that checks what the RFC makes a connection error, and the
//! request and response header blocks through HPACK (RFC 7541: requests encoded by the crate
//! `loona-hpack`, responses decoded by [`crate::hpack`]).
//!
//! Pure like the rest of `wire`: [`decode_frame`] looks at the front of a buffer and answers
//! "need more", one frame borrowing the buffer and the bytes it used, or an error; it never
//! panics and never accepts a frame longer than the maximum the caller announced. Flow
//! control, stream states and SETTINGS acknowledgement are the caller's (the load engine's
//! connection), which owns time and sockets.

use thiserror::Error;

/// What a client sends first on every HTTP/2 connection (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Bytes of a frame header.
pub const HEADER_LEN: usize = 9;
/// The frame payload size every peer must accept (SETTINGS_MAX_FRAME_SIZE's initial value).
pub const DEFAULT_MAX_FRAME: usize = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE allowed.
pub const MAX_FRAME_LIMIT: usize = (1 << 24) - 1;
/// A stream's and the connection's flow-control window before any SETTINGS or WINDOW_UPDATE.
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// The longest header block (HEADERS and its CONTINUATIONs) a client should gather before
/// it gives up on the connection.
pub const MAX_HEADER_BLOCK: usize = 64 * 1024;

/// SETTINGS parameters (RFC 9113 §6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// Error codes of RST_STREAM and GOAWAY (RFC 9113 §7).
pub mod code {
    pub const NO_ERROR: u32 = 0x0;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const INTERNAL_ERROR: u32 = 0x2;
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub const SETTINGS_TIMEOUT: u32 = 0x4;
    pub const STREAM_CLOSED: u32 = 0x5;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const CANCEL: u32 = 0x8;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const CONNECT_ERROR: u32 = 0xa;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
    pub const INADEQUATE_SECURITY: u32 = 0xc;
    pub const HTTP_1_1_REQUIRED: u32 = 0xd;

    /// The RFC's name of an error code, for messages.
    pub fn name(code: u32) -> &'static str {
        match code {
            NO_ERROR => "NO_ERROR",
            PROTOCOL_ERROR => "PROTOCOL_ERROR",
            INTERNAL_ERROR => "INTERNAL_ERROR",
            FLOW_CONTROL_ERROR => "FLOW_CONTROL_ERROR",
            SETTINGS_TIMEOUT => "SETTINGS_TIMEOUT",
            STREAM_CLOSED => "STREAM_CLOSED",
            FRAME_SIZE_ERROR => "FRAME_SIZE_ERROR",
            REFUSED_STREAM => "REFUSED_STREAM",
            CANCEL => "CANCEL",
            COMPRESSION_ERROR => "COMPRESSION_ERROR",
            CONNECT_ERROR => "CONNECT_ERROR",
            ENHANCE_YOUR_CALM => "ENHANCE_YOUR_CALM",
            INADEQUATE_SECURITY => "INADEQUATE_SECURITY",
            HTTP_1_1_REQUIRED => "HTTP_1_1_REQUIRED",
            _ => "unknown error code",
        }
    }
}

// Frame types (RFC 9113 §6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

// Flags.
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

/// Why bytes are not a frame a client can accept (each a connection error of RFC 9113).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum H2Error {
    /// A frame longer than the maximum frame size this side announced.
    #[error("frame of {len} bytes exceeds the maximum frame size {max}")]
    FrameTooLarge { len: usize, max: usize },
    /// A frame whose payload length does not fit its type.
    #[error("{kind} frame with a payload of {len} bytes")]
    BadLength { kind: &'static str, len: usize },
    /// A frame on a stream its type does not allow (0 for stream frames, or not 0).
    #[error("{kind} frame on stream {stream}")]
    BadStream { kind: &'static str, stream: u32 },
    /// Padding longer than the frame's payload.
    #[error("{kind} frame padded with {pad} bytes of {len}")]
    BadPadding {
        kind: &'static str,
        pad: usize,
        len: usize,
    },
    /// A SETTINGS value out of its range.
    #[error("SETTINGS {id:#x} = {value} is out of range")]
    BadSetting { id: u16, value: u32 },
    /// A WINDOW_UPDATE of 0.
    #[error("WINDOW_UPDATE of 0 on stream {stream}")]
    ZeroWindowUpdate { stream: u32 },
    /// A header block HPACK cannot decode.
    #[error("header block does not decode: {0}")]
    Hpack(String),
    /// A response header block without a valid `:status`.
    #[error("response headers without a valid :status")]
    NoStatus,
    /// A request that cannot be encoded (a stream id above 2^31 - 1, a frame size out of
    /// range).
    #[error("cannot encode: {0}")]
    Encode(String),
}

/// One decoded frame; payloads borrow the buffer it was decoded from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Response body bytes (padding removed). `flow_len` is the whole payload, padding
    /// included, which is what flow control counts.
    Data {
        stream: u32,
        end_stream: bool,
        data: &'a [u8],
        flow_len: usize,
    },
    /// The start of a header block (padding and priority removed).
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        block: &'a [u8],
    },
    /// The rest of a header block.
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    /// Stream priority (deprecated by RFC 9113; read and ignored).
    Priority { stream: u32 },
    /// The server ends a stream.
    RstStream { stream: u32, code: u32 },
    /// The peer's settings, or its acknowledgement of ours (`ack`, no parameters).
    Settings { ack: bool, params: Vec<(u16, u32)> },
    /// A promised stream (never asked for: the client disables push).
    PushPromise { stream: u32, promised: u32 },
    /// A liveness check (`ack`: the answer to ours).
    Ping { ack: bool, data: [u8; 8] },
    /// The server stops taking streams above `last_stream`.
    GoAway {
        last_stream: u32,
        code: u32,
        debug: &'a [u8],
    },
    /// More room in a flow-control window (stream 0: the connection's).
    WindowUpdate { stream: u32, increment: u32 },
    /// A frame type this client does not know (ignored, as RFC 9113 §4.1 requires).
    Unknown { kind: u8, stream: u32 },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The payload of a PADDED frame without its pad length byte and padding.
fn unpad<'a>(kind: &'static str, flags: u8, p: &'a [u8]) -> Result<&'a [u8], H2Error> {
    if flags & PADDED == 0 {
        return Ok(p);
    }
    let Some((&pad, rest)) = p.split_first() else {
        return Err(H2Error::BadLength { kind, len: 0 });
    };
    let pad = usize::from(pad);
    if pad > rest.len() {
        return Err(H2Error::BadPadding {
            kind,
            pad,
            len: p.len(),
        });
    }
    Ok(&rest[..rest.len() - pad])
}

/// Decodes the frame at the front of `buf`, accepting payloads up to `max_frame` bytes (the
/// SETTINGS_MAX_FRAME_SIZE this side announced). `Ok(None)`: the frame is not complete yet.
pub fn decode_frame(buf: &[u8], max_frame: usize) -> Result<Option<(usize, Frame<'_>)>, H2Error> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
    if len > max_frame {
        return Err(H2Error::FrameTooLarge {
            len,
            max: max_frame,
        });
    }
    let (kind, flags) = (buf[3], buf[4]);
    let stream = u32_at(buf, 5) & MAX_WINDOW;
    let total = HEADER_LEN + len;
    if buf.len() < total {
        return Ok(None);
    }
    let p = &buf[HEADER_LEN..total];
    let on_stream = |name: &'static str| {
        if stream == 0 {
            Err(H2Error::BadStream { kind: name, stream })
        } else {
            Ok(())
        }
    };
    let on_connection = |name: &'static str| {
        if stream != 0 {
            Err(H2Error::BadStream { kind: name, stream })
        } else {
            Ok(())
        }
    };
    let exact = |name: &'static str, want: usize| {
        if len != want {
            Err(H2Error::BadLength { kind: name, len })
        } else {
            Ok(())
        }
    };
    let frame = match kind {
        DATA => {
            on_stream("DATA")?;
            Frame::Data {
                stream,
                end_stream: flags & END_STREAM != 0,
                data: unpad("DATA", flags, p)?,
                flow_len: len,
            }
        }
        HEADERS => {
            on_stream("HEADERS")?;
            let mut block = unpad("HEADERS", flags, p)?;
            if flags & PRIORITY_FLAG != 0 {
                if block.len() < 5 {
                    return Err(H2Error::BadLength {
                        kind: "HEADERS",
                        len,
                    });
                }
                block = &block[5..];
            }
            Frame::Headers {
                stream,
                end_stream: flags & END_STREAM != 0,
                end_headers: flags & END_HEADERS != 0,
                block,
            }
        }
        PRIORITY => {
            on_stream("PRIORITY")?;
            exact("PRIORITY", 5)?;
            Frame::Priority { stream }
        }
        RST_STREAM => {
            on_stream("RST_STREAM")?;
            exact("RST_STREAM", 4)?;
            Frame::RstStream {
                stream,
                code: u32_at(p, 0),
            }
        }
        SETTINGS => {
            on_connection("SETTINGS")?;
            let ack = flags & ACK != 0;
            if (ack && len != 0) || len % 6 != 0 {
                return Err(H2Error::BadLength {
                    kind: "SETTINGS",
                    len,
                });
            }
            let mut params = Vec::with_capacity(len / 6);
            for c in p.chunks_exact(6) {
                let id = u16::from_be_bytes([c[0], c[1]]);
                let value = u32_at(c, 2);
                let ok = match id {
                    setting::ENABLE_PUSH => value <= 1,
                    setting::INITIAL_WINDOW_SIZE => value <= MAX_WINDOW,
                    setting::MAX_FRAME_SIZE => {
                        (DEFAULT_MAX_FRAME..=MAX_FRAME_LIMIT).contains(&(value as usize))
                    }
                    _ => true,
                };
                if !ok {
                    return Err(H2Error::BadSetting { id, value });
                }
                params.push((id, value));
            }
            Frame::Settings { ack, params }
        }
        PUSH_PROMISE => {
            on_stream("PUSH_PROMISE")?;
            let rest = unpad("PUSH_PROMISE", flags, p)?;
            if rest.len() < 4 {
                return Err(H2Error::BadLength {
                    kind: "PUSH_PROMISE",
                    len,
                });
            }
            Frame::PushPromise {
                stream,
                promised: u32_at(rest, 0) & MAX_WINDOW,
            }
        }
        PING => {
            on_connection("PING")?;
            exact("PING", 8)?;
            let mut data = [0; 8];
            data.copy_from_slice(p);
            Frame::Ping {
                ack: flags & ACK != 0,
                data,
            }
        }
        GOAWAY => {
            on_connection("GOAWAY")?;
            if len < 8 {
                return Err(H2Error::BadLength {
                    kind: "GOAWAY",
                    len,
                });
            }
            Frame::GoAway {
                last_stream: u32_at(p, 0) & MAX_WINDOW,
                code: u32_at(p, 4),
                debug: &p[8..],
            }
        }
        WINDOW_UPDATE => {
            exact("WINDOW_UPDATE", 4)?;
            let increment = u32_at(p, 0) & MAX_WINDOW;
            if increment == 0 {
                return Err(H2Error::ZeroWindowUpdate { stream });
            }
            Frame::WindowUpdate { stream, increment }
        }
        CONTINUATION => {
            on_stream("CONTINUATION")?;
            Frame::Continuation {
                stream,
                end_headers: flags & END_HEADERS != 0,
                block: p,
            }
        }
        kind => Frame::Unknown { kind, stream },
    };
    Ok(Some((total, frame)))
}

fn put_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    // Callers keep `len` within MAX_FRAME_LIMIT (24 bits).
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&(stream & MAX_WINDOW).to_be_bytes());
}

/// The client's connection preface followed by its SETTINGS.
pub fn encode_preface(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    out.extend_from_slice(PREFACE);
    encode_settings(out, settings);
}

/// A SETTINGS frame with `params`.
pub fn encode_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    put_header(out, 6 * params.len(), SETTINGS, 0, 0);
    for (id, v) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// The acknowledgement of the peer's SETTINGS.
pub fn encode_settings_ack(out: &mut Vec<u8>) {
    put_header(out, 0, SETTINGS, ACK, 0);
}

/// A PING, or (`ack`) the answer to the peer's.
pub fn encode_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    put_header(out, 8, PING, if ack { ACK } else { 0 }, 0);
    out.extend_from_slice(&data);
}

/// More room in a window (stream 0: the connection's). `increment` must be 1..=2^31-1.
pub fn encode_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) -> Result<(), H2Error> {
    if increment == 0 || increment > MAX_WINDOW {
        return Err(H2Error::Encode(format!(
            "a window increment of {increment}"
        )));
    }
    put_header(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
    Ok(())
}

/// The client ends a stream.
pub fn encode_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    put_header(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// The client closes the connection after `last_stream`.
pub fn encode_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32, debug: &[u8]) {
    let debug = &debug[..debug.len().min(DEFAULT_MAX_FRAME - 8)];
    put_header(out, 8 + debug.len(), GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(debug);
}

fn check_stream(stream: u32) -> Result<(), H2Error> {
    if stream == 0 || stream > MAX_WINDOW {
        return Err(H2Error::Encode(format!("stream id {stream}")));
    }
    Ok(())
}

fn check_max(max_frame: usize) -> Result<(), H2Error> {
    if !(DEFAULT_MAX_FRAME..=MAX_FRAME_LIMIT).contains(&max_frame) {
        return Err(H2Error::Encode(format!(
            "a maximum frame size of {max_frame}"
        )));
    }
    Ok(())
}

/// A header block on `stream`: one HEADERS frame, followed by CONTINUATION frames when the
/// block is longer than the peer's `max_frame`.
pub fn encode_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) -> Result<(), H2Error> {
    check_stream(stream)?;
    check_max(max_frame)?;
    let mut parts = block.chunks(max_frame);
    let first = parts.next().unwrap_or(&[]);
    let last = block.len() <= max_frame;
    let flags = if end_stream { END_STREAM } else { 0 } | if last { END_HEADERS } else { 0 };
    put_header(out, first.len(), HEADERS, flags, stream);
    out.extend_from_slice(first);
    let rest: Vec<&[u8]> = parts.collect();
    for (i, part) in rest.iter().enumerate() {
        let flags = if i + 1 == rest.len() { END_HEADERS } else { 0 };
        put_header(out, part.len(), CONTINUATION, flags, stream);
        out.extend_from_slice(part);
    }
    Ok(())
}

/// `data` on `stream`, in frames of at most `max_frame` bytes; the last one ends the stream
/// when `end_stream`. (The caller checks the flow-control windows first.)
pub fn encode_data(
    out: &mut Vec<u8>,
    stream: u32,
    data: &[u8],
    end_stream: bool,
    max_frame: usize,
) -> Result<(), H2Error> {
    check_stream(stream)?;
    check_max(max_frame)?;
    if data.is_empty() {
        put_header(
            out,
            0,
            DATA,
            if end_stream { END_STREAM } else { 0 },
            stream,
        );
        return Ok(());
    }
    let n = data.len().div_ceil(max_frame);
    for (i, part) in data.chunks(max_frame).enumerate() {
        let flags = if end_stream && i + 1 == n {
            END_STREAM
        } else {
            0
        };
        put_header(out, part.len(), DATA, flags, stream);
        out.extend_from_slice(part);
    }
    Ok(())
}

/// A connection's HPACK state for a client: the request encoder (`loona-hpack`'s) and the
/// response decoder ([`crate::hpack::Decoder`]); each must see every header block of its
/// direction, in order.
///
/// Measured (release build, this VM, `cargo run --release -p wire --example hpack_speed`):
/// decoding nginx 1.22.1's response head, Huffman-coded as nginx sends it, costs about
/// 0.75 µs with [`crate::hpack`] (0.5 µs with plain literals), against 180 µs with
/// `loona-hpack`'s decoder, which this crate used before and which builds a hash map of the
/// Huffman code for every string.
pub struct Hpack {
    encoder: loona_hpack::Encoder<'static>,
    decoder: crate::hpack::Decoder,
}

impl Default for Hpack {
    fn default() -> Self {
        Hpack::new()
    }
}

impl std::fmt::Debug for Hpack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hpack")
    }
}

/// A request's pseudo-headers and headers.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub method: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    pub authority: &'a str,
    pub path: &'a str,
    /// Further headers, names in lower case (e.g. `content-type`, `te`).
    pub headers: &'a [(&'a str, &'a str)],
}

/// A decoded response (or trailers) header block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fields(pub Vec<(Vec<u8>, Vec<u8>)>);

impl Fields {
    /// The first value of header `name` (lower case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(n, _)| n.as_slice() == name.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    /// The `:status` of a response head.
    pub fn status(&self) -> Result<u16, H2Error> {
        let v = self.get(":status").ok_or(H2Error::NoStatus)?;
        let s = std::str::from_utf8(v).map_err(|_| H2Error::NoStatus)?;
        match s.parse::<u16>() {
            Ok(n) if (100..=999).contains(&n) && s.len() == 3 => Ok(n),
            _ => Err(H2Error::NoStatus),
        }
    }
}

impl Hpack {
    /// Fresh tables (4,096 bytes each, as every connection starts).
    pub fn new() -> Self {
        Hpack {
            encoder: loona_hpack::Encoder::new(),
            decoder: crate::hpack::Decoder::new(),
        }
    }

    /// The header block of `req`, appended to `out`.
    pub fn encode_request(&mut self, req: &Request<'_>, out: &mut Vec<u8>) {
        self.encode_request_with(req, &[], out);
    }

    /// The header block of `req` followed by the owned headers `extra` (a client's headers
    /// fixed for a connection, e.g. gRPC's metadata, passed without a per-request slice of
    /// borrows), appended to `out`.
    pub fn encode_request_with(
        &mut self,
        req: &Request<'_>,
        extra: &[(String, String)],
        out: &mut Vec<u8>,
    ) {
        let pseudo = [
            (":method", req.method),
            (":scheme", req.scheme),
            (":authority", req.authority),
            (":path", req.path),
        ];
        let all = pseudo
            .iter()
            .chain(req.headers.iter())
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .chain(extra.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
        // Writing to a Vec cannot fail.
        let _ = self.encoder.encode_into(all, out);
    }

    /// Any header block (a server's response head or trailers; tests and servers), appended
    /// to `out`.
    pub fn encode_fields(&mut self, fields: &[(&[u8], &[u8])], out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail.
        let _ = self.encoder.encode_into(fields.iter().copied(), out);
    }

    /// Decodes one whole header block (HEADERS and its CONTINUATIONs joined).
    pub fn decode(&mut self, block: &[u8]) -> Result<Fields, H2Error> {
        self.decoder
            .decode(block)
            .map(Fields)
            .map_err(|e| H2Error::Hpack(e.to_string()))
    }
}

#[cfg(test)]
#[path = "h2_tests.rs"]
mod tests;
