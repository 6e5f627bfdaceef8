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

use plotters::prelude::*;

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
    /// Drawn dashed-looking (thinner, lighter) — used for the ideal beside a measurement.
    pub dashed: bool,
}

impl Series {
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            label: label.into(),
            points,
            dashed: false,
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

/// Writes a log–log CCDF plot of `series`: PNG when `path` ends in `.png`, else SVG.
pub fn ccdf_plot(path: &Path, title: &str, series: &[Series]) -> Result<(), ReportError> {
    if !is_png(path) {
        return ccdf_svg(path, title, series);
    }
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
            color: figure::color(i),
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
    f.png(path)
}

/// Writes a log–log CCDF plot of `series` to an SVG file.
pub fn ccdf_svg(path: &Path, title: &str, series: &[Series]) -> Result<(), ReportError> {
    font::register()?;
    let (mut xmin, mut xmax, mut ymin) = (f64::INFINITY, 0.0f64, 1.0f64);
    for s in series {
        for (x, y) in usable(&s.points) {
            xmin = xmin.min(x);
            xmax = xmax.max(x);
            ymin = ymin.min(y);
        }
    }
    if !xmin.is_finite() || xmax <= 0.0 {
        return Err(ReportError::Empty);
    }
    // Whole decades on both axes, as in the paper's figures.
    let x0 = 10f64.powf(xmin.log10().floor());
    let mut x1 = 10f64.powf(xmax.log10().ceil());
    if x1 <= x0 {
        x1 = x0 * 10.0;
    }
    // Slightly below the last decade so that its tick (and percentile label) is drawn.
    let y0 = 10f64.powf(ymin.log10().floor()).min(0.1) * 0.98;
    let werr = |e: &dyn std::fmt::Display| ReportError::Write {
        path: path.display().to_string(),
        msg: e.to_string(),
    };

    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| werr(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(120)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..1.0f64).log_scale())
        .map_err(|e| werr(&e))?;
    chart
        .configure_mesh()
        .x_desc("latency (µs)")
        .y_desc("P[X >= x]  (percentile)")
        .x_label_formatter(&|x| format!("{x}"))
        .y_label_formatter(&|y| {
            let k = -y.log10();
            if (k - k.round()).abs() < 1e-6 {
                match k.round() as i64 {
                    0 => format!("1 ({})", percentile_label(*y)),
                    k => format!("1e-{k} ({})", percentile_label(*y)),
                }
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(|e| werr(&e))?;

    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = if s.dashed {
            color.mix(0.6).stroke_width(1)
        } else {
            color.stroke_width(2)
        };
        let pts: Vec<(f64, f64)> = usable(&s.points).collect();
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts, style))
            .map_err(|e| werr(&e))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| werr(&e))?;
    root.present().map_err(|e| werr(&e))?;
    Ok(())
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
        ccdf_svg(&path, "test", &[a, b]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("measured") && svg.contains("ideal"));
        assert!(svg.contains("p99.9"));
    }

    #[test]
    fn empty_series_is_an_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let r = ccdf_svg(&path, "t", &[Series::new("x", vec![])]);
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
