//! The probe over a fake /proc that the test changes between samples: every delta is known.
//!
//! The probe keeps its files open and re-reads them with `pread`, as it does /proc, so the
//! fake's files are always rewritten in place (`fs::write`: same inode); a file replaced by a
//! rename would be a new inode that the probe never sees.

use attrib::{AttribError, HardIrqCounts, PacedProbe, Probe, Sampler, SamplerConfig};
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let f = Fake {
            dir: tempfile::tempdir().unwrap(),
        };
        f.system(0, 0, 0, 0);
        f.task("100/task/100", 1000, 50, 10, 1);
        f.task("100/task/101", 1000, 50, 10, 1);
        f.task("self/task/7", 0, 0, 0, 0);
        f
    }
    fn root(&self) -> &Path {
        self.dir.path()
    }
    fn write(&self, rel: &str, text: &str) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    /// CPU 1 is the server's; CPU 0 gets 1000 times as much of everything, never counted.
    fn system(&self, irq: u64, net_rx: u64, steal: u64, busy: u64) {
        self.write(
            "interrupts",
            &format!(
                "      CPU0  CPU1\n 36: {} {} PCI x\nLOC: {} {} Local timer\nTLB: {} {} TLB shootdowns\nERR: 9\n",
                irq * 1000,
                irq,
                irq * 1000,
                irq,
                // Flushes, not interrupts (never summed).
                irq * 7,
                irq * 7
            ),
        );
        self.write(
            "softirqs",
            &format!(
                "     CPU0 CPU1\n  TIMER: 5 5\n NET_RX: {} {}\n",
                net_rx * 1000,
                net_rx
            ),
        );
        self.write(
            "stat",
            &format!(
                "cpu 1 2 3 4 5 6 7 8 0 0\ncpu0 {} 0 0 9 0 0 0 {} 0 0\ncpu1 {} 0 {} 9 0 0 0 {} 0 0\nintr {} 0 0\nctxt 9\n",
                busy * 1000,
                steal * 1000,
                busy,
                busy,
                steal,
                // Both interrupt rows on both CPUs, as the kernel sums them.
                2 * (irq * 1000 + irq),
            ),
        );
    }
    /// A thread's counters. Its timeslices are its context switches, as on a real kernel
    /// (every switch away from a CPU follows an arrival on one): the probe reads a status only
    /// when the schedstat says the thread has run since the last reading.
    fn task(&self, rel: &str, runtime: u64, delay: u64, vol: u64, invol: u64) {
        self.write(
            &format!("{rel}/schedstat"),
            &format!("{runtime} {delay} {}\n", vol + invol),
        );
        self.write(
            &format!("{rel}/status"),
            &format!(
                "Name:\tx\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t{invol}\n"
            ),
        );
    }
    fn cfg(&self) -> SamplerConfig {
        SamplerConfig {
            proc_root: self.root().to_path_buf(),
            server_pids: vec![100],
            server_tids: vec![7],
            cpus: vec![1],
            avoid_cpus: vec![],
            interval: Duration::from_millis(10),
            // Every sample full: each counter's growth lands in its own interval (the spread
            // of counters read less often has its own test).
            slow_every: 1,
        }
    }
}

fn deltas(s: &attrib::Series, name: &str) -> Vec<f64> {
    s.source(name)
        .unwrap_or_else(|| panic!("no source {name}"))
        .deltas
        .clone()
}

