//! Sampled collection: the stage programs attached only in windows, so that what they cost
//! stays within a budget.
//!
//! Attached, the programs cost every server request some hundreds of ns in the kernel (their
//! bodies, measured by the BPF run-time statistics) and more that no statistic sees (the
//! tracepoints' slow path on every system call of the host). At the server's peak that is a
//! fifth of its capacity, which no user would accept as the price of a stage table. A
//! [`Sampler`] thread looks at the programs' measured time every `slice` and keeps their
//! total, plus its own CPU time, within `budget` of the wall time of the server's CPUs: it
//! detaches the programs when the total goes over, and attaches them again once the
//! allowance has caught up. At low rates the total never goes over and the programs stay
//! attached throughout (one window, every request); at the peak the windows are a few per
//! cent of the run.
//!
//! A window starts when the last program is attached and ends when the first is detached:
//! every event in between is seen, and [`crate::Collector::drain`] keeps only those. The
//! join then takes only requests a window saw whole (see lab's stages).
//!
//! Detached, the programs cost nothing: a syscall tracepoint with no program left is
//! switched off in the kernel.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::EbpfError;

/// What the sampler switches: the collector's programs ([`crate::Collector`]'s).
pub(crate) trait Toggle: Send + Sync {
    /// Attaches every program; CLOCK_MONOTONIC after the last attach.
    fn attach(&self) -> Result<u64, EbpfError>;
    /// Detaches them (the sampler closes the window before it calls this).
    fn detach(&self);
    /// The programs' run time so far (BPF run-time statistics; 0 when not measured), ns.
    fn program_ns(&self) -> u64;
}

/// Without run-time statistics the cost cannot be measured: windows of the shortest length
/// are attached this fraction of the time.
const UNMEASURED_DUTY: f64 = 0.1;

/// How the programs are sampled.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    /// Program time (and the sampler's own) allowed, as a fraction of the wall time of
    /// `cpus` CPUs: 0.01 with one CPU is 10 ms a second.
    pub budget: f64,
    /// The server's CPUs.
    pub cpus: usize,
    /// The shortest window: the join drops requests near a window's edges, so a window much
    /// shorter than its margins holds few whole requests.
    pub min_window: Duration,
    /// The shortest time between two looks at the cost.
    pub slice: Duration,
    /// CPUs for the sampling thread (empty: not pinned). Each attach and detach costs it
    /// 1–2 ms of CPU in the kernel, which (without kernel preemption) stalls whatever else
    /// wants that CPU meanwhile: its cost counts against the budget. It is a normal thread,
    /// not an idle-class one like the record writer: starved at the server's peak, a detach
    /// took 0.3 s and an attach up to 0.9 s at SCHED_IDLE, with the programs attached so far
    /// running at their full cost all along (5 % spent against a 1 % budget).
    pub run_on: Vec<usize>,
    /// The first window opens this long after the collector starts (a run's warm-up, whose
    /// requests every view drops), and the allowance counts from then: the measured part of
    /// a run is sampled as it would be without a warm-up. (Counted from the start, the first
    /// window spent what accrued during the warm-up, inside the measured part: memcached at
    /// 20k req/s, generator lateness p99 with/without 1.031 against 1.009, 20 alternating
    /// triples.)
    pub first_after: Duration,
}

impl Sampling {
    /// `budget` of `cpus` CPUs, with windows of at least 50 ms looked at every 10 ms.
    pub fn new(budget: f64, cpus: usize) -> Sampling {
        Sampling {
            budget,
            cpus: cpus.max(1),
            min_window: Duration::from_millis(50),
            slice: Duration::from_millis(10),
            run_on: Vec::new(),
            first_after: Duration::ZERO,
        }
    }
}

/// One span the programs were all attached, CLOCK_MONOTONIC ns; `end` None while open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    pub start: u64,
    pub end: Option<u64>,
}

/// The window that holds instant `ts` (windows sorted by start, none overlapping).
pub fn window_of(windows: &[Window], ts: u64) -> Option<Window> {
    let k = windows.partition_point(|w| w.start <= ts);
    let w = windows.get(k.checked_sub(1)?)?;
    w.end.is_none_or(|end| ts <= end).then_some(*w)
}

/// Whether some window holds `ts`.
pub fn inside(windows: &[Window], ts: u64) -> bool {
    window_of(windows, ts).is_some()
}

