//! Fuzz the RESP2 decoder: any bytes decode, ask for more, or fail cleanly; a decoded
//! value re-encodes and decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::resp::{decode, encode_value};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((n, v))) = decode(data) {
        assert!(n > 0 && n <= data.len());
        let mut again = Vec::new();
        encode_value(&mut again, &v);
        match decode(&again) {
            Ok(Some((m, v2))) => {
                assert_eq!(m, again.len());
                assert_eq!(v, v2);
            }
            other => panic!("re-encoded value did not decode: {other:?}"),
        }
    }
});
