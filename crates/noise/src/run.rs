//! [`run`]: validate, prepare, spawn one pinned probe thread per CPU, read counters around
//! the run, and turn each thread's raw ticks into a [`CpuReport`].

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::attribution::{contributor, rank, SourceKind};
use crate::clock::{self, ClockKind, Monotonic};
use crate::counters::{clock_ticks_per_s, read_thread_ctxt, CtxSwitches, PerCpu, SystemCounters};
use crate::probe::{prefaulted_buffer, run_loop, LoopParams, RawRun};
use crate::report::{finish, Totals};
use crate::throttle::{mark_throttle_gaps, RtThrottle};
use crate::{CpuReport, Gap, NoiseConfig, NoiseError, SchedSpec};

/// How often the calling thread wakes to report progress while the probes spin. Its
/// wake-ups land on some CPU and may show up there as small gaps; 4 per second is a small
/// fraction of the local timer's rate.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// What one probe thread hands back.
struct ThreadResult {
    raw: RawRun,
    ctxt: Result<(CtxSwitches, CtxSwitches), String>,
}

/// Runs the noise probe: one pinned thread per CPU of `cfg.cpus` for `cfg.duration` (or
/// until `stop` is set), calling `progress` with the elapsed fraction (0 … 1) from the
/// calling thread about four times a second. Returns one report per CPU, in `cfg.cpus`
/// order.
///
/// Errors: invalid configuration (see [`NoiseConfig::validate`]), `mlockall` refused, or a
/// probe thread that could not be pinned or given its scheduling policy (then the other
/// threads are stopped early and nothing is reported).
pub fn run(
    cfg: &NoiseConfig,
    stop: &AtomicBool,
    progress: &dyn Fn(f64),
) -> Result<Vec<CpuReport>, NoiseError> {
    cfg.validate(host::placement::online_cpus())?;
    let proc_dir = cfg.proc_root.join("proc");
    let mut warnings = Vec::new();
    let rt = RtThrottle::read(&proc_dir);
    let realtime = matches!(
        cfg.sched,
        Some(SchedSpec::Fifo { .. }) | Some(SchedSpec::Rr { .. })
    );
    if let (true, Some(t)) = (realtime, rt) {
        if t.enabled() {
            warnings.push(format!(
                "RT throttling is on (sched_rt_runtime_us={} of sched_rt_period_us={}): a \
                 spinning realtime probe is stopped for about {:.0} ms every {:.0} ms; such \
                 gaps are marked as throttling, not counted as OS noise (write -1 to \
                 /proc/sys/kernel/sched_rt_runtime_us to turn throttling off)",
                t.runtime_us,
                t.period_us,
                t.stall_ns() / 1e6,
                t.period_ns() / 1e6
            ));
        }
    }
    let locked = if cfg.mlock {
        // SAFETY: mlockall takes flags only.
        if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
            return Err(NoiseError::Mlock(io::Error::last_os_error()));
        }
        true
    } else {
        false
    };
    let result = probe_all(cfg, &proc_dir, stop, progress, rt, realtime, warnings);
    if locked {
        // SAFETY: no arguments; undoes the mlockall above.
        unsafe { libc::munlockall() };
    }
    result
}

