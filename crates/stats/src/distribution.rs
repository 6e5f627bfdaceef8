//! [`Distribution`]: percentiles by key, in the unit of the JSON shape they print as.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

struct DistributionVisitor;

impl<'de> Visitor<'de> for DistributionVisitor {
    type Value = Distribution;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of percentiles, e.g. {\"p50\": 12.5}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Distribution, A::Error> {
        let mut out = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Option<f64>>()? {
            out.push((k, v.unwrap_or(f64::NAN)));
        }
        Ok(Distribution(out))
    }
}

impl<'de> Deserialize<'de> for Distribution {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Distribution, D::Error> {
        d.deserialize_map(DistributionVisitor)
    }
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
}
