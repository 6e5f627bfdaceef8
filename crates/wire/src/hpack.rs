//! HPACK (RFC 7541) header block decoding for the HTTP/2 client: the static table, the
//! dynamic table with its size updates, integers, string literals and a table-driven Huffman
//! decoder.
//!
//! Why by hand: `loona-hpack` (which still encodes this crate's requests, and is the reference
//! its tests compare against) builds its Huffman decoder, a hash map of the 257 codes, for every
//! Huffman-coded string and then walks the input one bit at a time: 34 µs to 180 µs to decode
//! one nginx response head in a release build (180 µs for the head `examples/hpack_speed.rs`
//! times), where the load engine's budget is about 1 µs. No well-kept crate offers a fast
//! decoder on its own: `h2`'s HPACK module is private to it, and the rest either share that
//! per-string design or come with a whole HTTP stack. This module is the decoder alone: about
//! 0.75 µs for the same head, 0.5 µs of which the same head costs with plain literals, mostly
//! allocating the vectors it returns (`examples/hpack_speed.rs`).
//!
//! Pure like the rest of `wire`: [`Decoder::decode`] reads one whole header block (HEADERS and
//! its CONTINUATIONs joined) and answers its fields or an [`HpackError`] (the connection's
//! COMPRESSION_ERROR); it never panics, reads no byte past the block, accepts integers up to
//! 2^32 - 1 only, and bounds both the dynamic table (the limit the client announced) and the
//! decoded list ([`DEFAULT_MAX_LIST_SIZE`]), so a small block cannot expand into a large one.

use std::collections::VecDeque;
use std::sync::OnceLock;

use thiserror::Error;

/// The dynamic table's maximum size before any SETTINGS_HEADER_TABLE_SIZE (RFC 9113 §6.5.2).
pub const DEFAULT_TABLE_SIZE: usize = 4096;
/// The largest decoded header list (names, values and 32 bytes per field, as
/// SETTINGS_MAX_HEADER_LIST_SIZE counts) a block may expand to by default: 1 MiB, far above
/// any real response head, far below what indexed references to large entries could build
/// from a 64 KiB block.
pub const DEFAULT_MAX_LIST_SIZE: usize = 1 << 20;
/// What every table entry costs beyond its name and value (RFC 7541 §4.1).
pub const ENTRY_OVERHEAD: usize = 32;

/// A decoded header field: name and value.
pub type Field = (Vec<u8>, Vec<u8>);

/// Why a header block does not decode (each a COMPRESSION_ERROR of RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum HpackError {
    /// The block ends inside an integer or a string literal.
    #[error("header block truncated inside {0}")]
    Truncated(&'static str),
    /// An integer above 2^32 - 1, or one longer than its 5 continuation bytes can carry.
    #[error("integer larger than 2^32 - 1")]
    IntegerOverflow,
    /// Index 0, or one beyond the static and dynamic tables.
    #[error("index {index} is in neither table (61 static and {dynamic} dynamic entries)")]
    BadIndex { index: u32, dynamic: usize },
    /// A dynamic table size update after a field (RFC 7541 §4.2: only at a block's start).
    #[error("dynamic table size update after a header field")]
    LateSizeUpdate,
    /// A dynamic table size update above the limit the client announced (RFC 7541 §6.3).
    #[error("dynamic table size update to {size} above the limit {limit}")]
    SizeAboveLimit { size: u32, limit: usize },
    /// A Huffman-coded string containing the EOS symbol (RFC 7541 §5.2).
    #[error("Huffman-coded string contains EOS")]
    HuffmanEos,
    /// Huffman padding longer than 7 bits (RFC 7541 §5.2).
    #[error("Huffman padding longer than 7 bits")]
    HuffmanPaddingTooLong,
    /// Huffman padding that is not the most significant bits of EOS, i.e. not all ones (RFC
    /// 7541 §5.2); also a string cut inside a code.
    #[error("Huffman padding is not all ones")]
    HuffmanPaddingNotOnes,
    /// The decoded list grew beyond the decoder's bound ([`Decoder::set_max_list_size`]).
    #[error("decoded header list larger than {limit} bytes")]
    ListTooLarge { limit: usize },
}

