//! What sampling costs on this host's real /proc:
//! `cargo run --release -p attrib --example sample_cost [SAMPLES]` (or `bench/attrib_sample.sh`).
//!
//! Samples this process (its main thread and four idle ones, as a small server would have) on
//! every CPU, back to back, and prints the median, p99 and maximum µs per sample of three
//! schedules:
//!
//! - `in-loop`: the default schedule as the load generator's loop takes it (a
//!   [`PacedProbe`](attrib::PacedProbe): the lean schedule), every sample;
//! - `thread`: the default schedule of a sampler thread on a spare CPU (a bare [`Probe`]);
//! - `light`: samples that make no slow read;
//! - `in-loop all`: the lean schedule with every one of its reads in every sample
//!   (`slow_every = 1`): everything but /proc/interrupts, which the lean schedule reads only
//!   at the baseline and closing samples;
//! - `complete`: every counter at once (`slow_every = 1`), /proc/interrupts included: what the
//!   baseline and closing samples of a run cost, outside the measurement;
//! - each of them again as `KIND ebpf`, right after it, with the hard interrupts from crate
//!   `ebpf`'s per-CPU counter (memory-mapped, read every sample) instead of /proc/interrupts,
//!   when this process may load BPF (else a line says why not); then what the counter's
//!   programs cost in the kernel over a second (they run on every interrupt).
//!
//! Each sample is timed around the call with CLOCK_MONOTONIC; the figures are per call. Then
//! the cost of each read on its own (the same `pread` of a file kept open, 1,000 times), and
//! the host's load average and this run's CPU, so that a figure from a busy host reads as one.

use attrib::{mono_now_ns, HardIrqCounts, PacedProbe, Probe, SamplerConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The eBPF counter, shared by the probes measured one after the other.
#[derive(Clone)]
struct Ebpf(Arc<Mutex<ebpf::irqcount::HardIrqCounter>>);

impl HardIrqCounts for Ebpf {
    fn read(&mut self, per_cpu: &mut [u64]) -> Result<(), String> {
        let mut c = self.0.lock().map_err(|e| e.to_string())?;
        c.read(per_cpu).map_err(|e| e.to_string())
    }
    fn name(&self) -> &'static str {
        "ebpf"
    }
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1e3
}

fn measure(
    name: &str,
    slow_every: u32,
    in_loop: bool,
    samples: usize,
    irqs: Option<&Ebpf>,
) -> Result<(), attrib::AttribError> {
    let cfg = SamplerConfig {
        server_pids: vec![std::process::id()],
        slow_every,
        ..SamplerConfig::default()
    };
    let mut probe = Probe::new(&cfg)?;
    if let Some(e) = irqs {
        probe.set_hard_irq_counts(Box::new(e.clone()));
    }
    let mut ns = Vec::with_capacity(samples);
    let s = if in_loop {
        let mut p = PacedProbe::new(probe, Duration::from_millis(10), mono_now_ns());
        for _ in 0..samples {
            let t0 = mono_now_ns();
            p.sample(t0);
            ns.push(mono_now_ns() - t0);
        }
        p.finish().0
    } else {
        let mut p = probe;
        p.sample(mono_now_ns());
        for _ in 0..samples {
            let t0 = mono_now_ns();
            p.sample(t0);
            ns.push(mono_now_ns() - t0);
        }
        p.finish()
    };
    if slow_every > 1 && slow_every <= 100 {
        // Sample i (from 1) is in slot i mod slow_every of the cycle: one line per kind.
        let slots: Vec<String> = (0..slow_every as usize)
            .map(|slot| {
                let mut v: Vec<u64> = (0..ns.len())
                    .filter(|i| (i + 1) % slow_every as usize == slot)
                    .map(|i| ns[i])
                    .collect();
                v.sort_unstable();
                format!("{:.1}/{:.1}", quantile(&v, 0.5), quantile(&v, 0.99))
            })
            .collect();
        println!(
            "{name:16} by slot of the cycle, median/p99 µs: {}",
            slots.join(" ")
        );
    }
    ns.sort_unstable();
    println!(
        "{name:16} median {:6.1} µs  p99 {:6.1} µs  max {:7.1} µs  ({} samples, {} sources, a slow read every {} samples)",
        quantile(&ns, 0.5),
        quantile(&ns, 0.99),
        quantile(&ns, 1.0),
        ns.len(),
        s.sources.len(),
        slow_every,
    );
    Ok(())
}

