//! Fuzz the HTTP/2 frame decoder and the HPACK block decoder: any bytes decode, ask for more
//! or fail cleanly; a decoded frame never claims more bytes than it was given, and a header
//! block that decodes re-encodes to the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::h2::{decode_frame, Frame, Hpack, DEFAULT_MAX_FRAME, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    let mut hpack = Hpack::new();
    while let Ok(Some((n, f))) = decode_frame(&data[at..], DEFAULT_MAX_FRAME) {
        assert!(n >= HEADER_LEN && at + n <= data.len());
        if let Frame::Headers { block, .. } = f {
            if let Ok(fields) = hpack.decode(block) {
                let pairs: Vec<(&[u8], &[u8])> =
                    fields.0.iter().map(|(n, v)| (n.as_slice(), v.as_slice())).collect();
                let mut again = Vec::new();
                Hpack::new().encode_fields(&pairs, &mut again);
                assert_eq!(Hpack::new().decode(&again).ok(), Some(fields));
            }
        }
        at += n;
    }
});
