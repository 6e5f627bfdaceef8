//! gRPC over HTTP/2, as far as a unary client needs it: the length-prefixed message of a
//! request or response body, and the status a response's trailers carry.
//!
//! Messages are opaque protobuf bytes here (the caller encodes them). Pure: [`decode_message`]
//! answers "need more", one message and the bytes it used, or an error, and bounds the
//! message size.

use thiserror::Error;

use crate::h2::Fields;

/// Bytes before each message: the compressed flag and the length (big-endian u32).
pub const PREFIX_LEN: usize = 5;
/// The largest message accepted (gRPC's default receive limit, 4 MiB).
pub const MAX_MESSAGE: usize = 4 << 20;

/// The status codes of gRPC (`grpc-status`), by number.
pub const STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The name of a `grpc-status` code.
pub fn status_name(code: u32) -> &'static str {
    usize::try_from(code)
        .ok()
        .and_then(|i| STATUS_NAMES.get(i))
        .copied()
        .unwrap_or("unknown status")
}

/// Why bytes are not a gRPC message or status.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum GrpcError {
    /// The compressed flag is neither 0 nor 1.
    #[error("message flag {0} is neither 0 nor 1")]
    BadFlag(u8),
    /// A message longer than [`MAX_MESSAGE`].
    #[error("message of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// Trailers whose `grpc-status` is not a number.
    #[error("grpc-status {0:?} is not a number")]
    BadStatus(String),
}

/// One length-prefixed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The message was compressed with the stream's `grpc-encoding`.
    pub compressed: bool,
    pub data: &'a [u8],
}

/// Appends `msg` as one uncompressed length-prefixed message.
pub fn encode_message(out: &mut Vec<u8>, msg: &[u8]) -> Result<(), GrpcError> {
    if msg.len() > MAX_MESSAGE {
        return Err(GrpcError::TooLarge(msg.len()));
    }
    out.push(0);
    // MAX_MESSAGE fits in a u32.
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
    Ok(())
}

/// The message at the front of `buf`; `Ok(None)`: not complete yet.
pub fn decode_message(buf: &[u8]) -> Result<Option<(usize, Message<'_>)>, GrpcError> {
    if buf.len() < PREFIX_LEN {
        return Ok(None);
    }
    let flag = buf[0];
    if flag > 1 {
        return Err(GrpcError::BadFlag(flag));
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > MAX_MESSAGE {
        return Err(GrpcError::TooLarge(len));
    }
    if buf.len() < PREFIX_LEN + len {
        return Ok(None);
    }
    Ok(Some((
        PREFIX_LEN + len,
        Message {
            compressed: flag == 1,
            data: &buf[PREFIX_LEN..PREFIX_LEN + len],
        },
    )))
}

/// The status of a call, from its trailers (or a trailers-only response's headers):
/// `grpc-status` and `grpc-message` (percent-encoded on the wire, decoded here). `Ok(None)`:
/// the block carries no status.
pub fn status_of(fields: &Fields) -> Result<Option<(u32, String)>, GrpcError> {
    let Some(v) = fields.get("grpc-status") else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(v);
    let code: u32 = text
        .parse()
        .map_err(|_| GrpcError::BadStatus(text.to_string()))?;
    let message = fields
        .get("grpc-message")
        .map(percent_decode)
        .unwrap_or_default();
    Ok(Some((code, message)))
}

/// `grpc-message`'s percent-decoding (invalid escapes kept as they are).
fn percent_decode(v: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'%' && i + 2 < v.len() {
            if let (Some(h), Some(l)) = (hex(v[i + 1]), hex(v[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_status_and_its_message_are_read_from_trailers() {
        let f = Fields(vec![
            (b"grpc-status".to_vec(), b"5".to_vec()),
            (b"grpc-message".to_vec(), b"no%20such%20key%zz".to_vec()),
        ]);
        assert_eq!(
            status_of(&f).unwrap(),
            Some((5, "no such key%zz".to_string()))
        );
        assert_eq!(status_name(5), "NOT_FOUND");
        assert_eq!(status_name(99), "unknown status");
        assert_eq!(status_of(&Fields(vec![])).unwrap(), None);
        let bad = Fields(vec![(b"grpc-status".to_vec(), b"x".to_vec())]);
        assert!(matches!(status_of(&bad), Err(GrpcError::BadStatus(_))));
    }

    #[test]
    fn bad_prefixes_are_refused() {
        assert_eq!(decode_message(&[2, 0, 0, 0, 0]), Err(GrpcError::BadFlag(2)));
        let big = (MAX_MESSAGE as u32 + 1).to_be_bytes();
        assert_eq!(
            decode_message(&[0, big[0], big[1], big[2], big[3]]),
            Err(GrpcError::TooLarge(MAX_MESSAGE + 1))
        );
    }

    proptest! {
        #[test]
        fn messages_round_trip_through_any_split(msgs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..5), cut in 0usize..2000) {
            let mut buf = Vec::new();
            for m in &msgs {
                encode_message(&mut buf, m).unwrap();
            }
            let cut = cut.min(buf.len());
            // The first `cut` bytes: whole messages decode, the rest asks for more.
            let mut at = 0;
            let mut got = Vec::new();
            while let Some((n, m)) = decode_message(&buf[at..cut]).unwrap() {
                prop_assert!(!m.compressed);
                got.push(m.data.to_vec());
                at += n;
            }
            prop_assert_eq!(&got[..], &msgs[..got.len()]);
            while let Some((n, m)) = decode_message(&buf[at..]).unwrap() {
                got.push(m.data.to_vec());
                at += n;
            }
            prop_assert_eq!(got, msgs);
            prop_assert_eq!(at, buf.len());
        }

        #[test]
        fn any_bytes_decode_ask_for_more_or_fail(data in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(Some((n, _))) = decode_message(&data) {
                prop_assert!(n >= PREFIX_LEN && n <= data.len());
            }
        }
    }
}
