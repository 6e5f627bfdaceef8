//! Fuzz the memcached text decoder: any bytes decode, ask for more, or fail cleanly; a
//! decoded reply re-encodes to exactly the bytes it was decoded from (modulo a CAS field
//! and extra spaces, which the encoder does not write, so only the decode is re-checked).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::memcache::{decode, encode_response};

fuzz_target!(|data: &[u8]| {
    let mut buf = data;
    while let Ok(Some((n, r))) = decode(buf) {
        assert!(n > 0 && n <= buf.len());
        let mut again = Vec::new();
        encode_response(&mut again, &r);
        match decode(&again) {
            Ok(Some((m, r2))) => {
                assert_eq!(m, again.len());
                assert_eq!(r, r2);
            }
            other => panic!("re-encoded reply did not decode: {other:?}"),
        }
        buf = &buf[n..];
    }
});
