//! The column blob codec: one `i64` column ⇄ one compressed byte blob.
//!
//! A blob is a zstd frame around `tag, varint(count), body`. Three bodies exist, and the
//! encoder keeps whichever compresses smallest for the column at hand:
//!
//! * [`Tag::DeltaVarint`]: successive differences, zigzag-mapped, LEB128 varints. Compact
//!   before zstd for slowly varying columns.
//! * [`Tag::Planes`] / [`Tag::DeltaPlanes`]: zigzag values (or differences) split into byte
//!   planes, low byte plane first, high planes that are all zero dropped. Each plane is a
//!   homogeneous stream (the low plane noisy, the high ones nearly constant), which zstd's
//!   entropy coder handles far better than interleaved 8-byte words.
//!
//! Differences use wrapping arithmetic, so every `i64` sequence (including jumps from
//! `i64::MIN` to `i64::MAX`) round-trips exactly. Delta/zigzag/byte-plane transforms are
//! written by hand: they are a few lines each, and the crates that offer them (e.g.
//! `bitpacking`, `q_compress`) bring formats this file would then be tied to.

use std::io::Read;

use crate::StoreError;

/// zstd level: 3 is zstd's default, fast to write and within a few percent of level 9 on
/// these pre-transformed streams.
pub(crate) const ZSTD_LEVEL: i32 = 3;

/// The body layout inside the zstd frame; the first payload byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Tag {
    DeltaVarint = 1,
    Planes = 2,
    DeltaPlanes = 3,
}