/// RFC 7541 Appendix A: the static table, indices 1 to 61.
pub const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// One dynamic table entry: name and value in one allocation (half the allocations of two
/// vectors, and an evicted entry's buffer is reused for the next insertion).
#[derive(Debug)]
struct Entry {
    bytes: Vec<u8>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }

    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// The decoding side of one connection's HPACK context: the dynamic table the peer's encoder
/// fills. Every header block of the direction must go through it, in order.
#[derive(Debug)]
pub struct Decoder {
    /// Newest first: index 62 is `entries[0]`.
    entries: VecDeque<Entry>,
    /// Sum of the entries' sizes (RFC 7541 §4.1).
    size: usize,
    /// The maximum size the encoder chose (its last size update, else the limit).
    max_size: usize,
    /// The bound on `max_size`: the SETTINGS_HEADER_TABLE_SIZE this side announced.
    limit: usize,
    max_list: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

/// A cursor over a header block.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// An integer with an `prefix`-bit prefix (RFC 7541 §5.1; `prefix` in 1..=8), starting
    /// in the current byte.
    fn integer(&mut self, prefix: u32, what: &'static str) -> Result<u32, HpackError> {
        let mask = (1u32 << prefix) - 1;
        let Some(&first) = self.buf.get(self.at) else {
            return Err(HpackError::Truncated(what));
        };
        self.at += 1;
        let mut value = u32::from(first) & mask;
        if value < mask {
            return Ok(value);
        }
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.at) else {
                return Err(HpackError::Truncated(what));
            };
            self.at += 1;
            let sum = u64::from(value) + (u64::from(b & 0x7f) << shift);
            value = u32::try_from(sum).map_err(|_| HpackError::IntegerOverflow)?;
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
            // Five continuation bytes carry 35 bits: a sixth can only be zero padding.
            if shift > 28 {
                return Err(HpackError::IntegerOverflow);
            }
        }
    }

    /// A string literal (RFC 7541 §5.2), in a vector allocated once.
    fn string(&mut self, what: &'static str) -> Result<Vec<u8>, HpackError> {
        let huffman = self.buf.get(self.at).is_some_and(|b| b & 0x80 != 0);
        let len = self.integer(7, what)? as usize;
        let Some(raw) = self.buf.get(self.at..).and_then(|rest| rest.get(..len)) else {
            return Err(HpackError::Truncated(what));
        };
        self.at += len;
        if huffman {
            // No code is shorter than 5 bits.
            let mut out = Vec::with_capacity(len * 8 / 5);
            decode_huffman(raw, &mut out)?;
            Ok(out)
        } else {
            Ok(raw.to_vec())
        }
    }
}

impl Decoder {
    /// An empty table of [`DEFAULT_TABLE_SIZE`] bytes, as every connection starts. The first
    /// call also builds the Huffman decoder's table (about 0.3 ms, once per process).
    pub fn new() -> Self {
        byte_machine();
        Decoder {
            entries: VecDeque::new(),
            size: 0,
            max_size: DEFAULT_TABLE_SIZE,
            limit: DEFAULT_TABLE_SIZE,
            max_list: DEFAULT_MAX_LIST_SIZE,
        }
    }

    /// Sets the limit on the table size to the SETTINGS_HEADER_TABLE_SIZE this side announced
    /// (call it when the peer acknowledges those SETTINGS). Size updates above it are refused
    /// from then on. A limit below the current size also shrinks the table now, evicting the
    /// oldest entries: the peer's next block must start with a size update to at most `n`
    /// (RFC 7541 §4.2), which evicts the same entries on its side. A higher limit leaves the
    /// size as it is until the encoder raises it with an update.
    pub fn set_max_size_limit(&mut self, n: usize) {
        self.limit = n;
        if self.max_size > n {
            self.max_size = n;
            self.evict_to(n);
        }
    }

