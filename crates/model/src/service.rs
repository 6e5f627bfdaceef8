//! Per-request service times: the work an ideal server spends on each request. The paper
//! models it as deterministic (§3.2, peak throughput inverted); the others let the model ask
//! what variable work would do.

use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Pareto};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::units::parse_duration_ns;
use crate::variate::InlineExp;
use crate::ModelError;

/// A service-time distribution; every variant states its mean in ns.
#[derive(Clone, Debug, PartialEq)]
pub enum ServiceSpec {
    /// Every request takes exactly `mean_ns`.
    Deterministic { mean_ns: f64 },
    /// Exponential with mean `mean_ns`.
    Exponential { mean_ns: f64 },
    /// Lognormal `exp(N(μ, σ²))` with `μ = ln(mean) − σ²/2`, so the mean is `mean_ns`.
    Lognormal { mean_ns: f64, sigma: f64 },
    /// Pareto with shape `α > 1` and scale `x_m = mean·(α − 1)/α`, so the mean is `mean_ns`.
    Pareto { mean_ns: f64, shape: f64 },
    /// Resampling (uniformly, with replacement) of measured service times.
    Empirical { samples_ns: Vec<f64> },
}

impl FromStr for ServiceSpec {
    type Err = ModelError;

    /// `det:50us`, `exp:50us`, `lognormal:50us,1.0` (mean, σ), `pareto:50us,2.5` (mean, shape);
    /// a bare duration `50us` means `det:50us`. Empirical samples come from
    /// [`parse_empirical`] (the command line reads the file).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| ModelError::Service {
            text: s.to_string(),
            reason,
        };
        let t = s.trim();
        let (name, args) = match t.split_once(':') {
            Some((n, a)) => (n.trim().to_ascii_lowercase(), a),
            None => ("det".to_string(), t),
        };
        let mut parts = args.split(',').map(str::trim);
        let mean_ns =
            parse_duration_ns(parts.next().unwrap_or("")).map_err(|e| err(e.to_string()))?;
        let mut param = |what: &str| -> Result<f64, ModelError> {
            let a = parts
                .next()
                .ok_or_else(|| err(format!("{what} is required, e.g. {name}:50us,1.5")))?;
            a.parse::<f64>()
                .map_err(|_| err(format!("{what} '{a}' is not a number")))
        };
        let spec = match name.as_str() {
            "det" | "deterministic" | "constant" | "fixed" => Self::Deterministic { mean_ns },
            "exp" | "exponential" => Self::Exponential { mean_ns },
            "lognormal" => Self::Lognormal {
                mean_ns,
                sigma: param("sigma")?,
            },
            "pareto" => Self::Pareto {
                mean_ns,
                shape: param("shape")?,
            },
            "empirical" | "trace" => {
                return Err(err("sample files are read by the command line".into()))
            }
            _ => {
                return Err(err(
                    "expected det:MEAN, exp:MEAN, lognormal:MEAN,SIGMA or pareto:MEAN,SHAPE".into(),
                ))
            }
        };
        if parts.next().is_some() {
            return Err(err("too many parameters".into()));
        }
        spec.check().map_err(|reason| err(reason.into()))?;
        Ok(spec)
    }
}

/// Parses measured service times: one duration with its unit per line (`50us`, `1.2ms`); blank
/// lines and `#` comments are ignored.
pub fn parse_empirical(text: &str) -> Result<ServiceSpec, ModelError> {
    let mut samples_ns = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let ns = parse_duration_ns(content).map_err(|e| ModelError::Line {
            line: i + 1,
            text: content.to_string(),
            reason: e.to_string(),
        })?;
        samples_ns.push(ns);
    }
    let spec = ServiceSpec::Empirical { samples_ns };
    spec.validate()?;
    Ok(spec)
}

/// The longest mean service time, and empirical sample, accepted: 1e6 s (about 11.6 days).
/// Far beyond any request's work, and far enough below the 2^64 ns (584 years) that times are
/// kept in for the queueing delays of thousands of such requests to fit.
pub const MAX_SERVICE_NS: f64 = 1e15;

