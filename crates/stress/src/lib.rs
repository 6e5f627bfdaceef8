//! # stress — built-in interference generators
//!
//! Place in the data flow: beside the server, not in the measurement. Tales of the Tail §4.1
//! measures a server sharing its CPU with a background process; the Xeon vs ThunderX study
//! (Fig 11, Table VI) colocates services that contend for cores, cache and memory. A
//! [`Stressor`] makes that contention on demand, with no package to install: one thread per
//! chosen CPU, pinned there, running one of three loops ([`Kind`]) —
//!
//! - **cpu**: a busy loop (the background process);
//! - **memory**: a sequential read-modify-write stream over a buffer several times the LLC,
//!   so every access goes to DRAM (memory bandwidth);
//! - **cache**: read-modify-writes of every cache line of an LLC-sized buffer in a scattered
//!   order the prefetchers cannot follow (evicting whatever else the LLC held).
//!
//! `intensity` is the fraction of each 10 ms period a thread runs (it sleeps the rest). The
//! LLC size is read from sysfs (`cpuN/cache/index*/size`, under a root path) or, when the
//! host does not say, taken as [`DEFAULT_LLC_BYTES`]. A stressor stops when dropped (or on
//! [`Stressor::stop`], which reports what it did: iterations, bytes touched, bytes/s).

mod spec;
mod work;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use host::probe::HostRoot;
use serde::Serialize;

pub use spec::{check_intensity, Kind, StressSpec};

/// The LLC size assumed when sysfs does not give one (a common server L3 slice).
pub const DEFAULT_LLC_BYTES: u64 = 32 << 20;
/// The memory streamer's buffer is this many times the LLC (and at least 64 MiB), per thread.
const STREAM_LLC_FACTOR: u64 = 4;
const STREAM_MIN_BYTES: u64 = 64 << 20;

/// Why a stressor could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StressError {
    /// A spec that does not parse or names CPUs that do not exist.
    #[error("bad stressor: {0}")]
    BadSpec(String),
    /// A thread could not be started or pinned.
    #[error("stressor thread on CPU {cpu}: {reason}")]
    Thread { cpu: usize, reason: String },
}

/// What one thread did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThreadReport {
    pub cpu: usize,
    /// Loop iterations (cpu), words streamed (memory) or cache lines touched (cache).
    pub iterations: u64,
    /// Bytes read and written (0 for cpu).
    pub bytes: u64,
}

/// What a stressor did, for `tailscope stress` and the run it ran beside.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub kind: Kind,
    pub cpus: Vec<usize>,
    pub intensity: f64,
    pub duration_s: f64,
    pub iterations: u64,
    pub bytes: u64,
    pub bytes_per_s: f64,
    pub iterations_per_s: f64,
    /// Each thread's buffer (0 for cpu).
    pub buffer_bytes: u64,
    pub llc_bytes: u64,
    /// `sysfs` or `default` (see [`DEFAULT_LLC_BYTES`]).
    pub llc_source: &'static str,
    pub threads: Vec<ThreadReport>,
}

/// Counters one thread publishes as it goes.
#[derive(Default)]
pub(crate) struct Counters {
    pub iterations: AtomicU64,
    pub bytes: AtomicU64,
}

/// A running stressor; stops on drop.
pub struct Stressor {
    spec: StressSpec,
    stop: Arc<AtomicBool>,
    threads: Vec<(usize, Arc<Counters>, Option<JoinHandle<()>>)>,
    started: Instant,
    buffer_bytes: u64,
    llc_bytes: u64,
    llc_source: &'static str,
}

/// The LLC size of `cpu` under `root`, and where it came from.
pub fn llc_bytes(root: &HostRoot, cpu: usize) -> (u64, &'static str) {
    match host::facts::last_level_cache(root, cpu) {
        Some(c) if c.size_bytes > 0 => (c.size_bytes, "sysfs"),
        _ => (DEFAULT_LLC_BYTES, "default"),
    }
}