    /// The limit set by [`set_max_size_limit`](Self::set_max_size_limit).
    pub fn max_size_limit(&self) -> usize {
        self.limit
    }

    /// The table's current maximum size (the encoder's last size update, or the limit).
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// The table's current size: each entry's name, value and 32 bytes (RFC 7541 §4.1).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The dynamic table, newest entry (index 62) first.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.entries.iter().map(|e| (e.name(), e.value()))
    }

    /// Bounds the decoded size of one block's header list (each field's name, value and 32
    /// bytes); [`DEFAULT_MAX_LIST_SIZE`] unless set.
    pub fn set_max_list_size(&mut self, n: usize) {
        self.max_list = n;
    }

    /// Decodes one whole header block into its fields, in order.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<Field>, HpackError> {
        let mut out = Vec::with_capacity(16);
        self.decode_into(block, &mut out)?;
        Ok(out)
    }

    /// Decodes one whole header block, appending its fields to `out`. After an error `out` may
    /// hold the fields before it, and the table the insertions before it: the connection is
    /// unusable then anyway (COMPRESSION_ERROR).
    pub fn decode_into(&mut self, block: &[u8], out: &mut Vec<Field>) -> Result<(), HpackError> {
        let mut r = Reader { buf: block, at: 0 };
        let mut fields = false;
        let mut list = 0usize;
        while let Some(&first) = block.get(r.at) {
            let (name, value) = if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = r.integer(7, "an index")?;
                let (n, v) = self.get(index)?;
                (n.to_vec(), v.to_vec())
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing (§6.2.1).
                let (n, v) = self.literal(&mut r, 6)?;
                self.insert(&n, &v);
                (n, v)
            } else if first & 0x20 != 0 {
                // Dynamic table size update (§6.3), only before the first field (§4.2).
                if fields {
                    return Err(HpackError::LateSizeUpdate);
                }
                let size = r.integer(5, "a size update")?;
                if size as usize > self.limit {
                    return Err(HpackError::SizeAboveLimit {
                        size,
                        limit: self.limit,
                    });
                }
                self.max_size = size as usize;
                self.evict_to(self.max_size);
                continue;
            } else {
                // Literal without indexing (§6.2.2, 0000) or never indexed (§6.2.3, 0001):
                // the same to a decoder that forwards nothing.
                self.literal(&mut r, 4)?
            };
            fields = true;
            list = list.saturating_add(name.len() + value.len() + ENTRY_OVERHEAD);
            if list > self.max_list {
                return Err(HpackError::ListTooLarge {
                    limit: self.max_list,
                });
            }
            out.push((name, value));
        }
        Ok(())
    }

    /// The field at `index` of the static table followed by the dynamic one (§2.3.3).
    fn get(&self, index: u32) -> Result<(&[u8], &[u8]), HpackError> {
        let i = index as usize;
        let found = match i {
            0 => None,
            1..=61 => Some(STATIC_TABLE[i - 1]),
            _ => self.entries.get(i - 62).map(|e| (e.name(), e.value())),
        };
        found.ok_or(HpackError::BadIndex {
            index,
            dynamic: self.entries.len(),
        })
    }

    /// A literal field's name (indexed or literal) and value; the representation's pattern
    /// takes the bits above an index of `prefix` bits.
    fn literal(&self, r: &mut Reader<'_>, prefix: u32) -> Result<Field, HpackError> {
        let index = r.integer(prefix, "a name index")?;
        let name = if index == 0 {
            r.string("a name")?
        } else {
            self.get(index)?.0.to_vec()
        };
        Ok((name, r.string("a value")?))
    }

    /// Evicts the oldest entries until the table's size is at most `max`; returns the buffer
    /// of the last one evicted, for reuse.
    fn evict_to(&mut self, max: usize) -> Option<Vec<u8>> {
        let mut spare = None;
        while self.size > max {
            let Some(e) = self.entries.pop_back() else {
                break;
            };
            self.size -= e.size();
            spare = Some(e.bytes);
        }
        spare
    }

    /// Adds a field as the newest entry (§4.4): older entries are evicted to make room, and
    /// an entry larger than the whole table empties it and is not added.
    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        let mut bytes = self.evict_to(self.max_size - size).unwrap_or_default();
        bytes.clear();
        bytes.reserve(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.entries.push_front(Entry {
            bytes,
            name_len: name.len(),
        });
        self.size += size;
    }
}

