//! Testing knobs of the engine, for the catch-up benchmark (`bench/catchup.sh`): never set in
//! an ordinary run, read once per generator thread from the environment so that no public
//! configuration type carries them.
//!
//! - [`PAUSE_ENV`] = `EVERY_US:LENGTH_US`: generator thread 0 stops running for `LENGTH_US`
//!   every `EVERY_US` (a sleep the loop does not account as a wait, so it is a stall like one
//!   the host causes), and records how long the backlog then took to send
//!   ([`InjectedPause`]).
//! - [`WRITES_ENV`] = `per-request`: every request is written with its own system call, as
//!   the engine did before due requests were coalesced per connection (the benchmark's
//!   "before").

use super::cost::{InjectedPause, LoopClock};

/// `EVERY_US:LENGTH_US`: inject a pause of LENGTH_US into generator thread 0 every EVERY_US.
pub const PAUSE_ENV: &str = "TAILSCOPE_TESTING_PAUSE";
/// `per-request`: one write per request instead of one per connection and pass.
pub const WRITES_ENV: &str = "TAILSCOPE_TESTING_WRITES";

/// The knobs as read from the environment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Knobs {
    pub per_request_writes: bool,
    /// (every, length) ns.
    pub pause: Option<(u64, u64)>,
}

impl Knobs {
    /// Reads the knobs; values that do not parse are ignored (the knobs are for benchmarks).
    pub(crate) fn from_env(thread: u64) -> Knobs {
        let per_request_writes = std::env::var(WRITES_ENV).is_ok_and(|v| v == "per-request");
        let pause = std::env::var(PAUSE_ENV)
            .ok()
            .and_then(|v| parse_pause(&v))
            .filter(|_| thread == 0);
        Knobs {
            per_request_writes,
            pause,
        }
    }
}

/// `EVERY_US:LENGTH_US` → (every, length) ns, with 0 < length < every.
pub(crate) fn parse_pause(v: &str) -> Option<(u64, u64)> {
    let (every, len) = v.split_once(':')?;
    let every: u64 = every.trim().parse().ok()?;
    let len: u64 = len.trim().parse().ok()?;
    (len > 0 && len < every).then(|| (every.saturating_mul(1000), len.saturating_mul(1000)))
}

/// A pause whose backlog is still being sent.
#[derive(Clone, Copy, Debug)]
struct Open {
    start: u64,
    end: u64,
    /// The thread's `due_in_stalls` before the pause.
    due_before: u64,
}

/// The pause schedule of one thread and the pauses' outcomes.
#[derive(Debug, Default)]
pub(crate) struct Pauses {
    /// (every, length) ns; None: no pauses.
    plan: Option<(u64, u64)>,
    next_at: u64,
    open: Option<Open>,
}

impl Pauses {
    pub(crate) fn new(plan: Option<(u64, u64)>) -> Pauses {
        Pauses {
            plan,
            next_at: plan.map_or(u64::MAX, |(every, _)| every),
            open: None,
        }
    }

    /// Pauses the thread if one is due at `now` and the previous pause's backlog is sent;
    /// returns the loop's time afterwards (read through `clock`, which sees the stall).
    pub(crate) fn maybe_pause(&mut self, now: u64, clock: &LoopClock, due_in_stalls: u64) -> u64 {
        let Some((every, len)) = self.plan else {
            return now;
        };
        if now < self.next_at || self.open.is_some() {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_nanos(len));
        let end = clock.read();
        self.open = Some(Open {
            start: now,
            end,
            due_before: due_in_stalls,
        });
        self.next_at = end + every - len;
        end
    }

    /// Everything due has been written at `now`: closes the open pause, if any.
    pub(crate) fn caught_up(&mut self, now: u64, due_in_stalls: u64) -> Option<InjectedPause> {
        let o = self.open.take()?;
        Some(InjectedPause {
            pause_ns: o.end.saturating_sub(o.start),
            due: due_in_stalls - o.due_before,
            catch_up_ns: now.saturating_sub(o.end),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_knob_parses_only_a_length_shorter_than_its_period() {
        assert_eq!(parse_pause("100000:5000"), Some((100_000_000, 5_000_000)));
        assert_eq!(parse_pause(" 10 : 1 "), Some((10_000, 1_000)));
        assert_eq!(parse_pause("5000:5000"), None);
        assert_eq!(parse_pause("5000:0"), None);
        assert_eq!(parse_pause("5000"), None);
        assert_eq!(parse_pause("a:1"), None);
    }

    #[test]
    fn a_pause_is_taken_when_due_and_closed_when_caught_up() {
        let clock = LoopClock::new();
        clock.start_at(host::tstamp::mono_now_ns());
        let mut p = Pauses::new(Some((400_000, 200_000)));
        // Not due yet: nothing happens.
        assert_eq!(p.maybe_pause(10, &clock, 0), 10);
        assert_eq!(p.caught_up(20, 0), None);
        let mut now = clock.read();
        while now < 400_000 {
            now = clock.read();
        }
        let end = p.maybe_pause(now, &clock, 3);
        assert!(end >= now + 200_000, "{now} {end}");
        // The next one waits for this one's backlog.
        assert_eq!(p.maybe_pause(end + 10_000_000, &clock, 3), end + 10_000_000);
        let got = p.caught_up(end + 7_000, 10).unwrap();
        assert_eq!(got.due, 7);
        assert_eq!(got.catch_up_ns, 7_000);
        assert_eq!(got.pause_ns, end - now);
        assert!(got.ratio() > 0.0 && got.ratio() <= 7_000.0 / 200_000.0);
        assert_eq!(p.caught_up(end + 9_000, 10), None);
    }
}
