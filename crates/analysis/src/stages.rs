//! Per-stage breakdown (Tales of the Tail §3.3.1): where the time of the slowest requests went,
//! beside the median requests. The stages are the intervals between consecutive timestamps of a
//! request's life: the client's send, the server's T1..T6 and the client's receive. Client and
//! server read the same CLOCK_MONOTONIC when they share a host (loopback runs); across hosts
//! only the server-internal intervals are meaningful.

use load::RequestRecord;
use serde::Serialize;

/// The intervals, in order, with the timestamps that bound them.
pub const STAGE_NAMES: [&str; 8] = [
    "client lateness (intended→sent)",
    "client→server kernel (sent→T1)",
    "server wake-up (T1→T2)",
    "read (T2→T3)",
    "work (T3→T4)",
    "to write (T4→T5)",
    "write→kernel tx (T5→T6)",
    "return path (T6 or T5→received)",
];

/// Median and p99 of one stage for one group of requests.
#[derive(Clone, Debug, Serialize)]
pub struct StageRow {
    pub stage: String,
    pub slow_p50_us: f64,
    pub slow_p99_us: f64,
    pub median_p50_us: f64,
    pub median_p99_us: f64,
}

/// The breakdown of the slowest 1 % versus the requests around the median.
#[derive(Clone, Debug, Serialize)]
pub struct StageBreakdown {
    pub slow_requests: u64,
    pub median_requests: u64,
    pub rows: Vec<StageRow>,
}

/// Interval boundaries of one request, or None when the server sent no stamps.
fn intervals(r: &RequestRecord) -> Option<[Option<u64>; 8]> {
    let t = r.stamps;
    if t[0] == 0 || t[1] == 0 || t[2] == 0 || t[3] == 0 || t[4] == 0 {
        return None;
    }
    let d = |a: u64, b: u64| if a > 0 && b >= a { Some(b - a) } else { None };
    Some([
        d(r.intended_ns, r.sent_ns),
        None, // filled below when the clocks are comparable
        d(t[0], t[1]),
        d(t[1], t[2]),
        d(t[2], t[3]),
        d(t[3], t[4]),
        if t[5] > 0 { d(t[4], t[5]) } else { None },
        None, // filled below when the clocks are comparable
    ])
}

fn quantile(v: &mut [u64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    stats::quantile_sorted(v, q)
}

/// Breakdown of `ok` records (successful, after warm-up); None when fewer than 100 carry the
/// server's stamps. The client↔server intervals need absolute client times: `start_mono_ns` is
/// the run's start on the client's CLOCK_MONOTONIC, given only when client and server share a
/// host (and so a clock); with None those two intervals are left out.
pub fn stage_breakdown(
    ok: &[&RequestRecord],
    start_mono_ns: Option<u64>,
) -> Option<StageBreakdown> {
    let mut with: Vec<(u64, [Option<u64>; 8])> = ok
        .iter()
        .filter_map(|r| {
            let lat = r.latency_ns()?;
            let mut iv = intervals(r)?;
            if let Some(base) = start_mono_ns {
                let sent = base + r.sent_ns;
                let recv = base + r.received_ns;
                let t = r.stamps;
                let end_server = if t[5] > 0 { t[5] } else { t[4] };
                iv[1] = if t[0] >= sent {
                    Some(t[0] - sent)
                } else {
                    None
                };
                iv[7] = if recv >= end_server {
                    Some(recv - end_server)
                } else {
                    None
                };
            }
            Some((lat, iv))
        })
        .collect();
    if with.len() < 100 {
        return None;
    }
    with.sort_unstable_by_key(|(lat, _)| *lat);
    let n = with.len();
    let slow = &with[n - n.div_ceil(100)..];
    let lo = n * 45 / 100;
    let hi = (n * 55 / 100).max(lo + 1);
    let mid = &with[lo..hi];
    let mut rows = Vec::new();
    for (i, name) in STAGE_NAMES.iter().enumerate() {
        let mut s: Vec<u64> = slow.iter().filter_map(|(_, iv)| iv[i]).collect();
        let mut m: Vec<u64> = mid.iter().filter_map(|(_, iv)| iv[i]).collect();
        if s.is_empty() && m.is_empty() {
            continue;
        }
        rows.push(StageRow {
            stage: name.to_string(),
            slow_p50_us: quantile(&mut s, 0.5) / 1e3,
            slow_p99_us: quantile(&mut s, 0.99) / 1e3,
            median_p50_us: quantile(&mut m, 0.5) / 1e3,
            median_p99_us: quantile(&mut m, 0.99) / 1e3,
        });
    }
    Some(StageBreakdown {
        slow_requests: slow.len() as u64,
        median_requests: mid.len() as u64,
        rows,
    })
}
