//! Lenient serde readers for stored JSON written by any version: a field this build cannot
//! read as its type reads as its default, as a path lookup that finds nothing would.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Reads a field through [`Value`]: a value this type cannot hold reads as its default.
pub fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// A list read element by element: an element this type cannot hold reads as its default
/// (a list that is no list: empty).
pub fn lenient_each<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let v: Vec<Value> = lenient(d)?;
    Ok(v.iter().map(read).collect())
}

/// A list present (`Some`, read as [`lenient_each`]: a value that is no list is empty) or
/// absent (`None`, with `#[serde(default)]`).
pub fn lenient_list<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    lenient_each(d).map(Some)
}

/// A stored JSON value read as `T`; the default when it is not an object of that shape.
pub fn read<T: DeserializeOwned + Default>(v: &Value) -> T {
    T::deserialize(v).unwrap_or_default()
}
