//! Reports: the last step of tailscope's data flow. Turns distributions (already computed by
//! `stats`/`model`/`load`) into pictures and files a person reads: CCDF plots in the style of
//! Tales of the Tail (log–log, the y axis labelled by percentile; SVG or PNG) and CCDF point
//! tables as CSV, and the terminal view of a [`lab::Run`] ([`terminal`]).
//!
//! Every other output is a module of its own that takes stored runs and experiments:
//! [`html`] (the self-contained report page), [`figure`] (its figures, also as PNG),
//! [`compare`] (`runs compare`), [`hdr`] (HdrHistogram interval logs and `.hgrm` spectra),
//! [`openmetrics`] (a run's or an experiment's summary for Prometheus).
//! [`stored`] reads a run back from the store for them.

pub mod ab_view;
pub mod agents_view;
pub mod brief;
pub mod bursty_view;
pub mod check_view;
pub mod compare;
pub mod demo_tour;
pub mod demo_view;
pub mod experiment;
pub mod export;
pub mod figure;
pub mod files;
mod font;
pub mod gate;
pub mod hdr;
pub mod host_view;
pub mod html;
pub mod model_view;
pub mod openmetrics;
pub mod outcome_view;
pub mod page_files;
pub mod paper_figure;
pub mod plan_view;
pub mod progress;
pub mod pushgateway;
pub mod repeat_view;
pub mod run_view;
pub mod slo_view;
pub mod store_view;
pub mod stored;
pub mod sweep_view;
pub mod synthetic;
pub mod terminal;

use std::io::Write;
use std::path::Path;

/// Errors from writing a report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    #[error("nothing to plot: every series is empty")]
    Empty,
    #[error("cannot write {path}: {msg}")]
    Write { path: String, msg: String },
    #[error("write failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the embedded font could not be loaded")]
    Font,
    #[error("cannot draw figure {figure}: {msg}")]
    Draw { figure: String, msg: String },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("HdrHistogram: {0}")]
    Hdr(String),
    #[error("run {0} has no per-request records")]
    NoRecords(i64),
}

/// One line of a CCDF plot: points (latency in µs, P[X >= x]).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed — used for the ideal beside a measurement.
    pub dashed: bool,
    /// The colour's group: series of one group share one colour (a load's repeats and its
    /// ideal); None, a colour of its own by position.
    pub group: Option<usize>,
}

impl Series {
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            label: label.into(),
            points,
            dashed: false,
            group: None,
        }
    }
}

/// Label of a probability tick on the CCDF's y axis: 10^-k is the (1 - 10^-k) percentile, so the
/// paper labels 0.1 as the 90th, 0.01 as the 99th percentile, and so on.
pub fn percentile_label(p: f64) -> String {
    // Work in whole decades k = -log10(p): p = 10^-k is the percentile 100 − 10^(2−k), written
    // as "p99." followed by k − 2 nines, which avoids floating-point noise such as p99.98999.
    let k = (-p.log10()).round().max(0.0) as usize;
    match k {
        0 => "p0".to_string(),
        1 => "p90".to_string(),
        2 => "p99".to_string(),
        _ => format!("p99.{}", "9".repeat(k - 2)),
    }
}

fn usable(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y > 0.0)
}

/// Whether `path` names a PNG file (by its extension, in any case): plots are written as PNG
/// then, as SVG otherwise.
pub fn is_png(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
}

/// Writes a log–log CCDF plot of `series`: PNG when `path` ends in `.png`, else SVG. Each
/// series has its group's colour (its position's without one, from [`figure::PALETTE`], all
/// of which read on white); a dashed series is drawn dashed; a label already drawn is not
/// repeated in the legend (the repeats of one load are named once).
pub fn ccdf_plot(path: &Path, title: &str, series: &[Series]) -> Result<(), ReportError> {
    if series.iter().all(|s| usable(&s.points).next().is_none()) {
        return Err(ReportError::Empty);
    }
    let curves = series
        .iter()
        .enumerate()
        .map(|(i, s)| figure::Curve {
            label: s.label.clone(),
            points: s.points.clone(),
            band: Vec::new(),
            color: figure::color(s.group.unwrap_or(i)),
            dashed: s.dashed,
        })
        .collect();
    let f = figure::Figure {
        name: "ccdf".into(),
        title: title.into(),
        width: 900,
        height: 600,
        body: figure::Body::Ccdf(figure::CcdfFigure { curves }),
    };
    if is_png(path) {
        return f.png(path);
    }
    let svg = f.svg()?;
    std::fs::write(path, svg).map_err(|e| ReportError::Write {
        path: path.display().to_string(),
        msg: e.to_string(),
    })
}

