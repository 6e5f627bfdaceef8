//! The sampler thread, and where it may run.
//!
//! DESIGN.md: an instrument stays off the load generator's and the server's CPUs unless the
//! user says otherwise. A [`Sampler`] therefore runs only on a *spare* CPU
//! ([`spare_cpus`](crate::spare_cpus)) and refuses to start when the host has none
//! ([`AttribError::NoSpareCpu`]); the caller then samples from inside the load generator's own
//! loop with a [`PacedProbe`](crate::PacedProbe), in the gaps between sends. (Before this rule
//! the sampler ran on "a CPU that is not the server's", which on a 2-CPU host is the
//! generator's: at 5,000 req/s it raised the generator's lateness p99 from 12 µs to 195 µs.)

use crate::config::{mono_now_ns, SampleCost, SamplerConfig};
use crate::probe::Probe;
use crate::{AttribError, Series};
use serde::Serialize;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The grid of wanted sample instants: every `interval_ns` from the baseline. Shared by the
/// sampler thread and the in-loop [`PacedProbe`](crate::PacedProbe) so that both count missed
/// intervals alike.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pace {
    interval_ns: u64,
    due_ns: u64,
}

impl Pace {
    /// Intervals under 1 µs are taken as 1 µs (a sample itself costs several µs).
    pub(crate) fn new(interval: Duration, baseline_ns: u64) -> Pace {
        let interval_ns = (interval.as_nanos() as u64).max(1_000);
        Pace {
            interval_ns,
            due_ns: baseline_ns.saturating_add(interval_ns),
        }
    }

    pub(crate) fn due_ns(&self) -> u64 {
        self.due_ns
    }

    /// A sample is taken at `now`: it stands for the due grid point (even when early); the
    /// whole intervals after that point that passed without a sample are returned as missed,
    /// and the next due point is the first grid point after `now`.
    pub(crate) fn taken(&mut self, now: u64) -> u64 {
        let missed = now.saturating_sub(self.due_ns) / self.interval_ns;
        self.due_ns = self
            .due_ns
            .saturating_add((missed + 1).saturating_mul(self.interval_ns));
        missed
    }
}

/// What a [`Sampler`] recorded, what it cost, and where it ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SamplerOutput {
    pub series: Series,
    pub cost: SampleCost,
    /// The CPUs the sampler thread was pinned to.
    pub cpus: Vec<usize>,
}

/// A probe sampled every interval on its own thread, pinned to spare CPUs, from
/// [`Sampler::start`] to [`Sampler::stop`].
pub struct Sampler {
    stop_tx: mpsc::Sender<()>,
    handle: JoinHandle<(Series, SampleCost)>,
    cpus: Vec<usize>,
}

impl Sampler {
    /// Validate the configuration, find the spare CPUs (refusing with
    /// [`AttribError::NoSpareCpu`] when there are none), start the thread pinned to them, and
    /// return once it has taken its baseline sample there.
    pub fn start(cfg: SamplerConfig) -> Result<Sampler, AttribError> {
        if cfg.interval.is_zero() {
            return Err(AttribError::Interval);
        }
        Sampler::from_probe(Probe::new(&cfg)?)
    }