/// What the sampling did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SamplingReport {
    /// The budget, a fraction of `cpus` CPUs' wall time.
    pub budget: f64,
    pub cpus: usize,
    /// Whether the programs' time was measured (BPF run-time statistics); without it the
    /// windows follow a fixed duty cycle.
    pub measured: bool,
    /// Windows opened.
    pub windows: u64,
    /// Time attached, and since the sampling began (ns): the first window's earliest start.
    pub attached_ns: u64,
    pub elapsed_ns: u64,
    /// What counted against the budget: the programs' time and the sampler's CPU time (ns).
    pub program_ns: u64,
    pub sampler_cpu_ns: u64,
    /// Longest attach and detach (all programs), ns.
    pub attach_max_ns: u64,
    pub detach_max_ns: u64,
    /// Kernel records dropped because no window saw them whole.
    pub outside_events: u64,
    /// Why the sampling stopped early (the programs then stay detached).
    pub error: Option<String>,
}

impl SamplingReport {
    /// The fraction of the time attached.
    pub fn duty(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return if self.windows > 0 { 1.0 } else { 0.0 };
        }
        self.attached_ns as f64 / self.elapsed_ns as f64
    }
}

struct State {
    windows: VecDeque<Window>,
    /// Since when the programs are being attached (CLOCK_MONOTONIC ns), until their window
    /// is listed: a drain meanwhile keeps the events after it for the next drain, which
    /// knows the window (they would otherwise be dropped as outside every window, and the
    /// window's first requests would lack them).
    attaching_since: Option<u64>,
    report: SamplingReport,
}

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
}

