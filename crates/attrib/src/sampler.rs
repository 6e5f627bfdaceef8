//! The sampler: a [`Probe`] reads the counters once per call; a [`Sampler`] calls it every
//! interval on its own thread while a run lasts.
//!
//! Cost per sample: two small files per server thread (schedstat, status), plus /proc/stat,
//! /proc/interrupts and /proc/softirqs, all read into one reused buffer. Measured on the 2-CPU
//! development VM (`examples/sample_cost.rs`): about 270 µs per sample with 5 server threads,
//! of which /proc/interrupts alone is about 100 µs (the kernel formats every IRQ line), i.e.
//! under 3 % of one CPU at the default 10 ms. The sampler thread pins itself to CPUs that are
//! not the server's, when there are any, so that this cost does not land on the server.
//!
//! "Other tasks' CPU time" is an approximation chosen for cost: reading every process's
//! /proc/PID/stat each 10 ms costs milliseconds of CPU on a busy host, so instead it is the
//! busy time (user + nice + system) of the server's CPUs in /proc/stat minus the CPU time of
//! the server's threads (schedstat). It is exact when the server is pinned to those CPUs; it has
//! the tick granularity of /proc/stat (typically 10 ms per CPU), so single intervals are noisy
//! (negative estimates are clipped to 0) and only averages over many intervals mean much. When
//! the kernel has /proc/schedstat (CONFIG_SCHEDSTATS), its per-CPU run time in ns replaces the
//! ticks.

use crate::procfs::{self, TaskSchedstat};
use crate::{AttribError, Series, SourceKind, SourceSeries};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What to sample.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SamplerConfig {
    /// Where /proc is mounted (tests point this at a fixture tree).
    pub proc_root: PathBuf,
    /// Server processes: all their threads are sampled (threads that appear later too).
    pub server_pids: Vec<u32>,
    /// Threads of this very process (an in-process server), read under `proc_root/self/task`.
    pub server_tids: Vec<u32>,
    /// The server's CPUs; empty means every CPU.
    pub cpus: Vec<usize>,
    pub interval: Duration,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            proc_root: PathBuf::from("/proc"),
            server_pids: Vec::new(),
            server_tids: Vec::new(),
            cpus: Vec::new(),
            interval: Duration::from_millis(10),
        }
    }
}

// Indices of the fixed sources; the softirq types follow.
const RUN_DELAY: usize = 0;
const INVOL: usize = 1;
const VOL: usize = 2;
const HARDIRQ: usize = 3;
const STEAL: usize = 4;
const OTHER: usize = 5;
const FIXED: [(&str, SourceKind, &str); 6] = [
    ("run-queue wait", SourceKind::Scheduling, "ns"),
    (
        "involuntary context switches",
        SourceKind::Scheduling,
        "count",
    ),
    (
        "voluntary context switches",
        SourceKind::Scheduling,
        "count",
    ),
    ("hard interrupts", SourceKind::Interrupts, "count"),
    ("steal time", SourceKind::Background, "ns"),
    ("other tasks' CPU time", SourceKind::Background, "ns"),
];

/// Cumulative system-wide counters restricted to the server's CPUs.
#[derive(Clone, Debug, Default)]
struct SysCounters {
    hardirq: u64,
    steal_ticks: u64,
    busy_ns: u64,
    softirq: Vec<u64>,
}

#[derive(Clone, Copy, Debug)]
struct TaskCounters {
    sched: TaskSchedstat,
    vol: u64,
    invol: u64,
    seen: u64,
}

/// Reads the counters on demand; a [`Sampler`] drives it from a thread, tests call it directly.
pub struct Probe {
    cfg: SamplerConfig,
    buf: String,
    tick_ns: f64,
    softirq_names: Vec<String>,
    /// CPU ids the host has (from /proc/stat).
    host_cpus: Vec<usize>,
    /// /proc/schedstat exists: per-CPU run time in ns instead of ticks.
    has_schedstat: bool,
    tasks: HashMap<(u32, u32), TaskCounters>,
    prev_sys: Option<SysCounters>,
    generation: u64,
    series: Series,
}

fn read_into(path: &Path, buf: &mut String) -> Result<(), AttribError> {
    buf.clear();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_string(buf))
        .map(|_| ())
        .map_err(|source| AttribError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// CLOCK_MONOTONIC now, ns: the clock the run's records are relative to.
pub fn mono_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer we pass; CLOCK_MONOTONIC
    // always exists on Linux. std's Instant does not expose its raw value, hence libc.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn clock_tick_ns() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1e9 / hz as f64
    } else {
        1e7
    }
}