// Huffman decoding (RFC 7541 §5.2, Appendix B).
//
// A finite-state machine. Its states are the 256 internal nodes of the code's binary tree (257
// leaves, so 256 inner nodes; state 0 is the root). At the end of a string the state says what
// the bits since the last symbol were: none (the root), valid padding (1 to 7 ones) or not.
//
// Two machines, one built from the other:
// - The 4-bit machine: each (state, nibble) pair gives the next state, at most one symbol (no
//   code is shorter than 5 bits) or a failure (the nibble completes EOS). 4,096 entries,
//   computed at compile time by a `const fn` from the code table, so that a transcription
//   error in the table (a code that is the prefix of another, a hole in the tree) fails the
//   build instead of a test.
// - The 8-bit machine the decoder runs: each (state, byte) pair, two nibble steps composed,
//   gives the next state, up to two symbols, or a failure. Its speed is bound by the chain of
//   dependent table loads (each step needs the state the last one gave): one load per byte
//   instead of two cuts the time of an nginx response head from about 1.0 to 0.75 µs
//   (measured, `examples/hpack_speed.rs`). Its 65,536 entries (256 KiB) are composed at run
//   time, once, in a `OnceLock` that `Decoder::new` fills (about 0.3 ms at the first
//   connection, not at its first response): as a `const` they would cost every build of this
//   crate about 0.7 s of compile-time evaluation and every binary linking it 256 KiB.

