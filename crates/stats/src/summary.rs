//! [`Summary`]: what a recorder reports, and its JSON shapes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Estimate;

/// Count, moments, extremes and the standard quantiles with confidence intervals (all ns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Mean.
    #[serde(deserialize_with = "crate::f64_or_nan")]
    pub mean_ns: f64,
    /// Population standard deviation (divides by n).
    #[serde(deserialize_with = "crate::f64_or_nan")]
    pub stdev_ns: f64,
    /// Smallest value (histogram: lowest value of its bucket).
    #[serde(deserialize_with = "crate::f64_or_nan")]
    pub min_ns: f64,
    /// Largest value (histogram: highest value of its bucket).
    #[serde(deserialize_with = "crate::f64_or_nan")]
    pub max_ns: f64,
    /// True when quantiles are exact, false when histogram-derived.
    pub exact: bool,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// The [`crate::STANDARD_QUANTILES`], in order.
    pub quantiles: Vec<QuantileEstimate>,
    /// How the intervals were made, in one line: "order statistic (assumes independent
    /// samples)", or "sectioning over 24 time blocks of 200 ms (t, 23 df)" (see
    /// [`crate::BlockedRecorder::section_summary`]). Empty in summaries stored before it
    /// existed.
    #[serde(default)]
    pub ci_method: String,
}

/// One quantile of a [`Summary`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantileEstimate {
    /// JSON key, e.g. `"p99.9"`.
    pub key: String,
    /// The probability, e.g. 0.999.
    pub q: f64,
    /// Estimate and confidence interval in ns.
    pub est: Estimate,
    /// Time sections the interval was built from (sectioning); 0 = the order-statistic
    /// interval, which assumes independent samples (not time-aware).
    #[serde(default)]
    pub blocks: u32,
}

const NS_PER_US: f64 = 1000.0;

impl Summary {
    /// The estimate stored under `key` (`"p50"`, `"p99.9"`, …).
    pub fn get(&self, key: &str) -> Option<&Estimate> {
        self.quantiles.iter().find(|q| q.key == key).map(|q| &q.est)
    }

    /// The standard quantiles in µs, typed: what [`Summary::distribution_json`] prints.
    pub fn distribution(&self) -> crate::Distribution {
        self.quantiles
            .iter()
            .map(|q| (q.key.clone(), q.est.value / NS_PER_US))
            .collect()
    }

    /// The standard quantiles' intervals in µs, typed: what [`Summary::intervals_json`]
    /// prints.
    pub fn distribution_ci(&self) -> crate::DistributionCi {
        self.quantiles
            .iter()
            .map(|q| {
                let est = crate::Estimate {
                    value: q.est.value / NS_PER_US,
                    lo: q.est.lo / NS_PER_US,
                    hi: q.est.hi / NS_PER_US,
                };
                (q.key.clone(), est)
            })
            .collect()
    }

    /// `{"p50": µs, "p90": µs, …}`: the distribution object of DESIGN.md (microseconds).
    pub fn distribution_json(&self) -> Value {
        let map: Map<String, Value> = self
            .quantiles
            .iter()
            .map(|q| (q.key.clone(), Value::from(q.est.value / NS_PER_US)))
            .collect();
        Value::Object(map)
    }

    /// `{"p50": {"value": µs, "lo": µs, "hi": µs}, …}`.
    pub fn intervals_json(&self) -> Value {
        let map: Map<String, Value> = self
            .quantiles
            .iter()
            .map(|q| {
                let mut inner = Map::new();
                inner.insert("value".into(), Value::from(q.est.value / NS_PER_US));
                inner.insert("lo".into(), Value::from(q.est.lo / NS_PER_US));
                inner.insert("hi".into(), Value::from(q.est.hi / NS_PER_US));
                (q.key.clone(), Value::Object(inner))
            })
            .collect();
        Value::Object(map)
    }
}
