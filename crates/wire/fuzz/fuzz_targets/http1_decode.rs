//! Fuzz the HTTP/1.1 response framer: any bytes frame, ask for more, or fail cleanly, and
//! every prefix of a framed response asks for more or fails, never frames differently.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::http1::decode;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((n, r))) = decode(data) {
        assert!(n > 0 && n <= data.len());
        if let Ok(Some((m, r2))) = decode(&data[..n]) {
            assert_eq!((m, r2), (n, r));
        }
        assert!(!matches!(decode(&data[..n - 1]), Ok(Some(_))));
    }
});