impl Stressor {
    /// Starts one pinned thread per CPU of `spec` (which must name them). The LLC size is
    /// read under `root` (`/` for the real host).
    pub fn start(spec: &StressSpec, root: &HostRoot) -> Result<Stressor, StressError> {
        spec.validate()?;
        if spec.cpus.is_empty() {
            return Err(StressError::BadSpec(
                "no CPUs to run on (name them, e.g. cpu:1)".into(),
            ));
        }
        let (llc, source) = llc_bytes(root, spec.cpus[0]);
        let buffer_bytes = match spec.kind {
            Kind::Cpu => 0,
            Kind::Memory => (llc * STREAM_LLC_FACTOR).max(STREAM_MIN_BYTES),
            Kind::Cache => llc,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let mut s = Stressor {
            spec: spec.clone(),
            stop: Arc::clone(&stop),
            threads: Vec::new(),
            started: Instant::now(),
            buffer_bytes,
            llc_bytes: llc,
            llc_source: source,
        };
        for &cpu in &spec.cpus {
            let counters = Arc::new(Counters::default());
            let (c, st) = (Arc::clone(&counters), Arc::clone(&stop));
            let (kind, intensity) = (spec.kind, spec.intensity);
            // The thread reports whether it could pin itself before it starts working.
            let (tx, rx) = std::sync::mpsc::channel();
            let h = std::thread::Builder::new()
                .name(format!("ts-stress-{}", kind.name()))
                .spawn(move || {
                    if let Err(e) = host::placement::pin_current_thread(&[cpu]) {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                    let _ = tx.send(Ok(()));
                    work::run(kind, intensity, buffer_bytes, &st, &c);
                })
                .map_err(|e| StressError::Thread {
                    cpu,
                    reason: e.to_string(),
                })?;
            let pinned = rx.recv().unwrap_or_else(|_| Err("exited".into()));
            s.threads.push((cpu, counters, Some(h)));
            // Dropping `s` on the error stops the threads already started.
            pinned.map_err(|reason| StressError::Thread { cpu, reason })?;
        }
        s.started = Instant::now();
        Ok(s)
    }

    /// What it is doing.
    pub fn spec(&self) -> &StressSpec {
        &self.spec
    }

    /// What it has done so far (it keeps running).
    pub fn report(&self) -> Report {
        let d = self.started.elapsed().as_secs_f64();
        let threads: Vec<ThreadReport> = self
            .threads
            .iter()
            .map(|(cpu, c, _)| ThreadReport {
                cpu: *cpu,
                iterations: c.iterations.load(Ordering::Relaxed),
                bytes: c.bytes.load(Ordering::Relaxed),
            })
            .collect();
        let iterations: u64 = threads.iter().map(|t| t.iterations).sum();
        let bytes: u64 = threads.iter().map(|t| t.bytes).sum();
        let per_s = |x: u64| if d > 0.0 { x as f64 / d } else { 0.0 };
        Report {
            kind: self.spec.kind,
            cpus: self.spec.cpus.clone(),
            intensity: self.spec.intensity,
            duration_s: d,
            iterations,
            bytes,
            bytes_per_s: per_s(bytes),
            iterations_per_s: per_s(iterations),
            buffer_bytes: self.buffer_bytes,
            llc_bytes: self.llc_bytes,
            llc_source: self.llc_source,
            threads,
        }
    }

    /// Stops every thread and reports what they did.
    pub fn stop(mut self) -> Report {
        let d = self.started.elapsed();
        self.halt();
        let mut r = self.report();
        r.duration_s = d.as_secs_f64();
        let per_s = |x: u64| {
            if r.duration_s > 0.0 {
                x as f64 / r.duration_s
            } else {
                0.0
            }
        };
        (r.bytes_per_s, r.iterations_per_s) = (per_s(r.bytes), per_s(r.iterations));
        r
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (_, _, h) in &mut self.threads {
            if let Some(h) = h.take() {
                // A worker that panicked has stopped too.
                let _ = h.join();
            }
        }
    }
}

impl Drop for Stressor {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(spec: &str) -> Report {
        let s = Stressor::start(&spec.parse().unwrap(), &HostRoot::default()).unwrap();
        // Sleep only to let it work; nothing below depends on how long it ran.
        std::thread::sleep(std::time::Duration::from_millis(150));
        s.stop()
    }

    #[test]
    fn each_kind_works_on_its_cpu_and_stops() {
        let cpu = host::placement::online_cpus() - 1;
        let r = run(&format!("cpu:{cpu}"));
        assert!(r.iterations > 0 && r.bytes == 0, "{r:?}");
        assert_eq!(r.threads.len(), 1);
        assert_eq!(r.threads[0].cpu, cpu);
        let m = run(&format!("memory:{cpu}@0.5"));
        assert!(m.bytes > 0 && m.bytes_per_s > 0.0, "{m:?}");
        assert!(m.buffer_bytes >= STREAM_MIN_BYTES && m.buffer_bytes >= 4 * m.llc_bytes);
        let c = run(&format!("cache:{cpu}"));
        assert_eq!(c.buffer_bytes, c.llc_bytes);
        assert_eq!(c.bytes, 64 * c.iterations, "one line per iteration");
        // No thread of it is left. `stop` joins them; a joined thread may stay listed in
        // /proc for a moment (the kernel clears its tid, which `join` waits for, before it
        // removes the task), so the check waits up to 5 s: a thread never joined stays listed
        // for all of it.
        let left = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .flatten()
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .unwrap_or_default()
                        .starts_with("ts-stress")
                })
                .count()
        };
        let mut n = left();
        for _ in 0..500 {
            if n == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            n = left();
        }
        assert_eq!(n, 0);
    }

    #[test]
    fn llc_size_from_sysfs_or_the_stated_default() {
        let (b, src) = llc_bytes(&HostRoot::new("/nonexistent"), 0);
        assert_eq!((b, src), (DEFAULT_LLC_BYTES, "default"));
        let spec = StressSpec::new(Kind::Cpu);
        assert!(
            Stressor::start(&spec, &HostRoot::default()).is_err(),
            "no CPUs named"
        );
    }
}
