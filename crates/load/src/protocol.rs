//! The one trait every protocol codec implements for the engine, and the null-RPC codec.
//!
//! Codecs are pure (bytes in, bytes out, via crate `wire`); the engine owns sockets and time.

use crate::error::ProtoError;
use crate::target::Transport;

/// A protocol codec for the engine. One instance per connection (it may keep parse state).
pub trait Protocol: Send {
    /// The transport this codec instance is configured for.
    fn transport(&self) -> Transport;
    /// Append request number `id` (unique per run) to `out`. `class` is the request label.
    fn encode(&mut self, id: u64, class: u8, out: &mut Vec<u8>);
    /// Try to parse one reply from the front of `buf`. `Ok(None)` = need more bytes.
    /// For datagram transports `buf` holds exactly one datagram, and `Ok(None)` means the
    /// datagram was taken in but completes no reply yet (part of a multi-datagram reply).
    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError>;
    /// Whether replies carry the request id (else matched in FIFO order per connection).
    fn carries_id(&self) -> bool;
    /// Forget per-connection state (request-id tables, partial replies): called whenever
    /// the engine closes the connection. Stateless codecs need not implement it.
    fn reset(&mut self) {}
    /// Bytes to send first on a (re)opened connection, before any request (HTTP/2's
    /// preface and SETTINGS). Most codecs send none.
    fn on_open(&mut self, _out: &mut Vec<u8>) {}
    /// Bytes the codec owes the server after what it decoded (HTTP/2's SETTINGS and PING
    /// acknowledgements, WINDOW_UPDATEs), appended to `out`; the connection sends them at
    /// once. Most codecs owe none.
    fn take_output(&mut self, _out: &mut Vec<u8>) {}
    /// Requests the server lets be in flight on this connection (HTTP/2's
    /// MAX_CONCURRENT_STREAMS), when it says; more wait in the client like requests beyond
    /// `--max-outstanding`.
    fn in_flight_limit(&self) -> Option<usize> {
        None
    }
    /// The TLS client this codec is spoken over (`https://`, `h2://`), if any: the connection
    /// shakes hands with it and carries the codec's bytes inside TLS records.
    fn tls(&self) -> Option<&crate::tls::TlsClient> {
        None
    }
}

/// One parsed message from the server.
///
/// A message with `id == None` and `tx_stamp_for == Some(..)` is a pure follow-up (it
/// completes no request); any other message completes one request: the one named by `id`,
/// or, when the protocol does not carry ids, the oldest outstanding one on the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The request id echoed by the server, if the protocol carries one.
    pub id: Option<u64>,
    /// Whether the server reported success (an error reply still completes the request).
    pub ok: bool,
    /// Server stage stamps T1..T6 (server CLOCK_MONOTONIC ns; 0 = missing).
    pub stamps: Option<[u64; 6]>,
    /// A late transmit stamp: (request id, T6), sent after the reply itself.
    pub tx_stamp_for: Option<(u64, u64)>,
    /// A successful lookup that found nothing (memcached `END`, Redis nil, HTTP 404).
    pub miss: bool,
    /// The server announced it closes the connection after this reply (HTTP
    /// `Connection: close`): the engine reopens it instead of treating the close as a fault.
    pub closes: bool,
    /// A message of the connection itself that completes no request (an HTTP/2 SETTINGS,
    /// PING or WINDOW_UPDATE frame, or a header block whose body is still to come).
    pub control: bool,
    /// What an error reply said, when its protocol says it with a code (the engine counts
    /// error replies by code: `RunSummary::error_codes`).
    pub code: Option<ErrorCode>,
}

/// The code an error reply carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    /// An HTTP status (4xx, 5xx, or a gRPC call's non-200 head).
    Http(u16),
    /// A gRPC status other than OK (`grpc-status` of the trailers).
    Grpc(u32),
    /// The server reset the request's HTTP/2 stream (RST_STREAM), with its error code.
    Reset(u32),
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ErrorCode::Http(s) => write!(f, "HTTP {s}"),
            ErrorCode::Grpc(c) => write!(f, "gRPC {} ({c})", wire::grpc::status_name(c)),
            ErrorCode::Reset(c) => write!(f, "RST_STREAM {}", wire::h2::code::name(c)),
        }
    }
}

impl Reply {
    /// Whether this message completes no request: a follow-up carrying T6 for an earlier
    /// reply, or a control message.
    pub fn is_follow_up(&self) -> bool {
        self.control || (self.id.is_none() && self.tx_stamp_for.is_some())
    }

    /// A control message (it completes no request).
    pub fn control() -> Reply {
        Reply {
            id: None,
            ok: true,
            stamps: None,
            tx_stamp_for: None,
            miss: false,
            closes: false,
            control: true,
            code: None,
        }
    }
}

/// The null-RPC protocol (crate `wire::nullrpc`): fixed-size requests echoed by the server,
/// optionally with the server's T1..T6 stamps appended.
#[derive(Clone, Debug)]
pub struct NullRpc {
    /// Total request frame length in bytes (header included), 32..=65536.
    pub request_len: usize,
    /// Ask the server to append its T1..T6 stage stamps.
    pub want_stamps: bool,
    /// Ask the server for a follow-up frame carrying the kernel transmit stamp T6.
    pub want_tx_stamp: bool,
    transport: Transport,
}