fn probe_all(
    cfg: &NoiseConfig,
    proc_dir: &Path,
    stop: &AtomicBool,
    progress: &dyn Fn(f64),
    rt: Option<RtThrottle>,
    realtime: bool,
    mut warnings: Vec<String>,
) -> Result<Vec<CpuReport>, NoiseError> {
    let kind = clock::clock_kind();
    let ns_per_tick = clock::tsc_ns_per_tick();
    let ticks = |ns: f64| (ns / ns_per_tick) as u64;
    let threshold_ticks = ticks(cfg.threshold_ns as f64);
    let duration_ticks = ticks(cfg.duration.as_nanos() as f64).max(1);

    let (timer, reason) = crate::measured::start(cfg.contributors, &cfg.cpus)?;
    let before = SystemCounters::read(proc_dir, &mut warnings);
    let started = Instant::now();
    let t0 = clock::read_ticks();
    let abort = AtomicBool::new(false);
    let results: Vec<Result<ThreadResult, NoiseError>> = thread::scope(|s| {
        let mut handles = Vec::new();
        for &cpu in &cfg.cpus {
            let abort = &abort;
            let timing = Timing {
                kind,
                threshold_ticks,
                duration_ticks,
            };
            let h = thread::Builder::new()
                .name(format!("{}{cpu}", crate::measured::THREAD_PREFIX))
                .spawn_scoped(s, move || {
                    let r = probe_thread(cpu, cfg, proc_dir, timing, [stop, abort]);
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                });
            match h {
                Ok(h) => handles.push((cpu, h)),
                Err(e) => {
                    abort.store(true, Ordering::Relaxed);
                    handles.push((cpu, thread_error_handle(s, cpu, e.to_string())));
                }
            }
        }
        progress(0.0);
        while !handles.iter().all(|(_, h)| h.is_finished()) {
            thread::sleep(PROGRESS_EVERY);
            let f = started.elapsed().as_secs_f64() / cfg.duration.as_secs_f64();
            progress(f.min(1.0));
        }
        handles
            .into_iter()
            .map(|(cpu, h)| {
                h.join().unwrap_or_else(|_| {
                    Err(NoiseError::Thread {
                        cpu,
                        reason: "panicked".into(),
                    })
                })
            })
            .collect()
    });
    let after = SystemCounters::read(proc_dir, &mut warnings);
    let window_s = started.elapsed().as_secs_f64();
    let timed = crate::measured::finish(timer, reason, cfg.contributors)?;
    progress(1.0);

    let ctx = ReportCtx {
        cfg,
        kind,
        ns_per_tick,
        t0,
        realtime,
        rt,
        before: &before,
        after: &after,
        window_s,
        warnings: &warnings,
        timed: &timed,
    };
    cfg.cpus
        .iter()
        .zip(results)
        .map(|(&cpu, r)| Ok(ctx.report(cpu, r?)))
        .collect()
}

/// What every CPU's report is built from.
struct ReportCtx<'a> {
    cfg: &'a NoiseConfig,
    kind: clock::ClockKind,
    ns_per_tick: f64,
    t0: u64,
    realtime: bool,
    rt: Option<RtThrottle>,
    before: &'a SystemCounters,
    after: &'a SystemCounters,
    window_s: f64,
    warnings: &'a [String],
    timed: &'a crate::measured::Timed,
}

impl ReportCtx<'_> {
    /// One CPU's report from its probe thread's result.
    fn report(&self, cpu: usize, r: ThreadResult) -> CpuReport {
        let (cfg, ns_per_tick, window_s) = (self.cfg, self.ns_per_tick, self.window_s);
        let (realtime, rt) = (self.realtime, self.rt);
        let mut w = self.warnings.to_vec();
        let mut gaps: Vec<Gap> = r
            .raw
            .gaps
            .iter()
            .map(|g| Gap {
                start_ns: (g.start.saturating_sub(self.t0) as f64 * ns_per_tick).round() as u64,
                len_ns: (g.len as f64 * ns_per_tick).round() as u64,
                throttle: false,
            })
            .collect();
        if let (true, Some(t)) = (realtime, rt) {
            let n = mark_throttle_gaps(&mut gaps, &t);
            if n > 0 {
                w.push(format!(
                    "{n} gap(s) match the RT-throttle pattern and are not counted as noise"
                ));
            }
        }
        let max_gap = gaps
            .iter()
            .filter(|g| !g.throttle)
            .map(|g| g.len_ns)
            .max()
            .unwrap_or(0) as f64;
        let mut classes = attribute(
            cpu,
            self.before,
            self.after,
            &r.ctxt,
            window_s,
            max_gap,
            &mut w,
        );
        if rt_matters(realtime, rt) && gaps.iter().any(|g| g.throttle) {
            classes.push(crate::Contributor {
                source: "RT throttling".into(),
                delta: gaps.iter().filter(|g| g.throttle).count() as u64,
                per_s: gaps.iter().filter(|g| g.throttle).count() as f64 / window_s.max(1e-9),
                class: crate::GoodBadUgly::Ugly,
                note: "kernel policy stalls of period − runtime; excluded from noise".into(),
            });
        }
        rank(&mut classes);
        if r.raw.migrations > 0 {
            w.push(format!(
                "{} gaps spanned a CPU change and were ignored",
                r.raw.migrations
            ));
        }
        let mut rep = CpuReport {
            cpu,
            loop_kind: cfg.loop_kind,
            clock: self.kind.describe().to_string(),
            ns_per_tick,
            threshold_ns: cfg.threshold_ns,
            loops: r.raw.loops,
            min_loop_ns: r.raw.min_ticks as f64 * ns_per_tick,
            elapsed_ns: 0,
            gaps,
            gaps_dropped: 0,
            migrations: r.raw.migrations,
            gaps_per_s: 0.0,
            time_lost_ns: 0,
            time_lost_fraction: 0.0,
            throttle_lost_ns: 0,
            snr: f64::INFINITY,
            paper_snr: None,
            loop_p999: None,
            gap_summary: None,
            lost_ccdf: Vec::new(),
            gap_classes: Vec::new(),
            classes,
            rt_throttled: false,
            warnings: w,
            contributor_source: if self.timed.totals.is_some() {
                crate::Contributors::Ebpf
            } else {
                crate::Contributors::Counters
            },
            contributors_reason: self.timed.reason.clone(),
            measured: Vec::new(),
            ebpf: self.timed.totals.clone(),
        };
        let totals = Totals {
            elapsed_ns: (r.raw.last.saturating_sub(r.raw.first) as f64 * ns_per_tick).round()
                as u64,
            dropped: r.raw.dropped,
            dropped_ns: (r.raw.dropped_ticks as f64 * ns_per_tick).round() as u64,
        };
        finish(&mut rep, &totals);
        if let Some(t) = &self.timed.totals {
            let labels = self.before.interrupts.as_ref();
            let irq_label = |id: u16| {
                let (exact, prefix) = (format!("IRQ {id}"), format!("IRQ {id} "));
                labels?
                    .0
                    .keys()
                    .find(|l| **l == exact || l.starts_with(&prefix))
                    .cloned()
            };
            let window = t.attached_ns as f64 / 1e9;
            rep.measured =
                crate::measured::contributors(cpu, &self.timed.measured, window, &irq_label);
            for m in &mut rep.measured {
                m.lost_share =
                    (rep.time_lost_ns > 0).then(|| m.total_ns as f64 / rep.time_lost_ns as f64);
            }
        }
        rep
    }
}

