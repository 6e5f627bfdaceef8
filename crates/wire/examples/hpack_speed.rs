//! How long decoding one nginx response head takes, with `wire::hpack` (what `h2::Hpack`
//! uses) and with `loona-hpack`'s decoder (what it used before): 100,000 heads each, on one
//! connection's decoder, as the load engine would read them.
//!
//! The head is nginx 1.22.1's answer to `GET /` for an 831-byte index.html over h2c, built
//! the way nginx builds it (each field's representation as nginx chooses it, every string
//! Huffman-coded when that is shorter) and checked against the bytes nginx actually sent.
//! The same head with plain literals is timed too.
//!
//! Run: `cargo run --release -p wire --example hpack_speed`

use std::hint::black_box;
use std::time::Instant;

use wire::hpack::{Decoder, HUFFMAN_CODES};

const HEADS: u32 = 100_000;
const ROUNDS: u32 = 10;

/// The head nginx 1.22.1 sent (captured from a HEADERS frame).
const CAPTURED: &str = "887689aa6355e580ae212e1f6196d07abe9403aa5f29141004e28105c6c57191298b46ff\
                        5f87497ca589d34d1f5c033833316c96d07abe9403aa5f29141004e28105c6c57190a9\
                        8b46ff00832a47378cfe5c8c2e3d2965599665fe7f008919085ad2b583aa62a3848fd2\
                        4a8f";

fn huffman(s: &[u8]) -> Vec<u8> {
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u64, 0u32);
    for &c in s {
        let (code, len) = HUFFMAN_CODES[usize::from(c)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        // Padded with the most significant bits of EOS: ones.
        out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) as u8);
    }
    out
}

fn integer(out: &mut Vec<u8>, value: usize, prefix: u32, pattern: u8) {
    wire::hpack::encode_integer(out, value as u64, prefix, pattern);
}

/// A string literal, Huffman-coded when that is shorter (and `huff`), as nginx writes them.
fn string(out: &mut Vec<u8>, s: &str, huff: bool) {
    let h = huffman(s.as_bytes());
    if huff && h.len() < s.len() {
        integer(out, h.len(), 7, 0x80);
        out.extend_from_slice(&h);
    } else {
        integer(out, s.len(), 7, 0);
        out.extend_from_slice(s.as_bytes());
    }
}

fn nginx_head(huff: bool) -> Vec<u8> {
    let mut b = vec![0x88]; // :status 200, indexed
                            // Literals with incremental indexing, names from the static table.
    for (index, value) in [
        (54, "nginx/1.22.1"),                  // server
        (33, "Mon, 07 Dec 2026 10:52:32 GMT"), // date
        (31, "text/html"),                     // content-type
        (28, "831"),                           // content-length
        (44, "Mon, 07 Dec 2026 10:52:31 GMT"), // last-modified
    ] {
        integer(&mut b, index, 6, 0x40);
        string(&mut b, value, huff);
    }
    // Literals without indexing, literal names.
    for (name, value) in [("etag", "\"6b168fef-33f\""), ("accept-ranges", "bytes")] {
        b.push(0x00);
        string(&mut b, name, huff);
        string(&mut b, value, huff);
    }
    b
}

fn hex(s: &str) -> Vec<u8> {
    let d: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    d.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap_or("00"), 16).unwrap_or(0))
        .collect()
}

/// Nanoseconds per head: `HEADS` heads in `ROUNDS` rounds after a warm-up; the median round
/// and the fastest (the machine may be shared: the median is the figure, the fastest what the
/// code can do).
fn time(mut decode: impl FnMut(&[u8]) -> usize, block: &[u8]) -> (f64, f64) {
    for _ in 0..1_000 {
        black_box(decode(black_box(block)));
    }
    let per_round = HEADS / ROUNDS;
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_round {
                black_box(decode(black_box(block)));
            }
            t.elapsed().as_nanos() as f64 / f64::from(per_round)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    (rounds[rounds.len() / 2], rounds[0])
}

fn main() {
    let t = Instant::now();
    black_box(Decoder::new());
    println!(
        "first wire::hpack::Decoder::new (builds the Huffman table): {:.0} µs",
        t.elapsed().as_secs_f64() * 1e6
    );
    let huffman_head = nginx_head(true);
    assert_eq!(huffman_head, hex(CAPTURED), "not the head nginx sent");
    let plain_head = nginx_head(false);
    for (what, block) in [
        ("Huffman-coded as nginx sends it", &huffman_head),
        ("plain literals", &plain_head),
    ] {
        let want = loona_hpack::Decoder::new().decode(block).unwrap();
        assert_eq!(Decoder::new().decode(block).unwrap(), want);
        let mut ours = Decoder::new();
        let t_ours = time(|b| ours.decode(b).map_or(0, |f| f.len()), block);
        let mut h2 = wire::h2::Hpack::new();
        let t_h2 = time(|b| h2.decode(b).map_or(0, |f| f.0.len()), block);
        let mut loona = loona_hpack::Decoder::new();
        let t_loona = time(|b| loona.decode(b).map_or(0, |f| f.len()), block);
        println!(
            "nginx 1.22.1 head, {what}: {} bytes, {} fields; ns/head, median (fastest) of {ROUNDS} \
             rounds",
            block.len(),
            want.len()
        );
        for (who, (median, fastest)) in [
            ("wire::hpack::Decoder", t_ours),
            ("wire::h2::Hpack", t_h2),
            ("loona_hpack::Decoder", t_loona),
        ] {
            println!("  {who:22} {median:9.0} ({fastest:.0})");
        }
    }
}