/// RFC 7541 Appendix B: (code, bit length) for symbols 0 to 255 and EOS (256), codes aligned
/// to the least significant bit.
#[rustfmt::skip]
pub const HUFFMAN_CODES: [(u32, u8); 257] = [
    /*   0 */ (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28),
    /*   4 */ (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28),
    /*   8 */ (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28),
    /*  12 */ (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28),
    /*  16 */ (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),
    /*  20 */ (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),
    /*  24 */ (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28),
    /*  28 */ (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28),
    /*  32 */ (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),
    /*  36 */ (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11),
    /*  40 */ (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11),
    /*  44 */ (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6),
    /*  48 */ (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6),
    /*  52 */ (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6),
    /*  56 */ (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8),
    /*  60 */ (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10),
    /*  64 */ (0x1ffa, 13), (0x21, 6), (0x5d, 7), (0x5e, 7),
    /*  68 */ (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7),
    /*  72 */ (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7),
    /*  76 */ (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7),
    /*  80 */ (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7),
    /*  84 */ (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7),
    /*  88 */ (0xfc, 8), (0x73, 7), (0xfd, 8), (0x1ffb, 13),
    /*  92 */ (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    /*  96 */ (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5),
    /* 100 */ (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6),
    /* 104 */ (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7),
    /* 108 */ (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5),
    /* 112 */ (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5),
    /* 116 */ (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    /* 120 */ (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15),
    /* 124 */ (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28),
    /* 128 */ (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),
    /* 132 */ (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23),
    /* 136 */ (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23),
    /* 140 */ (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23),
    /* 144 */ (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23),
    /* 148 */ (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23),
    /* 152 */ (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23),
    /* 156 */ (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24),
    /* 160 */ (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22),
    /* 164 */ (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21),
    /* 168 */ (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24),
    /* 172 */ (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23),
    /* 176 */ (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21),
    /* 180 */ (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23),
    /* 184 */ (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22),
    /* 188 */ (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
    /* 192 */ (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19),
    /* 196 */ (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25),
    /* 200 */ (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27),
    /* 204 */ (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25),
    /* 208 */ (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27),
    /* 212 */ (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24),
    /* 216 */ (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26),
    /* 220 */ (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27),
    /* 224 */ (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21),
    /* 228 */ (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23),
    /* 232 */ (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25),
    /* 236 */ (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),
    /* 240 */ (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26),
    /* 244 */ (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27),
    /* 248 */ (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),
    /* 252 */ (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26),
    /* 256 */ (0x3fffffff, 30),
];

/// The EOS symbol.
const EOS: u16 = 256;
/// A tree slot holding a leaf (its symbol in the low bits), not an inner node's index.
const LEAF: u16 = 0x8000;

// A 4-bit transition: bits 0-11 where the next state's row starts (state * 16), bits 12-19
// the symbol, then the flags.
const ROW_MASK: u32 = 0xff0;
const SYM_SHIFT: u32 = 12;
const EMIT_SHIFT: u32 = 20;
const EMIT: u32 = 1 << EMIT_SHIFT;
const FAIL: u32 = 1 << 21;

// An 8-bit transition: bits 0-1 how many symbols, bit 2 failure, bits 8-15 the next state (so
// `t & BYTE_ROW_MASK` is where its row starts, state * 256: no multiplication in the chain),
// bits 16-23 the first symbol, 24-31 the second.
const BYTE_COUNT_MASK: u32 = 0b11;
const BYTE_FAIL: u32 = 1 << 2;
const BYTE_ROW_MASK: u32 = 0xff00;
const BYTE_ROW_SHIFT: u32 = 8;

// What ending in a state means.
const END_OK: u8 = 0;
const END_TOO_LONG: u8 = 1;
const END_NOT_ONES: u8 = 2;

struct Machine {
    /// Row `state * 16`, column the nibble.
    next: [u32; 4096],
    end: [u8; 256],
}

static HUFFMAN: Machine = build_machine();

/// The 8-bit machine: row `state * 256`, column the byte (65,536 entries).
fn byte_machine() -> &'static [u32] {
    static BYTES: OnceLock<Box<[u32]>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let nibbles = &HUFFMAN.next;
        let mut t = vec![0u32; 1 << 16];
        for (i, entry) in t.iter_mut().enumerate() {
            let (state, byte) = (i >> 8, i & 0xff);
            let hi = nibbles[state * 16 + (byte >> 4)];
            let lo = nibbles[(hi & ROW_MASK) as usize | (byte & 0xf)];
            let (hi_sym, lo_sym) = ((hi >> SYM_SHIFT) & 0xff, (lo >> SYM_SHIFT) & 0xff);
            let symbols = match (hi & EMIT != 0, lo & EMIT != 0) {
                (true, true) => 2 | hi_sym << 16 | lo_sym << 24,
                (true, false) => 1 | hi_sym << 16,
                (false, true) => 1 | lo_sym << 16,
                (false, false) => 0,
            };
            let fail = if (hi | lo) & FAIL != 0 { BYTE_FAIL } else { 0 };
            *entry = symbols | fail | (lo & ROW_MASK) << 4;
        }
        t.into_boxed_slice()
    })
}