/// The thread that attaches and detaches the programs.
pub(crate) struct Sampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `programs`; `started`: when the collector started (CLOCK_MONOTONIC ns;
    /// the first window opens `cfg.first_after` later); `attached`: when they were attached,
    /// the first window's start, or None when they wait for `cfg.first_after`; `measured`:
    /// whether the kernel's run-time statistics are on.
    pub fn start(
        cfg: Sampling,
        programs: Arc<dyn Toggle>,
        started: u64,
        attached: Option<u64>,
        measured: bool,
    ) -> Result<Sampler, EbpfError> {
        if !(cfg.budget > 0.0 && cfg.budget.is_finite()) {
            return Err(EbpfError::Config(format!(
                "the sampling budget must be above 0, got {}",
                cfg.budget
            )));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                windows: attached
                    .map(|start| Window { start, end: None })
                    .into_iter()
                    .collect(),
                attaching_since: None,
                report: SamplingReport {
                    budget: cfg.budget,
                    cpus: cfg.cpus,
                    measured,
                    windows: u64::from(attached.is_some()),
                    ..SamplingReport::default()
                },
            }),
            stop: AtomicBool::new(false),
        });
        let inner = Arc::clone(&shared);
        // Not "ts-…": the collector follows the built-in server's threads by that prefix.
        let thread = std::thread::Builder::new()
            .name("ebpf-windows".into())
            .spawn(move || {
                run(
                    &cfg,
                    programs.as_ref(),
                    &inner,
                    (started, attached),
                    measured,
                )
            })
            .map_err(|e| EbpfError::Config(format!("starting the sampling thread: {e}")))?;
        Ok(Sampler {
            shared,
            thread: Some(thread),
        })
    }

    /// The windows kept so far, oldest first.
    pub fn windows(&self) -> Vec<Window> {
        self.windows_and_attaching().0
    }

    /// The windows kept so far, and since when programs are being attached for the next
    /// (None when they are not): events after that instant may belong to a window not
    /// listed yet.
    pub fn windows_and_attaching(&self) -> (Vec<Window>, Option<u64>) {
        self.shared
            .state
            .lock()
            .map(|s| (s.windows.iter().copied().collect(), s.attaching_since))
            .unwrap_or_default()
    }

    /// Forgets windows that closed before `horizon`.
    pub fn forget_before(&self, horizon: u64) {
        if let Ok(mut s) = self.shared.state.lock() {
            while s
                .windows
                .front()
                .is_some_and(|w| w.end.is_some_and(|e| e < horizon))
            {
                s.windows.pop_front();
            }
        }
    }

    /// The report so far; `outside`: records the drain dropped.
    pub fn report(&self, outside: u64) -> SamplingReport {
        let mut r = self
            .shared
            .state
            .lock()
            .map(|s| s.report.clone())
            .unwrap_or_default();
        r.outside_events = outside;
        r
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The sampling loop: detach when what was spent exceeds the allowance (and the window is
/// at least `min_window` old), attach when the allowance has caught up. Between looks it
/// sleeps until the next decision could be due (reading the programs' statistics costs
/// ~4 µs a program, which looked at every few ms would be a good part of a 1 % budget),
/// but at least `slice`. `(started, attached)`: as given to [`Sampler::start`].
fn run(
    cfg: &Sampling,
    programs: &dyn Toggle,
    shared: &Shared,
    (started, attached): (u64, Option<u64>),
    measured: bool,
) {
    // Best effort, like the record writer's: a thread left where it was still samples.
    if !cfg.run_on.is_empty() {
        let _ = host::placement::pin_current_thread(&cfg.run_on);
    }
    let cpu0 = host::clock::thread_cpu_ns();
    let prog0 = programs.program_ns();
    let per_ns = cfg.budget * cfg.cpus as f64;
    let slice = cfg.slice.as_nanos() as u64;
    let min_window = cfg.min_window.as_nanos() as u64;
    // The open window: its start and the programs' time then.
    let mut opened = attached.map(|a| (a, 0u64));
    // The allowance (and the span reported) count from the first window's earliest start.
    let first_at = started.saturating_add(cfg.first_after.as_nanos() as u64);
    // When the last window closed (unmeasured: the first opens at `first_at`).
    let off = (min_window as f64 * (1.0 / UNMEASURED_DUTY - 1.0)) as u64;
    let mut closed_at = first_at.saturating_sub(off);
    let mut program_ns = 0u64;
    let mut wait = if attached.is_some() {
        min_window
    } else {
        first_at.saturating_sub(host::clock::mono_now_ns())
    };
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_nanos(wait.max(slice)));
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let now = host::clock::mono_now_ns();
        if opened.is_some() {
            program_ns = programs.program_ns().saturating_sub(prog0);
        }
        let sampler_cpu_ns = host::clock::thread_cpu_ns().saturating_sub(cpu0);
        let spent = (program_ns + sampler_cpu_ns) as f64;
        let allowed = per_ns * now.saturating_sub(first_at) as f64;
        if let Ok(mut st) = shared.state.lock() {
            st.report.program_ns = program_ns;
            st.report.sampler_cpu_ns = sampler_cpu_ns;
            st.report.elapsed_ns = now.saturating_sub(first_at);
        }
        // The lock is not held while the programs attach or detach (milliseconds): the
        // drain reads the windows meanwhile.
        match opened {
            Some((start, prog_at_open)) => {
                let age = now.saturating_sub(start);
                // Unmeasured: every window is the shortest (a fixed duty cycle).
                let over = !measured || spent > allowed;
                if age >= min_window && over {
                    // The window's end is written before the first program goes, not after
                    // the last: detaching takes milliseconds (a pause between programs), and
                    // whoever reads the windows meanwhile must not see the window open while
                    // some programs are gone (a request sent then would count as whole with
                    // half its events; issue 36's CI: 34 requests without their arrival).
                    let end = host::clock::mono_now_ns();
                    match shared.state.lock() {
                        Ok(mut st) => {
                            if let Some(w) = st.windows.back_mut() {
                                w.end = Some(end);
                            }
                        }
                        Err(_) => return,
                    }
                    programs.detach();
                    let took = host::clock::mono_now_ns().saturating_sub(end);
                    let Ok(mut st) = shared.state.lock() else {
                        return;
                    };
                    st.report.detach_max_ns = st.report.detach_max_ns.max(took);
                    st.report.attached_ns += end.saturating_sub(start);
                    opened = None;
                    closed_at = end;
                    wait = slice;
                } else if age < min_window {
                    wait = min_window - age;
                } else {
                    // Under the allowance: look again when, at this window's rate, the
                    // programs would have spent it.
                    let rate = program_ns.saturating_sub(prog_at_open) as f64 / age.max(1) as f64;
                    let gain = rate - per_ns;
                    wait = if gain > 0.0 {
                        ((allowed - spent) / gain) as u64
                    } else {
                        LONGEST_WAIT
                    }
                    .min(LONGEST_WAIT);
                }
            }
            None if now < first_at => {
                wait = first_at - now;
                continue;
            }
            None => {
                let (due, left) = if measured {
                    (
                        spent <= allowed,
                        ((spent - allowed) / per_ns).max(0.0) as u64,
                    )
                } else {
                    let done = now.saturating_sub(closed_at);
                    (done >= off, off.saturating_sub(done))
                };
                if !due {
                    wait = left.min(LONGEST_WAIT);
                    continue;
                }
                let t = host::clock::mono_now_ns();
                match shared.state.lock() {
                    Ok(mut st) => st.attaching_since = Some(t),
                    Err(_) => return,
                }
                let got = programs.attach();
                let Ok(mut st) = shared.state.lock() else {
                    return;
                };
                st.attaching_since = None;
                match got {
                    Ok(start) => {
                        st.report.attach_max_ns =
                            st.report.attach_max_ns.max(start.saturating_sub(t));
                        st.windows.push_back(Window { start, end: None });
                        st.report.windows += 1;
                        opened = Some((start, program_ns));
                        wait = min_window;
                    }
                    Err(e) => {
                        // Some programs may have attached: none stay.
                        programs.detach();
                        st.report.error = Some(e.to_string());
                        return;
                    }
                }
            }
        }
    }
    if let (Some((start, _)), Ok(mut st)) = (opened, shared.state.lock()) {
        let now = host::clock::mono_now_ns();
        st.report.attached_ns += now.saturating_sub(start);
        st.report.elapsed_ns = now.saturating_sub(first_at);
        st.report.sampler_cpu_ns = host::clock::thread_cpu_ns().saturating_sub(cpu0);
    }
}

