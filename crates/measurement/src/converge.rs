//! Runs that converge (`--precision p99=5% --max-duration 60s`): the run keeps measuring until
//! the interval of each asked percentile is within the asked fraction of its estimate, or
//! until the longest duration allowed. Lancet's idea, with the run's own time-block
//! intervals: the records are fed, as the generator finishes them, to the same sectioning
//! recorder the analysis uses ([`stats::BlockedRecorder`]), so the interval that decides when
//! to stop is the one the run then reports, not one that assumes independent samples.
//!
//! The run is one continuous open-loop run (one schedule, one stored run): the generator
//! stops when a check says "converged" (a flag of its own, apart from the user's Ctrl-C), and
//! the check runs on the record writer's thread, off the generator's loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use load::{RecordSink, RequestRecord};
use serde::{Deserialize, Serialize};
use stats::{BlockedRecorder, Quantile};

use crate::error::{invalid, LabError};
use crate::view::View;

/// One asked precision: the half-width of `view`'s `key` interval within `rel` of its
/// estimate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub view: View,
    pub key: String,
    pub q: f64,
    /// Relative half-width asked for (0.05 for 5 %).
    pub rel: f64,
}

/// `--precision` with its bounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Precision {
    pub text: String,
    pub targets: Vec<Target>,
    /// The run stops here whether or not it converged.
    pub max_duration: Duration,
    /// The intervals are checked this often (of measured time).
    pub check_every: Duration,
}

impl Precision {
    /// `p99=5%`, `server:p99=5%`, several joined by commas; `view` is the default view.
    pub fn parse(text: &str, view: View, max_duration: Duration) -> Result<Precision, LabError> {
        let mut targets = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (v, rest) = match part.split_once(':') {
                Some((v, rest)) => (
                    match v.trim() {
                        "user" => View::User,
                        "server" => View::Server,
                        other => {
                            return Err(invalid(format!(
                                "--precision: unknown view '{other}' in '{part}' (user or server)"
                            )))
                        }
                    },
                    rest,
                ),
                None => (view, part),
            };
            let (key, rel) = rest.split_once('=').ok_or_else(|| {
                invalid(format!(
                    "--precision: expected PERCENTILE=REL% like p99=5%, got '{part}'"
                ))
            })?;
            let key = key.trim().to_ascii_lowercase();
            // The key as `--slo` reads it, but always with its `p` (a bare 99 is refused here).
            let q = key
                .starts_with('p')
                .then(|| crate::percentile::parse_percentile(&key).ok())
                .flatten()
                .map(|(_, q)| q)
                .ok_or_else(|| {
                    invalid(format!(
                        "--precision: '{key}' is not a percentile like p50, p99 or p99.9"
                    ))
                })?;
            let r = rel.trim();
            let rel: f64 = r
                .strip_suffix('%')
                .ok_or_else(|| {
                    invalid(format!(
                        "--precision {part}: give the precision in %, e.g. 5%"
                    ))
                })?
                .trim()
                .parse()
                .map_err(|_| invalid(format!("--precision {part}: cannot parse '{r}'")))?;
            if !(rel > 0.0 && rel < 100.0) {
                return Err(invalid(format!(
                    "--precision {part}: the precision must be in (0, 100) %"
                )));
            }
            targets.push(Target {
                view: v,
                key,
                q,
                rel: rel / 100.0,
            });
        }
        if targets.is_empty() {
            return Err(invalid("--precision: nothing asked (e.g. p99=5%)"));
        }
        if max_duration.is_zero() {
            return Err(invalid("--max-duration must be positive"));
        }
        Ok(Precision {
            text: text.trim().to_string(),
            targets,
            max_duration,
            check_every: Duration::from_secs(1),
        })
    }
}

/// One check of the intervals during the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Check {
    /// Measured time (after the warm-up) at the check, s.
    pub t_s: f64,
    /// Per target, the interval's relative half-width (larger of the two sides ÷ estimate);
    /// None while there is nothing to judge yet.
    pub rel: Vec<Option<f64>>,
    /// Per target, the sections of time the interval used (0: too few samples in time).
    pub sections: Vec<u32>,
}

/// What a converging run reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Convergence {
    pub precision: Precision,
    pub converged: bool,
    /// Measured time (after the warm-up) when it converged, or when it stopped, s.
    pub after_s: f64,
    /// The last check's relative half-widths, per target.
    pub reached: Vec<Option<f64>>,
    /// At most the last 60 checks.
    pub checks: Vec<Check>,
    /// Why it did not converge (None when it did).
    pub why_not: Option<String>,
}

