//! Whether a run's tail was steady over time: the sectioning intervals (and any single
//! summary of a run) mean something only if it was.
//!
//! Three looks at the p99, per view:
//! (a) a trend: Spearman's rank correlation of the blocks' p99 with time (t approximation,
//!     two-sided; flagged below [`TREND_ALPHA`]);
//! (b) windows whose p99 moved: above [`MOVE_FACTOR`] × the windows' median p99 and beyond
//!     [`MOVE_MADS`] robust spreads (1.4826·MAD) from it (or below median ÷ factor and as far
//!     under), among windows with at least [`MIN_WINDOW_COUNT`] requests;
//! (c) the spread between blocks against what sampling within a block would give if the
//!     samples were independent (q(1−q)/(n_b f²), f the density at the quantile): reported
//!     as a ratio with its χ² p-value, but not used for `steady`, because a steady queue's
//!     autocorrelation alone inflates it (that inflation is why the intervals are sectioned).

use serde::{Deserialize, Serialize};
use stats::{BlockEstimate, BlockedRecorder, Quantile};

use crate::windows::Window;

/// A trend whose two-sided p-value is below this makes the tail not steady.
pub const TREND_ALPHA: f64 = 0.01;
/// A window's p99 must be this many times above (or below) the typical one to have moved.
pub const MOVE_FACTOR: f64 = 3.0;
/// … and this many robust spreads away from it.
pub const MOVE_MADS: f64 = 6.0;
/// Windows with fewer requests are not judged (their p99 is about their maximum).
pub const MIN_WINDOW_COUNT: u64 = 200;
/// At most this many moved spans are listed.
const MAX_MOVED: usize = 10;

/// A stretch of adjacent windows whose p99 moved (its largest p99).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MovedSpan {
    pub start_s: f64,
    pub end_s: f64,
    pub p99_us: f64,
}

/// The steadiness of one view's p99.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TailStationarity {
    pub steady: bool,
    /// Blocks with enough samples for a p99 (≥ 5 expected beyond it) used by (a) and (c).
    pub blocks: u32,
    /// (a) Spearman's ρ of block p99 against time and its two-sided p-value (None with fewer
    /// than 5 blocks).
    pub trend_rho: Option<f64>,
    pub trend_p_value: Option<f64>,
    /// (b) Windows judged, their median p99 and robust spread (1.4826·MAD), µs.
    pub windows: u32,
    pub typical_p99_us: f64,
    pub spread_p99_us: f64,
    /// Windows whose p99 moved, adjacent ones merged (at most 10 spans).
    pub moved: Vec<MovedSpan>,
    /// Number of windows that moved (before merging and capping).
    pub moved_windows: u32,
    /// (c) Between-block variance of the p99 ÷ the variance independent sampling within the
    /// blocks would give, and its χ² p-value under independence (descriptive: a steady but
    /// autocorrelated queue has a ratio above 1 too).
    pub dispersion_ratio: Option<f64>,
    pub dispersion_p_value_if_independent: Option<f64>,
}

/// Whether the run's tail was steady, per view, with a sentence for the terminal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stationarity {
    pub steady: bool,
    pub summary: String,
    pub user: TailStationarity,
    pub server: Option<TailStationarity>,
}

const P99: f64 = 0.99;

/// The user view from the measured blocks and the windows' `p99_us`; the server view from
/// its blocks and the windows' `server_p99_us`.
pub(crate) fn stationarity(
    user_blk: &BlockedRecorder,
    server_blk: Option<&BlockedRecorder>,
    windows: &[Window],
) -> Option<Stationarity> {
    let user_w: Vec<(f64, f64, u64, f64)> = windows
        .iter()
        .map(|w| (w.start_s, w.end_s, w.count, w.p99_us))
        .collect();
    let user = tail(user_blk, &user_w)?;
    let server = server_blk.and_then(|b| {
        let sw: Vec<(f64, f64, u64, f64)> = windows
            .iter()
            .filter_map(|w| Some((w.start_s, w.end_s, w.count, w.server_p99_us?)))
            .collect();
        tail(b, &sw)
    });
    let steady = user.steady && server.as_ref().is_none_or(|s| s.steady);
    let mut summary = sentence("tail", &user);
    if let Some(s) = &server {
        if !s.steady || !user.steady {
            summary.push_str("; ");
            summary.push_str(&sentence("server tail", s));
        }
    }
    Some(Stationarity {
        steady,
        summary,
        user,
        server,
    })
}