/// `Err(reason)` unless `m` is a usable mean service time in ns.
fn check_mean(m: f64) -> Result<(), &'static str> {
    if !(m.is_finite() && m > 0.0) {
        Err("mean must be positive and finite")
    } else if m > MAX_SERVICE_NS {
        Err("mean must be at most 1e6 s")
    } else {
        Ok(())
    }
}

impl ServiceSpec {
    /// `Err(reason)` when a parameter is out of range.
    fn check(&self) -> Result<(), &'static str> {
        match self {
            Self::Deterministic { mean_ns } | Self::Exponential { mean_ns } => check_mean(*mean_ns),
            Self::Lognormal { mean_ns, sigma } => {
                check_mean(*mean_ns)?;
                if !(sigma.is_finite() && *sigma > 0.0) {
                    Err("sigma must be positive and finite")
                } else {
                    Ok(())
                }
            }
            Self::Pareto { mean_ns, shape } => {
                check_mean(*mean_ns)?;
                if !(shape.is_finite() && *shape > 1.0) {
                    Err("shape must be finite and greater than 1 (else the mean is infinite)")
                } else {
                    Ok(())
                }
            }
            Self::Empirical { samples_ns } => {
                if samples_ns.is_empty() {
                    Err("no samples")
                } else if samples_ns.iter().any(|s| !(s.is_finite() && *s >= 0.0)) {
                    Err("samples must be non-negative and finite")
                } else if samples_ns.iter().any(|s| *s > MAX_SERVICE_NS) {
                    Err("samples must be at most 1e6 s")
                } else if samples_ns.iter().all(|s| *s == 0.0) {
                    Err("all samples are zero")
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Checks the parameters (positive finite mean, σ > 0, shape > 1, non-empty samples).
    pub fn validate(&self) -> Result<(), ModelError> {
        self.check().map_err(|reason| ModelError::Service {
            text: self.short_name().into(),
            reason: reason.into(),
        })
    }

    fn short_name(&self) -> &'static str {
        match self {
            Self::Deterministic { .. } => "det",
            Self::Exponential { .. } => "exp",
            Self::Lognormal { .. } => "lognormal",
            Self::Pareto { .. } => "pareto",
            Self::Empirical { .. } => "empirical",
        }
    }

    /// Mean service time E[S] in ns.
    pub fn mean_ns(&self) -> f64 {
        match self {
            Self::Deterministic { mean_ns }
            | Self::Exponential { mean_ns }
            | Self::Lognormal { mean_ns, .. }
            | Self::Pareto { mean_ns, .. } => *mean_ns,
            Self::Empirical { samples_ns } => {
                samples_ns.iter().sum::<f64>() / samples_ns.len().max(1) as f64
            }
        }
    }

    /// Squared coefficient of variation Var[S]/E[S]²: 0 deterministic, 1 exponential,
    /// `exp(σ²) − 1` lognormal, `1/(α(α − 2))` Pareto (infinite for α ≤ 2), the sample's
    /// (population) value for empirical.
    pub fn scv(&self) -> f64 {
        match self {
            Self::Deterministic { .. } => 0.0,
            Self::Exponential { .. } => 1.0,
            Self::Lognormal { sigma, .. } => (sigma * sigma).exp_m1(),
            Self::Pareto { shape, .. } => {
                if *shape > 2.0 {
                    1.0 / (shape * (shape - 2.0))
                } else {
                    f64::INFINITY
                }
            }
            Self::Empirical { samples_ns } => {
                let m = self.mean_ns();
                let var = samples_ns.iter().map(|s| (s - m) * (s - m)).sum::<f64>()
                    / samples_ns.len().max(1) as f64;
                var / (m * m)
            }
        }
    }

    /// Second moment E[S²] = E[S]²(1 + scv) in ns².
    pub fn second_moment_ns2(&self) -> f64 {
        let m = self.mean_ns();
        m * m * (1.0 + self.scv())
    }
}

/// The sampler behind a [`ServiceGen`].
#[derive(Clone, Debug)]
enum Sampler {
    Det(f64),
    Exp(InlineExp),
    Lognormal(LogNormal<f64>),
    Pareto(Pareto<f64>),
    Empirical(Vec<f64>),
}

/// A seeded stream of service times in ns.
#[derive(Clone, Debug)]
pub struct ServiceGen {
    sampler: Sampler,
    rng: Xoshiro256PlusPlus,
}

impl ServiceGen {
    /// A generator for `spec`, reproducible from `seed`.
    pub fn new(spec: &ServiceSpec, seed: u64) -> Result<Self, ModelError> {
        spec.validate()?;
        let bad = |e: String| ModelError::Service {
            text: spec.short_name().into(),
            reason: e,
        };
        let sampler = match spec {
            ServiceSpec::Deterministic { mean_ns } => Sampler::Det(*mean_ns),
            ServiceSpec::Exponential { mean_ns } => {
                Sampler::Exp(InlineExp::new(1.0 / mean_ns).map_err(|e| bad(e.to_string()))?)
            }
            ServiceSpec::Lognormal { mean_ns, sigma } => Sampler::Lognormal(
                LogNormal::new(mean_ns.ln() - sigma * sigma / 2.0, *sigma)
                    .map_err(|e| bad(e.to_string()))?,
            ),
            ServiceSpec::Pareto { mean_ns, shape } => Sampler::Pareto(
                Pareto::new(mean_ns * (shape - 1.0) / shape, *shape)
                    .map_err(|e| bad(e.to_string()))?,
            ),
            ServiceSpec::Empirical { samples_ns } => Sampler::Empirical(samples_ns.clone()),
        };
        Ok(Self {
            sampler,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        })
    }

    /// The next service time in ns.
    ///
    /// The two common distributions are inlined into the simulator's loop; the others are a
    /// call.
    #[inline(always)]
    pub fn sample_ns(&mut self) -> f64 {
        match &self.sampler {
            Sampler::Det(d) => *d,
            Sampler::Exp(d) => d.sample(&mut self.rng),
            _ => self.sample_other(),
        }
    }

    /// Fills `out` with the next service times, as many calls of [`ServiceGen::sample_ns`]
    /// would (a block at a time, for the simulator's loops; see `ArrivalGen::fill_gaps_ns`).
    #[inline]
    pub fn fill_ns(&mut self, out: &mut [f64]) {
        match &self.sampler {
            Sampler::Det(d) => out.fill(*d),
            Sampler::Exp(d) => {
                // A local copy of the generator, stored back once: stepped through `self`,
                // its state was stored to memory after every variate (the ziggurat's rare path
                // is a call).
                let (d, mut rng) = (*d, self.rng.clone());
                for o in out.iter_mut() {
                    *o = d.sample(&mut rng);
                }
                self.rng = rng;
            }
            _ => {
                for o in out.iter_mut() {
                    *o = self.sample_other();
                }
            }
        }
    }

    #[inline(never)]
    fn sample_other(&mut self) -> f64 {
        match &self.sampler {
            Sampler::Det(d) => *d,
            Sampler::Exp(d) => d.sample(&mut self.rng),
            Sampler::Lognormal(d) => d.sample(&mut self.rng),
            Sampler::Pareto(d) => d.sample(&mut self.rng),
            Sampler::Empirical(v) => v[self.rng.gen_range(0..v.len())],
        }
    }

    /// True when every sample is the same (lets the simulator skip sampling).
    pub fn is_deterministic(&self) -> bool {
        matches!(self.sampler, Sampler::Det(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_specs() {
        assert_eq!(
            "det:50us".parse::<ServiceSpec>().unwrap(),
            ServiceSpec::Deterministic { mean_ns: 50_000.0 }
        );
        assert_eq!(
            "50us".parse::<ServiceSpec>().unwrap(),
            ServiceSpec::Deterministic { mean_ns: 50_000.0 }
        );
        assert_eq!(
            "exp:1ms".parse::<ServiceSpec>().unwrap(),
            ServiceSpec::Exponential { mean_ns: 1e6 }
        );
        assert_eq!(
            "lognormal:50us,1.0".parse::<ServiceSpec>().unwrap(),
            ServiceSpec::Lognormal {
                mean_ns: 50_000.0,
                sigma: 1.0
            }
        );
        assert_eq!(
            "pareto:50us, 2.5".parse::<ServiceSpec>().unwrap(),
            ServiceSpec::Pareto {
                mean_ns: 50_000.0,
                shape: 2.5
            }
        );
        for bad in [
            "det:0us",
            "det:50",
            "exp:-1us",
            "pareto:50us,1",
            "lognormal:50us",
            "det:5us,3",
            "zipf:5us",
            "",
        ] {
            assert!(bad.parse::<ServiceSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn service_times_beyond_the_bound_are_refused_not_saturated() {
        // 1e6 s is the longest mean; 1e99 s does not even parse as a u64 of ns.
        assert_eq!(
            "det:1000000s".parse::<ServiceSpec>().unwrap().mean_ns(),
            MAX_SERVICE_NS
        );
        for bad in [
            "det:1e99s",
            "det:1000001s",
            "exp:1.5e6s",
            "exp:300h",
            "lognormal:2e6s,1.0",
            "pareto:1e7s,2.5",
        ] {
            let e = bad.parse::<ServiceSpec>();
            assert!(e.is_err(), "{bad}");
        }
        let msg = "det:1e99s".parse::<ServiceSpec>().unwrap_err().to_string();
        assert!(msg.contains("too long"), "{msg}");
        let msg = "exp:300h".parse::<ServiceSpec>().unwrap_err().to_string();
        assert!(msg.contains("at most 1e6 s"), "{msg}");
        let e = parse_empirical("10us\n2000000s\n").unwrap_err().to_string();
        assert!(e.contains("at most 1e6 s"), "{e}");
    }

    #[test]
    fn empirical() {
        let s = parse_empirical("# samples\n10us\n\n30us\n").unwrap();
        assert_eq!(s.mean_ns(), 20_000.0);
        assert!((s.scv() - 0.25).abs() < 1e-12);
        assert!(parse_empirical("").is_err());
        let e = parse_empirical("10us\n7\n").unwrap_err();
        assert!(e.to_string().starts_with("line 2:"), "{e}");
    }

    #[test]
    fn moments() {
        let e = ServiceSpec::Exponential { mean_ns: 2.0 };
        assert_eq!(e.second_moment_ns2(), 8.0);
        assert_eq!(
            ServiceSpec::Deterministic { mean_ns: 3.0 }.second_moment_ns2(),
            9.0
        );
        assert!(
            (ServiceSpec::Pareto {
                mean_ns: 1.0,
                shape: 3.0
            }
            .scv()
                - 1.0 / 3.0)
                .abs()
                < 1e-12
        );
        assert!(ServiceSpec::Pareto {
            mean_ns: 1.0,
            shape: 2.0
        }
        .scv()
        .is_infinite());
    }

    #[test]
    fn sample_means_and_scv() {
        // 2e5 samples; tolerances > 4 standard errors of the sample mean (CV/√n ≤ 0.3 %) and
        // generous for the SCV of the lognormal (fourth moments converge slowly).
        let n = 200_000;
        for spec in [
            ServiceSpec::Exponential { mean_ns: 50_000.0 },
            ServiceSpec::Lognormal {
                mean_ns: 50_000.0,
                sigma: 0.5,
            },
            ServiceSpec::Pareto {
                mean_ns: 50_000.0,
                shape: 4.5,
            },
        ] {
            let mut g = ServiceGen::new(&spec, 3).unwrap();
            let xs: Vec<f64> = (0..n).map(|_| g.sample_ns()).collect();
            let m = xs.iter().sum::<f64>() / n as f64;
            let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
            assert!(
                (m / spec.mean_ns() - 1.0).abs() < 0.012,
                "{spec:?} mean {m}"
            );
            assert!(
                (v / (m * m) / spec.scv() - 1.0).abs() < 0.1,
                "{spec:?} scv {}",
                v / (m * m)
            );
        }
    }
}
