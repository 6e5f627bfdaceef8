//! The null-RPC frame spoken by the built-in server (Tales of the Tail §3.3: a server that does
//! nothing but answer, so that every microsecond of its latency is the OS's and the
//! architecture's, not the application's).
//!
//! Layout (all integers little-endian), 32-byte header:
//!
//! | bytes  | field                                                           |
//! |--------|-----------------------------------------------------------------|
//! | 0..4   | magic `b"TSN1"`                                                 |
//! | 4..8   | `len` u32: total frame length, header + payload + trailer       |
//! | 8..16  | `id` u64                                                        |
//! | 16..24 | `client_ts` u64, opaque to the server, echoed                   |
//! | 24     | kind u8: 0 request, 1 response, 2 transmit-stamp follow-up      |
//! | 25     | flags u8: bit 0 `WANT_STAMPS`, bit 1 `WANT_TX_STAMP`            |
//! | 26..32 | reserved, zero                                                  |
//!
//! then the payload, then a kind-dependent trailer:
//!
//! - **request**: no trailer; fixed size chosen by the client (default
//!   [`DEFAULT_REQUEST_LEN`], at least [`HEADER_LEN`], at most [`MAX_FRAME`]).
//! - **response**: echoes the request's payload; when its `WANT_STAMPS` flag is set it ends in a
//!   [`STAMPS_LEN`]-byte trailer of six u64 stage stamps T1..T6 (server `CLOCK_MONOTONIC` ns,
//!   0 = not available). The response's flags say what the server actually did: `WANT_STAMPS`
//!   set ⇔ the trailer is present; `WANT_TX_STAMP` set ⇔ a follow-up *may* come (it does only
//!   if the kernel reported the transmit timestamp).
//! - **tx-stamp follow-up**: exactly `HEADER_LEN + 8` bytes; the header carries the request id,
//!   the 8 trailing bytes carry T6.

use thiserror::Error;

/// First four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"TSN1";
/// Length of the fixed header.
pub const HEADER_LEN: usize = 32;
/// Length of the stamp trailer of a response (six u64).
pub const STAMPS_LEN: usize = 48;
/// Largest frame either side accepts.
pub const MAX_FRAME: usize = 65536;
/// Request size used when the user does not choose one.
pub const DEFAULT_REQUEST_LEN: usize = 128;
/// Total length of a transmit-stamp follow-up frame.
pub const TX_STAMP_LEN: usize = HEADER_LEN + 8;

const FLAG_WANT_STAMPS: u8 = 1 << 0;
const FLAG_WANT_TX_STAMP: u8 = 1 << 1;
const KNOWN_FLAGS: u8 = FLAG_WANT_STAMPS | FLAG_WANT_TX_STAMP;

/// Why bytes are not a valid frame, or why a frame cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WireError {
    /// The first four bytes are not [`MAGIC`].
    #[error("bad magic {found:02x?} (expected \"TSN1\")")]
    BadMagic { found: [u8; 4] },
    /// The kind byte is not 0, 1 or 2.
    #[error("unknown frame kind {0}")]
    BadKind(u8),
    /// Flag bits other than `WANT_STAMPS` and `WANT_TX_STAMP` are set.
    #[error("unknown flag bits {0:#04x}")]
    BadFlags(u8),
    /// The reserved header bytes are not zero.
    #[error("reserved header bytes are not zero")]
    BadReserved,
    /// The frame length exceeds [`MAX_FRAME`].
    #[error("frame length {len} exceeds the maximum {MAX_FRAME}")]
    TooLarge { len: usize },
    /// The frame length is below what its kind needs (at least the header).
    #[error("frame length {len} is too short")]
    TooShort { len: usize },
    /// A response or follow-up whose length does not fit its trailer.
    #[error("{kind:?} frame of length {len} has no room for its trailer")]
    BadTrailer { kind: Kind, len: usize },
    /// `encode_response` was given a header that is not a request.
    #[error("cannot answer a {0:?} frame")]
    NotARequest(Kind),
}

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Client → server.
    Request,
    /// Server → client, echoes the request's payload.
    Response,
    /// Server → client after a response: the kernel transmit stamp T6.
    TxStamp,
}

impl Kind {
    fn to_byte(self) -> u8 {
        match self {
            Kind::Request => 0,
            Kind::Response => 1,
            Kind::TxStamp => 2,
        }
    }

