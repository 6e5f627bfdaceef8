//! Per-stage breakdown (Tales of the Tail §3.3.1): where the time of the slowest requests went,
//! beside the median requests. The stages are the intervals between consecutive timestamps of a
//! request's life: the client's send, the server's T1..T6 and the client's receive. Client and
//! server read the same CLOCK_MONOTONIC when they share a host (loopback runs); across hosts
//! only the server-internal intervals are meaningful.
//!
//! Our T1..T6 are the server's stamps as the records keep them (`crates/server`'s table): T1
//! the stack's entry, T2 the application awake, T3 the read done, T4 the work done, T5 the
//! write, T6 the transmit. The paper's T2 — the end of the protocol stack, the data queued on
//! the socket before the application is scheduled — has no number of ours: a record carries it
//! as `stack_ns` when the kernel gave it (the eBPF collector). Then our T1→T2 is split into the
//! paper's two stages at that instant, "queued": the protocol stack (T1→queued, the paper's
//! T1→T2) and the queueing and wake-up (queued→T2, the paper's T2→T3). Without it the two are
//! one row, labelled merged. Every row is named by our stamps, so no two rows name the same
//! pair.
//!
//! Streaming: the first pass over the records ranks the latencies of the stamped requests
//! ([`StageGroups::from_latencies`]); the second files each stamped request's intervals under
//! "slowest 1 %" or "around the median" ([`StageAcc`]).

use load::RequestRecord;
use serde::{Deserialize, Serialize};
use stats::{Quantile, Recorder};

/// The intervals, in order, with the timestamps that bound them. A request files its T1→T2
/// either under the split rows (2 and 3, when it carries the stack's end) or under the merged
/// row (4), never both; a row no request filed under is left out of the breakdown.
pub const STAGE_NAMES: [&str; 10] = [
    "client lateness (intended→sent)",
    "client→server kernel (sent→T1)",
    "protocol stack (T1→queued)",
    "queueing + wake-up (queued→T2)",
    "stack + wake-up, merged (T1→T2)",
    "read (T2→T3)",
    "work (T3→T4)",
    "to write (T4→T5)",
    "write→kernel tx (T5→T6)",
    "return path (T6 or T5→received)",
];

/// Number of stages.
pub(crate) const N_STAGES: usize = STAGE_NAMES.len();

/// Fewer stamped requests than this: no breakdown.
const MIN_STAMPED: u64 = 100;

/// Median and p99 of one stage for one group of requests.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageRow {
    pub stage: String,
    pub slow_p50_us: f64,
    pub slow_p99_us: f64,
    pub median_p50_us: f64,
    pub median_p99_us: f64,
}

/// The breakdown of the slowest 1 % versus the requests around the median.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageBreakdown {
    pub slow_requests: u64,
    pub median_requests: u64,
    pub rows: Vec<StageRow>,
}

/// Interval boundaries of one request, or None when the server sent no stamps. The
/// client↔server intervals need absolute client times: `start_mono_ns` is the run's start on
/// the client's CLOCK_MONOTONIC, given only when client and server share a host (and so a
/// clock); with None those two intervals are left out.
pub(crate) fn intervals(
    r: &RequestRecord,
    start_mono_ns: Option<u64>,
) -> Option<[Option<u64>; N_STAGES]> {
    let t = r.stamps;
    if t[0] == 0 || t[1] == 0 || t[2] == 0 || t[3] == 0 || t[4] == 0 {
        return None;
    }
    let d = |a: u64, b: u64| if a > 0 && b >= a { Some(b - a) } else { None };
    // The stack's end splits T1→T2 only when it lies within it.
    let stack = (r.stack_ns >= t[0] && r.stack_ns <= t[1]).then_some(r.stack_ns);
    let mut iv = [
        d(r.intended_ns, r.sent_ns),
        None,
        stack.and_then(|s| d(t[0], s)),
        stack.and_then(|s| d(s, t[1])),
        if stack.is_none() { d(t[0], t[1]) } else { None },
        d(t[1], t[2]),
        d(t[2], t[3]),
        d(t[3], t[4]),
        if t[5] > 0 { d(t[4], t[5]) } else { None },
        None,
    ];
    if let Some(base) = start_mono_ns {
        let sent = base + r.sent_ns;
        let recv = base + r.received_ns;
        let end_server = if t[5] > 0 { t[5] } else { t[4] };
        iv[1] = (t[0] >= sent).then(|| t[0] - sent);
        iv[N_STAGES - 1] = (recv >= end_server).then(|| recv - end_server);
    }
    Some(iv)
}

/// Which latencies count as "slowest 1 %" and "around the median" (45–55 %), from the first
/// pass's ranking of the stamped requests' latencies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StageGroups {
    slow_from: f64,
    mid: (f64, f64),
}

impl StageGroups {
    /// None when fewer than [`MIN_STAMPED`] requests carry stamps.
    pub fn from_latencies(stamped: &mut Recorder) -> Option<Self> {
        let n = stamped.len();
        if n < MIN_STAMPED {
            return None;
        }
        // The value at 0-based rank r is the type-7 quantile r / (n − 1).
        let at = |rec: &mut Recorder, r: u64| {
            rec.quantile(Quantile::new(r as f64 / (n - 1) as f64).ok()?)
        };
        let k = n.div_ceil(100);
        let lo = n * 45 / 100;
        let hi = (n * 55 / 100).max(lo + 1) - 1;
        Some(StageGroups {
            slow_from: at(stamped, n - k)?,
            mid: (at(stamped, lo)?, at(stamped, hi)?),
        })
    }
}