/// The longest the sampler sleeps between looks.
const LONGEST_WAIT: u64 = 500_000_000;

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, AtomicU8};

    use super::*;

    #[test]
    fn an_instant_is_in_the_window_that_holds_it() {
        let w = [
            Window {
                start: 10,
                end: Some(20),
            },
            Window {
                start: 40,
                end: Some(50),
            },
            Window {
                start: 70,
                end: None,
            },
        ];
        for (ts, want) in [
            (9, None),
            (10, Some(0)),
            (20, Some(0)),
            (21, None),
            (39, None),
            (45, Some(1)),
            (51, None),
            (70, Some(2)),
            (u64::MAX, Some(2)),
        ] {
            assert_eq!(window_of(&w, ts), want.map(|k| w[k]), "at {ts}");
            assert_eq!(inside(&w, ts), want.is_some());
        }
        assert_eq!(window_of(&[], 5), None);
    }

    /// Programs that take a few milliseconds to attach and to detach, and say which they
    /// are doing (0 idle, 1 attaching, 2 attached, 3 detaching).
    struct Slow {
        phase: AtomicU8,
        attached_at: AtomicU64,
    }

    impl Toggle for Slow {
        fn attach(&self) -> Result<u64, EbpfError> {
            self.phase.store(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(6));
            let now = host::clock::mono_now_ns();
            self.attached_at.store(now, Ordering::SeqCst);
            self.phase.store(2, Ordering::SeqCst);
            Ok(now)
        }
        fn detach(&self) {
            self.phase.store(3, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(6));
            self.phase.store(0, Ordering::SeqCst);
        }
        fn program_ns(&self) -> u64 {
            0
        }
    }

    /// Whoever reads the windows while programs attach is told since when (so a drain keeps
    /// those events for the window to come), and while they detach sees the window closed
    /// (so no request sent then counts as whole).
    #[test]
    fn the_windows_say_what_the_programs_are_doing_meanwhile() {
        let slow = Arc::new(Slow {
            phase: AtomicU8::new(0),
            attached_at: AtomicU64::new(0),
        });
        let mut cfg = Sampling::new(0.01, 1);
        cfg.min_window = Duration::from_millis(10);
        let started = host::clock::mono_now_ns();
        // Unmeasured: windows of the shortest length, a fixed duty cycle.
        let sampler = Sampler::start(cfg, slow.clone(), started, None, false).unwrap();
        let (mut attaching_seen, mut detaching_seen) = (0, 0);
        let until = std::time::Instant::now() + Duration::from_millis(600);
        while std::time::Instant::now() < until {
            let before = slow.phase.load(Ordering::SeqCst);
            let (windows, attaching) = sampler.windows_and_attaching();
            let after = slow.phase.load(Ordering::SeqCst);
            if before != after {
                continue;
            }
            match before {
                1 => {
                    attaching_seen += 1;
                    assert!(attaching.is_some(), "{windows:?}");
                }
                3 => {
                    detaching_seen += 1;
                    let last = windows.last().expect("a window was opened");
                    assert!(last.end.is_some(), "open while detaching: {windows:?}");
                    assert!(attaching.is_none());
                }
                2 => {
                    let last = windows.last().expect("a window was opened");
                    assert!(last.end.is_none(), "closed while attached: {windows:?}");
                    assert!(last.start >= slow.attached_at.load(Ordering::SeqCst));
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        drop(sampler);
        assert!(
            attaching_seen > 0 && detaching_seen > 0,
            "looked {attaching_seen} times while attaching, {detaching_seen} while detaching"
        );
    }
}
