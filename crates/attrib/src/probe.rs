//! The probe: reads the counters behind the sources of tail latency once per call. A
//! [`Sampler`](crate::Sampler) calls it every interval from a thread of its own on a spare CPU;
//! a [`PacedProbe`](crate::PacedProbe) is called from the load generator's own loop when the
//! host has no spare CPU; tests call it directly on fixture trees. What a sample reads, what
//! each read costs, and how counters read less often are filed: see [`Probe`].

use crate::config::{clock_tick_ns, mono_now_ns, SampleCost, SamplerConfig};
use crate::procfile::{ProcFile, Records};
use crate::procfs::{self, TaskSchedstat};
use crate::rows::{rescale, spread, Counter, Rows};
use crate::schedule::{Piece, Pieces};
use crate::taskstats::Taskstats;
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

/// In the lean mode, a thread that did not run for this many samples in a row is read once per
/// cycle (with its status) until it runs again.
const QUIET: u32 = 3;

/// The system-wide count of hard interrupts: the first number of /proc/stat's `intr` line.
fn intr_total(stat: &str) -> Option<u64> {
    let at = if stat.starts_with("intr ") {
        0
    } else {
        stat.find("\nintr ")? + 1
    };
    let digits = stat[at + 5..].trim_start_matches(' ');
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Per-CPU hard-interrupt counts from a source cheaper than /proc/interrupts, meaning the same:
/// for each CPU, the sum of the per-CPU rows of /proc/interrupts (device lines and the
/// architecture's vectors) but TLB, which counts flushes, not interrupts (each shootdown's
/// interrupt is a CAL). Crate `ebpf`'s `HardIrqCounter` is one (its counts are read from
/// memory shared with the kernel, no system call: well under 1 µs, against 60–90 µs for the
/// file); whoever builds the probe injects it ([`Probe::set_hard_irq_counts`]), so that this
/// crate does not depend on libbpf.
pub trait HardIrqCounts: Send {
    /// The counts since some fixed origin, indexed by CPU id, into `per_cpu` (every element
    /// is written; CPUs the source does not know get 0). An error means "not read this time".
    fn read(&mut self, per_cpu: &mut [u64]) -> Result<(), String>;
    /// Its name in the run's report (`SampleCost::hard_irq_source`).
    fn name(&self) -> &'static str;
    /// What counting costs outside the sampler's own calls (programs the kernel runs on each
    /// interrupt): (runs, ns) so far, when measured.
    fn counting_cost(&self) -> Option<(u64, u64)> {
        None
    }
}

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
    /// Samples in a row in which it did not run (see [`QUIET`]).
    quiet: u32,
    /// (run time, timeslices) of its schedstat at the last reading, and at the reading that
    /// preceded its last status reading: while they are equal (and it has run at all), its
    /// context-switch counts have not moved and its status need not be read (see
    /// [`Probe::read_status`]).
    seen: Option<(u64, u64)>,
    status_seen: Option<(u64, u64)>,
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
            quiet: 0,
            seen: None,
            status_seen: None,
        })
    }
}

/// A server process's task directory, held open so that a re-listing can be skipped when it
/// cannot have found anything new. On /proc the directory's link count is 2 plus the
/// process's live threads (`proc_task_getattr`): one `fstat` (0.5 µs) against 5–10 µs for a
/// listing. When the count is 2 plus the threads already sampled, no thread is missing unless
/// one of those exited and another started since; a thread that exits is dropped on its own
/// (the kept file of an exited task fails to read), after which the count no longer matches
/// and the next re-listing finds the new one. The test holds only for procfs (checked with
/// `fstatfs`); on any other file system (fixture trees) every re-listing is made.
#[derive(Debug)]
struct TaskDir {
    pid: u32,
    /// Open only when the directory is on procfs.
    dir: Option<std::fs::File>,
}

impl TaskDir {
    fn open(root: &Path, pid: u32) -> TaskDir {
        let path = root.join(pid.to_string()).join("task");
        let dir = std::fs::File::open(path).ok().filter(on_procfs);
        TaskDir { pid, dir }
    }

    /// 2 plus the process's live threads (procfs only).
    fn links(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        Some(self.dir.as_ref()?.metadata().ok()?.nlink())
    }
}