/// The second pass: each stamped request's intervals filed by group.
pub(crate) struct StageAcc {
    groups: StageGroups,
    slow: Vec<Recorder>,
    mid: Vec<Recorder>,
    slow_n: u64,
    mid_n: u64,
}

impl StageAcc {
    pub fn new(groups: StageGroups, exact_limit: u64) -> Self {
        let mk = || {
            (0..STAGE_NAMES.len())
                .map(|_| Recorder::bounded(exact_limit))
                .collect()
        };
        StageAcc {
            groups,
            slow: mk(),
            mid: mk(),
            slow_n: 0,
            mid_n: 0,
        }
    }

    pub fn add(&mut self, latency_ns: u64, iv: &[Option<u64>; N_STAGES]) {
        let l = latency_ns as f64;
        let (recs, n) = if l >= self.groups.slow_from {
            (&mut self.slow, &mut self.slow_n)
        } else if l >= self.groups.mid.0 && l <= self.groups.mid.1 {
            (&mut self.mid, &mut self.mid_n)
        } else {
            return;
        };
        *n += 1;
        for (r, v) in recs.iter_mut().zip(iv) {
            if let Some(v) = v {
                r.record(*v);
            }
        }
    }

    pub fn finish(mut self) -> StageBreakdown {
        let q = |r: &mut Recorder, q: f64| {
            Quantile::new(q)
                .ok()
                .and_then(|q| r.quantile(q))
                .unwrap_or(f64::NAN)
        };
        let mut rows = Vec::new();
        for (i, name) in STAGE_NAMES.iter().enumerate() {
            let (s, m) = (&mut self.slow[i], &mut self.mid[i]);
            if s.is_empty() && m.is_empty() {
                continue;
            }
            rows.push(StageRow {
                stage: name.to_string(),
                slow_p50_us: q(s, 0.5) / 1e3,
                slow_p99_us: q(s, 0.99) / 1e3,
                median_p50_us: q(m, 0.5) / 1e3,
                median_p99_us: q(m, 0.99) / 1e3,
            });
        }
        StageBreakdown {
            slow_requests: self.slow_n,
            median_requests: self.mid_n,
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(stack_ns: u64) -> RequestRecord {
        RequestRecord {
            sent_ns: 1_000,
            received_ns: 90_000,
            outcome: load::Outcome::Ok,
            stamps: [2_000, 10_000, 11_000, 50_000, 50_100, 50_200],
            stack_ns,
            ..RequestRecord::scheduled(500, 0)
        }
    }

    #[test]
    fn the_stacks_end_splits_t1_t2_into_the_papers_two_stages() {
        let iv = intervals(&stamped(3_500), Some(0)).unwrap();
        assert_eq!(
            iv,
            [
                Some(500),    // intended → sent
                Some(1_000),  // sent → T1
                Some(1_500),  // protocol stack: T1 → stack end
                Some(6_500),  // queueing + wake-up: stack end → T2
                None,         // not merged
                Some(1_000),  // read
                Some(39_000), // work
                Some(100),    // to write
                Some(100),    // write → tx
                Some(39_800), // return path
            ]
        );
        assert_eq!(iv[2].unwrap() + iv[3].unwrap(), 10_000 - 2_000);
    }

    #[test]
    fn without_the_stacks_end_t1_t2_is_one_merged_stage() {
        for stack in [0, 1_999, 10_001] {
            let iv = intervals(&stamped(stack), None).unwrap();
            assert_eq!((iv[2], iv[3], iv[4]), (None, None, Some(8_000)), "{stack}");
            assert!(STAGE_NAMES[4].contains("merged"));
        }
    }

    #[test]
    fn a_run_files_each_request_under_split_or_merged_rows() {
        // 200 requests: the even ones carry the stack's end, the odd ones do not.
        let mut lat = Recorder::bounded(1_000);
        for i in 0..200u64 {
            lat.record(80_000 + i);
        }
        let groups = StageGroups::from_latencies(&mut lat).unwrap();
        let mut acc = StageAcc::new(groups, 1_000);
        for i in 0..200u64 {
            let r = stamped(if i % 2 == 0 { 3_500 } else { 0 });
            acc.add(80_000 + i, &intervals(&r, None).unwrap());
        }
        let b = acc.finish();
        let names: Vec<&str> = b.rows.iter().map(|r| r.stage.as_str()).collect();
        assert_eq!(
            names,
            [
                "client lateness (intended→sent)",
                "protocol stack (T1→queued)",
                "queueing + wake-up (queued→T2)",
                "stack + wake-up, merged (T1→T2)",
                "read (T2→T3)",
                "work (T3→T4)",
                "to write (T4→T5)",
                "write→kernel tx (T5→T6)",
            ]
        );
        let row = |n: &str| b.rows.iter().find(|r| r.stage == n).unwrap();
        assert_eq!(row("protocol stack (T1→queued)").median_p50_us, 1.5);
        assert_eq!(row("queueing + wake-up (queued→T2)").median_p50_us, 6.5);
        assert_eq!(row("stack + wake-up, merged (T1→T2)").median_p50_us, 8.0);
    }
}