impl NullRpc {
    /// A null-RPC codec. `request_len` is clamped into the frame limits of `wire`.
    pub fn new(
        transport: Transport,
        request_len: usize,
        want_stamps: bool,
        want_tx_stamp: bool,
    ) -> Self {
        NullRpc {
            request_len: request_len.clamp(wire::nullrpc::HEADER_LEN, wire::nullrpc::MAX_FRAME),
            want_stamps,
            want_tx_stamp,
            transport,
        }
    }
}

impl Protocol for NullRpc {
    fn transport(&self) -> Transport {
        self.transport
    }

    fn encode(&mut self, id: u64, class: u8, out: &mut Vec<u8>) {
        let flags = wire::nullrpc::Flags {
            want_stamps: self.want_stamps,
            want_tx_stamp: self.want_tx_stamp,
        };
        // The length is clamped into wire's limits in `new`, so encoding cannot fail; if a
        // future wire version disagrees, the server sees a short frame and the request
        // times out rather than the engine panicking.
        let start = out.len();
        let _ = wire::nullrpc::encode_request(out, id, 0, self.request_len, flags);
        // The request's label rides in the first payload byte, where the built-in server's
        // staged mode reads it (class 0 = delay-sensitive); other modes just echo it.
        if let Some(b) = out.get_mut(start + wire::nullrpc::HEADER_LEN) {
            *b = class;
        }
    }

    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
        use wire::nullrpc::{decode, Decoded, Kind};
        match decode(buf) {
            Ok(Decoded::Incomplete { need_at_least }) if self.transport == Transport::Udp => {
                Err(ProtoError::Malformed(format!(
                    "truncated datagram of {} bytes (frame needs {need_at_least})",
                    buf.len()
                )))
            }
            Ok(Decoded::Incomplete { .. }) => Ok(None),
            Ok(Decoded::Frame {
                header,
                stamps,
                tx_stamp,
                consumed,
                ..
            }) => match header.kind {
                Kind::Response => Ok(Some((
                    consumed,
                    Reply {
                        id: Some(header.id),
                        ok: true,
                        stamps: stamps.map(|s| s.0),
                        tx_stamp_for: None,
                        miss: false,
                        closes: false,
                        control: false,
                        code: None,
                    },
                ))),
                Kind::TxStamp => {
                    let t6 = tx_stamp.ok_or_else(|| {
                        ProtoError::Malformed(format!(
                            "tx-stamp frame for id {} without a stamp",
                            header.id
                        ))
                    })?;
                    Ok(Some((
                        consumed,
                        Reply {
                            id: None,
                            ok: true,
                            stamps: None,
                            tx_stamp_for: Some((header.id, t6)),
                            miss: false,
                            closes: false,
                            control: false,
                            code: None,
                        },
                    )))
                }
                Kind::Request => Err(ProtoError::Unexpected(format!(
                    "request frame (id {}) sent to the client",
                    header.id
                ))),
            },
            Err(e) => Err(ProtoError::Malformed(e.to_string())),
        }
    }

    fn carries_id(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_through_wire() {
        let mut p = NullRpc::new(Transport::Tcp, 100, true, false);
        let mut req = Vec::new();
        p.encode(42, 0, &mut req);
        assert_eq!(req.len(), 100);
        let wire::nullrpc::Decoded::Frame {
            header, payload, ..
        } = wire::nullrpc::decode(&req).unwrap()
        else {
            panic!("request does not decode");
        };
        assert!(header.flags.want_stamps && !header.flags.want_tx_stamp);
        let mut resp = Vec::new();
        let st = wire::nullrpc::Stamps([1, 2, 3, 4, 5, 6]);
        wire::nullrpc::encode_response(&mut resp, &header, payload, Some(&st)).unwrap();
        wire::nullrpc::encode_tx_stamp(&mut resp, 42, 7);
        assert_eq!(p.decode(&resp[..10]).unwrap(), None);
        let (n, r) = p.decode(&resp).unwrap().unwrap();
        assert_eq!(
            r,
            Reply {
                id: Some(42),
                ok: true,
                stamps: Some([1, 2, 3, 4, 5, 6]),
                tx_stamp_for: None,
                miss: false,
                closes: false,
                control: false,
                code: None,
            }
        );
        let (m, f) = p.decode(&resp[n..]).unwrap().unwrap();
        assert_eq!(n + m, resp.len());
        assert!(f.is_follow_up());
        assert_eq!(f.tx_stamp_for, Some((42, 7)));
        // A request sent back to the client is an error, not a reply.
        assert!(matches!(p.decode(&req), Err(ProtoError::Unexpected(_))));
        // Out-of-range lengths are clamped into the frame limits.
        assert_eq!(
            NullRpc::new(Transport::Udp, 1, false, false).request_len,
            wire::nullrpc::HEADER_LEN
        );
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut p = NullRpc::new(Transport::Tcp, 128, true, true);
            if let Ok(Some((n, _))) = p.decode(&bytes) {
                prop_assert!(n > 0 && n <= bytes.len());
            }
        }
    }
}
