//! HTTP/2 with prior knowledge (`h2c://`, and `h2://` inside TLS): GETs of the workload's
//! paths, or gRPC unary calls (`grpc://`, `grpcs://`), each on its own stream, many in flight
//! on one connection.
//!
//! The codec is the connection's HTTP/2 state (crate `wire::h2` does the bytes): it opens
//! with the preface and its SETTINGS (no push; every stream's window at the maximum, so no
//! stream waits for a WINDOW_UPDATE), acknowledges the server's SETTINGS and PINGs, gives the
//! connection window back as DATA arrives, and maps stream ids to request ids (replies carry
//! ids, so the engine matches them out of order). The server's MAX_CONCURRENT_STREAMS is the
//! connection's in-flight limit: requests beyond it wait in the client, held and counted as
//! requests beyond `--max-outstanding` are. A RST_STREAM completes its request as an error; a
//! GOAWAY ends the connection (a protocol error: the engine's fault path counts its requests).
//!
//! A gRPC call sends its message in a DATA frame, so it spends the server's flow-control
//! windows: a call waits in the client, held like the others, until the connection's window
//! (given back by the server's WINDOW_UPDATEs) has room for its message. Its outcome is the
//! `grpc-status` of its trailers (or of a trailers-only response): anything but OK is an error
//! reply with its code, as is a head other than `:status 200`.

use std::collections::HashMap;

use wire::h2::{self, setting, Fields, Frame, Hpack};

use crate::error::ProtoError;
use crate::protocol::{ErrorCode, Protocol, Reply};
use crate::target::Transport;
use crate::workload::{GrpcWorkload, HttpWorkload, PathGen};
use crate::LoadError;

/// What the client announces: no server push, every stream's receive window at the maximum.
const SETTINGS: [(u16, u32); 2] = [
    (setting::ENABLE_PUSH, 0),
    (setting::INITIAL_WINDOW_SIZE, h2::MAX_WINDOW),
];

/// The connection's receive window is given back once this much of it was used.
const WINDOW_REFILL: u32 = 1 << 20;

/// The largest gRPC request message sent: it must fit a new stream's window at HTTP/2's
/// default (65,535 bytes, prefix included), whatever the server announces.
pub const MAX_GRPC_MESSAGE: usize = h2::DEFAULT_WINDOW as usize - wire::grpc::PREFIX_LEN;

/// The headers of a gRPC call besides the pseudo-headers.
const GRPC_HEADERS: [(&str, &str); 2] = [("content-type", "application/grpc"), ("te", "trailers")];