fn tail(blk: &BlockedRecorder, windows: &[(f64, f64, u64, f64)]) -> Option<TailStationarity> {
    let p99 = Quantile::new(P99).ok()?;
    let need = (5.0 / (1.0 - P99)).ceil() as u64;
    let blocks: Vec<BlockEstimate> = blk
        .block_quantiles(p99)
        .into_iter()
        .filter(|b| b.count >= need)
        .collect();
    let (trend_rho, trend_p_value) = if blocks.len() >= 5 {
        let v: Vec<f64> = blocks.iter().map(|b| b.value).collect();
        let rho = spearman(&v);
        let df = blocks.len() as u64 - 2;
        let t = rho * (df as f64 / (1.0 - rho * rho).max(1e-12)).sqrt();
        (Some(rho), Some(stats::student_t_two_sided_p(t, df)))
    } else {
        (None, None)
    };
    let (dispersion_ratio, dispersion_p) = dispersion(blk, &blocks).unzip();

    let judged: Vec<&(f64, f64, u64, f64)> =
        windows.iter().filter(|w| w.2 >= MIN_WINDOW_COUNT).collect();
    let mut p: Vec<f64> = judged.iter().map(|w| w.3).collect();
    let typical = median(&mut p).unwrap_or(0.0);
    let mut dev: Vec<f64> = p.iter().map(|x| (x - typical).abs()).collect();
    let spread = 1.4826 * median(&mut dev).unwrap_or(0.0);
    let moved_w: Vec<&(f64, f64, u64, f64)> = judged
        .iter()
        .copied()
        .filter(|w| {
            let x = w.3;
            let far = (x - typical).abs() > MOVE_MADS * spread;
            far && (x > typical * MOVE_FACTOR || x * MOVE_FACTOR < typical)
        })
        .collect();
    let mut moved: Vec<MovedSpan> = Vec::new();
    for w in &moved_w {
        match moved.last_mut() {
            Some(m) if (m.end_s - w.0).abs() < 1e-9 => {
                m.end_s = w.1;
                m.p99_us = m.p99_us.max(w.3);
            }
            _ => moved.push(MovedSpan {
                start_s: w.0,
                end_s: w.1,
                p99_us: w.3,
            }),
        }
    }
    moved.truncate(MAX_MOVED);
    let trending = trend_p_value.is_some_and(|p| p < TREND_ALPHA);
    Some(TailStationarity {
        steady: !trending && moved_w.is_empty(),
        blocks: blocks.len() as u32,
        trend_rho,
        trend_p_value,
        windows: judged.len() as u32,
        typical_p99_us: typical,
        spread_p99_us: spread,
        moved_windows: moved_w.len() as u32,
        moved,
        dispersion_ratio,
        dispersion_p_value_if_independent: dispersion_p,
    })
}

/// (c): Σ (ξ_b − ξ̄)² / Var_iid(ξ_b) over k blocks, ~ χ²_{k−1} for independent samples.
fn dispersion(blk: &BlockedRecorder, blocks: &[BlockEstimate]) -> Option<(f64, f64)> {
    if blocks.len() < 3 {
        return None;
    }
    let (a, b) = (Quantile::new(0.985).ok()?, Quantile::new(0.995).ok()?);
    let dx = blk.quantile(b)? - blk.quantile(a)?;
    if dx <= 0.0 {
        return None;
    }
    let f = 0.01 / dx; // density at the p99
    let var = |n: u64| P99 * (1.0 - P99) / (n as f64 * f * f);
    let wsum: f64 = blocks.iter().map(|b| 1.0 / var(b.count)).sum();
    let mean = blocks.iter().map(|b| b.value / var(b.count)).sum::<f64>() / wsum;
    let d: f64 = blocks
        .iter()
        .map(|b| (b.value - mean).powi(2) / var(b.count))
        .sum();
    let nu = (blocks.len() - 1) as f64;
    // Wilson–Hilferty: (χ²/ν)^(1/3) ≈ N(1 − 2/(9ν), 2/(9ν))
    let c = 2.0 / (9.0 * nu);
    let z = ((d / nu).cbrt() - (1.0 - c)) / c.sqrt();
    Some((d / nu, 1.0 - stats::normal_cdf(z)))
}

/// Spearman's ρ of the values against their order (ties get average ranks).
fn spearman(v: &[f64]) -> f64 {
    let n = v.len();
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut rank = vec![0.0; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0;
        for &k in &idx[i..=j] {
            rank[k] = r;
        }
        i = j + 1;
    }
    let mean = (n - 1) as f64 / 2.0;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (t, r) in rank.iter().enumerate() {
        let (x, y) = (t as f64 - mean, r - mean);
        sxy += x * y;
        sxx += x * x;
        syy += y * y;
    }
    if sxx > 0.0 && syy > 0.0 {
        sxy / (sxx * syy).sqrt()
    } else {
        0.0
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    })
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn sentence(what: &str, t: &TailStationarity) -> String {
    if t.steady {
        return format!(
            "{what} steady over {} blocks and {} windows",
            t.blocks, t.windows
        );
    }
    let mut parts = Vec::new();
    if let Some(m) = t.moved.first() {
        parts.push(format!(
            "p99 moved in {} window{} ({:.1}–{:.1} s: {} vs {} typical)",
            t.moved_windows,
            if t.moved_windows == 1 { "" } else { "s" },
            m.start_s,
            m.end_s,
            fmt_us(m.p99_us),
            fmt_us(t.typical_p99_us)
        ));
    }
    if let (Some(rho), Some(p)) = (t.trend_rho, t.trend_p_value) {
        if p < TREND_ALPHA {
            parts.push(format!(
                "p99 trends {} over {} blocks (Spearman ρ {rho:.2}, p {p:.2e})",
                if rho > 0.0 { "up" } else { "down" },
                t.blocks
            ));
        }
    }
    format!("{what} NOT steady: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_monotone_and_reversed_series() {
        assert!((spearman(&[1.0, 2.0, 5.0, 9.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&[9.0, 5.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert_eq!(spearman(&[3.0, 3.0, 3.0]), 0.0);
    }
}
