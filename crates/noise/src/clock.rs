//! The probe's clock: the TSC read with `rdtscp` on x86_64, calibrated against
//! `CLOCK_MONOTONIC`; elsewhere (or on an x86_64 CPU without `rdtscp`) `CLOCK_MONOTONIC`
//! itself, in nanoseconds.

use std::time::{Duration, Instant};

/// One reading: a tick count and the CPU the reading was taken on (`u32::MAX` when the
/// clock cannot tell).
pub(crate) trait TickSource {
    fn read() -> (u64, u32);
}

/// `rdtscp`: the TSC plus `IA32_TSC_AUX`, which Linux loads with `(node << 12) | cpu`.
#[cfg(target_arch = "x86_64")]
pub(crate) struct Rdtscp;

#[cfg(target_arch = "x86_64")]
impl TickSource for Rdtscp {
    #[inline(always)]
    fn read() -> (u64, u32) {
        let mut aux = 0_u32;
        // SAFETY: `rdtscp` has no memory-safety preconditions beyond CPU support, which
        // `clock_kind` checks with CPUID before this source is ever chosen; `aux` is a
        // valid, writable u32. The instruction waits for earlier instructions to finish,
        // so a gap between two reads covers everything that ran between them.
        let t = unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
        (t, aux & 0xfff)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds; no CPU id.
pub(crate) struct Monotonic;

impl TickSource for Monotonic {
    #[inline(always)]
    fn read() -> (u64, u32) {
        (monotonic_ns(), u32::MAX)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds, read with `clock_gettime` directly (vDSO) so that
/// calibration compares the TSC with exactly the clock the rest of tailscope uses.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Which clock the probe loops read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockKind {
    /// The time-stamp counter via `rdtscp` (x86_64 with the instruction).
    Rdtscp,
    /// `clock_gettime(CLOCK_MONOTONIC)`: the fallback; its own cost (~20 ns through the
    /// vDSO) adds to every loop, so minimum loop times are larger than the TSC's.
    Monotonic,
}

impl ClockKind {
    /// A phrase for reports.
    pub fn describe(self) -> &'static str {
        match self {
            ClockKind::Rdtscp => "TSC via rdtscp, calibrated against CLOCK_MONOTONIC",
            ClockKind::Monotonic => {
                "CLOCK_MONOTONIC via clock_gettime (no rdtscp on this CPU or architecture)"
            }
        }
    }
}

/// The clock this machine's probe uses.
pub fn clock_kind() -> ClockKind {
    #[cfg(target_arch = "x86_64")]
    {
        if has_rdtscp() {
            return ClockKind::Rdtscp;
        }
    }
    ClockKind::Monotonic
}

/// CPUID leaf 0x8000_0001, EDX bit 27 says whether `rdtscp` exists. std's feature
/// detection has no name for it, hence the hand-written check.
#[cfg(target_arch = "x86_64")]
fn has_rdtscp() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x8000_0000 reports the highest
    // extended leaf, and 0x8000_0001 is only asked for when it is available.
    #[allow(unused_unsafe)]
    unsafe {
        let max_ext = __cpuid(0x8000_0000).eax;
        max_ext >= 0x8000_0001 && (__cpuid(0x8000_0001).edx >> 27) & 1 == 1
    }
}

/// Reads `S` bracketed by two monotonic reads; retries (up to 20 times) while the bracket is
/// wider than 20 µs (the thread was preempted in between). Returns (monotonic midpoint,
/// ticks).
fn paired_reading<S: TickSource>() -> (f64, u64) {
    let mut best: Option<(u64, f64, u64)> = None;
    for _ in 0..20 {
        let a = monotonic_ns();
        let (t, _) = S::read();
        let b = monotonic_ns();
        let width = b.saturating_sub(a);
        let mid = a as f64 + width as f64 / 2.0;
        if !matches!(best, Some((w, _, _)) if w <= width) {
            best = Some((width, mid, t));
        }
        if width < 20_000 {
            break;
        }
    }
    let (_, mid, t) = best.unwrap_or((0, monotonic_ns() as f64, S::read().0));
    (mid, t)
}

/// Nanoseconds per tick of source `S`, from two paired readings `span` apart (spinning in
/// between, so the thread keeps its CPU as far as the scheduler allows).
pub(crate) fn calibrate<S: TickSource>(span: Duration) -> f64 {
    let (m0, t0) = paired_reading::<S>();
    let start = Instant::now();
    while start.elapsed() < span {
        std::hint::spin_loop();
    }
    let (m1, t1) = paired_reading::<S>();
    let dt = t1.saturating_sub(t0);
    if dt == 0 {
        return 1.0;
    }
    (m1 - m0) / dt as f64
}

/// Nanoseconds per TSC tick: `rdtscp` calibrated against `CLOCK_MONOTONIC` over 60 ms (each
/// end read between two monotonic reads, taking the tightest of up to 20 tries, so the
/// error is about (bracket width) / 60 ms, well under 0.1 %).
///
/// On other architectures, or x86_64 CPUs without `rdtscp`, the probe reads
/// `CLOCK_MONOTONIC` in nanoseconds instead and this returns 1.0; [`clock_kind`] says which
/// (and reports print [`ClockKind::describe`]).
pub fn tsc_ns_per_tick() -> f64 {
    match clock_kind() {
        #[cfg(target_arch = "x86_64")]
        ClockKind::Rdtscp => calibrate::<Rdtscp>(Duration::from_millis(60)),
        _ => 1.0,
    }
}

/// Raw reading of the probe clock (ticks, CPU id), for tests and examples.
pub fn read_ticks() -> u64 {
    match clock_kind() {
        #[cfg(target_arch = "x86_64")]
        ClockKind::Rdtscp => Rdtscp::read().0,
        _ => Monotonic::read().0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calibrated rate, applied to a fresh 30 ms interval read on both clocks, agrees
    /// with CLOCK_MONOTONIC within 1 %. Both ends are bracketed reads, so a preemption
    /// between the two clocks' reads is retried rather than counted.
    #[test]
    fn calibration_matches_monotonic_within_one_percent() {
        let k = tsc_ns_per_tick();
        assert!(k > 0.0 && k.is_finite());
        let ok = (0..3).any(|_| {
            let (m0, t0) = match clock_kind() {
                #[cfg(target_arch = "x86_64")]
                ClockKind::Rdtscp => paired_reading::<Rdtscp>(),
                _ => paired_reading::<Monotonic>(),
            };
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
            let (m1, t1) = match clock_kind() {
                #[cfg(target_arch = "x86_64")]
                ClockKind::Rdtscp => paired_reading::<Rdtscp>(),
                _ => paired_reading::<Monotonic>(),
            };
            let mono = m1 - m0;
            let tsc = (t1 - t0) as f64 * k;
            ((tsc - mono) / mono).abs() < 0.01
        });
        assert!(
            ok,
            "calibrated TSC disagrees with CLOCK_MONOTONIC by >= 1 %"
        );
    }

    #[test]
    fn monotonic_source_is_nanoseconds() {
        let k = calibrate::<Monotonic>(Duration::from_millis(5));
        assert!((k - 1.0).abs() < 1e-3, "{k}");
    }
}
