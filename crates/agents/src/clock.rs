//! An agent's clock against the coordinator's, NTP-style, over the agent's own channel.
//!
//! One exchange: the coordinator sends at t1 (its clock), the agent receives at t2 and
//! replies at t3 (its clock), the coordinator receives at t4. Whatever the two directions
//! took, the agent's clock minus the coordinator's lies in `[t3 − t4, t2 − t1]`, an interval
//! as wide as the round trip less the agent's turnaround. The exchange with the shortest
//! round trip gives the narrowest interval (queueing in ssh, a pipe or a scheduler only ever
//! adds delay), so it is the one kept: its midpoint is the offset, half its width the
//! uncertainty, a bound and not a standard deviation.

use serde::Serialize;

/// Exchanges per agent (the issue asks for at least 8; a few more cost microseconds each and
/// make a short round trip more likely).
pub const EXCHANGES: usize = 16;

/// One ping/pong: coordinator send and receive (t1, t4), agent receive and reply (t2, t3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    pub t4: u64,
}

impl Exchange {
    /// Round trip less the agent's turnaround, ns (None when the stamps contradict
    /// themselves: a reply before its request on either clock).
    pub fn rtt_ns(&self) -> Option<u64> {
        let there_and_back = self.t4.checked_sub(self.t1)?;
        let turnaround = self.t3.checked_sub(self.t2)?;
        there_and_back.checked_sub(turnaround)
    }

    /// The offset's midpoint estimate, agent − coordinator, ns.
    pub fn offset_ns(&self) -> i128 {
        let (t1, t2, t3, t4) = (
            i128::from(self.t1),
            i128::from(self.t2),
            i128::from(self.t3),
            i128::from(self.t4),
        );
        ((t2 - t1) + (t3 - t4)) / 2
    }
}

/// What the exchanges said about one agent's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ClockOffset {
    /// Agent's CLOCK_MONOTONIC minus the coordinator's, ns, from the shortest exchange.
    pub offset_ns: i64,
    /// Half the shortest round trip: the true offset is within ± this, ns.
    pub uncertainty_ns: u64,
    pub min_rtt_ns: u64,
    pub exchanges: usize,
}

/// The offset from the exchange with the shortest round trip; None when no exchange is
/// consistent (or the offset does not fit an i64 ns, ±292 years).
pub fn estimate(exchanges: &[Exchange]) -> Option<ClockOffset> {
    let best = exchanges
        .iter()
        .filter_map(|e| e.rtt_ns().map(|r| (r, e)))
        .min_by_key(|(r, _)| *r)?;
    Some(ClockOffset {
        offset_ns: i64::try_from(best.1.offset_ns()).ok()?,
        uncertainty_ns: best.0.div_ceil(2),
        min_rtt_ns: best.0,
        exchanges: exchanges.len(),
    })
}

/// `t` on the coordinator's clock as the agent's clock reads it.
pub fn to_agent_clock(t: u64, offset_ns: i64) -> Option<u64> {
    u64::try_from(i128::from(t) + i128::from(offset_ns)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent whose clock reads `offset` more than the coordinator's, with one-way delays
    /// `up` and `down` and a turnaround of 3 µs.
    fn ex(at: u64, offset: i64, up: u64, down: u64) -> Exchange {
        let t2c = at + up;
        let t3c = t2c + 3_000;
        Exchange {
            t1: at,
            t2: (t2c as i64 + offset) as u64,
            t3: (t3c as i64 + offset) as u64,
            t4: t3c + down,
        }
    }

    #[test]
    fn the_shortest_round_trip_is_kept_and_bounds_the_error() {
        let offset = 1_000_000_000_000i64; // a time namespace 1000 s ahead
        let xs = [
            ex(10_000_000, offset, 400_000, 90_000), // queued on the way there
            ex(20_000_000, offset, 30_000, 50_000),  // the shortest: 80 µs
            ex(30_000_000, offset, 60_000, 900_000),
        ];
        let c = estimate(&xs).unwrap();
        assert_eq!(c.min_rtt_ns, 80_000);
        assert_eq!(c.uncertainty_ns, 40_000);
        // Asymmetric delays (30 vs 50 µs) put the midpoint 10 µs off: within the bound.
        assert_eq!(c.offset_ns, offset - 10_000);
        assert!((c.offset_ns - offset).unsigned_abs() <= c.uncertainty_ns);
        assert_eq!(c.exchanges, 3);
        assert_eq!(to_agent_clock(5, -3), Some(2));
        assert_eq!(to_agent_clock(5, -6), None);
    }

    #[test]
    fn contradictory_stamps_are_ignored() {
        let bad = Exchange {
            t1: 100,
            t2: 50,
            t3: 40, // replied before it received
            t4: 90, // received before it sent
        };
        assert!(bad.rtt_ns().is_none());
        assert!(estimate(&[bad]).is_none());
        assert!(estimate(&[]).is_none());
    }
}