/// Writes CCDF points as CSV: `series,latency_us,ccdf` with one row per point.
pub fn ccdf_csv(w: &mut impl Write, series: &[Series]) -> Result<(), ReportError> {
    writeln!(w, "series,latency_us,ccdf")?;
    for s in series {
        let label = s.label.replace('"', "'");
        for (x, y) in &s.points {
            writeln!(w, "\"{label}\",{x},{y}")?;
        }
    }
    Ok(())
}

/// A number with thousands separators (a rate, a count).
pub(crate) fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let n = v.round() as i128;
    let s = n.unsigned_abs().to_string();
    let mut o = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            o.push(',');
        }
        o.push(c);
    }
    if n < 0 {
        format!("-{o}")
    } else {
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels_follow_the_paper() {
        assert_eq!(percentile_label(1.0), "p0");
        assert_eq!(percentile_label(0.1), "p90");
        assert_eq!(percentile_label(0.01), "p99");
        assert_eq!(percentile_label(0.001), "p99.9");
        assert_eq!(percentile_label(0.0001), "p99.99");
        assert_eq!(percentile_label(9.9999e-5), "p99.99");
        assert_eq!(percentile_label(1e-6), "p99.9999");
    }

    #[test]
    fn svg_contains_every_series_label() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let a = Series::new("measured", vec![(50.0, 1.0), (80.0, 0.1), (200.0, 0.001)]);
        let mut b = Series::new("ideal", vec![(50.0, 1.0), (70.0, 0.1), (150.0, 0.001)]);
        b.dashed = true;
        ccdf_plot(&path, "test", &[a, b]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("measured") && svg.contains("ideal"));
        assert!(svg.contains("p99.9"));
    }

    /// Issue 36: the demo's picture — a group's curves share one colour (the ideal dashed),
    /// a label drawn twice (two repeats) is named once in the legend, and no colour is too
    /// pale to see on white.
    #[test]
    fn groups_share_a_colour_and_repeats_are_named_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let pts = |k: f64| vec![(50.0 * k, 1.0), (80.0 * k, 0.1), (200.0 * k, 0.001)];
        let mut series = Vec::new();
        for (g, load) in ["30% load", "60% load"].iter().enumerate() {
            for rep in 0..2 {
                let mut m = Series::new(
                    format!("measured {load}"),
                    pts(1.0 + g as f64 + 0.1 * rep as f64),
                );
                m.group = Some(g);
                series.push(m);
                let mut i = Series::new(format!("ideal {load}"), pts(0.9 + g as f64));
                i.dashed = true;
                i.group = Some(g);
                series.push(i);
            }
        }
        ccdf_plot(&path, "demo", &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        // Each label once in the legend's text.
        for l in [
            "measured 30% load",
            "ideal 30% load",
            "measured 60% load",
            "ideal 60% load",
        ] {
            assert_eq!(svg.matches(&format!(">\n{l}\n<")).count(), 1, "{l}");
        }
        // Two colours drawn: the palette's first two, each dark enough to read on white.
        for (i, c) in figure::PALETTE.iter().take(2).enumerate() {
            let hex = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
            assert!(svg.contains(&hex), "group {i}'s colour {hex}");
        }
        assert!(!svg.contains(&{
            let c = figure::PALETTE[2];
            format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
        }));
        for c in figure::PALETTE {
            let luma = 0.2126 * f64::from(c.0) + 0.7152 * f64::from(c.1) + 0.0722 * f64::from(c.2);
            assert!(luma < 190.0, "{c:?} is too pale on white");
        }
    }

    #[test]
    fn empty_series_is_an_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let r = ccdf_plot(&path, "t", &[Series::new("x", vec![])]);
        assert!(matches!(r, Err(ReportError::Empty)));
        assert!(!path.exists());
    }

    #[test]
    fn png_by_extension() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.PNG");
        let a = Series::new("measured", vec![(50.0, 1.0), (80.0, 0.1), (200.0, 0.001)]);
        ccdf_plot(&path, "test", &[a]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(is_png(&path) && !is_png(Path::new("x.svg")));
    }

    #[test]
    fn csv_has_a_row_per_point() {
        let mut out = Vec::new();
        ccdf_csv(&mut out, &[Series::new("a", vec![(1.0, 1.0), (2.0, 0.5)])]).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s.lines().count(), 3);
        assert!(s.contains("\"a\",2,0.5"));
    }
}
