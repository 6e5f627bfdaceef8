//! Fuzz gRPC's message framing: any bytes decode, ask for more or fail cleanly; a decoded
//! message re-encodes to the bytes it came from (when uncompressed).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::grpc::{decode_message, encode_message, PREFIX_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((n, m))) = decode_message(data) {
        assert!(n >= PREFIX_LEN && n <= data.len());
        if !m.compressed {
            let mut again = Vec::new();
            encode_message(&mut again, m.data).unwrap();
            assert_eq!(&again[..], &data[..n]);
        }
    }
});