    /// [`start`](Sampler::start) with a probe already made (and given, say, a
    /// [`HardIrqCounts`](crate::HardIrqCounts) source); its baseline is not taken yet.
    pub fn from_probe(mut probe: Probe) -> Result<Sampler, AttribError> {
        let cfg = probe.config().clone();
        if cfg.interval.is_zero() {
            return Err(AttribError::Interval);
        }
        let interval = cfg.interval;
        let cpus = probe.spare_cpus();
        if cpus.is_empty() {
            return Err(AttribError::NoSpareCpu {
                host: probe.host_cpus().to_vec(),
                server: cfg.cpus,
                avoid: cfg.avoid_cpus,
            });
        }
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), host::HostError>>(1);
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let pin = cpus.clone();
        let handle = std::thread::Builder::new()
            .name("attrib-sampler".into())
            .spawn(move || {
                // Pinned before the first read, so that not even the baseline runs elsewhere.
                if let Err(e) = host::placement::pin_current_thread(&pin) {
                    let _ = ready_tx.send(Err(e));
                    return (Series::default(), SampleCost::default());
                }
                let mut pace = Pace::new(interval, mono_now_ns());
                probe.sample(mono_now_ns());
                let _ = ready_tx.send(Ok(()));
                loop {
                    let wait = Duration::from_nanos(pace.due_ns().saturating_sub(mono_now_ns()));
                    match stop_rx.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            let now = mono_now_ns();
                            let missed = pace.taken(now);
                            probe.add_skipped(missed);
                            probe.sample(now);
                        }
                        // Stopped (or the Sampler was dropped): close the last interval with
                        // every counter read.
                        _ => {
                            let now = mono_now_ns();
                            let missed = pace.taken(now);
                            probe.add_skipped(missed);
                            probe.sample_full(now);
                            let cost = probe.cost();
                            return (probe.finish(), cost);
                        }
                    }
                }
            })
            .map_err(AttribError::Thread)?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Sampler {
                stop_tx,
                handle,
                cpus,
            }),
            Ok(Err(source)) => {
                let _ = handle.join();
                Err(AttribError::Pin { cpus, source })
            }
            // The thread ended without a word: it panicked (a bug).
            Err(_) => Err(AttribError::Thread(std::io::Error::other(
                "the sampler thread ended before its baseline sample",
            ))),
        }
    }

    /// The CPUs the sampler thread runs on.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Stop the thread promptly (it is woken, not waited out), and return what it recorded,
    /// what that cost and where it ran.
    pub fn stop(self) -> SamplerOutput {
        let _ = self.stop_tx.send(());
        // The thread only panics on a bug; then there is nothing to report.
        let (series, cost) = self.handle.join().unwrap_or_default();
        SamplerOutput {
            series,
            cost,
            cpus: self.cpus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::spare_cpus;

    #[test]
    fn spare_cpus_are_the_hosts_minus_server_and_generator() {
        assert_eq!(spare_cpus(&[0, 1, 2, 3], &[1], &[0]), vec![2, 3]);
        assert_eq!(spare_cpus(&[0, 1, 2, 3], &[1, 2], &[]), vec![0, 3]);
        assert_eq!(spare_cpus(&[3, 0, 2, 3], &[1], &[]), vec![0, 2, 3]);
        // The 2-CPU case of issue 9: generator on 0, server on 1 — nothing is spare.
        assert!(spare_cpus(&[0, 1], &[1], &[0]).is_empty());
        // An unpinned server may be anywhere.
        assert!(spare_cpus(&[0, 1, 2, 3], &[], &[0]).is_empty());
        // CPUs named but not on the host change nothing.
        assert_eq!(spare_cpus(&[0, 1], &[1, 7], &[9]), vec![0]);
        assert!(spare_cpus(&[], &[1], &[]).is_empty());
    }

    #[test]
    fn the_pace_counts_whole_missed_intervals_and_stays_on_its_grid() {
        let mut p = Pace::new(Duration::from_nanos(10_000), 1_000_000);
        assert_eq!(p.due_ns(), 1_010_000);
        assert_eq!(p.taken(1_010_500), 0);
        assert_eq!(p.due_ns(), 1_020_000);
        // 2.5 intervals late: two grid points passed with no sample.
        assert_eq!(p.taken(1_045_000), 2);
        assert_eq!(p.due_ns(), 1_050_000);
        // Early: it stands for the due point.
        assert_eq!(p.taken(1_041_000), 0);
        assert_eq!(p.due_ns(), 1_060_000);
        assert_eq!(Pace::new(Duration::ZERO, 0).due_ns(), 1_000);
    }
}