fn rt_matters(realtime: bool, rt: Option<RtThrottle>) -> bool {
    realtime && rt.is_some_and(|t| t.enabled())
}

/// A scoped handle that just returns the spawn error (keeps the join loop uniform).
fn thread_error_handle<'scope>(
    s: &'scope thread::Scope<'scope, '_>,
    cpu: usize,
    reason: String,
) -> thread::ScopedJoinHandle<'scope, Result<ThreadResult, NoiseError>> {
    s.spawn(move || Err(NoiseError::Thread { cpu, reason }))
}

/// The clock a probe thread reads, and its gap threshold and run length in its ticks.
#[derive(Clone, Copy)]
struct Timing {
    kind: ClockKind,
    threshold_ticks: u64,
    duration_ticks: u64,
}

/// The body of one probe thread: place it, prepare the buffer, spin, read its switches.
fn probe_thread(
    cpu: usize,
    cfg: &NoiseConfig,
    proc_dir: &Path,
    timing: Timing,
    flags: [&AtomicBool; 2],
) -> Result<ThreadResult, NoiseError> {
    let Timing {
        kind,
        threshold_ticks,
        duration_ticks,
    } = timing;
    let placement = |source| NoiseError::Placement { cpu, source };
    host::placement::pin_current_thread(&[cpu]).map_err(placement)?;
    if let Some(s) = cfg.sched.as_ref() {
        host::placement::apply_sched_current_thread(s).map_err(placement)?;
    }
    let buffer = prefaulted_buffer(cfg.max_gaps);
    let ctxt_before = read_thread_ctxt(proc_dir);
    let end_tick = clock::read_ticks().saturating_add(duration_ticks);
    let p = LoopParams {
        kind: cfg.loop_kind,
        threshold_ticks,
        end_tick,
        stop: flags,
        buffer,
    };
    let raw = match kind {
        #[cfg(target_arch = "x86_64")]
        ClockKind::Rdtscp => run_loop::<clock::Rdtscp>(p),
        _ => run_loop::<Monotonic>(p),
    };
    let ctxt_after = read_thread_ctxt(proc_dir);
    let ctxt = match (ctxt_before, ctxt_after) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    Ok(ThreadResult { raw, ctxt })
}

