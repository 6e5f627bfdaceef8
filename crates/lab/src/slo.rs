//! Service-level objectives and their verdicts. A verdict reads the confidence interval, not
//! the point estimate: `meets` when the interval's upper end is within the target, `violates`
//! when its lower end is beyond it, `undecided` otherwise. A run whose generator fell behind
//! (invalid) never meets; a saturated or failed one violates.

use serde::Serialize;
use stats::Summary;

use crate::error::{invalid, LabError};
use crate::run::{Run, RunStatus};

/// Which latency an SLO reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// Intended send → received: what a user behind the arrival process sees (default).
    User,
    /// Sent → the client kernel's receive: what the network and the server did.
    Server,
}

impl std::str::FromStr for View {
    type Err = LabError;
    fn from_str(s: &str) -> Result<View, LabError> {
        match s.trim() {
            "user" => Ok(View::User),
            "server" => Ok(View::Server),
            other => Err(invalid(format!(
                "--slo-view must be user or server, got '{other}'"
            ))),
        }
    }
}

/// One bound: a percentile key (`p99`) at most `max_ns`.
#[derive(Clone, Debug, Serialize)]
pub struct Bound {
    pub key: String,
    pub max_us: f64,
}

/// An SLO: every bound must hold, read from `view`.
#[derive(Clone, Debug, Serialize)]
pub struct Slo {
    pub text: String,
    pub bounds: Vec<Bound>,
    pub view: View,
}

/// A verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Meets,
    Violates,
    Undecided,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Meets => "meets",
            Verdict::Violates => "violates",
            Verdict::Undecided => "undecided",
        }
    }
}

const KEYS: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];

impl Slo {
    /// `p99<=1ms` or several joined by commas (`p99<=1ms,p99.9<=5ms`), read from `view`.
    pub fn parse(text: &str, view: View) -> Result<Slo, LabError> {
        let mut bounds = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, max) = part
                .split_once("<=")
                .or_else(|| part.split_once('<'))
                .ok_or_else(|| {
                    invalid(format!(
                        "--slo: expected KEY<=TIME like p99<=1ms, got '{part}'"
                    ))
                })?;
            let key = key.trim().to_ascii_lowercase();
            if !KEYS.contains(&key.as_str()) {
                return Err(invalid(format!(
                    "--slo: unknown percentile '{key}' (one of {})",
                    KEYS.join(", ")
                )));
            }
            let ns = model::parse_duration_ns(max.trim())
                .map_err(|e| invalid(format!("--slo {part}: {e}")))?;
            if ns.is_nan() || ns <= 0.0 {
                return Err(invalid(format!(
                    "--slo {part}: the target must be positive"
                )));
            }
            bounds.push(Bound {
                key,
                max_us: ns / 1e3,
            });
        }
        if bounds.is_empty() {
            return Err(invalid("--slo: no bound given (e.g. p99<=1ms)"));
        }
        Ok(Slo {
            text: text.trim().to_string(),
            bounds,
            view,
        })
    }

    /// The verdict of one distribution's intervals.
    pub fn judge(&self, s: &Summary) -> Verdict {
        let mut verdict = Verdict::Meets;
        for b in &self.bounds {
            let Some(e) = s.get(&b.key) else {
                return Verdict::Undecided;
            };
            let target = b.max_us * 1e3;
            if e.lo > target {
                return Verdict::Violates;
            }
            if e.hi > target {
                verdict = Verdict::Undecided;
            }
        }
        verdict
    }

    /// The verdict of a run: saturated and failed runs violate, an interrupted one is
    /// undecided, an invalid one never meets.
    pub fn verdict(&self, run: &Run) -> Verdict {
        match run.status {
            RunStatus::Saturated | RunStatus::Failed => return Verdict::Violates,
            RunStatus::Interrupted => return Verdict::Undecided,
            RunStatus::Ok | RunStatus::Invalid => {}
        }
        let a = &run.analysis;
        let dist = match self.view {
            View::User => Some(&a.measured),
            View::Server => a.server_view.as_ref().map(|s| &s.measured),
        };
        let Some(dist) = dist else {
            return Verdict::Undecided;
        };
        match (self.judge(dist), run.status) {
            (Verdict::Meets, RunStatus::Invalid) => Verdict::Undecided,
            (v, _) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(p99: (f64, f64, f64)) -> Summary {
        let mut r = stats::Recorder::exact(0);
        r.record(1);
        let mut s = r.summarize(0.95).unwrap();
        for q in &mut s.quantiles {
            if q.key == "p99" {
                q.est.value = p99.0;
                q.est.lo = p99.1;
                q.est.hi = p99.2;
            }
        }
        s
    }

    #[test]
    fn verdicts_read_the_interval() {
        let slo = Slo::parse("p99<=1ms", View::User).unwrap();
        assert_eq!(slo.bounds[0].max_us, 1000.0);
        assert_eq!(slo.judge(&summary((900e3, 850e3, 950e3))), Verdict::Meets);
        assert_eq!(
            slo.judge(&summary((990e3, 900e3, 1_100e3))),
            Verdict::Undecided
        );
        assert_eq!(
            slo.judge(&summary((1_200e3, 1_100e3, 1_300e3))),
            Verdict::Violates
        );
        let two = Slo::parse("p99<=2ms, p50<=1us", View::Server).unwrap();
        // p50 of a recorder holding the value 1 ns: 1 ns <= 1 µs.
        assert_eq!(two.judge(&summary((900e3, 850e3, 950e3))), Verdict::Meets);
        for bad in ["p99", "p98<=1ms", "p99<=x", "p99<=0us", ""] {
            assert!(Slo::parse(bad, View::User).is_err(), "{bad}");
        }
    }
}
