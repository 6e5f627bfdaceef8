//! Histograms between processes: an agent's per-interval HdrHistograms, V2-serialized (the
//! format every HdrHistogram implementation reads), and their checked decoding.
//!
//! The coordinator *adds* histograms: the merged distribution is the one of all requests of
//! all agents, to the histogram's precision. It never averages percentiles (what Lancet does
//! across agents): the mean of two p99s is no percentile of anything.

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

use crate::frame::{put_bytes, put_u32, put_u64, FrameError, Kind, Reader};

/// Significant digits of every histogram sent: 0.1 % resolution, as the stats crate's.
pub const SIGFIG: u8 = 3;

/// V2 header: cookie, payload length, normalizing offset, digits (u32 each), lowest and
/// highest trackable value (u64 each), integer-to-double ratio (f64), all big-endian.
const V2_HEADER: usize = 40;
/// The uncompressed V2 cookie (the compressed one is refused: deflate could expand a small
/// frame into any size).
const V2_COOKIE: u32 = 0x1c84_9313;

/// An empty histogram that grows to any value (a latency is never clamped).
pub fn empty() -> Histogram<u64> {
    // A constant within hdrhistogram's range [0, 5]: this cannot fail.
    Histogram::new(SIGFIG).expect("3 significant digits is valid")
}

/// V2 bytes of `h`.
pub fn encode(h: &Histogram<u64>) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut out)
        .map_err(|e| FrameError::payload(Kind::Interval, format!("histogram: {e:?}")))?;
    Ok(out)
}

/// A histogram back from V2 bytes an agent sent, its header checked first: the
/// deserializer allocates what the header asks for, so a garbage header must not reach it.
pub fn decode(b: &[u8]) -> Result<Histogram<u64>, FrameError> {
    let bad = |m: &str| FrameError::payload(Kind::Interval, format!("histogram: {m}"));
    if b.len() < V2_HEADER {
        return Err(bad("shorter than its header"));
    }
    let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    if be32(0) != V2_COOKIE {
        return Err(bad("not an uncompressed V2 histogram"));
    }
    if be32(4) as usize != b.len() - V2_HEADER {
        return Err(bad("its length does not match its header"));
    }
    if be32(12) > u32::from(SIGFIG) {
        return Err(bad("more significant digits than tailscope sends"));
    }
    let mut h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &b[..])
        .map_err(|e| bad(&format!("{e:?}")))?;
    // Added into auto-resizing histograms later; this one need not resize itself.
    h.auto(true);
    Ok(h)
}

/// One generator thread's measured requests whose intended time fell in one interval (or
/// those of them in one chunk of its records: the coordinator adds the pieces).
#[derive(Clone, Debug)]
pub struct Interval {
    pub thread: u32,
    /// Interval number: intended time ÷ the interval's length.
    pub index: u64,
    /// Outcomes: ok, error, timeout, dropped.
    pub outcomes: [u64; 4],
    /// Latency of the successful ones (intended → received), ns.
    pub latency: Histogram<u64>,
    /// The generator's own lateness (intended → seen), ns, of those it saw.
    pub lateness: Histogram<u64>,
}

impl Interval {
    pub fn new(thread: u32, index: u64) -> Self {
        Interval {
            thread,
            index,
            outcomes: [0; 4],
            latency: empty(),
            lateness: empty(),
        }
    }

    pub fn to_payload(&self) -> Result<Vec<u8>, FrameError> {
        let mut p = Vec::new();
        put_u32(&mut p, self.thread);
        put_u64(&mut p, self.index);
        for o in self.outcomes {
            put_u64(&mut p, o);
        }
        put_bytes(&mut p, &encode(&self.latency)?)?;
        put_bytes(&mut p, &encode(&self.lateness)?)?;
        Ok(p)
    }

    pub fn from_payload(p: &[u8]) -> Result<Interval, FrameError> {
        let mut r = Reader::new(Kind::Interval, p);
        let thread = r.u32()?;
        let index = r.u64()?;
        let mut outcomes = [0u64; 4];
        for o in &mut outcomes {
            *o = r.u64()?;
        }
        let latency = decode(r.bytes()?)?;
        let lateness = decode(r.bytes()?)?;
        r.end()?;
        if latency.len() > outcomes[0] {
            return Err(FrameError::payload(
                Kind::Interval,
                "more latencies than successful requests",
            ));
        }
        Ok(Interval {
            thread,
            index,
            outcomes,
            latency,
            lateness,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Interval {
        let mut i = Interval::new(2, 17);
        for v in 1..=5_000u64 {
            i.latency.record(v * 1_013).unwrap();
            i.lateness.record(v % 97).unwrap();
        }
        i.outcomes = [5_000, 3, 2, 1];
        i
    }

    #[test]
    fn intervals_round_trip_exactly() {
        let i = sample();
        let back = Interval::from_payload(&i.to_payload().unwrap()).unwrap();
        assert_eq!(
            (back.thread, back.index, back.outcomes),
            (2, 17, i.outcomes)
        );
        assert_eq!(back.latency, i.latency);
        assert_eq!(back.lateness, i.lateness);
    }

    #[test]
    fn damaged_histograms_are_errors_not_panics() {
        let p = sample().to_payload().unwrap();
        for cut in 0..p.len() {
            assert!(Interval::from_payload(&p[..cut]).is_err(), "cut {cut}");
        }
        // Every byte flipped in turn: an error or a well-formed interval, never a panic.
        for i in 0..p.len() {
            let mut bad = p.clone();
            bad[i] ^= 0xa5;
            let _ = Interval::from_payload(&bad);
        }
        // A header asking for a huge payload or 5 digits is refused before allocating.
        let h = encode(&sample().latency).unwrap();
        let mut big = h.clone();
        big[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode(&big).is_err());
        let mut digits = h;
        digits[12..16].copy_from_slice(&5u32.to_be_bytes());
        assert!(decode(&digits).is_err());
    }
}
