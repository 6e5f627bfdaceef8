//! Percentile keys as the user writes them (`p95`, `p99.5`) and as the outputs name them.

use crate::error::{invalid, LabError};

/// The five percentiles every distribution reports.
pub const KEYS: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];

/// `p95` → ("p95", 0.95), `p99.50` → ("p99.5", 0.995): a percentile strictly between 0 and
/// 100, its key written canonically.
pub fn parse_percentile(text: &str) -> Result<(String, f64), LabError> {
    let t = text.trim().to_ascii_lowercase();
    let num = t.strip_prefix('p').unwrap_or(&t);
    let v: f64 = num
        .parse()
        .map_err(|_| invalid(format!("not a percentile: '{text}' (e.g. p95, p99.5)")))?;
    if !(v > 0.0 && v < 100.0) {
        return Err(invalid(format!(
            "a percentile must be strictly between 0 and 100, got '{text}'"
        )));
    }
    Ok((format!("p{v}"), v / 100.0))
}

/// `--percentiles 50,95,99.5`: the keys beyond the standard five, with their probabilities.
pub fn parse_percentiles(text: &str) -> Result<Vec<(String, f64)>, LabError> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(invalid(format!(
                "--percentiles: an empty item in '{text}' (e.g. 50,95,99.5)"
            )));
        }
        let (k, q) = parse_percentile(part).map_err(|e| invalid(format!("--percentiles: {e}")))?;
        if !KEYS.contains(&k.as_str()) && !out.iter().any(|(o, _)| *o == k) {
            out.push((k, q));
        }
    }
    Ok(out)
}
