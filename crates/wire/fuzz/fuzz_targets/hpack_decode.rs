//! Fuzz the HPACK decoder (`wire::hpack`) against loona-hpack's: the input is header blocks of
//! one connection, each a length byte and that many bytes. Every block decodes or fails
//! cleanly; whenever loona-hpack accepts one, ours returns the same fields, or refuses what
//! RFC 7541 refuses and loona-hpack does not check (a size update after a field, §4.2); and
//! the fields of a block that decodes re-encode to the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loona_hpack::decoder::{DecoderError, IntegerDecodingError};
use wire::hpack::{Decoder, HpackError};

fuzz_target!(|data: &[u8]| {
    let mut ours = Decoder::new();
    let mut theirs = loona_hpack::Decoder::new();
    theirs.set_max_allowed_table_size(wire::hpack::DEFAULT_TABLE_SIZE);
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let block = &tail[..tail.len().min(usize::from(len))];
        rest = &tail[block.len()..];
        let agree = match (ours.decode(block), theirs.decode(block)) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b);
                let mut again = Vec::new();
                loona_hpack::Encoder::new()
                    .encode_into(a.iter().map(|(n, v)| (&n[..], &v[..])), &mut again)
                    .unwrap();
                assert_eq!(Decoder::new().decode(&again).ok(), Some(a));
                true
            }
            (Err(HpackError::LateSizeUpdate), Ok(_)) => false,
            (Err(e), Ok(_)) => panic!("refused what loona-hpack accepts: {e}"),
            // loona-hpack refuses a block that ends with a size update, which RFC 7541 allows,
            // and integers longer than 5 bytes, where we take any up to 2^32 - 1.
            (Ok(_), Err(DecoderError::SizeUpdateAtEnd))
            | (
                Ok(_),
                Err(DecoderError::IntegerDecodingError(IntegerDecodingError::TooManyOctets)),
            ) => false,
            (Ok(_), Err(e)) => panic!("accepted what loona-hpack refuses: {e}"),
            (Err(_), Err(_)) => false,
        };
        if !agree {
            // The tables may differ from here on.
            break;
        }
        assert!(ours.size() <= ours.max_size());
    }
});
