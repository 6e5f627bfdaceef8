//! The clocks tailscope reads (`CLOCK_MONOTONIC`, `CLOCK_REALTIME`, a thread's CPU time) and
//! the mapping of another clock onto `CLOCK_MONOTONIC` ([`ClockMap`]): the software receive
//! stamps ([`crate::tstamp`]) and a NIC's hardware clock ([`crate::hwstamp`]) are both
//! converted through it.

/// How long a thread reuses its realtime→monotonic mapping before sampling it again.
pub const CLOCK_MAP_MAX_AGE_NS: u64 = 10_000_000;

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks always exist on Linux, so the
    // call cannot fail and its return value carries no information.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// `clock_gettime(CLOCK_MONOTONIC)` in ns.
#[inline]
pub fn mono_now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`), ns: what a background
/// thread of tailscope cost.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock_gettime(CLOCK_REALTIME)` in ns.
#[inline]
pub fn realtime_now_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// The offset between `CLOCK_REALTIME` and `CLOCK_MONOTONIC` at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockMap {
    /// realtime − monotonic, ns.
    offset_ns: i64,
    /// Width of the monotonic bracket around the realtime read that produced `offset_ns`:
    /// the offset is known to within ± half of it.
    uncertainty_ns: u64,
    /// When the sample was taken (monotonic ns).
    sampled_at_ns: u64,
}

impl ClockMap {
    /// Reads (mono, realtime, mono) a few times and keeps the tightest bracket; the realtime
    /// reading is paired with the bracket's midpoint.
    pub fn sample() -> Self {
        // Reading CLOCK_REALTIME cannot fail.
        Self::sample_with(|| Some(realtime_now_ns())).unwrap_or(ClockMap {
            offset_ns: 0,
            uncertainty_ns: u64::MAX,
            sampled_at_ns: 0,
        })
    }

    /// The mapping of another clock (`read` gives its time now, ns) onto CLOCK_MONOTONIC:
    /// (mono, other, mono) five times, the tightest bracket kept. None when `read` fails.
    pub fn sample_with(read: impl Fn() -> Option<u64>) -> Option<Self> {
        let mut best: Option<ClockMap> = None;
        for _ in 0..5 {
            let m1 = mono_now_ns();
            let r = read()?;
            let m2 = mono_now_ns();
            let cand = ClockMap::from_bracket(m1, r, m2);
            best = match best {
                Some(b) if b.uncertainty_ns <= cand.uncertainty_ns => Some(b),
                _ => Some(cand),
            };
        }
        best
    }

    /// The mapping from one bracket: `other` read between monotonic readings `m1` and `m2`,
    /// paired with their midpoint.
    pub fn from_bracket(m1: u64, other: u64, m2: u64) -> Self {
        let gap = m2.saturating_sub(m1);
        let mid = m1 + gap / 2;
        ClockMap {
            offset_ns: (other as i64).wrapping_sub(mid as i64),
            uncertainty_ns: gap,
            sampled_at_ns: m2,
        }
    }

    /// When the sample was taken (monotonic ns).
    pub fn sampled_at_ns(&self) -> u64 {
        self.sampled_at_ns
    }

    /// Converts a reading of the mapped clock (`CLOCK_REALTIME` for [`ClockMap::sample`])
    /// to `CLOCK_MONOTONIC` (saturating at 0).
    #[inline]
    pub fn realtime_to_mono(&self, rt_ns: u64) -> u64 {
        let m = (rt_ns as i64).wrapping_sub(self.offset_ns);
        m.max(0) as u64
    }

    /// The mapped clock − monotonic, ns (realtime − monotonic for [`ClockMap::sample`]).
    pub fn offset_ns(&self) -> i64 {
        self.offset_ns
    }

    /// The bracket width of the chosen sample (the offset is good to ± half of it).
    pub fn uncertainty_ns(&self) -> u64 {
        self.uncertainty_ns
    }
}
