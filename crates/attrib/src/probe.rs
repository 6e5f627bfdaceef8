//! The probe: reads the counters behind the sources of tail latency once per call. A
//! [`Sampler`](crate::Sampler) calls it every interval from a thread of its own on a spare CPU;
//! a [`PacedProbe`](crate::PacedProbe) is called from the load generator's own loop when the
//! host has no spare CPU; tests call it directly on fixture trees. What a sample reads, what
//! each read costs, and how counters read less often are filed: see [`Probe`].

use crate::config::{clock_tick_ns, mono_now_ns, SampleCost, SamplerConfig};
use crate::procfile::{ProcFile, Records};
use crate::procfs::{self, TaskSchedstat};
use crate::rows::{spread, Counter, Rows};
use crate::{AttribError, Series, SourceKind, SourceSeries};
use std::path::Path;

// Columns of the fixed sources; the softirq types follow, then two internal columns.
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

/// The pid under which threads of this process (`server_tids`) are kept.
const OWN: u32 = 0;

#[derive(Debug)]
struct Task {
    pid: u32,
    tid: u32,
    schedstat: ProcFile,
    status: ProcFile,
    runtime: Counter,
    run_delay: Counter,
    vol: Counter,
    invol: Counter,
    /// The task-directory scan that last listed it.
    listed: u64,
}

impl Task {
    fn open(dir: &Path, pid: u32, tid: u32, scan: u64) -> std::io::Result<Task> {
        Ok(Task {
            pid,
            tid,
            schedstat: ProcFile::open(&dir.join("schedstat"), Records::One)?,
            status: ProcFile::open(&dir.join("status"), Records::One)?,
            runtime: Counter::default(),
            run_delay: Counter::default(),
            vol: Counter::default(),
            invol: Counter::default(),
            listed: scan,
        })
    }
}

/// The server's CPUs, as a lookup by CPU id.
#[derive(Debug)]
struct CpuSel {
    all: bool,
    set: Vec<bool>,
}

impl CpuSel {
    fn new(cpus: &[usize]) -> CpuSel {
        let mut set = vec![false; cpus.iter().max().map_or(0, |m| m + 1)];
        for &c in cpus {
            set[c] = true;
        }
        CpuSel {
            all: cpus.is_empty(),
            set,
        }
    }

    fn has(&self, cpu: usize) -> bool {
        self.all || self.set.get(cpu).copied().unwrap_or(false)
    }
}

#[derive(Debug, Default)]
struct CostAcc {
    samples: u64,
    skipped: u64,
    total_ns: u64,
    max_ns: u64,
}