const fn build_machine() -> Machine {
    // The tree: children[node][bit] is 0 (empty: the root is nobody's child), an inner node's
    // index, or LEAF | symbol.
    let mut children = [[0u16; 2]; 256];
    let mut depth = [0u8; 256];
    let mut all_ones = [false; 256];
    all_ones[0] = true;
    let mut nodes = 1usize;
    let mut sym = 0usize;
    while sym < HUFFMAN_CODES.len() {
        let (code, len) = HUFFMAN_CODES[sym];
        assert!(len >= 5 && len <= 30, "code length out of range");
        let mut node = 0usize;
        let mut i = len;
        while i > 1 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            let child = children[node][bit];
            if child == 0 {
                assert!(nodes < 256, "more inner nodes than a complete code has");
                children[node][bit] = nodes as u16;
                depth[nodes] = depth[node] + 1;
                all_ones[nodes] = all_ones[node] && bit == 1;
                node = nodes;
                nodes += 1;
            } else {
                assert!(child & LEAF == 0, "a code is the prefix of another");
                node = child as usize;
            }
        }
        let bit = (code & 1) as usize;
        assert!(children[node][bit] == 0, "a code is the prefix of another");
        children[node][bit] = LEAF | sym as u16;
        sym += 1;
    }
    assert!(nodes == 256, "the code is not complete");

    let mut next = [0u32; 4096];
    let mut end = [END_OK; 256];
    let mut state = 0usize;
    while state < 256 {
        let mut b = 0;
        while b < 2 {
            assert!(children[state][b] != 0, "the code is not complete");
            b += 1;
        }
        end[state] = if state == 0 || (all_ones[state] && depth[state] <= 7) {
            END_OK
        } else if all_ones[state] {
            END_TOO_LONG
        } else {
            END_NOT_ONES
        };
        let mut nibble = 0usize;
        while nibble < 16 {
            let mut node = state;
            let mut entry = 0u32;
            let mut i = 4;
            while i > 0 {
                i -= 1;
                let child = children[node][(nibble >> i) & 1];
                if child & LEAF != 0 {
                    let leaf = child & !LEAF;
                    if leaf == EOS {
                        entry |= FAIL;
                        break;
                    }
                    entry |= EMIT | (leaf as u32) << SYM_SHIFT;
                    node = 0;
                } else {
                    node = child as usize;
                }
            }
            next[state * 16 + nibble] = entry | (node as u32) << 4;
            nibble += 1;
        }
        state += 1;
    }
    Machine { next, end }
}

/// Decodes the Huffman-coded string `src`, appending it to `out`. Refuses EOS in the string
/// and padding that is longer than 7 bits or not all ones (RFC 7541 §5.2); `out` is left as it
/// was then.
pub fn decode_huffman(src: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let start = out.len();
    // No code is shorter than 5 bits.
    out.reserve(src.len() * 8 / 5);
    let next = byte_machine();
    let (mut row, mut seen) = (0usize, 0u32);
    // A byte completes at most two symbols. The loop writes both symbol slots into `chunk`
    // and counts only those that hold one, so that no branch depends on the input (strings
    // that vary from response to response would mispredict it); failures gather in `seen`,
    // looked at once at the end. In a piece of 32 bytes, `n` is at most 2 * 31 before the
    // last byte, so `n & 63` and `(n + 1) & 63` are the slots themselves and need no bounds
    // check.
    let mut chunk = [0u8; 64];
    for piece in src.chunks(32) {
        let mut n = 0usize;
        for &byte in piece {
            // Always in the table (row at most 0xff00, plus a byte); the fallback would fail.
            let t = next
                .get(row | usize::from(byte))
                .copied()
                .unwrap_or(BYTE_FAIL);
            chunk[n & 63] = (t >> 16) as u8;
            chunk[(n + 1) & 63] = (t >> 24) as u8;
            n += (t & BYTE_COUNT_MASK) as usize;
            seen |= t;
            row = (t & BYTE_ROW_MASK) as usize;
        }
        out.extend_from_slice(&chunk[..n.min(64)]);
    }
    let result = if seen & BYTE_FAIL != 0 {
        Err(HpackError::HuffmanEos)
    } else {
        match HUFFMAN.end[row >> BYTE_ROW_SHIFT] {
            END_OK => Ok(()),
            END_TOO_LONG => Err(HpackError::HuffmanPaddingTooLong),
            _ => Err(HpackError::HuffmanPaddingNotOnes),
        }
    };
    if result.is_err() {
        out.truncate(start);
    }
    result
}

#[cfg(test)]
#[path = "hpack_tests.rs"]
mod tests;

/// Appends `value` as an HPACK integer with a `prefix`-bit prefix (RFC 7541 §5.1), the first
/// byte's other bits from `pattern` (e.g. 0x80 for an indexed field, 0x40 for a literal with
/// incremental indexing). Tests and benchmarks build header blocks with it.
pub fn encode_integer(out: &mut Vec<u8>, value: u64, prefix: u32, pattern: u8) {
    let max = (1u64 << prefix) - 1;
    if value < max {
        out.push(pattern | value as u8);
        return;
    }
    out.push(pattern | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}