#[test]
fn known_changes_give_known_deltas() {
    let f = Fake::new();
    let mut p = Probe::new(&f.cfg()).unwrap();
    p.sample(1_000);
    // Interval 0: thread 100 waits 500 ns more and switches; the in-process thread 7 runs
    // 2 µs; interrupts, NET_RX, steal and busy grow on CPU 1 (and 1000× on CPU 0).
    f.task("100/task/100", 1000, 550, 13, 2);
    f.task("self/task/7", 2000, 450, 1, 0);
    f.system(10, 5, 2, 3);
    p.sample(2_000);
    // Interval 1: thread 101 exits, thread 102 appears (counted only from here on).
    fs::remove_dir_all(f.root().join("100/task/101")).unwrap();
    f.task("100/task/102", 5000, 7000, 70, 7);
    p.sample(3_000);
    // Interval 2: the new thread waits 1000 ns more.
    f.task("100/task/102", 5000, 8000, 70, 7);
    p.sample(4_000);
    let s = p.finish();
    assert_eq!(s.t_mono_ns, vec![1_000, 2_000, 3_000, 4_000]);
    assert_eq!(s.intervals(), 3);
    assert_eq!(deltas(&s, "run-queue wait"), vec![950.0, 0.0, 1000.0]);
    assert_eq!(
        deltas(&s, "voluntary context switches"),
        vec![4.0, 0.0, 0.0]
    );
    assert_eq!(
        deltas(&s, "involuntary context switches"),
        vec![1.0, 0.0, 0.0]
    );
    // Both rows (36 and LOC) grew by 10 on CPU 1.
    assert_eq!(deltas(&s, "hard interrupts"), vec![20.0, 0.0, 0.0]);
    assert_eq!(deltas(&s, "softirq NET_RX"), vec![5.0, 0.0, 0.0]);
    assert_eq!(deltas(&s, "softirq TIMER"), vec![0.0, 0.0, 0.0]);
    assert_eq!(s.server_cpu_ns, vec![2000.0, 0.0, 0.0]);
    // Steal and busy are in clock ticks of this host: 2 and 3+3 (user + system) ticks; the
    // server's 2 µs are subtracted from the busy time.
    let steal = deltas(&s, "steal time");
    let other = deltas(&s, "other tasks' CPU time");
    let tick = steal[0] / 2.0;
    assert!(tick >= 1e6, "tick {tick} ns");
    assert_eq!(other[0], 6.0 * tick - 2000.0);
    assert_eq!(&steal[1..], &[0.0, 0.0]);
    assert_eq!(&other[1..], &[0.0, 0.0]);
    for src in &s.sources {
        assert_eq!(src.deltas.len(), 3, "{}", src.name);
    }
}

#[test]
fn per_cpu_run_time_from_schedstat_replaces_ticks() {
    let f = Fake::new();
    let line = |cpu: usize, ns: u64| format!("cpu{cpu} 0 0 0 0 0 0 {ns} 0 0\n");
    let schedstat = |ns| format!("version 15\ntimestamp 1\n{}{}", line(0, 7), line(1, ns));
    f.write("schedstat", &schedstat(1_000_000));
    let mut p = Probe::new(&f.cfg()).unwrap();
    p.sample(0);
    // CPU 1 ran tasks for 30 µs more, 2 µs of them the server's thread 7; ticks are ignored.
    f.write("schedstat", &schedstat(1_030_000));
    f.task("self/task/7", 2000, 0, 0, 0);
    f.system(0, 0, 0, 5);
    p.sample(1);
    assert_eq!(deltas(&p.finish(), "other tasks' CPU time"), vec![28_000.0]);
}

#[test]
fn an_unparsable_file_spreads_its_growth_over_the_intervals_it_missed() {
    let f = Fake::new();
    let mut p = Probe::new(&f.cfg()).unwrap();
    p.sample(0);
    f.system(4, 0, 0, 0);
    f.write("interrupts", "garbage\n");
    p.sample(1);
    f.system(4, 0, 0, 0);
    p.sample(2);
    // 8 on CPU 1 (two rows of 4) over two intervals of equal length.
    assert_eq!(deltas(&p.finish(), "hard interrupts"), vec![4.0, 4.0]);
}

#[test]
fn slow_reads_are_spread_over_the_cycle_and_their_growth_over_the_intervals() {
    let f = Fake::new();
    let mut c = f.cfg();
    c.slow_every = 3;
    let mut p = Probe::new(&c).unwrap();
    // Six slow reads over a cycle of three samples: /proc/stat and the re-listing in slot 0,
    // /proc/interrupts and thread 7's status in slot 1, threads 100's and 101's in slot 2.
    p.sample(0); // baseline: everything
    f.system(10, 5, 0, 0);
    f.task("100/task/100", 1000, 550, 14, 1);
    f.task("100/task/102", 0, 0, 0, 0);
    p.sample(1_000); // slot 1: interrupts
    p.sample(2_000); // slot 2: threads 100 and 101's context switches
    p.sample(4_000); // slot 0: /proc/stat, and the re-listing finds thread 102
    f.task("100/task/102", 0, 1_000, 0, 0);
    f.system(13, 5, 0, 0);
    p.sample(5_000); // slot 1: interrupts again
    let s = p.finish();
    assert_eq!(s.intervals(), 4);
    // Read every sample: exact per interval (thread 102 only counts from sample 3 on).
    assert_eq!(deltas(&s, "run-queue wait"), vec![500.0, 0.0, 0.0, 1000.0]);
    assert_eq!(deltas(&s, "softirq NET_RX"), vec![5.0, 0.0, 0.0, 0.0]);
    // Read at samples 0, 1 and 4: 20, then 6 spread over intervals of 1, 2 and 1 µs.
    assert_eq!(deltas(&s, "hard interrupts"), vec![20.0, 1.5, 3.0, 1.5]);
    // Thread 100's status read at sample 2: 4 over two intervals of 1 µs.
    assert_eq!(
        deltas(&s, "voluntary context switches"),
        vec![2.0, 2.0, 0.0, 0.0]
    );
}