impl Probe {
    /// Check the configuration against `proc_root` (it has a readable `stat`, the CPUs exist,
    /// the processes and threads exist) and prepare the series; no sample is taken yet.
    pub fn new(cfg: &SamplerConfig) -> Result<Probe, AttribError> {
        let root = &cfg.proc_root;
        let mut buf = String::with_capacity(16 * 1024);
        let stat = root.join("stat");
        read_into(&stat, &mut buf)?;
        let known: Vec<usize> = procfs::parse_stat_cpus(&buf)
            .iter()
            .map(|c| c.cpu)
            .collect();
        if known.is_empty() {
            return Err(AttribError::Format { path: stat });
        }
        if let Some(&cpu) = cfg.cpus.iter().find(|c| !known.contains(c)) {
            return Err(AttribError::UnknownCpu { cpu, known });
        }
        let host_cpus = known;
        for &pid in &cfg.server_pids {
            if !root.join(pid.to_string()).join("task").is_dir() {
                return Err(AttribError::NoProcess {
                    pid,
                    root: root.clone(),
                });
            }
        }
        for &tid in &cfg.server_tids {
            if !root.join("self/task").join(tid.to_string()).is_dir() {
                return Err(AttribError::NoThread {
                    tid,
                    root: root.clone(),
                });
            }
        }
        // Softirq types are fixed by the kernel; a host without the file gets none.
        let softirq_names = match read_into(&root.join("softirqs"), &mut buf) {
            Ok(()) => procfs::parse_cpu_table(&buf)
                .map(|t| t.rows.into_iter().map(|(n, _)| n).collect())
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let mut sources: Vec<SourceSeries> = FIXED
            .iter()
            .map(|(name, kind, unit)| SourceSeries {
                name: name.to_string(),
                kind: *kind,
                unit: unit.to_string(),
                deltas: Vec::new(),
            })
            .collect();
        for n in &softirq_names {
            sources.push(SourceSeries {
                name: format!("softirq {n}"),
                kind: SourceKind::SoftIrq,
                unit: "count".into(),
                deltas: Vec::new(),
            });
        }
        Ok(Probe {
            cfg: cfg.clone(),
            buf,
            tick_ns: clock_tick_ns(),
            softirq_names,
            host_cpus,
            has_schedstat: !procfs::parse_schedstat_cpus(
                &std::fs::read_to_string(root.join("schedstat")).unwrap_or_default(),
            )
            .is_empty(),
            tasks: HashMap::new(),
            prev_sys: None,
            generation: 0,
            series: Series {
                t_mono_ns: Vec::new(),
                sources,
                server_cpu_ns: Vec::new(),
            },
        })
    }

    /// Directories of the server's threads now: (pid or 0 for our own process, tid, path).
    fn task_dirs(&self) -> Vec<(u32, u32, PathBuf)> {
        let root = &self.cfg.proc_root;
        let mut out = Vec::new();
        for &pid in &self.cfg.server_pids {
            let dir = root.join(pid.to_string()).join("task");
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue; // the process exited: its threads simply stop contributing
            };
            for e in rd.flatten() {
                if let Some(tid) = e.file_name().to_str().and_then(|s| s.parse().ok()) {
                    out.push((pid, tid, e.path()));
                }
            }
        }
        for &tid in &self.cfg.server_tids {
            out.push((0, tid, root.join("self/task").join(tid.to_string())));
        }
        out
    }

    fn read_task(&mut self, dir: &Path) -> Option<TaskCounters> {
        read_into(&dir.join("schedstat"), &mut self.buf).ok()?;
        let sched = procfs::parse_task_schedstat(&self.buf)?;
        read_into(&dir.join("status"), &mut self.buf).ok()?;
        let (vol, invol) = procfs::parse_ctxt_switches(&self.buf)?;
        Some(TaskCounters {
            sched,
            vol,
            invol,
            seen: self.generation,
        })
    }

    fn read_sys(&mut self) -> SysCounters {
        let root = self.cfg.proc_root.clone();
        let cpus = self.cfg.cpus.clone();
        // A file that cannot be read this time keeps its previous value: its growth shows up
        // in the next interval that reads it.
        let mut sys = self.prev_sys.clone().unwrap_or_default();
        if read_into(&root.join("stat"), &mut self.buf).is_ok() {
            let per = procfs::parse_stat_cpus(&self.buf);
            let mine = per
                .iter()
                .filter(|c| cpus.is_empty() || cpus.contains(&c.cpu));
            sys.steal_ticks = mine.clone().map(|c| c.steal).sum();
            if !self.has_schedstat {
                sys.busy_ns = (mine.map(|c| c.busy).sum::<u64>() as f64 * self.tick_ns) as u64;
            }
        }
        if self.has_schedstat && read_into(&root.join("schedstat"), &mut self.buf).is_ok() {
            sys.busy_ns = procfs::parse_schedstat_cpus(&self.buf)
                .iter()
                .filter(|(c, _)| cpus.is_empty() || cpus.contains(c))
                .map(|(_, ns)| ns)
                .sum();
        }
        if read_into(&root.join("interrupts"), &mut self.buf).is_ok() {
            if let Some(t) = procfs::parse_cpu_table(&self.buf) {
                sys.hardirq = t.total(&cpus);
            }
        }
        sys.softirq.resize(self.softirq_names.len(), 0);
        if read_into(&root.join("softirqs"), &mut self.buf).is_ok() {
            if let Some(t) = procfs::parse_cpu_table(&self.buf) {
                for (name, row) in &t.rows {
                    if let Some(i) = self.softirq_names.iter().position(|n| n == name) {
                        sys.softirq[i] = t.row_sum(row, &cpus);
                    }
                }
            }
        }
        sys
    }

