//! Property tests for the null-RPC codec: arbitrary bytes never panic the decoder, and
//! encode → decode is the identity for every frame kind.

use proptest::prelude::*;
use wire::nullrpc::{
    decode, encode_request, encode_response, encode_tx_stamp, Decoded, Flags, Header, Kind, Stamps,
    HEADER_LEN, MAX_FRAME,
};

fn flags() -> impl Strategy<Value = Flags> {
    (any::<bool>(), any::<bool>()).prop_map(|(a, b)| Flags {
        want_stamps: a,
        want_tx_stamp: b,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(Decoded::Frame { header, payload, consumed, .. }) = decode(&bytes) {
            prop_assert!(consumed <= bytes.len());
            prop_assert_eq!(consumed, header.len as usize);
            prop_assert!(payload.len() <= consumed - HEADER_LEN);
        }
    }

    #[test]
    fn any_bytes_after_a_valid_magic_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        len in 0u32..300,
    ) {
        let mut b = b"TSN1".to_vec();
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&bytes);
        match decode(&b) {
            Ok(Decoded::Frame { consumed, .. }) => prop_assert!(consumed <= b.len()),
            Ok(Decoded::Incomplete { need_at_least }) => prop_assert!(need_at_least > b.len()),
            Err(_) => {}
        }
    }

    #[test]
    fn request_response_round_trip(
        id in any::<u64>(),
        ts in any::<u64>(),
        len in HEADER_LEN..2048usize,
        f in flags(),
        stamps in proptest::option::of(any::<[u64; 6]>()),
        split in 0usize..4096,
    ) {
        let mut req = Vec::new();
        encode_request(&mut req, id, ts, len, f).unwrap();
        prop_assert_eq!(req.len(), len);
        // A prefix is always incomplete, never an error.
        let cut = split % len;
        let incomplete = matches!(decode(&req[..cut]), Ok(Decoded::Incomplete { .. }));
        prop_assert!(incomplete);
        let Ok(Decoded::Frame { header, payload, stamps: s0, tx_stamp, consumed }) = decode(&req) else {
            return Err(TestCaseError::fail("request did not decode"));
        };
        let expect = Header { kind: Kind::Request, flags: f, len: len as u32, id, client_ts: ts };
        prop_assert_eq!(header, expect);
        prop_assert_eq!((s0, tx_stamp, consumed), (None, None, len));
        prop_assert!(wire::nullrpc::check_payload(id, payload));

        let stamps = stamps.map(Stamps);
        let mut resp = Vec::new();
        encode_response(&mut resp, &header, payload, stamps.as_ref()).unwrap();
        let Ok(Decoded::Frame { header: rh, payload: rp, stamps: rs, tx_stamp: rt, consumed: rc }) = decode(&resp) else {
            return Err(TestCaseError::fail("response did not decode"));
        };
        prop_assert_eq!(rh.kind, Kind::Response);
        prop_assert_eq!((rh.id, rh.client_ts), (id, ts));
        prop_assert_eq!(rp, payload);
        prop_assert_eq!(rs, stamps);
        prop_assert_eq!(rh.flags.want_stamps, stamps.is_some());
        prop_assert_eq!(rh.flags.want_tx_stamp, stamps.is_some() && f.want_tx_stamp);
        prop_assert_eq!((rt, rc), (None, resp.len()));
        prop_assert!(rc <= MAX_FRAME);
    }

    #[test]
    fn tx_stamp_round_trip(id in any::<u64>(), t6 in any::<u64>()) {
        let mut b = Vec::new();
        encode_tx_stamp(&mut b, id, t6);
        let Ok(Decoded::Frame { header, tx_stamp, .. }) = decode(&b) else {
            return Err(TestCaseError::fail("follow-up did not decode"));
        };
        prop_assert_eq!((header.kind, header.id, tx_stamp), (Kind::TxStamp, id, Some(t6)));
    }
}