#[test]
fn the_in_loop_schedule_shapes_hard_interrupts_by_the_system_wide_count() {
    let f = Fake::new();
    let mut c = f.cfg();
    c.slow_every = 3;
    let ms = 1_000_000;
    let mut p = PacedProbe::new(Probe::new(&c).unwrap(), Duration::from_millis(10), 0);
    // 20 on CPU 1 in the first three intervals, then 60 in the next two; the system-wide
    // count (both CPUs) grows 1001 times as much. /proc/stat is read at samples 3 and 5.
    f.system(10, 0, 0, 0);
    for i in 1..=3 {
        p.sample(10 * ms * i);
    }
    f.system(40, 0, 0, 0);
    p.sample(40 * ms);
    let (s, _) = p.finish_at(50 * ms);
    let irq = deltas(&s, "hard interrupts");
    let want = [20.0 / 3.0, 20.0 / 3.0, 20.0 / 3.0, 30.0, 30.0];
    assert_eq!(irq.len(), want.len());
    for (got, want) in irq.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{irq:?}");
    }
}

#[test]
fn the_in_loop_schedule_leaves_the_softirqs_of_the_stat_sample_to_the_next() {
    let f = Fake::new();
    let mut c = f.cfg();
    c.slow_every = 3;
    let ms = 1_000_000;
    // In-loop: /proc/stat at samples 3 and 6, the softirqs there left to samples 4 and 7.
    let mut lean = PacedProbe::new(Probe::new(&c).unwrap(), Duration::from_millis(10), 0);
    // A sampler thread: every sample reads them.
    let mut thread = Probe::new(&c).unwrap();
    thread.sample(0);
    let mut net_rx = 0;
    for i in 1..=7 {
        // 6 NET_RX on CPU 1 in interval i - 1; interval 3 lasts 20 ms.
        net_rx += 6;
        f.system(0, net_rx, 0, 0);
        let t = 10 * ms * i + if i >= 4 { 10 * ms } else { 0 };
        lean.sample(t);
        thread.sample(t);
    }
    let (lean, _) = lean.finish_at(90 * ms);
    let thread = thread.finish();
    assert_eq!(
        deltas(&thread, "softirq NET_RX"),
        vec![6.0, 6.0, 6.0, 6.0, 6.0, 6.0, 6.0]
    );
    // Intervals 2 and 3 (10 and 20 ms) share 12 by length; 5 and 6 (10 ms each) share 12.
    assert_eq!(
        deltas(&lean, "softirq NET_RX"),
        vec![6.0, 6.0, 4.0, 8.0, 6.0, 6.0, 6.0, 0.0]
    );
}

#[test]
fn the_in_loop_schedule_reads_a_quiet_thread_once_per_cycle() {
    let f = Fake::new();
    let mut c = f.cfg();
    c.slow_every = 3;
    let ms = 1_000_000;
    let mut p = PacedProbe::new(Probe::new(&c).unwrap(), Duration::from_millis(10), 0);
    // Five slow reads (no /proc/interrupts in the cycle): /proc/stat and the re-listing in
    // slot 0, the statuses of threads 7 and 100 in slot 1, thread 101's in slot 2. No thread
    // runs in samples 0-3, so from sample 3 on all three are quiet.
    for i in 1..=3 {
        p.sample(10 * ms * i);
    }
    // Thread 101 waits 900 ns: read again in its slot (sample 5), not at sample 4.
    f.task("100/task/101", 1000, 950, 10, 1);
    p.sample(40 * ms);
    p.sample(50 * ms);
    // Thread 100 runs 1 µs: read at sample 7 (its slot; it was last read at sample 4), and
    // every sample from then on.
    f.task("100/task/100", 2000, 50, 10, 1);
    p.sample(60 * ms);
    p.sample(70 * ms);
    f.task("100/task/100", 3000, 250, 10, 1);
    p.sample(80 * ms);
    let (s, _) = p.finish_at(90 * ms);
    assert_eq!(
        deltas(&s, "run-queue wait"),
        vec![0.0, 0.0, 0.0, 450.0, 450.0, 0.0, 0.0, 200.0, 0.0]
    );
    let third = 1000.0 / 3.0;
    let want = [0.0, 0.0, 0.0, 0.0, third, third, third, 1000.0, 0.0];
    assert_eq!(s.server_cpu_ns.len(), want.len());
    for (got, want) in s.server_cpu_ns.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{:?}", s.server_cpu_ns);
    }
}