/// Median and p99 µs of `f`, 1,000 calls.
fn time(mut f: impl FnMut()) -> (f64, f64) {
    let mut ns: Vec<u64> = (0..1_000)
        .map(|_| {
            let t0 = mono_now_ns();
            f();
            mono_now_ns() - t0
        })
        .collect();
    ns.sort_unstable();
    (quantile(&ns, 0.5), quantile(&ns, 0.99))
}

/// Each read of a sample on its own: a file kept open and read whole with `pread`.
fn per_read() {
    use std::os::unix::fs::FileExt;
    let me = std::process::id();
    let tid = std::fs::read_dir(format!("/proc/{me}/task"))
        .ok()
        .and_then(|mut d| d.find_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()))
        .unwrap_or(me);
    let task = format!("/proc/{me}/task/{tid}");
    let mut buf = vec![0u8; 64 * 1024];
    println!("each read on its own, median/p99 µs:");
    for path in [
        format!("{task}/schedstat"),
        format!("{task}/status"),
        "/proc/softirqs".into(),
        "/proc/stat".into(),
        "/proc/interrupts".into(),
    ] {
        let Ok(f) = std::fs::File::open(&path) else {
            continue;
        };
        let (m, p) = time(|| {
            let mut n = 0;
            while let Ok(got @ 1..) = f.read_at(&mut buf[n..], n as u64) {
                n += got;
            }
        });
        println!("  {path:32} {m:6.1} / {p:6.1}");
    }
    let dir = format!("/proc/{me}/task");
    if let Ok(f) = std::fs::File::open(&dir) {
        let (m, p) = time(|| drop(f.metadata()));
        println!("  {:32} {m:6.1} / {p:6.1}", format!("{dir} (fstat)"));
    }
    let (m, p) = time(|| drop(std::fs::read_dir(&dir).map(|d| d.count())));
    println!("  {:32} {m:6.1} / {p:6.1}", format!("{dir} (listing)"));
}

fn main() -> Result<(), attrib::AttribError> {
    let samples: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000);
    let _threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(3600))))
        .collect();
    println!("one attribution sample on this host's /proc, 5 server threads, every CPU:");
    let every = SamplerConfig::default().slow_every;
    // Unmeasured while the samples are timed: the kernel's BPF statistics, once on, add two
    // clock reads to every BPF program's run on the host, and other programs (a stage
    // collector's on every read and write) run in a sample's system calls.
    let ebpf = match ebpf::irqcount::HardIrqCounter::open_unmeasured() {
        Ok(c) => Some(Ebpf(Arc::new(Mutex::new(c)))),
        Err(e) => {
            println!("ebpf counter: not loaded here ({e})");
            None
        }
    };
    // Each kind with /proc/interrupts, then with the eBPF counter, side by side (the host's
    // load drifts over a run).
    let kinds: [(&str, u32, bool); 5] = [
        ("in-loop", every, true),
        ("thread", every, false),
        ("light", u32::MAX, false),
        ("in-loop all", 1, true),
        ("complete", 1, false),
    ];
    for (name, slow_every, in_loop) in kinds {
        measure(name, slow_every, in_loop, samples, None)?;
        if let Some(e) = &ebpf {
            let name = format!("{name} ebpf");
            measure(&name, slow_every, in_loop, samples, Some(e))?;
        }
    }
    drop(ebpf);
    if let Ok(mut c) = ebpf::irqcount::HardIrqCounter::open() {
        // The programs' own cost, measured over a second of this host's interrupts.
        let loaded = std::time::Instant::now();
        std::thread::sleep(Duration::from_secs(1));
        let cost = c.cost();
        let wall_ns = loaded.elapsed().as_nanos() as f64;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut v = vec![0; c.possible_cpus()];
        let (m, p) = time(|| drop(c.read(&mut v)));
        println!("ebpf counter: one read {m:.2} / {p:.2} µs (median / p99)");
        println!(
            "ebpf counter's programs in the kernel over 1 s: {} runs, {:.0} ns each, \
             {:.4} % of {cpus} CPUs ({})",
            cost.runs,
            cost.run_time_ns as f64 / cost.runs.max(1) as f64,
            100.0 * cost.run_time_ns as f64 / wall_ns / cpus as f64,
            if cost.measured {
                "BPF statistics"
            } else {
                "not measured"
            },
        );
        for (name, runs, ns) in cost.programs.iter().filter(|p| p.1 > 0) {
            println!(
                "  {name:26} {runs:8} runs {:6.0} ns each",
                *ns as f64 / *runs as f64
            );
        }
    }
    per_read();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "host load average {} (2 CPUs busy = 2.0)",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}