    fn from_byte(b: u8) -> Result<Self, WireError> {
        match b {
            0 => Ok(Kind::Request),
            1 => Ok(Kind::Response),
            2 => Ok(Kind::TxStamp),
            other => Err(WireError::BadKind(other)),
        }
    }
}

/// Per-frame options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Flags {
    /// Request: append T1..T5 (and T6 if known) to the response. Response: the trailer is present.
    pub want_stamps: bool,
    /// Request: send T6 in a follow-up once the kernel reports it. Response: one may follow.
    pub want_tx_stamp: bool,
}

impl Flags {
    fn to_byte(self) -> u8 {
        let mut b = 0;
        if self.want_stamps {
            b |= FLAG_WANT_STAMPS;
        }
        if self.want_tx_stamp {
            b |= FLAG_WANT_TX_STAMP;
        }
        b
    }

    fn from_byte(b: u8) -> Result<Self, WireError> {
        if b & !KNOWN_FLAGS != 0 {
            return Err(WireError::BadFlags(b));
        }
        Ok(Flags {
            want_stamps: b & FLAG_WANT_STAMPS != 0,
            want_tx_stamp: b & FLAG_WANT_TX_STAMP != 0,
        })
    }
}

/// The decoded 32-byte header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub flags: Flags,
    /// Total frame length including header and trailer.
    pub len: u32,
    pub id: u64,
    pub client_ts: u64,
}

/// Server stage stamps T1..T6 (index 0..6), `CLOCK_MONOTONIC` ns of the server host, 0 = not
/// available. See the `server` crate for what each stage is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stamps(pub [u64; 6]);

/// The result of looking at the front of a receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// Not a whole frame yet: read until the buffer holds at least `need_at_least` bytes
    /// (a total, not an increment) and call again.
    Incomplete { need_at_least: usize },
    /// One whole frame at the front of the buffer.
    Frame {
        header: Header,
        /// Request or response payload (empty for a follow-up).
        payload: &'a [u8],
        /// The response trailer, when the response's `want_stamps` flag is set.
        stamps: Option<Stamps>,
        /// T6 of a follow-up frame.
        tx_stamp: Option<u64>,
        /// Bytes to drop from the front of the buffer.
        consumed: usize,
    },
}

fn put_header(out: &mut Vec<u8>, h: &Header) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&h.len.to_le_bytes());
    out.extend_from_slice(&h.id.to_le_bytes());
    out.extend_from_slice(&h.client_ts.to_le_bytes());
    out.push(h.kind.to_byte());
    out.push(h.flags.to_byte());
    out.extend_from_slice(&[0u8; 6]);
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

/// The payload byte at offset `i` of request `id`: requests carry a pattern derived from the
/// id, so that a client can check that the server echoed *this* request's bytes.
#[inline]
pub fn payload_byte(id: u64, i: usize) -> u8 {
    (id as u8).wrapping_add(i as u8)
}

/// True when `payload` is the pattern [`encode_request`] writes for `id`.
pub fn check_payload(id: u64, payload: &[u8]) -> bool {
    payload
        .iter()
        .enumerate()
        .all(|(i, &b)| b == payload_byte(id, i))
}

/// Appends a request of total length `len` (header included) to `out`.
pub fn encode_request(
    out: &mut Vec<u8>,
    id: u64,
    client_ts: u64,
    len: usize,
    flags: Flags,
) -> Result<(), WireError> {
    if len < HEADER_LEN {
        return Err(WireError::TooShort { len });
    }
    if len > MAX_FRAME {
        return Err(WireError::TooLarge { len });
    }
    out.reserve(len);
    put_header(
        out,
        &Header {
            kind: Kind::Request,
            flags,
            len: len as u32,
            id,
            client_ts,
        },
    );
    out.extend((0..len - HEADER_LEN).map(|i| payload_byte(id, i)));
    Ok(())
}