    /// Read every counter now (`t_mono_ns` is the instant to file it under). The first call
    /// sets the baseline; each later call closes one interval. Threads that appear are counted
    /// from the sample that first sees them; threads that vanish stop contributing.
    pub fn sample(&mut self, t_mono_ns: u64) {
        self.generation += 1;
        let mut d = vec![0.0; self.series.sources.len()];
        let mut server_cpu = 0.0;
        for (pid, tid, dir) in self.task_dirs() {
            let Some(now) = self.read_task(&dir) else {
                continue;
            };
            if let Some(prev) = self.tasks.insert((pid, tid), now) {
                d[RUN_DELAY] += now
                    .sched
                    .run_delay_ns
                    .saturating_sub(prev.sched.run_delay_ns) as f64;
                d[INVOL] += now.invol.saturating_sub(prev.invol) as f64;
                d[VOL] += now.vol.saturating_sub(prev.vol) as f64;
                server_cpu += now.sched.runtime_ns.saturating_sub(prev.sched.runtime_ns) as f64;
            }
        }
        let generation = self.generation;
        self.tasks.retain(|_, t| t.seen == generation);
        let sys = self.read_sys();
        let first = self.prev_sys.is_none();
        if let Some(prev) = &self.prev_sys {
            d[HARDIRQ] = sys.hardirq.saturating_sub(prev.hardirq) as f64;
            d[STEAL] = sys.steal_ticks.saturating_sub(prev.steal_ticks) as f64 * self.tick_ns;
            let busy = sys.busy_ns.saturating_sub(prev.busy_ns) as f64;
            d[OTHER] = (busy - server_cpu).max(0.0);
            for (i, (now, before)) in sys.softirq.iter().zip(&prev.softirq).enumerate() {
                d[FIXED.len() + i] = now.saturating_sub(*before) as f64;
            }
        }
        self.prev_sys = Some(sys);
        self.series.t_mono_ns.push(t_mono_ns);
        if !first {
            for (s, v) in self.series.sources.iter_mut().zip(d) {
                s.deltas.push(v);
            }
            self.series.server_cpu_ns.push(server_cpu);
        }
    }

    /// The CPUs a sampler should run on so as not to disturb the server: the host's CPUs other
    /// than the server's (empty when the server has them all).
    pub fn spare_cpus(&self) -> Vec<usize> {
        if self.cfg.cpus.is_empty() {
            return Vec::new();
        }
        let spare = self.host_cpus.iter().copied();
        spare.filter(|c| !self.cfg.cpus.contains(c)).collect()
    }

    /// The series recorded so far.
    pub fn finish(self) -> Series {
        self.series
    }
}

/// Restrict the calling thread to `cpus` (no-op when empty; errors ignored, see the caller).
fn pin_to(cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET only writes inside it (ids
    // beyond its capacity are skipped first); sched_setaffinity reads it. std has no API for
    // affinity, hence libc.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let capacity = 8 * std::mem::size_of::<libc::cpu_set_t>();
        for &c in cpus.iter().filter(|&&c| c < capacity) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A probe sampled every interval on its own thread, from [`Sampler::start`] to
/// [`Sampler::stop`].
pub struct Sampler {
    stop_tx: mpsc::Sender<()>,
    handle: JoinHandle<Series>,
}

impl Sampler {
    /// Validate the configuration, take the baseline sample, and start the thread.
    pub fn start(cfg: SamplerConfig) -> Result<Sampler, AttribError> {
        if cfg.interval.is_zero() {
            return Err(AttribError::Interval);
        }
        let interval = cfg.interval;
        let mut probe = Probe::new(&cfg)?;
        probe.sample(mono_now_ns());
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("attrib-sampler".into())
            .spawn(move || {
                // Keep the sampler itself off the server's CPUs, where it would be one more
                // background task. Best effort: a fixture root may name CPUs this host lacks.
                pin_to(&probe.spare_cpus());
                let step = interval.as_nanos() as u64;
                let mut next = mono_now_ns() + step;
                loop {
                    let now = mono_now_ns();
                    let wait = Duration::from_nanos(next.saturating_sub(now));
                    match stop_rx.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            probe.sample(mono_now_ns());
                            // Absolute deadlines, so the period does not drift; after a long
                            // stall, resume from now rather than sampling in a burst.
                            next = (next + step).max(mono_now_ns());
                        }
                        // Stopped (or the Sampler was dropped): close the last interval.
                        _ => {
                            probe.sample(mono_now_ns());
                            return probe.finish();
                        }
                    }
                }
            })
            .map_err(AttribError::Thread)?;
        Ok(Sampler { stop_tx, handle })
    }

    /// Stop the thread promptly (it is woken, not waited out), and return what it recorded.
    pub fn stop(self) -> Series {
        let _ = self.stop_tx.send(());
        // The thread only panics on a bug; then there is nothing to report.
        self.handle.join().unwrap_or_default()
    }
}
