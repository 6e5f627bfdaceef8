//! HTTP/2 over cleartext with prior knowledge (`h2c://`): GETs of the workload's paths, each
//! on its own stream, many in flight on one connection.
//!
//! The codec is the connection's HTTP/2 state (crate `wire::h2` does the bytes): it opens
//! with the preface and its SETTINGS (no push; every stream's window at the maximum, so no
//! stream waits for a WINDOW_UPDATE), acknowledges the server's SETTINGS and PINGs, gives the
//! connection window back as DATA arrives, and maps stream ids to request ids (replies carry
//! ids, so the engine matches them out of order). The server's MAX_CONCURRENT_STREAMS is the
//! connection's in-flight limit: requests beyond it wait in the client, held and counted as
//! requests beyond `--max-outstanding` are. A RST_STREAM completes its request as an error; a
//! GOAWAY ends the connection (a protocol error: the engine's fault path counts its requests).

use std::collections::HashMap;

use wire::h2::{self, setting, Frame, Hpack};

use crate::error::ProtoError;
use crate::protocol::{Protocol, Reply};
use crate::target::Transport;
use crate::workload::{HttpWorkload, PathGen};
use crate::LoadError;

/// What the client announces: no server push, every stream's receive window at the maximum.
const SETTINGS: [(u16, u32); 2] = [
    (setting::ENABLE_PUSH, 0),
    (setting::INITIAL_WINDOW_SIZE, h2::MAX_WINDOW),
];

/// The connection's receive window is given back once this much of it was used.
const WINDOW_REFILL: u32 = 1 << 20;

/// One connection's HTTP/2 client state.
pub struct H2Get {
    paths: PathGen,
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
    /// The request's header block, reused from request to request.
    scratch: Vec<u8>,
}

impl H2Get {
    /// A codec drawing paths from `w` with `seed`; `authority` is `host:port`.
    pub fn new(w: &HttpWorkload, authority: String, seed: u64) -> Result<Self, LoadError> {
        if let Some(p) = w.paths.iter().find(|p| !p.starts_with('/')) {
            return Err(LoadError::Config(format!(
                "h2c: a path must start with '/', got {p:?}"
            )));
        }
        Ok(H2Get {
            paths: PathGen::new(w, seed)?,
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
            scratch: Vec::with_capacity(64),
        })
    }

    /// The reply that completes `stream` (its request id), if it is one of ours.
    fn complete(&mut self, stream: u32, ok: bool, miss: bool) -> Reply {
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
            },
            // A stream this side did not open (or already ended): nothing to complete.
            None => Reply::control(),
        }
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
                    return Ok(self.complete(stream, status < 400, status == 404));
                }
                self.heads.insert(stream, status);
                Ok(Reply::control())
            }
            // Trailers (no :status) end a stream whose head came before.
            _ if end_stream => {
                let status = self.heads.get(&stream).copied().unwrap_or(0);
                Ok(self.complete(stream, (200..400).contains(&status), status == 404))
            }
            _ => Err(ProtoError::Malformed(format!(
                "h2c: stream {stream}: a header block without :status"
            ))),
        }
    }
}

impl Protocol for H2Get {
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
        self.hpack.encode_request(
            &h2::Request {
                method: "GET",
                scheme: "http",
                authority: &self.authority,
                path: self.paths.next_path(),
                headers: &[],
            },
            &mut self.scratch,
        );
        // The stream id and frame size are in range (checked above and by the constants).
        let _ = h2::encode_headers(out, stream, &self.scratch, true, self.peer_max_frame);
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
                        _ => {}
                    }
                }
                h2::encode_settings_ack(&mut self.owed);
                Reply::control()
            }
            Frame::Ping { ack: false, data } => {
                h2::encode_ping(&mut self.owed, true, data);
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
                    self.complete(stream, (200..400).contains(&status), status == 404)
                } else {
                    Reply::control()
                }
            }
            Frame::RstStream { stream, .. } => {
                // The server refused or cancelled the request: an error reply (nothing for a
                // stream that is not in flight).
                self.complete(stream, false, false)
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
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> H2Get {
        let w = HttpWorkload {
            paths: vec!["/a".into()],
            popularity: crate::workload::Popularity::Uniform,
        };
        H2Get::new(&w, "127.0.0.1:1".into(), 1).unwrap()
    }

    /// What a server answers on `stream`: a head, then the body ending the stream.
    fn answer(server: &mut Hpack, stream: u32, status: &[u8], out: &mut Vec<u8>) {
        let mut head = Vec::new();
        server.encode_fields(&[(b":status", status)], &mut head);
        h2::encode_headers(out, stream, &head, false, h2::DEFAULT_MAX_FRAME).unwrap();
        h2::encode_data(out, stream, b"body", true, h2::DEFAULT_MAX_FRAME).unwrap();
    }

    /// Every reply in `buf`, as the connection reads them.
    fn replies(c: &mut H2Get, buf: &[u8]) -> Vec<Reply> {
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
}