/// Reads the counters on demand.
///
/// **Cost.** A sample is meant to fit in a gap between two sends of the load generator, so it
/// reads little, and nothing twice: every file is opened once and re-read with `pread` into one
/// reused buffer (module `procfile`), parsed in place, and the deltas go into storage that
/// never reallocates in one piece (module `rows`). Costs of the reads on the development VM
/// (kernel 6.18, 2 vCPUs; `cargo bench -p attrib --bench sample` has the totals):
///
/// | read | cost | in |
/// |---|---|---|
/// | a server thread's schedstat (run time, run-queue wait) | 0.6 µs | every sample |
/// | /proc/softirqs | 2.4 µs | every sample |
/// | /proc/schedstat, when the kernel has it | — | every sample |
/// | a server thread's status (context switches) | 6.6 µs | full samples |
/// | /proc/stat (steal, busy ticks) | 6.4 µs | full samples |
/// | /proc/interrupts | 58 µs | full samples |
/// | re-listing the server's task directories (new threads) | 4 µs | full samples |
///
/// A *full* sample is every [`SamplerConfig::slow_every`]-th (default 10: every 100 ms at the
/// 10 ms interval); the others are *light*. Why these are the expensive ones, and why nothing
/// cheaper replaces them: the kernel formats /proc/interrupts by walking every possible IRQ
/// number, hundreds of empty ones, to reach the per-CPU timer, IPI and TLB-shootdown lines at
/// its end; the `intr` line of /proc/stat (which is most of that file's cost, for the same
/// reason) is system-wide only; /sys/kernel/irq/N/per_cpu_count has the device IRQs but not
/// the architecture's; a thread's `sched` file costs nearly what `status` does; taskstats
/// needs CAP_NET_ADMIN. /proc/stat counts in USER_HZ ticks (10 ms), so read every 10 ms it
/// moves by 0 or 1 tick per CPU: reading it every 100 ms loses little resolution that was
/// there.
///
/// **Deltas of counters read less often, or not read this time.** A counter's growth between
/// two readings is *spread* over the intervals in between, in proportion to their lengths (the
/// rate over the span, not a spike in its last interval: `explain` compares intervals, and a
/// 100 ms burst filed under one 10 ms interval would point at the wrong requests). So "hard
/// interrupts", the two context-switch series, "steal time" and (without /proc/schedstat)
/// "other tasks' CPU time" have the resolution of `slow_every` intervals; run-queue wait, the
/// server's CPU time and the softirqs have one interval's. The same rule covers a file that
/// could not be read or parsed once: its growth is spread over the intervals it missed.
///
/// "Other tasks' CPU time" is an approximation chosen for cost: reading every process's
/// /proc/PID/stat each 10 ms costs milliseconds of CPU on a busy host, so instead it is the
/// busy time (user + nice + system) of the server's CPUs in /proc/stat minus the CPU time of
/// the server's threads (schedstat). It is exact when the server is pinned to those CPUs; it has
/// the tick granularity of /proc/stat (typically 10 ms per CPU), so single intervals are noisy
/// (negative estimates are clipped to 0) and only averages over many intervals mean much. When
/// the kernel has /proc/schedstat (CONFIG_SCHEDSTATS), its per-CPU run time in ns replaces the
/// ticks.
pub struct Probe {
    cfg: SamplerConfig,
    /// One read buffer for every file; its contents are scratch.
    buf: Vec<u8>,
    /// The CPU of each column of the last per-CPU table read (reused).
    cols: Vec<usize>,
    sel: CpuSel,
    tick_ns: f64,
    host_cpus: Vec<usize>,
    softirq_names: Vec<String>,
    stat: ProcFile,
    /// /proc/schedstat when it has per-CPU lines: run time in ns instead of ticks.
    schedstat: Option<ProcFile>,
    softirqs: Option<ProcFile>,
    interrupts: Option<ProcFile>,
    steal: Counter,
    busy: Counter,
    hardirq: Counter,
    softirq: Vec<Counter>,
    /// Sorted by (pid, tid).
    tasks: Vec<Task>,
    scan: u64,
    times: Rows<u64>,
    /// Per interval: the sources' deltas, then the server's CPU time and the CPUs' busy time.
    rows: Rows<f64>,
    since_full: u32,
    last_full: bool,
    last_ns: u64,
    cost: CostAcc,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> AttribError + '_ {
    move |source| AttribError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An optional system file: absent, unreadable or unparsable means "not sampled".
fn open_optional(path: &Path, records: Records, buf: &mut Vec<u8>) -> Option<(ProcFile, String)> {
    let f = ProcFile::open(path, records).ok()?;
    let text = f.read(buf).ok()?.to_string();
    Some((f, text))
}

impl Probe {
    /// Check the configuration against `proc_root` (it has a readable `stat`, the CPUs exist,
    /// the processes and threads exist), open the files, and prepare the series; no sample is
    /// taken yet.
    pub fn new(cfg: &SamplerConfig) -> Result<Probe, AttribError> {
        if cfg.slow_every == 0 {
            return Err(AttribError::SlowEvery);
        }
        let root = &cfg.proc_root;
        let mut buf = Vec::new();
        let stat_path = root.join("stat");
        let stat = ProcFile::open(&stat_path, Records::One).map_err(io_err(&stat_path))?;
        let text = stat.read(&mut buf).map_err(io_err(&stat_path))?;
        let host_cpus: Vec<usize> = procfs::stat_cpus(text).map(|c| c.cpu).collect();
        if host_cpus.is_empty() {
            return Err(AttribError::Format { path: stat_path });
        }
        if let Some(&cpu) = cfg.cpus.iter().find(|c| !host_cpus.contains(c)) {
            return Err(AttribError::UnknownCpu {
                cpu,
                known: host_cpus,
            });
        }
        for &pid in &cfg.server_pids {
            if !root.join(pid.to_string()).join("task").is_dir() {
                return Err(AttribError::NoProcess {
                    pid,
                    root: root.clone(),
                });
            }
        }
        let mut tasks = Vec::new();
        for &tid in &cfg.server_tids {
            let dir = root.join("self/task").join(tid.to_string());
            let task = Task::open(&dir, OWN, tid, 0).map_err(|_| AttribError::NoThread {
                tid,
                root: root.clone(),
            })?;
            tasks.push(task);
        }
        tasks.sort_by_key(|t| (t.pid, t.tid));
        tasks.dedup_by_key(|t| (t.pid, t.tid));
        // Softirq types are fixed by the kernel; a host without the file gets none.
        let softirqs = open_optional(&root.join("softirqs"), Records::One, &mut buf);
        let softirq_names: Vec<String> = softirqs
            .as_ref()
            .and_then(|(_, text)| procfs::parse_cpu_table(text))
            .map(|t| t.rows.into_iter().map(|(n, _)| n).collect())
            .unwrap_or_default();
        let schedstat = open_optional(&root.join("schedstat"), Records::Many, &mut buf)
            .filter(|(_, text)| procfs::schedstat_cpus(text).next().is_some());
        let interrupts = ProcFile::open(&root.join("interrupts"), Records::Many).ok();
        let width = FIXED.len() + softirq_names.len() + 2;
        let mut probe = Probe {
            cfg: cfg.clone(),
            buf,
            cols: Vec::with_capacity(host_cpus.len()),
            sel: CpuSel::new(&cfg.cpus),
            tick_ns: clock_tick_ns(),
            host_cpus,
            softirq: vec![Counter::default(); softirq_names.len()],
            softirq_names,
            stat,
            schedstat: schedstat.map(|(f, _)| f),
            softirqs: softirqs.map(|(f, _)| f),
            interrupts,
            steal: Counter::default(),
            busy: Counter::default(),
            hardirq: Counter::default(),
            tasks,
            scan: 0,
            times: Rows::new(1),
            rows: Rows::new(width),
            since_full: 0,
            last_full: false,
            last_ns: 0,
            cost: CostAcc::default(),
        };
        probe.rescan();
        Ok(probe)
    }

