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
    /// samples)", or "sectioning over 24 time blocks of 200 ms (t on logs, 23 df)" (see
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
    /// Makes the quantiles' intervals monotone in q, as the truth is. The true p99 is at
    /// least the true p90, which is at least the p90's lower end whenever the p90's interval
    /// holds it: so a p99 interval reaching below the p90's lower end starts there instead;
    /// likewise a p90 interval reaching above the p99's upper end ends there. Ends only move
    /// inward, never past their estimate; an end that is NaN neither moves nor moves others.
    /// When some intervals account for time (`blocks > 0`), those that do not (the
    /// order-statistic fallback, which assumes independence and is too narrow for a run) may
    /// move but do not move the others: a p99.99 from too few samples in time does not cut
    /// the p99.9's upper end. For quantiles of one distribution only (not for ratios such as
    /// the excess).
    pub fn monotone_intervals(&mut self) {
        let mixed = self.quantiles.iter().any(|q| q.blocks > 0);
        let mut order: Vec<usize> = (0..self.quantiles.len()).collect();
        order.sort_by(|&a, &b| self.quantiles[a].q.total_cmp(&self.quantiles[b].q));
        let mut floor = f64::NEG_INFINITY;
        for &i in &order {
            let source = !mixed || self.quantiles[i].blocks > 0;
            let e = &mut self.quantiles[i].est;
            if e.lo.is_nan() {
                continue;
            }
            let lo = e.lo;
            if floor > e.lo {
                e.lo = floor.min(e.value.max(e.lo));
            }
            if source {
                floor = floor.max(lo);
            }
        }
        let mut ceiling = f64::INFINITY;
        for &i in order.iter().rev() {
            let source = !mixed || self.quantiles[i].blocks > 0;
            let e = &mut self.quantiles[i].est;
            if e.hi.is_nan() {
                continue;
            }
            let hi = e.hi;
            if ceiling < e.hi {
                e.hi = ceiling.max(e.value.min(e.hi));
            }
            if source {
                ceiling = ceiling.min(hi);
            }
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(ends: &[(f64, f64, f64, f64)]) -> Summary {
        Summary {
            count: 1,
            mean_ns: 0.0,
            stdev_ns: 0.0,
            min_ns: 0.0,
            max_ns: 0.0,
            exact: true,
            confidence: 0.95,
            quantiles: ends
                .iter()
                .map(|&(q, value, lo, hi)| QuantileEstimate {
                    key: format!("p{}", q * 100.0),
                    q,
                    est: Estimate { value, lo, hi },
                    blocks: 3,
                })
                .collect(),
            ci_method: String::new(),
        }
    }

    fn ends(s: &Summary) -> Vec<(f64, f64)> {
        s.quantiles.iter().map(|q| (q.est.lo, q.est.hi)).collect()
    }

    #[test]
    fn intervals_become_monotone_in_q_moving_only_inward() {
        // p99.9's lower end below p99's, p99's upper end above p99.9's; the extra quantile
        // p95 comes last (as summarize_with appends extras) and is ordered by q
        let mut s = summary(&[
            (0.5, 100.0, 90.0, 110.0),
            (0.99, 400.0, 300.0, 900.0),
            (0.999, 600.0, 250.0, 800.0),
            (0.95, 250.0, 80.0, 1000.0),
        ]);
        s.monotone_intervals();
        assert_eq!(
            ends(&s),
            vec![(90.0, 110.0), (300.0, 800.0), (300.0, 800.0), (90.0, 800.0)]
        );
        // already monotone: unchanged; NaN ends are left alone and move nothing
        let mut m = summary(&[(0.5, 1.0, 0.5, 2.0), (0.9, f64::NAN, f64::NAN, f64::NAN)]);
        let before = ends(&m);
        m.monotone_intervals();
        assert_eq!(format!("{:?}", ends(&m)), format!("{before:?}"));
        // an order-statistic interval (blocks 0) among sectioned ones moves but moves nothing
        let mut mixed = summary(&[
            (0.99, 400.0, 300.0, 500.0),
            (0.999, 600.0, 250.0, 900.0),
            (0.9999, 700.0, 200.0, 720.0),
        ]);
        mixed.quantiles[2].blocks = 0;
        mixed.monotone_intervals();
        assert_eq!(
            ends(&mixed),
            vec![(300.0, 500.0), (300.0, 900.0), (300.0, 720.0)]
        );
        // never past the estimate (estimates that are not monotone themselves)
        let mut odd = summary(&[(0.5, 100.0, 95.0, 105.0), (0.9, 90.0, 80.0, 99.0)]);
        odd.monotone_intervals();
        assert_eq!(ends(&odd), vec![(95.0, 100.0), (90.0, 99.0)]);
    }
}