fn on_procfs(f: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: fstatfs writes into the zeroed struct we own; the fd is open for the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) };
    rc == 0 && st.f_type == libc::PROC_SUPER_MAGIC
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
/// (kernel 6.18, 2 vCPUs, host busy; `bench/attrib_sample.sh` measures whole samples):
///
/// | read | cost | in |
/// |---|---|---|
/// | a server thread's schedstat (run time, run-queue wait) | 1.3 µs | every sample |
/// | /proc/softirqs | 3.6 µs | every sample |
/// | /proc/schedstat, when the kernel has it | — | every sample |
/// | per-CPU hard-interrupt counts, in place of /proc/interrupts where injected ([`HardIrqCounts`]; crate `ebpf`: a memory-mapped array) | < 0.1 µs | every sample |
/// | a server thread's status (context switches); by taskstats | 8–13 µs; 5–6 µs | once per cycle, if it ran |
/// | /proc/stat (steal, busy ticks, system-wide interrupts) | 8–11 µs | once per cycle |
/// | the server's task directories: link count; re-listing | 0.6 µs; 5–10 µs | once per cycle; if the count changed |
/// | /proc/interrupts | 60–80 µs | once per cycle (thread); first and last sample (in-loop) |
///
/// **Read only what changed.** A thread's status is read only when its schedstat (read
/// anyway) shows a new timeslice or more run time since the status was last read
/// (`Probe::read_status` has why that is exact), so an idle thread's costs nothing; a task
/// directory is listed again only when its link count says a thread came or went
/// (`TaskDir`). /proc/stat and /proc/softirqs are each one seq_file record that the kernel
/// formats whole whatever the read asks for, and /proc/interrupts reaches its per-CPU timer,
/// IPI and TLB lines only after walking every possible IRQ number (on the development VM,
/// 57 of its 80 µs go to the ~380 numbers with no IRQ), so these cost what they cost.
/// A status that must be read comes by netlink taskstats where the kernel answers this
/// process (CAP_NET_ADMIN; module `taskstats`): 5–6 µs instead of 8–13, the same numbers.
/// Measured and left aside: one taskstats query per process (by TGID, 5 µs for all its
/// threads) in place of the threads' schedstats and statuses, because its sums lose the
/// context switches of threads that exit and can count an exiting thread twice for a moment.
///
/// **The cycle.** The slow reads (the last four rows) are made once every
/// [`SamplerConfig::slow_every`] samples (default 10: every 100 ms at the 10 ms interval), each
/// in its own sample of the cycle (module `schedule`): a sample makes at most one of them
/// while there are no more of them than samples in a cycle, so no sample costs the sum. The
/// first sample of a run (the baseline) and [`Probe::sample_full`] (its closing sample) read
/// everything.
///
/// **The lean schedule of the in-loop mode** ([`PacedProbe`](crate::PacedProbe), on the load
/// generator's CPU, where every µs of a sample must fit in a gap between sends):
/// - Where a [`HardIrqCounts`] source was injected ([`Probe::set_hard_irq_counts`]: the eBPF
///   counter, when the process may load BPF), the hard interrupts are read from it in every
///   sample of both schedules, exact per interval, and none of what follows about them
///   applies. Otherwise:
/// - /proc/interrupts is read only by the baseline and closing samples. The kernel formats it
///   by walking every possible IRQ number to reach the per-CPU timer, IPI and TLB-shootdown
///   lines at its end, one read costs several times the whole budget of a sample, and nothing
///   cheaper has those lines per CPU (/sys/kernel/irq/N/per_cpu_count has only the device
///   IRQs; perf counters on the `irq_vectors` tracepoints are per CPU, but reading another
///   CPU's counter sends it an IPI — 16 µs and one interrupt more on the server's CPU per
///   read on the development VM). Instead the system-wide count of the `intr` line of
///   /proc/stat (read anyway) gives the *shape* of "hard interrupts" over the run, once per
///   cycle, and the per-CPU readings give its *amount*: the server's CPUs' growth between the
///   two readings is shared out over the intervals in proportion to the system-wide growth
///   in each. Totals are exact; per cycle, interrupts on other CPUs (the load generator's)
///   move the shape too.
/// - The sample that reads /proc/stat (once per cycle) leaves /proc/softirqs to the next
///   sample, so that the heaviest sample of the cycle costs one slow read plus the threads'
///   schedstats, not plus the softirqs too: the softirqs of those two intervals are their
///   sum spread over both by length (one interval's resolution elsewhere). It never leaves
///   them two samples in a row (a cycle of one sample reads them every other sample).
/// - A server thread that did not run for 3 samples in a row is read once per cycle
///   (with its status) until it is seen running again: an idle thread costs nothing, and its
///   growth, if it wakes, is spread over the samples since it was last read.
///
/// **Deltas of counters read less often, or not read this time.** A counter's growth between
/// two readings is *spread* over the intervals in between, in proportion to their lengths (the
/// rate over the span, not a spike in its last interval: `explain` compares intervals, and a
/// 100 ms burst filed under one 10 ms interval would point at the wrong requests). So "hard
/// interrupts", the two context-switch series, "steal time" and (without /proc/schedstat)
/// "other tasks' CPU time" have the resolution of `slow_every` intervals; run-queue wait, the
/// server's CPU time and the softirqs have one interval's (the softirqs two intervals' once
/// per cycle in the in-loop mode, below). The same rule covers a file that
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
    /// Per-CPU hard-interrupt counts in place of /proc/interrupts, read every sample; and
    /// its reading, indexed by CPU id (see [`HardIrqCounts`]).
    irq_counts: Option<Box<dyn HardIrqCounts>>,
    irq_buf: Vec<u64>,
    steal: Counter,
    busy: Counter,
    hardirq: Counter,
    softirq: Vec<Counter>,
    /// Sorted by (pid, tid).
    tasks: Vec<Task>,
    scan: u64,
    /// Per server process, its task directory held open (see [`Probe::rescan`]).
    task_dirs: Vec<TaskDir>,
    /// Reads saved: status readings and task-directory listings skipped as unchanged.
    status_skipped: u64,
    scans_skipped: u64,
    /// Whether unchanged statuses and task directories are skipped (always, but for the
    /// tests that compare with reading everything).
    skip_unchanged: bool,
    /// Context switches by netlink instead of the status file, where the kernel answers
    /// (module `taskstats`); how many statuses it replaced.
    taskstats: Option<Taskstats>,
    taskstats_reads: u64,
    times: Rows<u64>,
    /// Per interval: the sources' deltas, then the server's CPU time and the CPUs' busy time.
    rows: Rows<f64>,
    /// The in-loop mode's schedule (see [`Probe`]).
    lean: bool,
    /// Lean mode: the system-wide interrupt count (the `intr` line of /proc/stat).
    intr_all: Counter,
    /// Lean mode: whether the last sample left /proc/softirqs to the next one.
    softirqs_deferred: bool,
    /// Lean mode: per-CPU readings of the hard interrupts, as (from sample, to sample, growth).
    irq_spans: Vec<(usize, usize, u64)>,
    /// Whether the last sample made a slow read, and whether it read everything.
    last_slow: bool,
    last_all: bool,
    first_bounds: (u64, u64),
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
            irq_counts: None,
            irq_buf: Vec::new(),
            steal: Counter::default(),
            busy: Counter::default(),
            hardirq: Counter::default(),
            tasks,
            scan: 0,
            task_dirs: cfg
                .server_pids
                .iter()
                .map(|&pid| TaskDir::open(root, pid))
                .collect(),
            status_skipped: 0,
            scans_skipped: 0,
            skip_unchanged: true,
            taskstats: if *root == Path::new("/proc") {
                Taskstats::open_checked()
            } else {
                None
            },
            taskstats_reads: 0,
            times: Rows::new(1),
            rows: Rows::new(width),
            lean: false,
            intr_all: Counter::default(),
            irq_spans: Vec::new(),
            softirqs_deferred: false,
            last_slow: false,
            last_all: false,
            first_bounds: (0, 0),
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
        crate::config::spare_cpus(&self.host_cpus, &self.cfg.cpus, &self.cfg.avoid_cpus)
    }

    fn col_server_cpu(&self) -> usize {
        FIXED.len() + self.softirq_names.len()
    }

    /// List the server processes' task directories: open the threads that appeared, drop
    /// those that are gone. Allocates (paths, directory entries), hence once per cycle, and
    /// only for a directory that changed (see [`TaskDir`]).
    fn rescan(&mut self) {
        self.scan += 1;
        let scan = self.scan;
        for d in 0..self.task_dirs.len() {
            let pid = self.task_dirs[d].pid;
            let tracked = self.tasks.iter().filter(|t| t.pid == pid).count();
            if self.skip_unchanged && self.task_dirs[d].links() == Some(tracked as u64 + 2) {
                self.scans_skipped += 1;
                for t in self.tasks.iter_mut().filter(|t| t.pid == pid) {
                    t.listed = scan;
                }
                continue;
            }
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

    /// The slow reads of a cycle (module `schedule`).
    fn pieces(&self) -> Pieces {
        Pieces {
            interrupts: !self.lean && self.irq_counts.is_none() && self.interrupts.is_some(),
            threads: self.tasks.len(),
        }
    }

    /// Whether the next [`sample`](Probe::sample) makes a slow read (the baseline reads all).
    pub(crate) fn next_reads_slow(&self) -> bool {
        let k = self.times.len();
        k == 0 || !self.pieces().slot(k, self.cfg.slow_every).is_empty()
    }

    /// The lean schedule of the in-loop mode (see [`Probe`]): hard interrupts from the
    /// system-wide count, shaped per interval and set to the server's CPUs' per-CPU readings
    /// at the baseline and closing samples; quiet threads read once per cycle. Before the
    /// baseline only.
    pub(crate) fn set_lean(&mut self) {
        if self.times.len() == 0 {
            self.lean = true;
        }
    }

    /// Take the hard interrupts from `src` instead of /proc/interrupts, in every sample (a
    /// light read, in both schedules): the lean schedule then needs no shaping by /proc/stat's
    /// system-wide count. Before the baseline only: returns false (and keeps /proc/interrupts)
    /// once a sample was taken.
    pub fn set_hard_irq_counts(&mut self, src: Box<dyn HardIrqCounts>) -> bool {
        if self.times.len() > 0 {
            return false;
        }
        let width = self.host_cpus.iter().max().map_or(0, |m| m + 1);
        self.irq_buf = vec![0; width];
        self.irq_counts = Some(src);
        true
    }

    /// Where the hard interrupts come from: the injected source's name, "/proc/interrupts",
    /// or "" when neither is there.
    pub fn hard_irq_source(&self) -> &'static str {
        match (&self.irq_counts, &self.interrupts) {
            (Some(src), _) => src.name(),
            (None, Some(_)) => "/proc/interrupts",
            (None, None) => "",
        }
    }

    /// Whether the lean schedule's approximation is in effect: /proc/interrupts read only at
    /// the baseline and closing samples, shaped in between by /proc/stat's system-wide count.
    fn shaped_irqs(&self) -> bool {
        self.lean && self.irq_counts.is_none() && self.interrupts.is_some()
    }

    /// Read the counters now (`t_mono_ns` is the instant to file it under): the every-sample
    /// counters, and the slow reads of this sample's slot in the cycle (module `schedule`).
    /// The first call sets the baseline and reads everything; each later call closes one
    /// interval. Threads that appear are counted from the sample that re-lists the task
    /// directories and first sees them; threads that vanish stop contributing.
    pub fn sample(&mut self, t_mono_ns: u64) {
        self.take(t_mono_ns, false);
    }

    /// Every counter whatever the schedule: the closing sample of a run, so that every
    /// counter's growth is filed under the run's own intervals.
    pub fn sample_full(&mut self, t_mono_ns: u64) {
        self.take(t_mono_ns, true);
    }

    fn take(&mut self, t_mono_ns: u64, all: bool) {
        let start = mono_now_ns();
        let k = self.times.len();
        let all = all || k == 0;
        self.times.push_default();
        if let Some(t) = self.times.get_mut(k) {
            t[0] = t_mono_ns;
        }
        if k > 0 {
            self.rows.push_default();
        }
        let slow = self.read_at(k, all);
        self.last_slow = slow;
        self.last_all = all;
        self.last_ns = mono_now_ns().saturating_sub(start);
        if k > 0 {
            self.cost.samples += 1;
            self.cost.total_ns += self.last_ns;
            self.cost.max_ns = self.cost.max_ns.max(self.last_ns);
        }
    }

    /// The reads of sample `k` (every piece when `all`); whether it made a slow one.
    fn read_at(&mut self, k: usize, all: bool) -> bool {
        let p = self.pieces();
        let range = if all {
            0..p.count()
        } else {
            p.slot(k, self.cfg.slow_every)
        };
        // Re-listing first: a thread it finds is read from this sample on.
        if k > 0 && range.clone().any(|j| p.get(j) == Piece::Rescan) {
            self.rescan();
        }
        let first_status = p.count() - p.threads;
        let due = |i: usize| all || range.contains(&(first_status + i));
        let t0 = mono_now_ns();
        // The lean schedule's /proc/stat sample leaves /proc/softirqs to the next one (but
        // never two in a row): see [`Probe`].
        let stat_here = range.clone().any(|j| p.get(j) == Piece::Stat);
        let softirqs = all || !self.lean || !stat_here || self.softirqs_deferred;
        self.softirqs_deferred = !softirqs;
        self.read_light(k, due, softirqs);
        let (mut t, mut piece_max) = (mono_now_ns(), 0);
        let light = t.saturating_sub(t0);
        // Highest index first: a thread dropped on the way moves none still to be read.
        for j in range.clone().rev() {
            if let Piece::Status(i) = p.get(j) {
                self.read_status(i, k);
                let now = mono_now_ns();
                piece_max = piece_max.max(now.saturating_sub(t));
                t = now;
            }
        }
        for j in range.clone() {
            match p.get(j) {
                Piece::Stat => self.read_stat(k),
                Piece::Interrupts => self.read_interrupts(k),
                Piece::Rescan | Piece::Status(_) => continue,
            }
            let now = mono_now_ns();
            piece_max = piece_max.max(now.saturating_sub(t));
            t = now;
        }
        if k == 0 {
            // What a light sample and one with a single slow read would take, as measured
            // on the baseline's reads (which read everything at once).
            self.first_bounds = (light, light.saturating_add(piece_max));
        }
        if all && self.shaped_irqs() {
            self.read_interrupts(k);
        }
        !range.is_empty()
    }

    /// Estimates of a light sample's duration and of one with a slow read, ns, from the
    /// baseline's reads (a stand-in until samples of each kind have been timed).
    pub(crate) fn first_bounds(&self) -> (u64, u64) {
        self.first_bounds
    }

    /// Every sample: the threads' schedstat (a quiet thread in the lean mode only when `due`),
    /// /proc/schedstat, /proc/softirqs.
    fn read_light(&mut self, k: usize, due: impl Fn(usize) -> bool, softirqs: bool) {
        let server_cpu = self.col_server_cpu();
        let (rows, times, buf) = (&mut self.rows, &self.times, &mut self.buf);
        let lean = self.lean;
        let mut i = 0;
        // A thread whose file cannot be read has exited (ESRCH on an fd of a dead task).
        self.tasks.retain_mut(|task| {
            let idx = i;
            i += 1;
            if lean && task.quiet >= QUIET && !due(idx) {
                return true;
            }
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
                timeslices,
            } = s;
            task.seen = Some((runtime_ns, timeslices));
            match task.runtime.update(runtime_ns, k) {
                Some(g) if g.1 > 0 => {
                    task.quiet = 0;
                    spread(rows, times, server_cpu, g, k, 1.0);
                }
                Some(_) => task.quiet = task.quiet.saturating_add(1),
                None => task.quiet = 0,
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
        if softirqs {
            self.read_softirqs(k);
        }
        if self.irq_counts.is_some() {
            self.read_interrupts(k);
        }
    }

    fn read_softirqs(&mut self, k: usize) {
        let Some(Ok(text)) = self.softirqs.as_ref().map(|f| f.read(&mut self.buf)) else {
            return;
        };
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

    /// Thread `i`'s context switches; a thread whose status cannot be read has exited.
    ///
    /// Read only what changed: a status costs 6–10 µs (the kernel formats 50-odd lines, memory
    /// figures included), its schedstat 1 µs, and the schedstat says whether the counts can
    /// have moved. The kernel counts a context switch of a thread when it leaves a CPU
    /// (`nvcsw`/`nivcsw`), and a timeslice when it arrives on one (`pcount`, schedstat's third
    /// number); it updates its run time when it leaves. So between two schedstat readings with
    /// the same run time and timeslices the thread neither arrived (no new timeslice) nor left
    /// a CPU it held at the first reading (its run time would have grown): its counts are
    /// those of the last status reading, which are filed again at this sample (a growth of 0,
    /// exactly what reading the file would give). A thread with no timeslice at all is
    /// always read: a kernel without sched_info prints `0 0 0` for every thread.
    fn read_status(&mut self, i: usize, k: usize) {
        let Some(task) = self.tasks.get_mut(i) else {
            return;
        };
        let seen = task.seen;
        let unchanged = seen.is_some_and(|(_, slices)| slices > 0) && seen == task.status_seen;
        if self.skip_unchanged && unchanged {
            if let (Some(vol), Some(invol)) = (task.vol.value(), task.invol.value()) {
                task.vol.update(vol, k);
                task.invol.update(invol, k);
                self.status_skipped += 1;
                return;
            }
        }
        // The same counts by netlink, when the reply is of this thread as just read (a thread
        // id taken over by another thread would show fewer timeslices or less run time).
        let by_netlink = match (self.taskstats.as_mut(), seen) {
            (Some(ts), Some((run, slices))) => ts
                .thread(task.tid)
                .ok()
                .filter(|c| c.tid == task.tid && c.timeslices >= slices && c.runtime_ns >= run),
            _ => None,
        };
        let counts = match by_netlink {
            Some(c) => {
                self.taskstats_reads += 1;
                Some((c.vol, c.invol))
            }
            None => task
                .status
                .read(&mut self.buf)
                .ok()
                .and_then(procfs::parse_ctxt_switches),
        };
        let Some((vol, invol)) = counts else {
            self.tasks.remove(i);
            return;
        };
        task.status_seen = seen;
        if let Some(g) = task.vol.update(vol, k) {
            spread(&mut self.rows, &self.times, VOL, g, k, 1.0);
        }
        if let Some(g) = task.invol.update(invol, k) {
            spread(&mut self.rows, &self.times, INVOL, g, k, 1.0);
        }
    }

    /// /proc/stat: steal and busy ticks of the server's CPUs; in the lean mode also the
    /// system-wide interrupt count, which shapes the hard interrupts per interval.
    fn read_stat(&mut self, k: usize) {
        let busy_col = self.col_server_cpu() + 1;
        let shaped = self.shaped_irqs();
        let Ok(text) = self.stat.read(&mut self.buf) else {
            return;
        };
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
        if shaped {
            if let Some(total) = intr_total(text) {
                if let Some(g) = self.intr_all.update(total, k) {
                    spread(&mut self.rows, &self.times, HARDIRQ, g, k, 1.0);
                }
            }
        }
    }

    /// The hard interrupts of the server's CPUs, from the injected source (every sample) or
    /// /proc/interrupts. Spread over the intervals since the last reading; with
    /// /proc/interrupts in the lean mode kept as a span that sets the amount of the
    /// system-wide shape at the end ([`Probe::finish`]).
    fn read_interrupts(&mut self, k: usize) {
        if let Some(src) = self.irq_counts.as_mut() {
            if src.read(&mut self.irq_buf).is_err() {
                return;
            }
            let mine = self.irq_buf.iter().enumerate();
            let total = mine.filter(|(c, _)| self.sel.has(*c)).map(|(_, v)| v).sum();
            if let Some(g) = self.hardirq.update(total, k) {
                spread(&mut self.rows, &self.times, HARDIRQ, g, k, 1.0);
            }
            return;
        }
        let Some(Ok(text)) = self.interrupts.as_ref().map(|f| f.read(&mut self.buf)) else {
            return;
        };
        let Some(table) = procfs::cpu_table_rows(text, &mut self.cols) else {
            return;
        };
        let mut total = 0;
        // Not TLB: a shootdown arrives as a function-call IPI, counted under CAL already, and
        // a CPU also counts one for a queued flush it runs leaving idle, with no interrupt.
        for row in table.filter(|r| r.name != "TLB") {
            let mine = row
                .counts()
                .zip(&self.cols)
                .filter(|(_, c)| self.sel.has(**c));
            total += mine.map(|(v, _)| v).sum::<u64>();
        }
        if let Some(g) = self.hardirq.update(total, k) {
            if self.shaped_irqs() {
                self.irq_spans.push((g.0, k, g.1));
            } else {
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
            hard_irq_source: self.hard_irq_source(),
            hard_irq_counting: self.irq_counts.as_ref().and_then(|s| s.counting_cost()),
        }
    }

    pub(crate) fn add_skipped(&mut self, intervals: u64) {
        self.cost.skipped += intervals;
    }

    /// Duration of the last sample, ns, and whether it made a slow read.
    pub(crate) fn last_sample(&self) -> (u64, bool) {
        (self.last_ns, self.last_slow)
    }

    /// The series recorded so far. When the last sample did not read everything, the slow counters
    /// are read now and their growth since their last reading is spread over the trailing
    /// intervals (so it includes whatever happened since the last sample: close with
    /// [`sample_full`](Probe::sample_full) to avoid that).
    pub fn finish(mut self) -> Series {
        let n = self.times.len();
        if n >= 2 && !self.last_all {
            self.read_at(n - 1, true);
        }
        for &(from, to, grown) in &self.irq_spans {
            rescale(&mut self.rows, &self.times, HARDIRQ, (from, grown), to);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::Duration;

    /// A fixture /proc: CPU 0, process 100 with threads 100 and 101.
    fn fixture() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("stat"),
            "cpu 1 0 0 0\ncpu0 1 0 0 0\nintr 5 0\n",
        )
        .unwrap();
        for tid in [100, 101] {
            fs::create_dir_all(dir.path().join(format!("100/task/{tid}"))).unwrap();
            write_task(dir.path(), tid, (0, 0, 0), (0, 0));
        }
        dir
    }

    /// Rewrite a thread's schedstat (run time, wait, timeslices) and context switches in place.
    fn write_task(root: &Path, tid: u32, (run, wait, slices): (u64, u64, u64), (v, i): (u64, u64)) {
        let d = root.join(format!("100/task/{tid}"));
        fs::write(d.join("schedstat"), format!("{run} {wait} {slices}\n")).unwrap();
        let status =
            format!("Name:\tx\nvoluntary_ctxt_switches:\t{v}\nnonvoluntary_ctxt_switches:\t{i}\n");
        fs::write(d.join("status"), status).unwrap();
    }

    fn probe(root: &Path, skip: bool) -> Probe {
        let mut p = Probe::new(&SamplerConfig {
            proc_root: root.to_path_buf(),
            server_pids: vec![100],
            slow_every: 1,
            interval: Duration::from_millis(10),
            ..SamplerConfig::default()
        })
        .unwrap();
        p.skip_unchanged = skip;
        p
    }

    fn series_bits(s: &Series) -> Vec<(String, Vec<u64>)> {
        s.sources
            .iter()
            .map(|src| {
                (
                    src.name.clone(),
                    src.deltas.iter().map(|d| d.to_bits()).collect(),
                )
            })
            .collect()
    }

    /// A kernel's sequence of readings: every context switch comes with a timeslice and some
    /// run time; the probe that skips unchanged statuses gives the very numbers of the one
    /// that reads every status, and skipped some.
    #[test]
    fn skipping_unchanged_statuses_gives_the_numbers_of_reading_them_all() {
        type Step = (u32, (u64, u64, u64), (u64, u64));
        let steps: [Step; 8] = [
            (100, (1_000, 10, 3), (2, 1)), // ran and switched 3 times
            (101, (0, 0, 0), (0, 0)),      // never ran: always read
            (100, (1_000, 10, 3), (2, 1)), // no change
            (100, (1_500, 10, 3), (3, 1)), // on a CPU at the last reading, left it
            (100, (1_500, 90, 5), (4, 2)), // waited, ran twice
            (100, (1_500, 90, 5), (4, 2)), // no change
            (101, (7, 1, 1), (1, 0)),      // ran once
            (101, (7, 1, 1), (1, 0)),      // no change
        ];
        let (a, b) = (fixture(), fixture());
        let (mut fast, mut full) = (probe(a.path(), true), probe(b.path(), false));
        let mut t = 0;
        for p in [&mut fast, &mut full] {
            p.sample(t);
        }
        for (tid, sched, ctx) in steps {
            t += 10_000_000;
            write_task(a.path(), tid, sched, ctx);
            write_task(b.path(), tid, sched, ctx);
            fast.sample(t);
            full.sample(t);
        }
        // Statuses read: 2 threads × 9 samples, less those of an unchanged thread that has run.
        assert_eq!(full.status_skipped, 0);
        assert!(fast.status_skipped >= 6, "{}", fast.status_skipped);
        let (fast, full) = (fast.finish(), full.finish());
        assert_eq!(series_bits(&fast), series_bits(&full));
        let vol = fast.source("voluntary context switches").unwrap();
        assert_eq!(vol.deltas.iter().sum::<f64>(), 5.0);
    }

    /// The evidence that a status was not read: a count that changed without a timeslice (which
    /// a kernel never shows) is not seen until the thread runs again.
    #[test]
    fn an_unchanged_schedstat_leaves_the_status_unread() {
        let a = fixture();
        let mut p = probe(a.path(), true);
        write_task(a.path(), 100, (5, 0, 1), (1, 0));
        p.sample(0);
        p.sample(1);
        write_task(a.path(), 100, (5, 0, 1), (9, 0));
        p.sample(2);
        write_task(a.path(), 100, (6, 0, 2), (9, 0));
        p.sample(3);
        let s = p.finish();
        let vol = &s.source("voluntary context switches").unwrap().deltas;
        assert_eq!(vol, &vec![0.0, 0.0, 8.0]);
    }

    /// On the real /proc, a sleeping one-thread process: after the first listing, no sample
    /// lists its task directory again or reads its status; once it is gone, it is dropped.
    #[test]
    fn a_process_that_sleeps_costs_neither_listings_nor_statuses() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until it is `sleep` and asleep (no time bound asserted).
        while !fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap()
            .contains("(sleep) S")
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut p = Probe::new(&SamplerConfig {
            server_pids: vec![pid],
            slow_every: 1,
            ..SamplerConfig::default()
        })
        .unwrap();
        assert!(p.task_dirs[0].dir.is_some(), "/proc is procfs");
        assert_eq!(p.tasks.len(), 1);
        for k in 0..=5 {
            p.sample(k);
        }
        assert_eq!((p.scans_skipped, p.status_skipped), (5, 5));
        child.kill().unwrap();
        child.wait().unwrap();
        p.sample(6);
        assert!(p.tasks.is_empty());
    }

    /// On the real /proc, a thread that keeps running: each sample reads its context
    /// switches (the baseline too), by netlink where the kernel answers this process.
    #[test]
    fn a_running_threads_switches_come_by_netlink_where_the_kernel_answers() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let mut p = Probe::new(&SamplerConfig {
            server_pids: vec![child.id()],
            slow_every: 1,
            ..SamplerConfig::default()
        })
        .unwrap();
        let available = crate::taskstats::Taskstats::open().and_then(|mut t| {
            let me = unsafe { libc::gettid() } as u32;
            t.thread(me)
        });
        for k in 0..4 {
            // It runs meanwhile: its run time grows (at least one scheduler tick).
            std::thread::sleep(Duration::from_millis(20));
            p.sample(k);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        match available {
            // Every sample's reading came by netlink, but for one the thread had no CPU
            // for (a busy host): the evidence is the skip, counted.
            Ok(_) => {
                assert!(p.taskstats.is_some());
                assert!(p.taskstats_reads >= 1);
                assert_eq!(p.taskstats_reads + p.status_skipped, 4);
            }
            Err(e) => {
                assert!(crate::taskstats::tests::cannot_have_taskstats(&e), "{e}");
                assert_eq!(p.taskstats_reads, 0);
            }
        }
    }

    #[test]
    fn the_system_wide_interrupt_count_is_the_first_number_of_the_intr_line() {
        assert_eq!(intr_total("cpu 1 2\nintr 12345 0 7\nctxt 9\n"), Some(12345));
        assert_eq!(intr_total("intr 8 1\n"), Some(8));
        assert_eq!(intr_total("cpu 1 2\nctxt 9\n"), None);
        assert_eq!(intr_total("cpu 1\nintr x\n"), None);
        let fixture = include_str!("../tests/fixtures/stat");
        assert!(intr_total(fixture).is_some_and(|n| n > 0));
    }
}