    /// The CPU ids the host has (from `stat` under the root).
    pub fn host_cpus(&self) -> &[usize] {
        &self.host_cpus
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// The CPUs a sampler thread may run on without disturbing the server or the load
    /// generator ([`spare_cpus`](crate::spare_cpus) of this host and configuration).
    pub fn spare_cpus(&self) -> Vec<usize> {
        crate::spare_cpus(&self.host_cpus, &self.cfg.cpus, &self.cfg.avoid_cpus)
    }

    fn col_server_cpu(&self) -> usize {
        FIXED.len() + self.softirq_names.len()
    }

    /// List the server processes' task directories: open the threads that appeared, drop
    /// those that are gone. Allocates (paths, directory entries), hence only in full samples.
    fn rescan(&mut self) {
        self.scan += 1;
        let scan = self.scan;
        for &pid in &self.cfg.server_pids {
            let dir = self.cfg.proc_root.join(pid.to_string()).join("task");
            // A process that exited lists nothing: its threads are dropped below.
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse().ok()) else {
                    continue;
                };
                match self
                    .tasks
                    .binary_search_by_key(&(pid, tid), |t| (t.pid, t.tid))
                {
                    Ok(i) => self.tasks[i].listed = scan,
                    Err(i) => {
                        // A thread that exits while being opened is simply not sampled.
                        if let Ok(t) = Task::open(&e.path(), pid, tid, scan) {
                            self.tasks.insert(i, t);
                        }
                    }
                }
            }
        }
        self.tasks.retain(|t| t.pid == OWN || t.listed == scan);
    }

    /// Whether the next [`sample`](Probe::sample) will be a full one (the baseline is).
    pub(crate) fn next_is_full(&self) -> bool {
        self.times.len() == 0 || self.since_full + 1 >= self.cfg.slow_every
    }