/// Appends the response to `req` to `out`: `payload` echoed, then the stamp trailer when
/// `stamps` is given. The response's flags record what was done (see the module doc).
pub fn encode_response(
    out: &mut Vec<u8>,
    req: &Header,
    payload: &[u8],
    stamps: Option<&Stamps>,
) -> Result<(), WireError> {
    if req.kind != Kind::Request {
        return Err(WireError::NotARequest(req.kind));
    }
    let len = HEADER_LEN + payload.len() + if stamps.is_some() { STAMPS_LEN } else { 0 };
    if len > MAX_FRAME {
        return Err(WireError::TooLarge { len });
    }
    out.reserve(len);
    put_header(
        out,
        &Header {
            kind: Kind::Response,
            flags: Flags {
                want_stamps: stamps.is_some(),
                want_tx_stamp: stamps.is_some() && req.flags.want_tx_stamp,
            },
            len: len as u32,
            id: req.id,
            client_ts: req.client_ts,
        },
    );
    out.extend_from_slice(payload);
    if let Some(s) = stamps {
        for t in s.0 {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
    Ok(())
}

/// Appends a transmit-stamp follow-up for request `id` carrying `t6`.
pub fn encode_tx_stamp(out: &mut Vec<u8>, id: u64, t6: u64) {
    put_header(
        out,
        &Header {
            kind: Kind::TxStamp,
            flags: Flags::default(),
            len: TX_STAMP_LEN as u32,
            id,
            client_ts: 0,
        },
    );
    out.extend_from_slice(&t6.to_le_bytes());
}

/// Validates the header at the front of `buf` without needing the rest of the frame.
///
/// `Ok(None)` means fewer than [`HEADER_LEN`] bytes are there yet *and* the bytes that are
/// there do not already prove the frame bad (a wrong magic is reported as soon as four bytes
/// have arrived, so a server can drop a garbage connection early). Servers use this to refuse
/// a `len` above their own limit before buffering the body.
pub fn peek_header(buf: &[u8]) -> Result<Option<Header>, WireError> {
    let n = buf.len().min(MAGIC.len());
    if buf[..n] != MAGIC[..n] {
        let mut found = [0u8; 4];
        found[..n].copy_from_slice(&buf[..n]);
        return Err(WireError::BadMagic { found });
    }
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let mut len_bytes = [0u8; 4];
    len_bytes.copy_from_slice(&buf[4..8]);
    let len = u32::from_le_bytes(len_bytes);
    let kind = Kind::from_byte(buf[24])?;
    let flags = Flags::from_byte(buf[25])?;
    if buf[26..32].iter().any(|&b| b != 0) {
        return Err(WireError::BadReserved);
    }
    let len_usize = len as usize;
    if len_usize > MAX_FRAME {
        return Err(WireError::TooLarge { len: len_usize });
    }
    if len_usize < HEADER_LEN {
        return Err(WireError::TooShort { len: len_usize });
    }
    match kind {
        Kind::TxStamp if len_usize != TX_STAMP_LEN => {
            return Err(WireError::BadTrailer {
                kind,
                len: len_usize,
            })
        }
        Kind::Response if flags.want_stamps && len_usize < HEADER_LEN + STAMPS_LEN => {
            return Err(WireError::BadTrailer {
                kind,
                len: len_usize,
            })
        }
        _ => {}
    }
    Ok(Some(Header {
        kind,
        flags,
        len,
        id: u64_at(buf, 8),
        client_ts: u64_at(buf, 16),
    }))
}

/// Decodes the frame at the front of `buf`, if it is all there.
pub fn decode(buf: &[u8]) -> Result<Decoded<'_>, WireError> {
    let Some(header) = peek_header(buf)? else {
        return Ok(Decoded::Incomplete {
            need_at_least: HEADER_LEN,
        });
    };
    let len = header.len as usize;
    if buf.len() < len {
        return Ok(Decoded::Incomplete { need_at_least: len });
    }
    let frame = &buf[..len];
    let (payload, stamps, tx_stamp) = match header.kind {
        Kind::Request => (&frame[HEADER_LEN..], None, None),
        Kind::Response if header.flags.want_stamps => {
            let body_end = len - STAMPS_LEN;
            let mut s = [0u64; 6];
            for (i, t) in s.iter_mut().enumerate() {
                *t = u64_at(frame, body_end + 8 * i);
            }
            (&frame[HEADER_LEN..body_end], Some(Stamps(s)), None)
        }
        Kind::Response => (&frame[HEADER_LEN..], None, None),
        Kind::TxStamp => (
            &frame[HEADER_LEN..HEADER_LEN],
            None,
            Some(u64_at(frame, HEADER_LEN)),
        ),
    };
    Ok(Decoded::Frame {
        header,
        payload,
        stamps,
        tx_stamp,
        consumed: len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(buf: &[u8]) -> (Header, Vec<u8>, Option<Stamps>, Option<u64>, usize) {
        match decode(buf).unwrap() {
            Decoded::Frame {
                header,
                payload,
                stamps,
                tx_stamp,
                consumed,
            } => (header, payload.to_vec(), stamps, tx_stamp, consumed),
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    #[test]
    fn request_layout_is_the_documented_one() {
        let mut out = Vec::new();
        let flags = Flags {
            want_stamps: true,
            want_tx_stamp: true,
        };
        encode_request(&mut out, 0x0102_0304_0506_0708, 99, 40, flags).unwrap();
        assert_eq!(out.len(), 40);
        assert_eq!(&out[0..4], b"TSN1");
        assert_eq!(&out[4..8], &[40, 0, 0, 0]);
        assert_eq!(&out[8..16], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&out[16..24], &99u64.to_le_bytes());
        assert_eq!(out[24], 0);
        assert_eq!(out[25], 0b11);
        assert_eq!(&out[26..32], &[0; 6]);
        assert!(check_payload(0x0102_0304_0506_0708, &out[32..]));
    }

    #[test]
    fn request_round_trip_default_size() {
        let mut out = Vec::new();
        encode_request(&mut out, 7, 1234, DEFAULT_REQUEST_LEN, Flags::default()).unwrap();
        let (h, p, s, t, c) = frame(&out);
        assert_eq!(h.kind, Kind::Request);
        assert_eq!((h.id, h.client_ts, h.len), (7, 1234, 128));
        assert_eq!(p.len(), DEFAULT_REQUEST_LEN - HEADER_LEN);
        assert!(check_payload(7, &p));
        assert!(!check_payload(8, &p));
        assert_eq!((s, t, c), (None, None, 128));
    }

    #[test]
    fn request_size_limits() {
        let mut out = Vec::new();
        assert_eq!(
            encode_request(&mut out, 1, 0, 31, Flags::default()),
            Err(WireError::TooShort { len: 31 })
        );
        assert_eq!(
            encode_request(&mut out, 1, 0, MAX_FRAME + 1, Flags::default()),
            Err(WireError::TooLarge { len: MAX_FRAME + 1 })
        );
        assert!(out.is_empty());
        encode_request(&mut out, 1, 0, HEADER_LEN, Flags::default()).unwrap();
        encode_request(&mut out, 2, 0, MAX_FRAME, Flags::default()).unwrap();
        assert_eq!(out.len(), HEADER_LEN + MAX_FRAME);
        let (h, p, ..) = frame(&out);
        assert_eq!((h.id, p.len()), (1, 0));
        let (h, p, ..) = frame(&out[HEADER_LEN..]);
        assert_eq!((h.id, p.len()), (2, MAX_FRAME - HEADER_LEN));
    }

    #[test]
    fn response_with_stamps_round_trip() {
        let mut req = Vec::new();
        let flags = Flags {
            want_stamps: true,
            want_tx_stamp: true,
        };
        encode_request(&mut req, 42, 5, 64, flags).unwrap();
        let (rh, rp, ..) = frame(&req);
        let stamps = Stamps([1, 2, 3, 4, 5, 0]);
        let mut out = Vec::new();
        encode_response(&mut out, &rh, &rp, Some(&stamps)).unwrap();
        assert_eq!(out.len(), 64 + STAMPS_LEN);
        let (h, p, s, t, c) = frame(&out);
        assert_eq!(h.kind, Kind::Response);
        assert_eq!(
            (h.id, h.client_ts, h.len as usize),
            (42, 5, 64 + STAMPS_LEN)
        );
        assert_eq!(h.flags, flags);
        assert_eq!(p, rp);
        assert_eq!(s, Some(stamps));
        assert_eq!((t, c), (None, 64 + STAMPS_LEN));
    }

    #[test]
    fn response_without_stamps_clears_both_flags() {
        let mut req = Vec::new();
        let flags = Flags {
            want_stamps: true,
            want_tx_stamp: true,
        };
        encode_request(&mut req, 3, 0, 48, flags).unwrap();
        let (rh, rp, ..) = frame(&req);
        let mut out = Vec::new();
        encode_response(&mut out, &rh, &rp, None).unwrap();
        let (h, p, s, ..) = frame(&out);
        assert_eq!(h.flags, Flags::default());
        assert_eq!((p, s, h.len), (rp, None, 48));
    }

    #[test]
    fn response_to_a_response_is_refused() {
        let mut out = Vec::new();
        encode_tx_stamp(&mut out, 1, 2);
        let (h, ..) = frame(&out);
        assert_eq!(
            encode_response(&mut Vec::new(), &h, &[], None),
            Err(WireError::NotARequest(Kind::TxStamp))
        );
    }

    #[test]
    fn response_too_large_with_trailer() {
        let req = Header {
            kind: Kind::Request,
            flags: Flags::default(),
            len: MAX_FRAME as u32,
            id: 1,
            client_ts: 0,
        };
        let payload = vec![0u8; MAX_FRAME - HEADER_LEN];
        let mut out = Vec::new();
        assert_eq!(
            encode_response(&mut out, &req, &payload, Some(&Stamps::default())),
            Err(WireError::TooLarge {
                len: MAX_FRAME + STAMPS_LEN
            })
        );
        assert!(out.is_empty());
    }

    #[test]
    fn tx_stamp_round_trip() {
        let mut out = Vec::new();
        encode_tx_stamp(&mut out, 77, u64::MAX - 1);
        assert_eq!(out.len(), TX_STAMP_LEN);
        let (h, p, s, t, c) = frame(&out);
        assert_eq!((h.kind, h.id), (Kind::TxStamp, 77));
        assert_eq!(
            (p.len(), s, t, c),
            (0, None, Some(u64::MAX - 1), TX_STAMP_LEN)
        );
    }

    #[test]
    fn incomplete_reports_what_is_needed() {
        let mut out = Vec::new();
        encode_request(&mut out, 1, 0, 100, Flags::default()).unwrap();
        assert_eq!(
            decode(&[]).unwrap(),
            Decoded::Incomplete {
                need_at_least: HEADER_LEN
            }
        );
        assert_eq!(
            decode(&out[..10]).unwrap(),
            Decoded::Incomplete {
                need_at_least: HEADER_LEN
            }
        );
        assert_eq!(
            decode(&out[..99]).unwrap(),
            Decoded::Incomplete { need_at_least: 100 }
        );
    }

    #[test]
    fn bad_magic_is_seen_from_the_first_bytes() {
        assert_eq!(
            decode(b"GE"),
            Err(WireError::BadMagic {
                found: [b'G', b'E', 0, 0]
            })
        );
        assert_eq!(
            decode(b"TS").unwrap(),
            Decoded::Incomplete { need_at_least: 32 }
        );
    }

    #[test]
    fn header_field_errors() {
        let mut good = Vec::new();
        encode_request(&mut good, 1, 0, 64, Flags::default()).unwrap();
        let mut b = good.clone();
        b[24] = 3;
        assert_eq!(decode(&b), Err(WireError::BadKind(3)));
        let mut b = good.clone();
        b[25] = 0x80;
        assert_eq!(decode(&b), Err(WireError::BadFlags(0x80)));
        let mut b = good.clone();
        b[31] = 1;
        assert_eq!(decode(&b), Err(WireError::BadReserved));
        let mut b = good.clone();
        b[4..8].copy_from_slice(&(MAX_FRAME as u32 + 1).to_le_bytes());
        assert_eq!(decode(&b), Err(WireError::TooLarge { len: MAX_FRAME + 1 }));
        let mut b = good.clone();
        b[4..8].copy_from_slice(&31u32.to_le_bytes());
        assert_eq!(decode(&b), Err(WireError::TooShort { len: 31 }));
        // A response claiming a trailer it has no room for.
        let mut b = good.clone();
        b[24] = 1;
        b[25] = 1;
        assert_eq!(
            decode(&b),
            Err(WireError::BadTrailer {
                kind: Kind::Response,
                len: 64
            })
        );
        // A follow-up must be exactly 40 bytes.
        let mut b = good;
        b[24] = 2;
        assert_eq!(
            decode(&b),
            Err(WireError::BadTrailer {
                kind: Kind::TxStamp,
                len: 64
            })
        );
    }

    #[test]
    fn back_to_back_frames_decode_in_order() {
        let mut out = Vec::new();
        for id in 0..5 {
            encode_request(&mut out, id, id * 10, 32 + id as usize, Flags::default()).unwrap();
        }
        let mut at = 0;
        for id in 0..5 {
            let (h, p, _, _, c) = frame(&out[at..]);
            assert_eq!((h.id, h.client_ts, p.len()), (id, id * 10, id as usize));
            at += c;
        }
        assert_eq!(at, out.len());
    }
}