/// Contributors for `cpu` from the counter deltas.
fn attribute(
    cpu: usize,
    before: &SystemCounters,
    after: &SystemCounters,
    ctxt: &Result<(CtxSwitches, CtxSwitches), String>,
    window_s: f64,
    max_gap_ns: f64,
    warnings: &mut Vec<String>,
) -> Vec<crate::Contributor> {
    let mut out = Vec::new();
    let mut table = |b: &Option<PerCpu>, a: &Option<PerCpu>, kind: SourceKind| {
        if let (Some(b), Some(a)) = (b, a) {
            for (label, d) in PerCpu::delta(b, a, cpu) {
                out.push(contributor(label, kind, d, window_s, max_gap_ns, ""));
            }
        }
    };
    table(&before.interrupts, &after.interrupts, SourceKind::Interrupt);
    table(&before.softirqs, &after.softirqs, SourceKind::Softirq);
    if let (Some(b), Some(a)) = (&before.steal, &after.steal) {
        let d = a
            .get(&cpu)
            .copied()
            .unwrap_or(0)
            .saturating_sub(b.get(&cpu).copied().unwrap_or(0));
        if d > 0 {
            let ms = d as f64 * 1e3 / clock_ticks_per_s();
            out.push(contributor(
                "steal".into(),
                SourceKind::Steal,
                d,
                window_s,
                max_gap_ns,
                &format!("delta in USER_HZ ticks = {ms:.0} ms stolen"),
            ));
        }
    }
    match ctxt {
        Ok((b, a)) => {
            let inv = a.nonvoluntary.saturating_sub(b.nonvoluntary);
            let vol = a.voluntary.saturating_sub(b.voluntary);
            if inv > 0 {
                out.push(contributor(
                    "involuntary context switches".into(),
                    SourceKind::InvoluntarySwitch,
                    inv,
                    window_s,
                    max_gap_ns,
                    "of the probe thread",
                ));
            }
            if vol > 0 {
                out.push(contributor(
                    "voluntary context switches".into(),
                    SourceKind::VoluntarySwitch,
                    vol,
                    window_s,
                    max_gap_ns,
                    "of the probe thread",
                ));
            }
        }
        Err(e) => warnings.push(format!("context switches not attributed: {e}")),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{parse_interrupts, parse_softirqs, parse_stat_steal};
    use crate::GoodBadUgly;

    const INTERRUPTS: &str = include_str!("../tests/fixtures/interrupts.txt");
    const SOFTIRQS: &str = include_str!("../tests/fixtures/softirqs.txt");
    const STAT: &str = include_str!("../tests/fixtures/stat.txt");

    #[test]
    fn attribution_from_fixture_deltas() {
        let before = SystemCounters {
            interrupts: Some(parse_interrupts(INTERRUPTS).unwrap()),
            softirqs: Some(parse_softirqs(SOFTIRQS).unwrap()),
            steal: Some(parse_stat_steal(STAT).unwrap()),
        };
        let after = SystemCounters {
            // CPU 0: +500 LOC, +3 TIMER softirqs, +4 steal ticks
            interrupts: Some(parse_interrupts(&INTERRUPTS.replace("749888", "750388")).unwrap()),
            softirqs: Some(parse_softirqs(&SOFTIRQS.replace("104825", "104828")).unwrap()),
            steal: Some(parse_stat_steal(&STAT.replace("3526 100 0 0", "3526 104 0 0")).unwrap()),
        };
        let ctxt = Ok((
            CtxSwitches::default(),
            CtxSwitches {
                voluntary: 0,
                nonvoluntary: 2,
            },
        ));
        let mut w = Vec::new();
        // longest gap 50 µs: the Ugly sources are capped at Bad
        let mut c = attribute(0, &before, &after, &ctxt, 2.0, 50_000.0, &mut w);
        rank(&mut c);
        let got: Vec<(&str, u64, GoodBadUgly)> = c
            .iter()
            .map(|c| (c.source.as_str(), c.delta, c.class))
            .collect();
        assert_eq!(
            got,
            [
                ("Local timer interrupts (LOC)", 500, GoodBadUgly::Bad),
                ("steal", 4, GoodBadUgly::Bad),
                ("softirq TIMER", 3, GoodBadUgly::Bad),
                ("involuntary context switches", 2, GoodBadUgly::Bad),
            ]
        );
        assert_eq!(c[0].per_s, 250.0);
        assert!(w.is_empty());
        // CPU 1 saw nothing but the switches; an unreadable status file is a warning
        let c = attribute(1, &before, &after, &Err("gone".into()), 2.0, 0.0, &mut w);
        assert!(c.is_empty());
        assert_eq!(w.len(), 1);
    }
}