    /// Read the counters now (`t_mono_ns` is the instant to file it under): a full sample
    /// every `slow_every`-th call, a light one otherwise. The first call sets the baseline;
    /// each later call closes one interval. Threads that appear are counted from the full
    /// sample that first sees them; threads that vanish stop contributing.
    pub fn sample(&mut self, t_mono_ns: u64) {
        let full = self.next_is_full();
        self.take(t_mono_ns, full);
    }

    /// A full sample whatever the schedule: the closing sample of a run, so that every
    /// counter's growth is filed under the run's own intervals.
    pub fn sample_full(&mut self, t_mono_ns: u64) {
        self.take(t_mono_ns, true);
    }

    fn take(&mut self, t_mono_ns: u64, full: bool) {
        let start = mono_now_ns();
        let k = self.times.len();
        self.times.push_default();
        if let Some(t) = self.times.get_mut(k) {
            t[0] = t_mono_ns;
        }
        if k > 0 {
            self.rows.push_default();
            if full {
                self.rescan();
            }
        }
        self.read_light(k);
        if full {
            self.read_slow(k);
            self.since_full = 0;
        } else {
            self.since_full = self.since_full.saturating_add(1);
        }
        self.last_full = full;
        self.last_ns = mono_now_ns().saturating_sub(start);
        if k > 0 {
            self.cost.samples += 1;
            self.cost.total_ns += self.last_ns;
            self.cost.max_ns = self.cost.max_ns.max(self.last_ns);
        }
    }

    /// Every sample: the threads' schedstat, /proc/schedstat, /proc/softirqs.
    fn read_light(&mut self, k: usize) {
        let server_cpu = self.col_server_cpu();
        let (rows, times, buf) = (&mut self.rows, &self.times, &mut self.buf);
        // A thread whose file cannot be read has exited (ESRCH on an fd of a dead task).
        self.tasks.retain_mut(|task| {
            let Some(s) = task
                .schedstat
                .read(buf)
                .ok()
                .and_then(procfs::parse_task_schedstat)
            else {
                return false;
            };
            let TaskSchedstat {
                runtime_ns,
                run_delay_ns,
                ..
            } = s;
            if let Some(g) = task.runtime.update(runtime_ns, k) {
                spread(rows, times, server_cpu, g, k, 1.0);
            }
            if let Some(g) = task.run_delay.update(run_delay_ns, k) {
                spread(rows, times, RUN_DELAY, g, k, 1.0);
            }
            true
        });
        let busy_col = server_cpu + 1;
        // A system file that cannot be read or parsed this time keeps its counters: its
        // growth is spread over the intervals it missed at the next reading.
        if let Some(Ok(text)) = self.schedstat.as_ref().map(|f| f.read(&mut self.buf)) {
            let mine = procfs::schedstat_cpus(text).filter(|(c, _)| self.sel.has(*c));
            let busy = mine.map(|(_, ns)| ns).sum();
            if let Some(g) = self.busy.update(busy, k) {
                spread(&mut self.rows, &self.times, busy_col, g, k, 1.0);
            }
        }
        if let Some(Ok(text)) = self.softirqs.as_ref().map(|f| f.read(&mut self.buf)) {
            let Some(table) = procfs::cpu_table_rows(text, &mut self.cols) else {
                return;
            };
            for (i, row) in table.enumerate() {
                // The kernel prints the types in a fixed order: try the same place first.
                let at = match self.softirq_names.get(i) {
                    Some(n) if n == row.name => Some(i),
                    _ => self.softirq_names.iter().position(|n| n == row.name),
                };
                let Some(at) = at else { continue };
                let sum = row
                    .counts()
                    .zip(&self.cols)
                    .filter(|(_, c)| self.sel.has(**c))
                    .map(|(v, _)| v)
                    .sum();
                if let Some(g) = self.softirq[at].update(sum, k) {
                    spread(&mut self.rows, &self.times, FIXED.len() + at, g, k, 1.0);
                }
            }
        }
    }

