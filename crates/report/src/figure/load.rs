//! Latency against offered load (the ThunderX study's Fig. 1, Tales' utilisation figures):
//! one panel per percentile, one solid line per knob value for the measured latency and a
//! dashed one for its ideal, the SLO as a horizontal line in its percentile's panel, the max
//! load as a vertical line inside its shaded bracket.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::ccdf::legend_line;
use super::{decades, fmt_us, log_tick_us, Drawn};

/// One line: (x, latency µs) points in x order.
#[derive(Clone, Debug)]
pub struct LoadLine {
    pub label: String,
    pub color: RGBColor,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
    /// Per point: its run was not `ok` (saturated, invalid, failed): drawn as a cross.
    pub flagged: Vec<bool>,
}

/// One percentile's panel.
#[derive(Clone, Debug)]
pub struct LoadPanel {
    /// The percentile, e.g. "p99".
    pub key: String,
    pub lines: Vec<LoadLine>,
    /// The SLO's bound in µs, when the SLO is on this percentile.
    pub slo_us: Option<f64>,
}

/// The highest load meeting the SLO and the bracket the search closed it to (x units).
#[derive(Clone, Debug)]
pub struct MaxLoadMark {
    pub x: f64,
    pub lo: f64,
    pub hi: f64,
    pub label: String,
}

#[derive(Clone, Debug)]
pub struct LoadFigure {
    pub x_label: String,
    /// How an x tick reads ("50 %", "12,000").
    pub x_format: fn(f64) -> String,
    pub panels: Vec<LoadPanel>,
    pub max_load: Option<MaxLoadMark>,
}

const SLO_COLOR: RGBColor = RGBColor(200, 0, 0);
const MAX_COLOR: RGBColor = RGBColor(0, 130, 60);

pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    f: &LoadFigure,
) -> Drawn<DB::ErrorType> {
    let font = super::super::font::FAMILY;
    let area = root.titled(title, (font, 22))?;
    let n = f.panels.len().max(1);
    let cells = area.split_evenly((1, n));
    // One x range for every panel, so that a load sits at the same place in each.
    let xs = f
        .panels
        .iter()
        .flat_map(|p| p.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)))
        .chain(f.max_load.iter().flat_map(|m| [m.lo, m.hi]))
        .filter(|x| x.is_finite());
    let (mut xa, mut xb) = (f64::INFINITY, f64::NEG_INFINITY);
    for x in xs {
        xa = xa.min(x);
        xb = xb.max(x);
    }
    if !xa.is_finite() {
        return Ok(());
    }
    let pad = ((xb - xa) * 0.08).max(xb.abs() * 0.02).max(1e-9);
    let (x0, x1) = ((xa - pad).max(0.0), xb + pad);
    for (i, (panel, cell)) in f.panels.iter().zip(cells.iter()).enumerate() {
        draw_panel(cell, panel, f, (x0, x1), i == 0)?;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    cell: &DrawingArea<DB, Shift>,
    panel: &LoadPanel,
    f: &LoadFigure,
    (x0, x1): (f64, f64),
    legend: bool,
) -> Drawn<DB::ErrorType> {
    let font = super::super::font::FAMILY;
    let ys = panel
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(panel.slo_us)
        .filter(|y| y.is_finite() && *y > 0.0);
    let (mut ya, mut yb) = (f64::INFINITY, 0.0f64);
    for y in ys {
        ya = ya.min(y);
        yb = yb.max(y);
    }
    if !ya.is_finite() {
        return Ok(());
    }
    let (y0, y1) = decades(ya, yb);
    let mut chart = ChartBuilder::on(cell)
        .caption(&panel.key, (font, 19))
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(f.x_label.as_str())
        .y_desc(format!("{} latency", panel.key))
        .label_style((font, 15))
        .axis_desc_style((font, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .x_labels(6)
        .x_label_formatter(&|x| (f.x_format)(*x))
        .y_label_formatter(&|y| log_tick_us(*y))
        .draw()?;
    if let Some(m) = &f.max_load {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(m.lo, y0), (m.hi, y1)],
            MAX_COLOR.mix(0.12).filled(),
        )))?;
        let style = MAX_COLOR.stroke_width(2);
        let s = chart.draw_series(std::iter::once(PathElement::new(
            vec![(m.x, y0), (m.x, y1)],
            style,
        )))?;
        if legend {
            s.label(m.label.clone()).legend(legend_line(style, false));
        }
    }
    if let Some(slo) = panel.slo_us {
        let style = SLO_COLOR.stroke_width(2);
        chart
            .draw_series(std::iter::once(DashedPathElement::new(
                vec![(x0, slo), (x1, slo)],
                10,
                4,
                style,
            )))?
            .label(format!("SLO {} ≤ {}", panel.key, fmt_us(slo)))
            .legend(legend_line(style, true));
    }
    for l in &panel.lines {
        if l.points.is_empty() {
            continue;
        }
        let style = l.color.stroke_width(2);
        let s = if l.dashed {
            chart.draw_series(std::iter::once(DashedPathElement::new(
                l.points.clone(),
                6,
                4,
                style,
            )))?
        } else {
            chart.draw_series(LineSeries::new(l.points.clone(), style))?
        };
        if legend {
            s.label(l.label.clone())
                .legend(legend_line(style, l.dashed));
        }
        // Markers: a dot per measured point, a cross where the run was not ok.
        let marks = l
            .points
            .iter()
            .zip(l.flagged.iter().copied().chain(std::iter::repeat(false)));
        if !l.dashed {
            chart.draw_series(marks.map(|(&(x, y), bad)| {
                if bad {
                    Cross::new((x, y), 5, l.color.stroke_width(2)).into_dyn()
                } else {
                    Circle::new((x, y), 3, l.color.filled()).into_dyn()
                }
            }))?;
        }
    }
    // The legend in the first panel, and in the one that holds the SLO's line.
    if legend || panel.slo_us.is_some() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((font, 14))
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(160, 160, 160))
            .draw()?;
    }
    Ok(())
}