/// Feeds the records to the sectioning recorders on their way to the store, checks the
/// intervals every `check_every` of measured time, and raises `halt` when every target is met
/// (but never before `min_ns` of run time: the duration the user asked for is the least).
pub struct ConvergeSink<'a> {
    inner: &'a mut dyn RecordSink,
    precision: Precision,
    confidence: f64,
    warmup_ns: u64,
    min_ns: u64,
    halt: &'a AtomicBool,
    user: BlockedRecorder,
    server: BlockedRecorder,
    /// Latest intended time seen (run-relative ns): how far the run has got.
    now_ns: u64,
    next_check_ns: u64,
    state: Convergence,
}

impl<'a> ConvergeSink<'a> {
    pub fn new(
        inner: &'a mut dyn RecordSink,
        precision: &Precision,
        confidence: f64,
        warmup_ns: u64,
        min_ns: u64,
        halt: &'a AtomicBool,
    ) -> Result<Self, LabError> {
        let rec = || {
            BlockedRecorder::new(stats::DEFAULT_INITIAL_WIDTH_NS, stats::DEFAULT_MIN_BLOCKS)
                .map_err(|e| invalid(format!("--precision: {e}")))
        };
        let every = precision.check_every.as_nanos() as u64;
        Ok(ConvergeSink {
            inner,
            confidence,
            warmup_ns,
            min_ns: min_ns.max(warmup_ns + every),
            halt,
            user: rec()?,
            server: rec()?,
            now_ns: 0,
            next_check_ns: warmup_ns + every,
            state: Convergence {
                precision: precision.clone(),
                converged: false,
                after_s: 0.0,
                reached: vec![None; precision.targets.len()],
                checks: Vec::new(),
                why_not: None,
            },
            precision: precision.clone(),
        })
    }

    fn add(&mut self, r: &RequestRecord) {
        if r.intended_ns < self.warmup_ns {
            return;
        }
        self.now_ns = self.now_ns.max(r.intended_ns);
        let Some(l) = r.latency_ns() else {
            return;
        };
        self.user.record(r.intended_ns - self.warmup_ns, l);
        let arrived = if r.kernel_rx_ns > 0 {
            r.kernel_rx_ns
        } else {
            r.received_ns
        };
        if r.sent_ns > 0 {
            self.server.record(
                r.sent_ns.saturating_sub(self.warmup_ns),
                arrived.saturating_sub(r.sent_ns),
            );
        }
    }

    /// The relative half-width of each target now.
    fn check(&mut self) {
        let mut rel = Vec::new();
        let mut sections = Vec::new();
        for t in &self.precision.targets {
            let rec = match t.view {
                View::User => &self.user,
                View::Server => &self.server,
            };
            let iv = Quantile::new(t.q)
                .ok()
                .filter(|_| !rec.is_empty())
                .and_then(|q| rec.interval(q, self.confidence, None).ok());
            match iv {
                Some(iv) if iv.sections > 0 && iv.value > 0.0 => {
                    rel.push(Some((iv.hi - iv.value).max(iv.value - iv.lo) / iv.value));
                    sections.push(iv.sections);
                }
                Some(iv) => {
                    rel.push(None);
                    sections.push(iv.sections);
                }
                None => {
                    rel.push(None);
                    sections.push(0);
                }
            }
        }
        let t_s = self.now_ns.saturating_sub(self.warmup_ns) as f64 / 1e9;
        let met = rel
            .iter()
            .zip(&self.precision.targets)
            .all(|(r, t)| r.is_some_and(|r| r <= t.rel));
        self.state.reached = rel.clone();
        self.state.after_s = t_s;
        if self.state.checks.len() >= 60 {
            self.state.checks.remove(0);
        }
        self.state.checks.push(Check { t_s, rel, sections });
        if met && self.now_ns >= self.min_ns {
            self.state.converged = true;
            self.halt.store(true, Ordering::Relaxed);
        }
    }

    /// The outcome, with why it did not converge when it did not.
    pub fn finish(mut self, interrupted: bool) -> Convergence {
        if !self.state.converged {
            self.check();
        }
        let mut c = self.state;
        if !c.converged {
            let parts: Vec<String> = c
                .precision
                .targets
                .iter()
                .zip(&c.reached)
                .map(|(t, r)| {
                    let view = match t.view {
                        View::User => "user",
                        View::Server => "server",
                    };
                    match r {
                        // An interval of a steady run narrows as 1/√t: what that would need.
                        Some(r) => format!(
                            "{view} {} reached ±{:.1} % (asked ±{:.1} %; narrowing as 1/sqrt(time) that needs about {:.0} s)",
                            t.key,
                            r * 100.0,
                            t.rel * 100.0,
                            c.after_s * (r / t.rel).powi(2)
                        ),
                        None => format!(
                            "{view} {} had too few samples in time for an interval",
                            t.key
                        ),
                    }
                })
                .collect();
            let cause = if interrupted {
                "interrupted".to_string()
            } else {
                format!(
                    "not within --max-duration {:.0} s",
                    c.precision.max_duration.as_secs_f64()
                )
            };
            // A tail that moves between the blocks (the host's bursts) widens the interval
            // and keeps it from narrowing as 1/√t: the run's stationarity says whether it did.
            c.why_not = Some(format!(
                "{cause}: {}; bursts that move the tail widen it (see the run's stationarity)",
                parts.join(", ")
            ));
        }
        c
    }
}

