//! A CCDF on log–log axes in the style of Tales of the Tail: latency (µs) across, P[X ≥ x]
//! down, the y axis labelled by percentile (0.01 is p99), each curve with its confidence band.

use plotters::coord::Shift;
use plotters::element::{DashedPathElement, Polygon};
use plotters::prelude::*;

use super::{decades, log_tick_us, Drawn};
use crate::percentile_label;

/// One curve: points (µs, P[X ≥ x]) and, optionally, its band (µs, P low, P high).
#[derive(Clone, Debug)]
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub band: Vec<(f64, f64, f64)>,
    pub color: RGBColor,
    /// Dashed: an ideal beside its measurement.
    pub dashed: bool,
}

/// Curves overlaid on one pair of axes.
#[derive(Clone, Debug, Default)]
pub struct CcdfFigure {
    pub curves: Vec<Curve>,
}

pub(super) fn usable(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y > 0.0)
}

/// The legend's sample of a line: solid, or two dashes (one element type for both, which
/// keeps the closure free of the backend's lifetime).
pub(super) fn legend_line(
    style: ShapeStyle,
    dashed: bool,
) -> impl Fn((i32, i32)) -> DashedPathElement<std::vec::IntoIter<(i32, i32)>, i32> {
    move |(x, y)| {
        let (dash, gap) = if dashed { (8, 5) } else { (21, 1) };
        DashedPathElement::new(vec![(x, y), (x + 21, y)], dash, gap, style)
    }
}

pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    f: &CcdfFigure,
) -> Drawn<DB::ErrorType> {
    let (mut xmin, mut xmax, mut ymin) = (f64::INFINITY, 0.0f64, 1.0f64);
    for c in &f.curves {
        for (x, y) in usable(&c.points) {
            xmin = xmin.min(x);
            xmax = xmax.max(x);
            ymin = ymin.min(y);
        }
    }
    if !xmin.is_finite() {
        return Ok(());
    }
    let (x0, x1) = decades(xmin, xmax);
    // Slightly below the last decade so that its tick (and percentile label) is drawn.
    let y0 = 10f64.powf(ymin.log10().floor()).min(0.1) * 0.98;
    let font = super::super::font::FAMILY;
    let mut chart = ChartBuilder::on(root)
        .caption(title, (font, 20))
        .margin(12)
        .margin_right(28)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..1.0f64).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("latency")
        .y_desc("P[X ≥ x]")
        .label_style((font, 15))
        .axis_desc_style((font, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .x_label_formatter(&|x| log_tick_us(*x))
        .y_label_formatter(&|y| {
            let k = -y.log10();
            if (k - k.round()).abs() < 1e-6 {
                match k.round() as i64 {
                    0 => "1".to_string(),
                    _ => percentile_label(*y),
                }
            } else {
                String::new()
            }
        })
        .draw()?;

    // Bands first, so that every line is drawn over every band.
    for c in &f.curves {
        if c.band.len() < 2 {
            continue;
        }
        let clamp = |p: f64| p.clamp(y0, 1.0);
        let mut poly: Vec<(f64, f64)> = c
            .band
            .iter()
            .filter(|(x, _, _)| *x > 0.0 && x.is_finite())
            .map(|&(x, _, hi)| (x, clamp(hi)))
            .collect();
        poly.extend(
            c.band
                .iter()
                .rev()
                .filter(|(x, _, _)| *x > 0.0 && x.is_finite())
                .map(|&(x, lo, _)| (x, clamp(lo))),
        );
        chart.draw_series(std::iter::once(Polygon::new(
            poly,
            c.color.mix(if c.dashed { 0.10 } else { 0.18 }).filled(),
        )))?;
    }
    let mut named: Vec<&str> = Vec::new();
    for c in &f.curves {
        let pts: Vec<(f64, f64)> = usable(&c.points).collect();
        if pts.is_empty() {
            continue;
        }
        let style = c.color.stroke_width(2);
        let dashed = c.dashed;
        // A label already in the legend (another repeat of one load) is not named again.
        let first = !named.contains(&c.label.as_str());
        named.push(&c.label);
        if dashed {
            let a = chart.draw_series(std::iter::once(DashedPathElement::new(pts, 7, 5, style)))?;
            if first {
                a.label(c.label.clone()).legend(legend_line(style, true));
            }
        } else {
            let a = chart.draw_series(LineSeries::new(pts, style))?;
            if first {
                a.label(c.label.clone()).legend(legend_line(style, false));
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((font, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}