    /// Full samples only: the threads' context switches, /proc/stat and /proc/interrupts.
    fn read_slow(&mut self, k: usize) {
        let (rows, times, buf) = (&mut self.rows, &self.times, &mut self.buf);
        self.tasks.retain_mut(|task| {
            let Some((vol, invol)) = task
                .status
                .read(buf)
                .ok()
                .and_then(procfs::parse_ctxt_switches)
            else {
                return false;
            };
            if let Some(g) = task.vol.update(vol, k) {
                spread(rows, times, VOL, g, k, 1.0);
            }
            if let Some(g) = task.invol.update(invol, k) {
                spread(rows, times, INVOL, g, k, 1.0);
            }
            true
        });
        let busy_col = self.col_server_cpu() + 1;
        if let Ok(text) = self.stat.read(&mut self.buf) {
            let (mut steal, mut busy, mut seen) = (0, 0, false);
            for c in procfs::stat_cpus(text).filter(|c| self.sel.has(c.cpu)) {
                steal += c.steal;
                busy += c.busy;
                seen = true;
            }
            if seen {
                if let Some(g) = self.steal.update(steal, k) {
                    spread(&mut self.rows, &self.times, STEAL, g, k, self.tick_ns);
                }
                if self.schedstat.is_none() {
                    if let Some(g) = self.busy.update(busy, k) {
                        spread(&mut self.rows, &self.times, busy_col, g, k, self.tick_ns);
                    }
                }
            }
        }
        if let Some(Ok(text)) = self.interrupts.as_ref().map(|f| f.read(&mut self.buf)) {
            let Some(table) = procfs::cpu_table_rows(text, &mut self.cols) else {
                return;
            };
            let mut total = 0;
            for row in table {
                let mine = row
                    .counts()
                    .zip(&self.cols)
                    .filter(|(_, c)| self.sel.has(**c));
                total += mine.map(|(v, _)| v).sum::<u64>();
            }
            if let Some(g) = self.hardirq.update(total, k) {
                spread(&mut self.rows, &self.times, HARDIRQ, g, k, 1.0);
            }
        }
    }

    /// What the samples so far cost (`skipped` is filled in by whoever paces the samples).
    pub fn cost(&self) -> SampleCost {
        let c = &self.cost;
        SampleCost {
            samples: c.samples,
            skipped: c.skipped,
            mean_ns: if c.samples == 0 {
                0.0
            } else {
                c.total_ns as f64 / c.samples as f64
            },
            max_ns: c.max_ns,
        }
    }

    pub(crate) fn add_skipped(&mut self, intervals: u64) {
        self.cost.skipped += intervals;
    }

    /// Duration of the last sample, ns, and whether it was full.
    pub(crate) fn last_sample(&self) -> (u64, bool) {
        (self.last_ns, self.last_full)
    }

    /// The series recorded so far. When the last sample was a light one, the slow counters
    /// are read now and their growth since the last full sample is spread over the trailing
    /// intervals (so it includes whatever happened since the last sample: close with
    /// [`sample_full`](Probe::sample_full) to avoid that).
    pub fn finish(mut self) -> Series {
        let n = self.times.len();
        if n >= 2 && !self.last_full {
            self.read_slow(n - 1);
        }
        let server_cpu = self.col_server_cpu();
        let server_cpu_ns = self.rows.column(server_cpu);
        let busy = self.rows.column(server_cpu + 1);
        let mut sources: Vec<SourceSeries> = FIXED
            .iter()
            .map(|(name, kind, unit)| (name.to_string(), *kind, unit.to_string()))
            .chain(
                self.softirq_names
                    .iter()
                    .map(|n| (format!("softirq {n}"), SourceKind::SoftIrq, "count".into())),
            )
            .enumerate()
            .map(|(col, (name, kind, unit))| SourceSeries {
                name,
                kind,
                unit,
                deltas: self.rows.column(col),
            })
            .collect();
        sources[OTHER].deltas = busy
            .iter()
            .zip(&server_cpu_ns)
            .map(|(b, s)| (b - s).max(0.0))
            .collect();
        Series {
            t_mono_ns: self.times.column(0),
            sources,
            server_cpu_ns,
        }
    }
}