#[test]
fn the_paced_probe_counts_the_intervals_it_had_no_slack_for() {
    let f = Fake::new();
    let ms = 1_000_000;
    let t0 = 1_000 * ms;
    let mut p = PacedProbe::new(Probe::new(&f.cfg()).unwrap(), Duration::from_millis(10), t0);
    assert_eq!(p.next_due_ns(), t0 + 10 * ms);
    // Measured on the baseline: positive, with the margin.
    assert!(p.cost_bound_ns() >= 5_000, "{}", p.cost_bound_ns());
    p.sample(t0 + 10 * ms + ms / 2); // on time
    assert_eq!(p.next_due_ns(), t0 + 20 * ms);
    p.sample(t0 + 45 * ms); // due at 20: the points at 30 and 40 passed without a sample
    assert_eq!(p.next_due_ns(), t0 + 50 * ms);
    assert_eq!(p.cost().skipped, 2);
    p.sample(t0 + 50 * ms);
    let c = p.cost();
    assert_eq!((c.samples, c.skipped), (3, 2));
    assert!(c.max_ns > 0 && c.mean_ns > 0.0 && c.mean_ns <= c.max_ns as f64);
    // Closing at 70: the point at 60 was missed.
    let (s, c) = p.finish_at(t0 + 70 * ms);
    assert_eq!((c.samples, c.skipped), (4, 3));
    assert_eq!(
        s.t_mono_ns,
        vec![
            t0,
            t0 + 10 * ms + ms / 2,
            t0 + 45 * ms,
            t0 + 50 * ms,
            t0 + 70 * ms
        ]
    );
    assert!(s.sources.iter().all(|src| src.deltas.len() == 4));
}

#[test]
fn the_sampler_thread_refuses_without_a_spare_cpu() {
    let f = Fake::new();
    let no_spare = |cpus: Vec<usize>, avoid: Vec<usize>| {
        let mut c = f.cfg();
        c.cpus = cpus;
        c.avoid_cpus = avoid;
        matches!(Sampler::start(c), Err(AttribError::NoSpareCpu { .. }))
    };
    assert!(no_spare(vec![0, 1], vec![]));
    assert!(no_spare(vec![1], vec![0]));
    // An unpinned server may be on any CPU.
    assert!(no_spare(vec![], vec![]));
}

#[test]
fn the_sampler_thread_runs_on_the_spare_cpu_and_reports_its_cost() {
    let f = Fake::new();
    // Server on 1, nothing to avoid: CPU 0, which every host has.
    let s = Sampler::start(f.cfg()).unwrap();
    assert_eq!(s.cpus(), &[0]);
    std::thread::sleep(Duration::from_millis(25));
    let out = s.stop();
    assert_eq!(out.cpus, vec![0]);
    assert!(out.series.intervals() >= 1);
    assert_eq!(out.cost.samples as usize, out.series.intervals());
    let js = serde_json::to_value(&out).unwrap();
    assert!(js["cost"]["mean_ns"].as_f64().unwrap() > 0.0, "{js}");
}

#[test]
fn the_sampler_avoids_the_servers_cpus() {
    let f = Fake::new();
    assert_eq!(Probe::new(&f.cfg()).unwrap().spare_cpus(), vec![0]);
    let mut c = f.cfg();
    c.cpus = vec![0, 1];
    assert!(Probe::new(&c).unwrap().spare_cpus().is_empty());
    c.cpus = vec![];
    assert!(Probe::new(&c).unwrap().spare_cpus().is_empty());
    c.cpus = vec![1];
    c.avoid_cpus = vec![0];
    assert!(Probe::new(&c).unwrap().spare_cpus().is_empty());
}

#[test]
fn bad_configurations_are_refused() {
    let f = Fake::new();
    let mut c = f.cfg();
    c.cpus = vec![3];
    assert!(matches!(
        Probe::new(&c),
        Err(AttribError::UnknownCpu { cpu: 3, .. })
    ));
    let mut c = f.cfg();
    c.server_pids = vec![999];
    assert!(matches!(
        Probe::new(&c),
        Err(AttribError::NoProcess { pid: 999, .. })
    ));
    let mut c = f.cfg();
    c.server_tids = vec![8];
    assert!(matches!(
        Probe::new(&c),
        Err(AttribError::NoThread { tid: 8, .. })
    ));
    let mut c = f.cfg();
    c.interval = Duration::ZERO;
    assert!(matches!(Sampler::start(c), Err(AttribError::Interval)));
    let mut c = f.cfg();
    c.slow_every = 0;
    assert!(matches!(Probe::new(&c), Err(AttribError::SlowEvery)));
    let mut c = f.cfg();
    c.proc_root = f.root().join("nowhere");
    let e = Probe::new(&c).err().unwrap();
    assert!(e.to_string().contains("nowhere"), "{e}");
}

