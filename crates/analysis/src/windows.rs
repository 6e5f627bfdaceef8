//! Per-window figures for a latency-over-time picture, built in the second pass (which reads
//! the records in intended order, like the first).
//!
//! User-view figures (latency, lateness, the ideal for the intended arrivals) are keyed by
//! intended time; server-view figures (sent → kernel receive, the ideal for the actual sends)
//! by sent time, released in sent order through a heap as in the first pass. A window closes
//! when the records pass its end: by then every request sent before that end has been
//! released (none not yet read can have been sent before its own intended time). Only the
//! open window's values are kept (plus the server values of the windows whose requests are
//! still in flight), exactly, and summarised on close.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use load::RequestRecord;
use serde::{Deserialize, Serialize};

use crate::first::OnlineIdeal;
use crate::IdealSpec;

/// Latency figures of one time window of a run (run-relative seconds, microseconds).
/// Windows in which no request succeeded are left out (a gap in `start_s`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_s: f64,
    pub end_s: f64,
    /// Successful measured requests intended in the window.
    pub count: u64,
    /// User view (intended → received).
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Server view (sent → kernel receive) of the requests sent in the window.
    pub server_p50_us: Option<f64>,
    pub server_p99_us: Option<f64>,
    /// The ideal for the intended arrivals in the window (None without an ideal).
    pub ideal_p99_us: Option<f64>,
    /// The ideal for the actual sends in the window.
    pub server_ideal_p99_us: Option<f64>,
    /// The generator's lateness (seen − intended) of the requests intended in the window.
    pub lateness_p99_us: f64,
}

/// The window width for a run spanning `span_ns`: `requested` when non-zero, else the span
/// / 300 rounded up to a multiple of 100 ms, at least 100 ms.
pub fn window_width(requested: u64, span_ns: u64) -> u64 {
    const STEP: u64 = 100_000_000;
    if requested > 0 {
        return requested;
    }
    (span_ns / 300).div_ceil(STEP).max(1) * STEP
}

/// The server's view of one answered request: sent → the client kernel's receive stamp (the
/// user-space receive without one), as in the first pass and as every paired comparison reads
/// it.
pub fn server_latency(r: &RequestRecord) -> Option<u64> {
    r.latency_ns()?;
    let arrived = if r.kernel_rx_ns > 0 {
        r.kernel_rx_ns
    } else {
        r.received_ns
    };
    Some(arrived.saturating_sub(r.sent_ns))
}

#[derive(Default)]
struct ServerVals {
    measured: Vec<u64>,
    ideal: Vec<u64>,
}

/// Pending sends: (sent, conn, counted, server latency or u64::MAX for none).
type Pending = BinaryHeap<Reverse<(u64, u32, bool, u64)>>;

pub(crate) struct WindowAcc {
    width: u64,
    warmup: u64,
    ideal: Option<OnlineIdeal>,
    server_ideal: Option<OnlineIdeal>,
    pending: Pending,
    open: Option<u64>,
    user: Vec<u64>,
    lateness: Vec<u64>,
    ideal_v: Vec<u64>,
    server: BTreeMap<u64, ServerVals>,
    pub out: Vec<Window>,
}

impl WindowAcc {
    pub fn new(
        width: u64,
        warmup: u64,
        ideal: Option<&IdealSpec>,
    ) -> Result<Self, model::ModelError> {
        Ok(WindowAcc {
            width: width.max(1),
            warmup,
            ideal: ideal.map(OnlineIdeal::replay).transpose()?,
            server_ideal: ideal.map(OnlineIdeal::replay).transpose()?,
            pending: BinaryHeap::new(),
            open: None,
            user: Vec::new(),
            lateness: Vec::new(),
            ideal_v: Vec::new(),
            server: BTreeMap::new(),
            out: Vec::new(),
        })
    }

    /// Takes one record (in intended order, every record including the warm-up's, so that the
    /// ideals replay the first pass's queues exactly).
    pub fn add(&mut self, r: &RequestRecord) {
        let counted = r.intended_ns >= self.warmup;
        let ideal = self
            .ideal
            .as_mut()
            .map(|i| i.push(r.intended_ns, r.conn, counted));
        self.release(r.intended_ns);
        if r.sent_ns > 0 {
            let sl = if counted {
                server_latency(r).unwrap_or(u64::MAX)
            } else {
                u64::MAX
            };
            self.pending.push(Reverse((r.sent_ns, r.conn, counted, sl)));
        }
        if !counted {
            return;
        }
        let w = r.intended_ns / self.width;
        match self.open {
            Some(o) if w > o => {
                self.close(o);
                // server values of windows with no intended request in them are dropped
                self.server = self.server.split_off(&w);
                self.open = Some(w);
            }
            None => self.open = Some(w),
            _ => {}
        }
        if let Some(l) = r.latency_ns() {
            self.user.push(l);
        }
        if let Some(l) = r.lateness_ns() {
            self.lateness.push(l);
        }
        if let Some(i) = ideal {
            self.ideal_v.push(i);
        }
    }

    fn release(&mut self, upto: u64) {
        while let Some(&Reverse((sent, conn, counted, sl))) = self.pending.peek() {
            if sent > upto {
                break;
            }
            self.pending.pop();
            let resp = self
                .server_ideal
                .as_mut()
                .map(|i| i.push(sent, conn, counted));
            if counted {
                let e = self.server.entry(sent / self.width).or_default();
                if sl != u64::MAX {
                    e.measured.push(sl);
                }
                if let Some(v) = resp {
                    e.ideal.push(v);
                }
            }
        }
    }

    fn close(&mut self, o: u64) {
        let sv = self.server.remove(&o).unwrap_or_default();
        let mut user = std::mem::take(&mut self.user);
        let mut late = std::mem::take(&mut self.lateness);
        let mut ideal = std::mem::take(&mut self.ideal_v);
        if user.is_empty() {
            return;
        }
        let (mut sm, mut si) = (sv.measured, sv.ideal);
        let us = |v: f64| v / 1e3;
        let start = o.saturating_mul(self.width);
        self.out.push(Window {
            start_s: start as f64 / 1e9,
            end_s: start.saturating_add(self.width) as f64 / 1e9,
            count: user.len() as u64,
            p50_us: us(q(&mut user, 0.5).unwrap_or(0.0)),
            p99_us: us(q(&mut user, 0.99).unwrap_or(0.0)),
            max_us: us(user.iter().copied().max().unwrap_or(0) as f64),
            server_p50_us: q(&mut sm, 0.5).map(us),
            server_p99_us: q(&mut sm, 0.99).map(us),
            ideal_p99_us: q(&mut ideal, 0.99).map(us),
            server_ideal_p99_us: q(&mut si, 0.99).map(us),
            lateness_p99_us: us(q(&mut late, 0.99).unwrap_or(0.0)),
        });
    }

    /// Closes the last window once every record has been read.
    pub fn finish(mut self) -> Vec<Window> {
        self.release(u64::MAX);
        if let Some(o) = self.open {
            self.close(o);
        }
        self.out
    }
}

/// Type-7 quantile of unsorted values (sorts them). None when empty.
fn q(v: &mut [u64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(stats::quantile_sorted(v, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_width_is_a_multiple_of_100_ms() {
        assert_eq!(window_width(0, 1_000_000_000), 100_000_000);
        assert_eq!(window_width(0, 60_000_000_000), 200_000_000);
        assert_eq!(window_width(0, 61_000_000_000), 300_000_000);
        assert_eq!(window_width(0, 0), 100_000_000);
        assert_eq!(window_width(5_000, 60_000_000_000), 5_000);
    }
}
