//! [`Distribution`]: percentiles by key, in the unit of the JSON shape they print as.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Estimate;

/// The documented distribution object, typed: `{"p50": 12.5, "p90": …}` — latencies in µs
/// (from [`crate::Summary::distribution`]), or ratios for an excess. Keys keep their order.
///
/// Serde reads and writes exactly that object, so a stored summary reads back into the same
/// value: a figure that is not a number (NaN, ±inf) is written as `null` by JSON and read
/// back as NaN.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Distribution(pub Vec<(String, f64)>);

impl Distribution {
    /// The figure under `key` (`"p99"`, `"p99.9"`, …).
    pub fn get(&self, key: &str) -> Option<f64> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Keys and figures in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

impl FromIterator<(String, f64)> for Distribution {
    fn from_iter<I: IntoIterator<Item = (String, f64)>>(iter: I) -> Self {
        Distribution(iter.into_iter().collect())
    }
}

impl Serialize for Distribution {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_pairs(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Distribution {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Distribution, D::Error> {
        let expecting = "an object of percentiles, e.g. {\"p50\": 12.5}";
        let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        deserialize_pairs(d, expecting, nan).map(Distribution)
    }
}

/// The documented object of a distribution's intervals, typed:
/// `{"p50": {"value": 12.5, "lo": 12.1, "hi": 12.9}, …}` — latencies in µs (from
/// [`crate::Summary::distribution_ci`]). Keys keep their order.
///
/// Serde reads and writes exactly that object; a figure that is not a number is written as
/// `null` by JSON and read back as NaN (see [`Estimate`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DistributionCi(pub Vec<(String, Estimate)>);

impl DistributionCi {
    /// The interval under `key` (`"p99"`, …).
    pub fn get(&self, key: &str) -> Option<&Estimate> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, e)| e)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(String, Estimate)> for DistributionCi {
    fn from_iter<I: IntoIterator<Item = (String, Estimate)>>(iter: I) -> Self {
        DistributionCi(iter.into_iter().collect())
    }
}

impl Serialize for DistributionCi {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_pairs(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for DistributionCi {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DistributionCi, D::Error> {
        let expecting =
            "an object of intervals, e.g. {\"p50\": {\"value\": 12.5, \"lo\": 12, \"hi\": 13}}";
        deserialize_pairs(d, expecting, |e: Estimate| e).map(DistributionCi)
    }
}

/// Writes keyed values as one object, in their order.
fn serialize_pairs<S: Serializer, V: Serialize>(
    pairs: &[(String, V)],
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

/// Reads one object into its keyed values, in their order: each value read as a `T` and
/// made a `V` by `make`.
fn deserialize_pairs<'de, D: Deserializer<'de>, T: Deserialize<'de>, V>(
    d: D,
    expecting: &'static str,
    make: fn(T) -> V,
) -> Result<Vec<(String, V)>, D::Error> {
    struct Pairs<T, V> {
        expecting: &'static str,
        make: fn(T) -> V,
    }

    impl<'de, T: Deserialize<'de>, V> Visitor<'de> for Pairs<T, V> {
        type Value = Vec<(String, V)>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(self.expecting)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = map.next_entry::<String, T>()? {
                out.push((k, (self.make)(v)));
            }
            Ok(out)
        }
    }

    d.deserialize_map(Pairs { expecting, make })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_the_object_it_writes_with_null_as_nan() {
        let d: Distribution = [("p50".to_string(), 12.5), ("p99".to_string(), f64::NAN)]
            .into_iter()
            .collect();
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v, serde_json::json!({"p50": 12.5, "p99": null}));
        let back: Distribution = serde_json::from_value(v).unwrap();
        assert_eq!(back.get("p50"), Some(12.5));
        assert!(back.get("p99").unwrap().is_nan());
        assert_eq!(back.get("p90"), None);
        assert!(serde_json::from_value::<Distribution>(serde_json::json!([1])).is_err());
    }

    #[test]
    fn intervals_read_back_the_object_they_write_with_null_as_nan() {
        let e = |value, lo, hi| Estimate { value, lo, hi };
        let d: DistributionCi = [
            ("p50".to_string(), e(12.5, 12.0, 13.0)),
            ("p99".to_string(), e(40.0, f64::NAN, 44.0)),
        ]
        .into_iter()
        .collect();
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "p50": {"value": 12.5, "lo": 12.0, "hi": 13.0},
                "p99": {"value": 40.0, "lo": null, "hi": 44.0},
            })
        );
        let back: DistributionCi = serde_json::from_value(v).unwrap();
        assert_eq!(back.get("p50"), Some(&e(12.5, 12.0, 13.0)));
        assert!(back.get("p99").unwrap().lo.is_nan());
        assert_eq!(back.get("p90"), None);
        assert!(serde_json::from_value::<DistributionCi>(serde_json::json!([1])).is_err());
    }
}
