//! The sampler thread: a [`Probe`] sampled every interval from [`Sampler::start`] to
//! [`Sampler::stop`], which returns the series with what sampling cost and where it ran.

use crate::config::{mono_now_ns, SampleCost, SamplerConfig};
use crate::probe::Probe;
use crate::{AttribError, Series};
use serde::Serialize;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The grid of wanted sample instants: every `interval_ns` from the baseline.
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
    /// The CPUs the sampler thread was pinned to (empty when it was not).
    pub cpus: Vec<usize>,
}

/// A probe sampled every interval on its own thread, from
/// [`Sampler::start`] to [`Sampler::stop`].
pub struct Sampler {
    stop_tx: mpsc::Sender<()>,
    handle: JoinHandle<(Series, SampleCost)>,
    cpus: Vec<usize>,
}

impl Sampler {
    /// Validate the configuration, take the baseline sample, and start the thread.
    pub fn start(cfg: SamplerConfig) -> Result<Sampler, AttribError> {
        if cfg.interval.is_zero() {
            return Err(AttribError::Interval);
        }
        let interval = cfg.interval;
        let mut probe = Probe::new(&cfg)?;
        // Keep the sampler itself off the server's CPUs, where it would be one more
        // background task. Best effort: a fixture root may name CPUs this host lacks.
        let spare = probe.spare_cpus();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Vec<usize>>(1);
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("attrib-sampler".into())
            .spawn(move || {
                let pinned =
                    !spare.is_empty() && host::placement::pin_current_thread(&spare).is_ok();
                let mut pace = Pace::new(interval, mono_now_ns());
                probe.sample(mono_now_ns());
                let _ = ready_tx.send(if pinned { spare } else { Vec::new() });
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
            Ok(cpus) => Ok(Sampler {
                stop_tx,
                handle,
                cpus,
            }),
            // The thread ended without a word: it panicked (a bug).
            Err(_) => Err(AttribError::Thread(std::io::Error::other(
                "the sampler thread ended before its baseline sample",
            ))),
        }
    }

    /// The CPUs the sampler thread runs on (empty: it could not be kept off the server's).
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
