//! The three loops. Each works in small chunks between clock reads, so it stops within
//! microseconds of being told and keeps its duty cycle.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::{Counters, Kind};

/// The duty-cycle period: `intensity` of it working, the rest asleep.
const PERIOD: Duration = Duration::from_millis(10);
/// Busy-loop iterations, stream words and cache lines per chunk.
const SPIN_CHUNK: u64 = 4096;
const STREAM_CHUNK: usize = 8192;
const LINES_CHUNK: usize = 1024;
/// u64 words per 64-byte cache line.
const WORDS_PER_LINE: usize = 8;

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A step through `lines` that visits every line once per lap in an order hardware
/// prefetchers do not follow: a large odd multiplier, coprime with the line count.
fn scatter_stride(lines: usize) -> usize {
    if lines <= 1 {
        return 1;
    }
    let mut s = (0x9E37_79B1usize % lines) | 1;
    while gcd(s, lines) != 1 {
        s += 2;
    }
    s
}

/// Runs `kind` until `stop`, publishing its counts.
pub(crate) fn run(kind: Kind, intensity: f64, buffer_bytes: u64, stop: &AtomicBool, c: &Counters) {
    let words = (buffer_bytes / 8) as usize;
    // calloc'd: the first lap faults the pages in, which is part of the interference.
    let mut buf: Vec<u64> = vec![0; words];
    let lines = words / WORDS_PER_LINE;
    let stride = scatter_stride(lines);
    let (mut pos, mut line) = (0usize, 0usize);
    let mut x = 1u64;
    let active = PERIOD.mul_f64(intensity);
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        while t0.elapsed() < active && !stop.load(Ordering::Relaxed) {
            match kind {
                Kind::Cpu => {
                    for i in 0..SPIN_CHUNK {
                        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
                    }
                    c.iterations.fetch_add(SPIN_CHUNK, Ordering::Relaxed);
                }
                Kind::Memory => {
                    let end = (pos + STREAM_CHUNK).min(words);
                    for w in &mut buf[pos..end] {
                        *w = w.wrapping_add(1);
                    }
                    black_box(&buf[pos..end]);
                    let n = (end - pos) as u64;
                    pos = if end == words { 0 } else { end };
                    c.iterations.fetch_add(n, Ordering::Relaxed);
                    // Each word read, then written.
                    c.bytes.fetch_add(16 * n, Ordering::Relaxed);
                }
                Kind::Cache => {
                    for _ in 0..LINES_CHUNK {
                        let w = line * WORDS_PER_LINE;
                        buf[w] = buf[w].wrapping_add(1);
                        line = (line + stride) % lines;
                    }
                    black_box(&buf);
                    c.iterations
                        .fetch_add(LINES_CHUNK as u64, Ordering::Relaxed);
                    c.bytes
                        .fetch_add(64 * LINES_CHUNK as u64, Ordering::Relaxed);
                }
            }
        }
        if intensity < 1.0 {
            if let Some(rest) = PERIOD.checked_sub(t0.elapsed()) {
                std::thread::sleep(rest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scatter_visits_every_line() {
        for lines in [1usize, 2, 8, 1000, 524_288, 786_432] {
            let s = scatter_stride(lines);
            assert_eq!(gcd(s, lines), 1, "{lines}");
        }
        let (lines, s) = (1000, scatter_stride(1000));
        let mut seen = vec![false; lines];
        let mut l = 0;
        for _ in 0..lines {
            seen[l] = true;
            l = (l + s) % lines;
        }
        assert!(seen.iter().all(|&b| b));
    }
}