/// A per-CPU hard-interrupt source the test sets: the counts of CPUs 0 and 1, or None for a
/// failed reading.
#[derive(Clone)]
struct FakeIrqs(Arc<Mutex<Option<[u64; 2]>>>);

impl FakeIrqs {
    fn new() -> FakeIrqs {
        FakeIrqs(Arc::new(Mutex::new(Some([0, 0]))))
    }
    fn set(&self, v: Option<[u64; 2]>) {
        *self.0.lock().unwrap() = v;
    }
}

impl HardIrqCounts for FakeIrqs {
    fn read(&mut self, per_cpu: &mut [u64]) -> Result<(), String> {
        let v = self.0.lock().unwrap().ok_or("no reading")?;
        per_cpu.fill(0);
        for (o, v) in per_cpu.iter_mut().zip(v) {
            *o = v;
        }
        Ok(())
    }
    fn name(&self) -> &'static str {
        "fake"
    }
    fn counting_cost(&self) -> Option<(u64, u64)> {
        Some((3, 450))
    }
}

/// With a per-CPU source, both schedules read the hard interrupts in every sample: exact
/// per interval, no shaping by /proc/stat, and /proc/interrupts (which the fake changes
/// too, by other amounts) is not read.
#[test]
fn an_injected_per_cpu_source_gives_exact_hard_interrupts_every_interval_in_both_schedules() {
    let f = Fake::new();
    let mut c = f.cfg();
    c.slow_every = 3;
    let ms = 1_000_000;
    let irqs = FakeIrqs::new();
    let mut lean_probe = Probe::new(&c).unwrap();
    assert!(lean_probe.set_hard_irq_counts(Box::new(irqs.clone())));
    let mut lean = PacedProbe::new(lean_probe, Duration::from_millis(10), 0);
    let mut thread = Probe::new(&c).unwrap();
    assert!(thread.set_hard_irq_counts(Box::new(irqs.clone())));
    thread.sample(0);
    assert!(
        !thread.set_hard_irq_counts(Box::new(irqs.clone())),
        "after the baseline"
    );
    // CPU 1 (the server's) gets 1, 2, …, 5 in intervals 0..4; CPU 0 a thousand more each.
    let mut cpu1 = 0;
    for i in 1..=5u64 {
        cpu1 += i;
        irqs.set(Some([1000 * i, cpu1]));
        f.system(7 * i, 0, 0, 0);
        lean.sample(10 * ms * i);
        thread.sample(10 * ms * i);
    }
    let want = vec![1.0, 2.0, 3.0, 4.0, 5.0];
    // The closing sample adds an interval with nothing in it.
    let (s, cost) = lean.finish_at(60 * ms);
    assert_eq!(deltas(&s, "hard interrupts"), [&want[..], &[0.0]].concat());
    assert_eq!(cost.hard_irq_source, "fake");
    assert_eq!(cost.hard_irq_counting, Some((3, 450)));
    let cost = thread.cost();
    assert_eq!(deltas(&thread.finish(), "hard interrupts"), want);
    assert_eq!(cost.hard_irq_source, "fake");
}

/// A failed reading of the source is a reading missed: its growth is spread over the
/// intervals since the last one, as for a file that could not be read.
#[test]
fn a_failed_reading_of_the_source_spreads_its_growth_over_the_intervals_it_missed() {
    let f = Fake::new();
    let irqs = FakeIrqs::new();
    let mut p = Probe::new(&f.cfg()).unwrap();
    p.set_hard_irq_counts(Box::new(irqs.clone()));
    p.sample(0);
    irqs.set(None);
    p.sample(1);
    irqs.set(Some([0, 8]));
    p.sample(2);
    assert_eq!(deltas(&p.finish(), "hard interrupts"), vec![4.0, 4.0]);
}

/// Without a source the probe says it read /proc/interrupts, and nothing when there is none.
#[test]
fn the_cost_names_the_hard_interrupts_source() {
    let f = Fake::new();
    let mut p = Probe::new(&f.cfg()).unwrap();
    p.sample(0);
    assert_eq!(p.cost().hard_irq_source, "/proc/interrupts");
    assert_eq!(p.cost().hard_irq_counting, None);
    fs::remove_file(f.root().join("interrupts")).unwrap();
    let p = Probe::new(&f.cfg()).unwrap();
    assert_eq!(p.cost().hard_irq_source, "");
}