impl RecordSink for ConvergeSink<'_> {
    fn write(&mut self, thread: usize, records: &[RequestRecord]) -> Result<(), String> {
        for r in records {
            self.add(r);
        }
        if !self.state.converged && self.now_ns >= self.next_check_ns {
            self.check();
            let every = self.precision.check_every.as_nanos() as u64;
            while self.next_check_ns <= self.now_ns {
                self.next_check_ns += every;
            }
        }
        self.inner.write(thread, records)
    }

    fn started(&mut self, start_mono_ns: u64) {
        self.inner.started(start_mono_ns);
    }

    fn connected(&mut self, conn: u32, local: std::net::SocketAddr, at_mono_ns: u64) {
        self.inner.connected(conn, local, at_mono_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_parses_and_refuses() {
        let p = Precision::parse("p99=5%", View::User, Duration::from_secs(60)).unwrap();
        assert_eq!(p.targets[0].q, 0.99);
        assert_eq!(p.targets[0].rel, 0.05);
        let p = Precision::parse(
            "server:p99.5=2%, p50=1%",
            View::User,
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(p.targets[0].view, View::Server);
        assert!((p.targets[0].q - 0.995).abs() < 1e-12);
        assert_eq!(p.targets[1].view, View::User);
        for bad in [
            "",
            "p99",
            "p99=5",
            "p100=5%",
            "q99=5%",
            "p99=0%",
            "p99=x%",
            "bogus:p99=5%",
        ] {
            assert!(
                Precision::parse(bad, View::User, Duration::from_secs(60)).is_err(),
                "{bad}"
            );
        }
        assert!(Precision::parse("p99=5%", View::User, Duration::ZERO).is_err());
    }

    /// Records of an M/M/1 queue (ρ = 0.5, mean service 50 µs) at 10,000 req/s through the
    /// sink: it converges to ±5 % at p99 and stops asking for more, and a stricter target
    /// that these records cannot reach does not converge and says why.
    #[test]
    fn a_steady_queue_converges_and_a_too_strict_target_does_not() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Exp};
        struct Null;
        impl RecordSink for Null {
            fn write(&mut self, _: usize, _: &[RequestRecord]) -> Result<(), String> {
                Ok(())
            }
        }
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let gap = Exp::new(1.0 / 100_000.0).unwrap();
        let service = Exp::new(1.0 / 50_000.0).unwrap();
        let mut records = Vec::new();
        let (mut t, mut free) = (0.0f64, 0.0f64);
        while t < 30e9 {
            t += gap.sample(&mut rng);
            let start = t.max(free);
            free = start + service.sample(&mut rng);
            let mut r = RequestRecord::scheduled(t as u64, 0);
            r.intended_ns = t as u64;
            r.sent_ns = t as u64;
            r.seen_ns = t as u64;
            r.received_ns = free as u64;
            r.kernel_rx_ns = free as u64;
            r.outcome = load::Outcome::Ok;
            records.push(r);
        }
        let run = |text: &str| {
            let halt = AtomicBool::new(false);
            let mut null = Null;
            let p = Precision::parse(text, View::User, Duration::from_secs(30)).unwrap();
            let mut sink = ConvergeSink::new(&mut null, &p, 0.95, 0, 2_000_000_000, &halt).unwrap();
            let mut fed = 0;
            for chunk in records.chunks(1000) {
                if halt.load(Ordering::Relaxed) {
                    break;
                }
                sink.write(0, chunk).unwrap();
                fed += chunk.len();
            }
            (sink.finish(false), fed)
        };
        let (c, fed) = run("p99=5%");
        assert!(c.converged, "{c:?}");
        assert!(fed < records.len(), "it stopped asking for records");
        assert!(c.after_s >= 2.0 && c.after_s < 30.0, "{}", c.after_s);
        assert!(c.reached[0].is_some_and(|r| r <= 0.05));
        let (c, fed) = run("p99=0.1%");
        assert!(!c.converged);
        assert_eq!(fed, records.len());
        assert!(
            c.why_not
                .as_deref()
                .is_some_and(|w| w.contains("asked ±0.1 %")),
            "{c:?}"
        );
    }
}