/// Whether `key: value` can be sent as gRPC custom metadata: a lower-case header name that is
/// none of gRPC's own (`grpc-*`), nor a pseudo-header, nor a binary (`*-bin`, base64) one,
/// and a printable ASCII value.
pub fn metadata_ok(key: &str, value: &str) -> bool {
    let name_ok = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
        && !key.starts_with("grpc-")
        && !key.ends_with("-bin")
        && !matches!(key, "content-type" | "te" | "user-agent");
    name_ok && value.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// What the connection's requests are.
enum Calls {
    /// GETs of the workload's paths.
    Get(PathGen),
    /// gRPC unary calls of one method: its path, the length-prefixed message, and the
    /// headers besides the pseudo-headers (gRPC's own, then the user's metadata).
    Grpc {
        path: String,
        body: Vec<u8>,
        headers: Vec<(String, String)>,
    },
}

/// One connection's HTTP/2 client state.
pub struct H2Client {
    calls: Calls,
    /// `http` or `https` (the `:scheme` of every request).
    scheme: &'static str,
    authority: String,
    hpack: Hpack,
    /// Stream id → request id, for the requests in flight.
    streams: HashMap<u32, u64>,
    /// The response status of streams whose head came without END_STREAM.
    heads: HashMap<u32, u16>,
    next_stream: u32,
    /// A header block being gathered from HEADERS and CONTINUATION frames: its stream,
    /// whether it ends the stream, and its bytes.
    block: Option<(u32, bool, Vec<u8>)>,
    /// Control frames owed to the server.
    owed: Vec<u8>,
    /// Connection window used since it was last given back.
    used: u32,
    /// The server's MAX_CONCURRENT_STREAMS (None until it says).
    limit: Option<usize>,
    /// The server's SETTINGS_MAX_FRAME_SIZE for what this side sends.
    peer_max_frame: usize,
    /// What this side may still send in DATA frames on the connection (gRPC's messages), and
    /// the window each new stream starts with (the server's SETTINGS_INITIAL_WINDOW_SIZE).
    send_window: i64,
    stream_window: u32,
    /// The request's header block, reused from request to request.
    scratch: Vec<u8>,
}

impl H2Client {
    /// A codec GETting paths drawn from `w` with `seed`; `authority` is `host:port`.
    pub fn get(
        w: &HttpWorkload,
        authority: String,
        tls: bool,
        seed: u64,
    ) -> Result<Self, LoadError> {
        if let Some(p) = w.paths.iter().find(|p| !p.starts_with('/')) {
            return Err(LoadError::Config(format!(
                "h2c: a path must start with '/', got {p:?}"
            )));
        }
        Ok(Self::with(
            Calls::Get(PathGen::new(w, seed)?),
            authority,
            tls,
        ))
    }

    /// A codec calling `w`'s method with its message; `authority` is `host:port`.
    pub fn grpc(w: &GrpcWorkload, authority: String, tls: bool) -> Result<Self, LoadError> {
        let p = &w.path;
        let well_formed = p.len() > 3
            && p.starts_with('/')
            && p[1..].split('/').count() == 2
            && p[1..].split('/').all(|part| !part.is_empty())
            && p.bytes().all(|b| b.is_ascii_graphic());
        if !well_formed {
            return Err(LoadError::Config(format!(
                "gRPC: the method must be package.Service/Method, got {:?}",
                p.trim_start_matches('/')
            )));
        }
        if w.message.len() > MAX_GRPC_MESSAGE {
            return Err(LoadError::Config(format!(
                "gRPC: the request message is {} bytes; at most {MAX_GRPC_MESSAGE} are sent (one stream's first window)",
                w.message.len()
            )));
        }
        if let Some((k, v)) = w.metadata.iter().find(|(k, v)| !metadata_ok(k, v)) {
            return Err(LoadError::Config(format!(
                "gRPC: metadata {k:?}: {v:?} is not a lower-case header name (not grpc-*, not *-bin) with a printable ASCII value"
            )));
        }
        let mut body = Vec::with_capacity(w.message.len() + wire::grpc::PREFIX_LEN);
        wire::grpc::encode_message(&mut body, &w.message)
            .map_err(|e| LoadError::Config(format!("gRPC: {e}")))?;
        let headers = GRPC_HEADERS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain(w.metadata.iter().cloned())
            .collect();
        let calls = Calls::Grpc {
            path: w.path.clone(),
            body,
            headers,
        };
        Ok(Self::with(calls, authority, tls))
    }

    fn with(calls: Calls, authority: String, tls: bool) -> Self {
        H2Client {
            calls,
            scheme: if tls { "https" } else { "http" },
            authority,
            hpack: Hpack::new(),
            streams: HashMap::new(),
            heads: HashMap::new(),
            next_stream: 1,
            block: None,
            owed: Vec::new(),
            used: 0,
            limit: None,
            peer_max_frame: h2::DEFAULT_MAX_FRAME,
            send_window: i64::from(h2::DEFAULT_WINDOW),
            stream_window: h2::DEFAULT_WINDOW,
            scratch: Vec::with_capacity(64),
        }
    }

    fn is_grpc(&self) -> bool {
        matches!(self.calls, Calls::Grpc { .. })
    }

    /// The reply that completes `stream` (its request id), if it is one of ours.
    fn complete(&mut self, stream: u32, ok: bool, miss: bool, code: Option<ErrorCode>) -> Reply {
        self.heads.remove(&stream);
        match self.streams.remove(&stream) {
            Some(id) => Reply {
                id: Some(id),
                ok,
                stamps: None,
                tx_stamp_for: None,
                miss,
                closes: false,
                control: false,
                code: if ok { None } else { code },
            },
            // A stream this side did not open (or already ended): nothing to complete.
            None => Reply::control(),
        }
    }

    /// `stream` ended with response status `status`; `last` is the block that ended it
    /// (trailers, or a head with END_STREAM), None when a DATA frame ended it.
    fn end(
        &mut self,
        stream: u32,
        status: u16,
        last: Option<&Fields>,
    ) -> Result<Reply, ProtoError> {
        if !self.is_grpc() {
            let ok = (200..400).contains(&status);
            return Ok(self.complete(stream, ok, status == 404, Some(ErrorCode::Http(status))));
        }
        if status != 200 {
            return Ok(self.complete(stream, false, false, Some(ErrorCode::Http(status))));
        }
        let grpc_status = match last.map(wire::grpc::status_of).transpose() {
            Ok(s) => s.flatten(),
            Err(e) => return Err(ProtoError::Malformed(format!("gRPC: stream {stream}: {e}"))),
        };
        // A call that ends without a status is INTERNAL, as gRPC's own clients read it.
        let code = grpc_status.map_or(13, |(c, _)| c);
        Ok(self.complete(stream, code == 0, false, Some(ErrorCode::Grpc(code))))
    }

    /// A whole header block of `stream` arrived.
    fn head(&mut self, stream: u32, end_stream: bool, block: &[u8]) -> Result<Reply, ProtoError> {
        // Every block goes through HPACK, trailers too: the dynamic table must follow.
        let fields = self
            .hpack
            .decode(block)
            .map_err(|e| ProtoError::Malformed(format!("h2c: {e}")))?;
        match fields.status() {
            Ok(status) if !self.heads.contains_key(&stream) => {
                if (100..200).contains(&status) {
                    // An informational head: the response's own is still to come.
                    return Ok(Reply::control());
                }
                if end_stream {
                    return self.end(stream, status, Some(&fields));
                }
                self.heads.insert(stream, status);
                Ok(Reply::control())
            }
            // Trailers (no :status) end a stream whose head came before.
            _ if end_stream => {
                let status = self.heads.get(&stream).copied().unwrap_or(0);
                self.end(stream, status, Some(&fields))
            }
            _ => Err(ProtoError::Malformed(format!(
                "h2c: stream {stream}: a header block without :status"
            ))),
        }
    }
}

impl Protocol for H2Client {
    fn transport(&self) -> Transport {
        Transport::Tcp
    }

    fn encode(&mut self, id: u64, _class: u8, out: &mut Vec<u8>) {
        let stream = self.next_stream;
        // Stream ids run out after 2^30 requests on one connection: the engine's own limit
        // per connection is far below (it reopens on --churn); past it the server refuses
        // the stream and the request counts as an error.
        self.next_stream = self.next_stream.saturating_add(2);
        self.streams.insert(stream, id);
        self.scratch.clear();
        let (method, path, headers, body): (_, _, &[(String, String)], _) = match &mut self.calls {
            Calls::Get(paths) => ("GET", paths.next_path(), &[], None),
            Calls::Grpc {
                path,
                body,
                headers,
            } => ("POST", path.as_str(), headers, Some(&*body)),
        };
        self.hpack.encode_request_with(
            &h2::Request {
                method,
                scheme: self.scheme,
                authority: &self.authority,
                path,
                headers: &[],
            },
            headers,
            &mut self.scratch,
        );
        // The stream id and frame size are in range (checked above and by the constants).
        let _ = h2::encode_headers(
            out,
            stream,
            &self.scratch,
            body.is_none(),
            self.peer_max_frame,
        );
        if let Some(body) = body {
            // The connection's window had room (`in_flight_limit`), and the stream's starts
            // at least as large as the message (checked when the server's SETTINGS came).
            self.send_window -= body.len() as i64;
            let _ = h2::encode_data(out, stream, body, true, self.peer_max_frame);
        }
    }

    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
        let (used, frame) = match h2::decode_frame(buf, h2::DEFAULT_MAX_FRAME) {
            Ok(None) => return Ok(None),
            Ok(Some(v)) => v,
            Err(e) => return Err(ProtoError::Malformed(format!("h2c: {e}"))),
        };
        if let Some((stream, _, _)) = &self.block {
            if !matches!(frame, Frame::Continuation { stream: s, .. } if s == *stream) {
                return Err(ProtoError::Malformed(format!(
                    "h2c: stream {stream}'s header block interrupted"
                )));
            }
        }
        let reply = match frame {
            Frame::Settings { ack: false, params } => {
                for (id, v) in params {
                    match id {
                        setting::MAX_CONCURRENT_STREAMS => {
                            self.limit = Some(usize::try_from(v).unwrap_or(usize::MAX));
                        }
                        setting::MAX_FRAME_SIZE => self.peer_max_frame = v as usize,
                        setting::INITIAL_WINDOW_SIZE => self.stream_window = v,
                        _ => {}
                    }
                }
                if let Calls::Grpc { body, .. } = &self.calls {
                    if body.len() > self.stream_window as usize {
                        return Err(ProtoError::Unexpected(format!(
                            "gRPC: the server's streams take {} bytes before a WINDOW_UPDATE, less than the {}-byte message",
                            self.stream_window,
                            body.len()
                        )));
                    }
                }
                h2::encode_settings_ack(&mut self.owed);
                Reply::control()
            }
            Frame::Ping { ack: false, data } => {
                h2::encode_ping(&mut self.owed, true, data);
                Reply::control()
            }
            Frame::WindowUpdate {
                stream: 0,
                increment,
            } => {
                self.send_window += i64::from(increment);
                Reply::control()
            }
            Frame::Settings { ack: true, .. }
            | Frame::Ping { ack: true, .. }
            | Frame::WindowUpdate { .. }
            | Frame::Priority { .. }
            | Frame::Unknown { .. } => Reply::control(),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
            } => {
                if end_headers {
                    self.head(stream, end_stream, block)?
                } else {
                    self.block = Some((stream, end_stream, block.to_vec()));
                    Reply::control()
                }
            }
            Frame::Continuation {
                end_headers, block, ..
            } => {
                let Some((stream, end_stream, mut whole)) = self.block.take() else {
                    return Err(ProtoError::Malformed(
                        "h2c: CONTINUATION without a header block".into(),
                    ));
                };
                whole.extend_from_slice(block);
                if whole.len() > h2::MAX_HEADER_BLOCK {
                    return Err(ProtoError::Malformed(format!(
                        "h2c: a header block over {} bytes",
                        h2::MAX_HEADER_BLOCK
                    )));
                }
                if end_headers {
                    self.head(stream, end_stream, &whole)?
                } else {
                    self.block = Some((stream, end_stream, whole));
                    Reply::control()
                }
            }
            Frame::Data {
                stream,
                end_stream,
                flow_len,
                ..
            } => {
                // Streams' windows start at the maximum (SETTINGS above); the connection's
                // is given back in steps.
                self.used = self.used.saturating_add(flow_len as u32);
                if self.used >= WINDOW_REFILL {
                    let _ = h2::encode_window_update(&mut self.owed, 0, self.used);
                    self.used = 0;
                }
                if end_stream {
                    let status = self.heads.get(&stream).copied().unwrap_or(0);
                    self.end(stream, status, None)?
                } else {
                    Reply::control()
                }
            }
            Frame::RstStream { stream, code } => {
                // The server refused or cancelled the request: an error reply (nothing for a
                // stream that is not in flight).
                self.complete(stream, false, false, Some(ErrorCode::Reset(code)))
            }
            // A graceful GOAWAY (nginx's after keepalive_requests): no new stream here; the
            // engine reopens the connection and sends again what the server had not answered
            // (GETs are idempotent; those it had processed may be answered twice, the second
            // answer on a closed connection). Any other code is the connection's failure.
            Frame::GoAway {
                code: h2::code::NO_ERROR,
                ..
            } => Reply {
                closes: true,
                ..Reply::control()
            },
            Frame::GoAway {
                last_stream, code, ..
            } => {
                return Err(ProtoError::Unexpected(format!(
                    "h2c: the server sent GOAWAY ({}, last stream {last_stream})",
                    h2::code::name(code)
                )));
            }
            Frame::PushPromise { .. } => {
                return Err(ProtoError::Unexpected(
                    "h2c: PUSH_PROMISE although push was disabled".into(),
                ));
            }
        };
        Ok(Some((used, reply)))
    }

    fn carries_id(&self) -> bool {
        true
    }

    fn reset(&mut self) {
        self.hpack = Hpack::new();
        self.streams.clear();
        self.heads.clear();
        self.next_stream = 1;
        self.block = None;
        self.owed.clear();
        self.used = 0;
        self.limit = None;
        self.peer_max_frame = h2::DEFAULT_MAX_FRAME;
        self.send_window = i64::from(h2::DEFAULT_WINDOW);
        self.stream_window = h2::DEFAULT_WINDOW;
    }

    fn on_open(&mut self, out: &mut Vec<u8>) {
        h2::encode_preface(out, &SETTINGS);
        // The connection's own window starts at 65,535 whatever SETTINGS say: widen it.
        let _ = h2::encode_window_update(out, 0, h2::MAX_WINDOW - h2::DEFAULT_WINDOW);
    }

    fn take_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.owed);
    }

    fn in_flight_limit(&self) -> Option<usize> {
        match &self.calls {
            Calls::Get(_) => self.limit,
            // As many more calls as the connection's window has room for.
            Calls::Grpc { body, .. } => {
                let room = usize::try_from(self.send_window.max(0)).unwrap_or(0) / body.len();
                let by_window = self.streams.len() + room;
                Some(self.limit.map_or(by_window, |l| l.min(by_window)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> H2Client {
        let w = HttpWorkload {
            paths: vec!["/a".into()],
            popularity: crate::workload::Popularity::Uniform,
        };
        H2Client::get(&w, "127.0.0.1:1".into(), false, 1).unwrap()
    }

    /// What a server answers on `stream`: a head, then the body ending the stream.
    fn answer(server: &mut Hpack, stream: u32, status: &[u8], out: &mut Vec<u8>) {
        let mut head = Vec::new();
        server.encode_fields(&[(b":status", status)], &mut head);
        h2::encode_headers(out, stream, &head, false, h2::DEFAULT_MAX_FRAME).unwrap();
        h2::encode_data(out, stream, b"body", true, h2::DEFAULT_MAX_FRAME).unwrap();
    }

    /// Every reply in `buf`, as the connection reads them.
    fn replies(c: &mut H2Client, buf: &[u8]) -> Vec<Reply> {
        let mut at = 0;
        let mut out = Vec::new();
        while let Some((n, r)) = c.decode(&buf[at..]).unwrap() {
            out.push(r);
            at += n;
        }
        assert_eq!(at, buf.len());
        out
    }

    #[test]
    fn streams_complete_their_own_requests_out_of_order() {
        let mut c = codec();
        let mut open = Vec::new();
        c.on_open(&mut open);
        assert!(open.starts_with(h2::PREFACE));
        let mut reqs = Vec::new();
        for id in [10, 11, 12] {
            c.encode(id, 0, &mut reqs);
        }
        let mut server = Hpack::new();
        let mut buf = Vec::new();
        h2::encode_settings(&mut buf, &[(setting::MAX_CONCURRENT_STREAMS, 2)]);
        answer(&mut server, 5, b"404", &mut buf);
        answer(&mut server, 1, b"200", &mut buf);
        h2::encode_rst_stream(&mut buf, 3, h2::code::REFUSED_STREAM);
        let done: Vec<(Option<u64>, bool, bool)> = replies(&mut c, &buf)
            .into_iter()
            .filter(|r| !r.is_follow_up())
            .map(|r| (r.id, r.ok, r.miss))
            .collect();
        assert_eq!(
            done,
            [
                (Some(12), false, true),
                (Some(10), true, false),
                (Some(11), false, false)
            ]
        );
        assert_eq!(c.in_flight_limit(), Some(2));
        // The server's SETTINGS are acknowledged.
        let mut owed = Vec::new();
        c.take_output(&mut owed);
        assert_eq!(owed, [0, 0, 0, 4, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn a_graceful_goaway_closes_and_any_other_fails_the_connection() {
        let mut c = codec();
        let mut buf = Vec::new();
        h2::encode_goaway(&mut buf, 7, h2::code::NO_ERROR, b"");
        let r = replies(&mut c, &buf);
        assert!(r.len() == 1 && r[0].closes && r[0].is_follow_up(), "{r:?}");
        let mut buf = Vec::new();
        h2::encode_goaway(&mut buf, 7, h2::code::PROTOCOL_ERROR, b"bad");
        let e = c.decode(&buf).unwrap_err().to_string();
        assert!(e.contains("GOAWAY") && e.contains("PROTOCOL_ERROR"), "{e}");
    }

    fn grpc_codec(message: &[u8]) -> H2Client {
        let w = GrpcWorkload {
            path: "/pkg.Echo/Say".into(),
            message: message.to_vec(),
            metadata: vec![("authorization".into(), "Bearer t0k".into())],
        };
        H2Client::grpc(&w, "127.0.0.1:1".into(), true).unwrap()
    }

    /// A server's answer to a call on `stream`: a head, a message, then trailers with
    /// `grpc-status` (or a trailers-only response when `message` is None).
    fn grpc_answer(
        server: &mut Hpack,
        stream: u32,
        message: Option<&[u8]>,
        status: &[u8],
        out: &mut Vec<u8>,
    ) {
        let mut block = Vec::new();
        let Some(m) = message else {
            server.encode_fields(
                &[(b":status", b"200"), (b"grpc-status", status)],
                &mut block,
            );
            h2::encode_headers(out, stream, &block, true, h2::DEFAULT_MAX_FRAME).unwrap();
            return;
        };
        server.encode_fields(
            &[(b":status", b"200"), (b"content-type", b"application/grpc")],
            &mut block,
        );
        h2::encode_headers(out, stream, &block, false, h2::DEFAULT_MAX_FRAME).unwrap();
        let mut body = Vec::new();
        wire::grpc::encode_message(&mut body, m).unwrap();
        h2::encode_data(out, stream, &body, false, h2::DEFAULT_MAX_FRAME).unwrap();
        block.clear();
        server.encode_fields(&[(b"grpc-status", status)], &mut block);
        h2::encode_headers(out, stream, &block, true, h2::DEFAULT_MAX_FRAME).unwrap();
    }

    #[test]
    fn a_grpc_call_posts_its_prefixed_message_and_reads_the_trailers_status() {
        let mut c = grpc_codec(b"\x0a\x03abc");
        let mut req = Vec::new();
        c.encode(7, 0, &mut req);
        // HEADERS (POST, the method's path, gRPC's content type; the stream stays open),
        // then the message in one DATA frame that ends the stream.
        let (n, head) = h2::decode_frame(&req, h2::DEFAULT_MAX_FRAME)
            .unwrap()
            .unwrap();
        let Frame::Headers {
            stream: 1,
            end_stream: false,
            block,
            ..
        } = head
        else {
            panic!("{head:?}");
        };
        let fields = Fields(wire::hpack::Decoder::new().decode(block).unwrap());
        for (name, value) in [
            (":method", "POST"),
            (":scheme", "https"),
            (":path", "/pkg.Echo/Say"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("authorization", "Bearer t0k"),
        ] {
            assert_eq!(fields.get(name), Some(value.as_bytes()), "{name}");
        }
        let (m, data) = h2::decode_frame(&req[n..], h2::DEFAULT_MAX_FRAME)
            .unwrap()
            .unwrap();
        assert_eq!(n + m, req.len());
        let Frame::Data {
            stream: 1,
            end_stream: true,
            data,
            ..
        } = data
        else {
            panic!("{data:?}");
        };
        assert_eq!(data, b"\0\0\0\0\x05\x0a\x03abc");
        // Three more calls; answers: OK with a message, UNIMPLEMENTED trailers-only, a 503
        // head, a message without trailers.
        for id in [8, 9, 10] {
            c.encode(id, 0, &mut req);
        }
        let mut server = Hpack::new();
        let mut buf = Vec::new();
        grpc_answer(&mut server, 1, Some(b"ok"), b"0", &mut buf);
        grpc_answer(&mut server, 3, None, b"12", &mut buf);
        let mut block = Vec::new();
        server.encode_fields(&[(b":status", b"503")], &mut block);
        h2::encode_headers(&mut buf, 5, &block, true, h2::DEFAULT_MAX_FRAME).unwrap();
        block.clear();
        server.encode_fields(&[(b":status", b"200")], &mut block);
        h2::encode_headers(&mut buf, 7, &block, false, h2::DEFAULT_MAX_FRAME).unwrap();
        h2::encode_data(&mut buf, 7, b"\0\0\0\0\0", true, h2::DEFAULT_MAX_FRAME).unwrap();
        let done: Vec<(Option<u64>, bool, Option<ErrorCode>)> = replies(&mut c, &buf)
            .into_iter()
            .filter(|r| !r.is_follow_up())
            .map(|r| (r.id, r.ok, r.code))
            .collect();
        assert_eq!(
            done,
            [
                (Some(7), true, None),
                (Some(8), false, Some(ErrorCode::Grpc(12))),
                (Some(9), false, Some(ErrorCode::Http(503))),
                (Some(10), false, Some(ErrorCode::Grpc(13))),
            ]
        );
        assert_eq!(ErrorCode::Grpc(12).to_string(), "gRPC UNIMPLEMENTED (12)");
    }

    #[test]
    fn grpc_calls_wait_for_the_connections_send_window() {
        let message = vec![7u8; 20_000];
        let mut c = grpc_codec(&message);
        // 65,535 bytes of window: three 20,005-byte calls fit, a fourth waits.
        assert_eq!(c.in_flight_limit(), Some(3));
        let mut out = Vec::new();
        for id in 0..3 {
            c.encode(id, 0, &mut out);
        }
        assert_eq!(c.in_flight_limit(), Some(3));
        let mut buf = Vec::new();
        h2::encode_settings(&mut buf, &[(setting::MAX_CONCURRENT_STREAMS, 100)]);
        h2::encode_window_update(&mut buf, 0, 40_010).unwrap();
        replies(&mut c, &buf);
        assert_eq!(c.in_flight_limit(), Some(5));
        // A server whose streams cannot take the message is refused with the reason.
        let mut small = Vec::new();
        h2::encode_settings(&mut small, &[(setting::INITIAL_WINDOW_SIZE, 1000)]);
        let e = c.decode(&small).unwrap_err().to_string();
        assert!(e.contains("1000") && e.contains("20005"), "{e}");
        // A method that is not package.Service/Method, or a message over one window.
        for path in [
            "/pkg.Echo",
            "pkg.Echo/Say",
            "/pkg.Echo/Say/x",
            "//Say",
            "/a b/c",
        ] {
            let w = GrpcWorkload {
                path: path.into(),
                message: vec![],
                metadata: vec![],
            };
            assert!(H2Client::grpc(&w, "h:1".into(), false).is_err(), "{path}");
        }
        let w = GrpcWorkload {
            path: "/p.S/M".into(),
            message: vec![0; MAX_GRPC_MESSAGE + 1],
            metadata: vec![],
        };
        assert!(H2Client::grpc(&w, "h:1".into(), false).is_err());
        // Metadata that is not a plain lower-case header, or is gRPC's or HTTP/2's own.
        for (k, v) in [
            ("X-Up", "a"),
            ("grpc-timeout", "1S"),
            ("k-bin", "AA"),
            ("te", "x"),
            ("k", "\n"),
        ] {
            let w = GrpcWorkload {
                path: "/p.S/M".into(),
                message: vec![],
                metadata: vec![(k.into(), v.into())],
            };
            assert!(H2Client::grpc(&w, "h:1".into(), false).is_err(), "{k}: {v}");
        }
    }
}
