//! Fuzz the null-RPC decoder: any bytes must decode, ask for more, or fail cleanly; a decoded
//! follow-up must re-encode to a frame with the same length, id and T6, and a response built
//! from a decoded request must decode back to the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::nullrpc::{decode, encode_response, encode_tx_stamp, Decoded, Kind, Stamps};

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Frame { header, payload, tx_stamp, consumed, .. }) = decode(data) else {
        return;
    };
    assert!(consumed <= data.len());
    assert_eq!(consumed, header.len as usize);
    match header.kind {
        Kind::Request => {
            let mut out = Vec::new();
            let stamps = Stamps([1, 2, 3, 4, 5, 6]);
            if encode_response(&mut out, &header, payload, Some(&stamps)).is_ok() {
                match decode(&out) {
                    Ok(Decoded::Frame { header: h, payload: p, stamps: s, .. }) => {
                        assert_eq!((h.id, h.client_ts), (header.id, header.client_ts));
                        assert_eq!(p, payload);
                        assert_eq!(s, Some(stamps));
                    }
                    other => panic!("response did not decode: {other:?}"),
                }
            }
        }
        Kind::TxStamp => {
            let mut out = Vec::new();
            encode_tx_stamp(&mut out, header.id, tx_stamp.unwrap_or_default());
            // Same frame length, id and T6 (client_ts and flags mean nothing in a follow-up).
            assert_eq!(out.len(), consumed);
            match decode(&out) {
                Ok(Decoded::Frame { header: h, tx_stamp: t, .. }) => {
                    assert_eq!((h.kind, h.id, t), (Kind::TxStamp, header.id, tx_stamp));
                }
                other => panic!("follow-up did not decode: {other:?}"),
            }
        }
        Kind::Response => {}
    }
});