impl Tag {
    fn from_byte(b: u8) -> Option<Tag> {
        match b {
            1 => Some(Tag::DeltaVarint),
            2 => Some(Tag::Planes),
            3 => Some(Tag::DeltaPlanes),
            _ => None,
        }
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Zigzag-mapped successive differences (the first against 0).
fn deltas(v: &[i64]) -> Vec<u64> {
    let mut prev = 0i64;
    v.iter()
        .map(|&x| {
            let d = x.wrapping_sub(prev);
            prev = x;
            zigzag(d)
        })
        .collect()
}

fn put_varint(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

/// Reads one LEB128 varint from `buf` at `*pos`, rejecting truncation and overlong forms
/// that would not fit 64 bits.
fn get_varint(buf: &[u8], pos: &mut usize) -> Result<u64, StoreError> {
    let mut u = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or_else(|| corrupt("truncated varint"))?;
        *pos += 1;
        let bits = u64::from(b & 0x7f);
        if shift == 63 && bits > 1 {
            return Err(corrupt("varint overflows 64 bits"));
        }
        u |= bits << shift;
        if b & 0x80 == 0 {
            return Ok(u);
        }
    }
    Err(corrupt("varint longer than 10 bytes"))
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(what.to_owned())
}

fn header(tag: Tag, count: usize, body_hint: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(11 + body_hint);
    out.push(tag as u8);
    put_varint(&mut out, count as u64);
    out
}

fn encode_varints(zz: &[u64]) -> Vec<u8> {
    let mut out = header(Tag::DeltaVarint, zz.len(), zz.len() * 3);
    for &u in zz {
        put_varint(&mut out, u);
    }
    out
}

fn encode_planes(tag: Tag, zz: &[u64]) -> Vec<u8> {
    let top = zz.iter().fold(0u64, |a, &u| a | u);
    let nplanes = (64 - top.leading_zeros()).div_ceil(8) as usize;
    let mut out = header(tag, zz.len(), zz.len() * nplanes + 1);
    out.push(nplanes as u8);
    for p in 0..nplanes {
        out.extend(zz.iter().map(|&u| (u >> (8 * p)) as u8));
    }
    out
}

fn compress(payload: &[u8]) -> Result<Vec<u8>, StoreError> {
    Ok(zstd::bulk::compress(payload, ZSTD_LEVEL)?)
}

/// Encodes one column; the result decodes with [`decode`] to exactly `v`.
pub(crate) fn encode(v: &[i64]) -> Result<Vec<u8>, StoreError> {
    let d = deltas(v);
    let raw: Vec<u64> = v.iter().map(|&x| zigzag(x)).collect();
    let candidates = [
        encode_planes(Tag::DeltaPlanes, &d),
        encode_varints(&d),
        encode_planes(Tag::Planes, &raw),
    ];
    let mut best: Option<Vec<u8>> = None;
    for payload in candidates {
        let blob = compress(&payload)?;
        match &best {
            Some(b) if b.len() <= blob.len() => {}
            _ => best = Some(blob),
        }
    }
    best.ok_or_else(|| corrupt("no encoding candidate"))
}

/// Decodes a blob written by [`encode`], which must hold exactly `expected` values.
/// Any damage is reported as [`StoreError::Corrupt`], never a panic, and memory use is
/// bounded by what `expected` values can legitimately need.
pub(crate) fn decode(blob: &[u8], expected: usize) -> Result<Vec<i64>, StoreError> {
    // The largest legitimate payload: tag, count varint, plane count, 10 bytes per value.
    let cap = expected.saturating_mul(10).saturating_add(12);
    let mut payload = Vec::new();
    zstd::stream::read::Decoder::new(blob)
        .and_then(|d| {
            d.take((cap as u64).saturating_add(1))
                .read_to_end(&mut payload)
        })
        .map_err(|e| StoreError::Corrupt(format!("zstd: {e}")))?;
    if payload.len() > cap {
        return Err(corrupt("payload larger than its record count allows"));
    }
    let tag = Tag::from_byte(*payload.first().ok_or_else(|| corrupt("empty payload"))?)
        .ok_or_else(|| corrupt("unknown column encoding"))?;
    let mut pos = 1;
    let count = get_varint(&payload, &mut pos)?;
    if count != expected as u64 {
        return Err(StoreError::Corrupt(format!(
            "column holds {count} values, run says {expected}"
        )));
    }
    let body = &payload[pos..];
    match tag {
        Tag::DeltaVarint => {
            let mut zz = Vec::with_capacity(expected);
            let mut p = 0;
            while zz.len() < expected {
                zz.push(get_varint(body, &mut p)?);
            }
            if p != body.len() {
                return Err(corrupt("trailing bytes after varints"));
            }
            Ok(undelta(&zz))
        }
        Tag::Planes | Tag::DeltaPlanes => {
            let (&np, planes) = body
                .split_first()
                .ok_or_else(|| corrupt("missing plane count"))?;
            let np = usize::from(np);
            if np > 8 || planes.len() != np * expected {
                return Err(corrupt("plane layout does not match the record count"));
            }
            let mut zz = vec![0u64; expected];
            for (p, plane) in planes.chunks_exact(expected.max(1)).enumerate() {
                for (u, &b) in zz.iter_mut().zip(plane) {
                    *u |= u64::from(b) << (8 * p);
                }
            }
            if tag == Tag::DeltaPlanes {
                Ok(undelta(&zz))
            } else {
                Ok(zz.into_iter().map(unzigzag).collect())
            }
        }
    }
}

fn undelta(zz: &[u64]) -> Vec<i64> {
    let mut prev = 0i64;
    zz.iter()
        .map(|&u| {
            prev = prev.wrapping_add(unzigzag(u));
            prev
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_maps_small_magnitudes_to_small_codes() {
        let cases = [
            (0, 0),
            (-1, 1),
            (1, 2),
            (-2, 3),
            (i64::MAX, u64::MAX - 1),
            (i64::MIN, u64::MAX),
        ];
        for (v, u) in cases {
            assert_eq!(zigzag(v), u, "zigzag({v})");
            assert_eq!(unzigzag(u), v, "unzigzag({u})");
        }
    }

    #[test]
    fn varint_round_trips_and_rejects_garbage() {
        for u in [0, 1, 127, 128, 16_383, 16_384, u64::MAX / 3, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, u);
            let mut pos = 0;
            assert_eq!(get_varint(&buf, &mut pos).unwrap(), u);
            assert_eq!(pos, buf.len());
        }
        // truncated: continuation bit set on the last byte
        assert!(get_varint(&[0x80], &mut 0).is_err());
        // 10th byte carrying more than the one remaining bit
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert!(get_varint(&over, &mut 0).is_err());
        // 11 bytes
        assert!(get_varint(&[0x80; 11], &mut 0).is_err());
    }

    #[test]
    fn each_encoding_round_trips_extremes() {
        let v = vec![i64::MIN, i64::MAX, 0, -1, i64::MIN, 1, i64::MAX, i64::MAX];
        let d = deltas(&v);
        let raw: Vec<u64> = v.iter().map(|&x| zigzag(x)).collect();
        for payload in [
            encode_planes(Tag::DeltaPlanes, &d),
            encode_varints(&d),
            encode_planes(Tag::Planes, &raw),
        ] {
            let blob = compress(&payload).unwrap();
            assert_eq!(decode(&blob, v.len()).unwrap(), v, "tag {}", payload[0]);
        }
    }

    #[test]
    fn empty_column_round_trips() {
        let blob = encode(&[]).unwrap();
        assert_eq!(decode(&blob, 0).unwrap(), Vec::<i64>::new());
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let v: Vec<i64> = (0..1000).map(|i| i * 1_000 + (i % 7)).collect();
        let blob = encode(&v).unwrap();
        assert!(matches!(decode(&blob, 999), Err(StoreError::Corrupt(_))));
        assert!(matches!(
            decode(&blob[..blob.len() / 2], 1000),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            decode(b"not zstd", 1000),
            Err(StoreError::Corrupt(_))
        ));
        // Valid zstd around an invalid payload: unknown tag, bad counts, bad plane layouts.
        for payload in [
            vec![9u8, 0],
            vec![1u8, 3, 0, 0],
            vec![2u8, 2, 9, 0, 0],
            vec![3u8, 2, 1, 0],
            vec![2u8],
        ] {
            let blob = compress(&payload).unwrap();
            let n = payload.get(1).map_or(0, |&c| usize::from(c));
            assert!(
                matches!(decode(&blob, n), Err(StoreError::Corrupt(_))),
                "payload {payload:?}"
            );
        }
        // Flip every byte in turn: whatever happens, no panic, and success only with the
        // right length.
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0x5a;
            if let Ok(out) = decode(&bad, 1000) {
                assert_eq!(out.len(), 1000);
            }
        }
    }
}

#[cfg(test)]
#[path = "codec_ratio_tests.rs"]
mod ratio_tests;
