//! Service-level objectives and their verdicts. A verdict reads the confidence interval, not
//! the point estimate: `meets` when the interval's upper end is within the target, `violates`
//! when its lower end is beyond it, `undecided` otherwise. A verdict read from a view that
//! is not valid for the run (the user's view of a run whose generator fell behind, the
//! server's view of one whose offered load was not sent) is `undecided`, never `meets`; a
//! saturated or failed run violates.

use serde::{Deserialize, Serialize};
use stats::Summary;

use crate::error::{invalid, LabError};
use crate::run::{Run, RunStatus};

/// Which latency a run's figures (and an SLO) are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// Intended send → received: what a user behind the arrival process sees.
    User,
    /// Sent → the client kernel's receive: what the network and the server did.
    Server,
}

impl View {
    pub fn as_str(self) -> &'static str {
        match self {
            View::User => "user",
            View::Server => "server",
        }
    }
}

impl std::fmt::Display for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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

/// The view the user asks for: one of the two, or `auto` — each run's headline view (the
/// user's when it is valid, else the server's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewChoice {
    #[default]
    Auto,
    User,
    Server,
}

impl ViewChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            ViewChoice::Auto => "auto",
            ViewChoice::User => "user",
            ViewChoice::Server => "server",
        }
    }
}

impl std::fmt::Display for ViewChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<View> for ViewChoice {
    fn from(v: View) -> ViewChoice {
        match v {
            View::User => ViewChoice::User,
            View::Server => ViewChoice::Server,
        }
    }
}

impl std::str::FromStr for ViewChoice {
    type Err = LabError;
    fn from_str(s: &str) -> Result<ViewChoice, LabError> {
        match s.trim() {
            "auto" => Ok(ViewChoice::Auto),
            "user" => Ok(ViewChoice::User),
            "server" => Ok(ViewChoice::Server),
            other => Err(invalid(format!(
                "a view must be auto, user or server, got '{other}'"
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

/// An SLO: every bound must hold, read from `view` (`auto`: each run's headline view).
#[derive(Clone, Debug, Serialize)]
pub struct Slo {
    pub text: String,
    pub bounds: Vec<Bound>,
    pub view: ViewChoice,
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
    pub fn parse(text: &str, view: impl Into<ViewChoice>) -> Result<Slo, LabError> {
        let view = view.into();
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

    /// The view this SLO reads for `run`: the one asked for, or its headline under `auto`.
    pub fn view_of(&self, run: &Run) -> View {
        match self.view {
            ViewChoice::Auto => run.views.headline,
            ViewChoice::User => View::User,
            ViewChoice::Server => View::Server,
        }
    }

    /// The verdict of a run: saturated and failed runs violate, an interrupted one is
    /// undecided; otherwise the interval of the view read ([`Slo::view_of`]) decides, and a
    /// view that is not valid for the run (or missing) never meets: it is undecided.
    pub fn verdict(&self, run: &Run) -> Verdict {
        match run.status {
            RunStatus::Saturated | RunStatus::Failed => return Verdict::Violates,
            RunStatus::Interrupted => return Verdict::Undecided,
            RunStatus::Ok | RunStatus::Invalid => {}
        }
        let view = self.view_of(run);
        if !run.views.is_valid(view) {
            return Verdict::Undecided;
        }
        let a = &run.analysis;
        let dist = match view {
            View::User => Some(&a.measured),
            View::Server => a.server_view.as_ref().map(|s| &s.measured),
        };
        match dist {
            Some(d) => self.judge(d),
            None => Verdict::Undecided,
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
        assert_eq!(
            Slo::parse("p99<=1ms", ViewChoice::Auto).unwrap().view,
            ViewChoice::Auto
        );
        assert_eq!("auto".parse::<ViewChoice>().unwrap(), ViewChoice::Auto);
        assert!("both".parse::<ViewChoice>().is_err());
        for bad in ["p99", "p98<=1ms", "p99<=x", "p99<=0us", ""] {
            assert!(Slo::parse(bad, View::User).is_err(), "{bad}");
        }
    }
}
