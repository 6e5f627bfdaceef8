//! Ratios against time (an A/B comparison's per-pair ratios): one panel per percentile, the
//! ratio candidate ÷ baseline on a log axis (×1 drawn), each series as markers (one shape and
//! colour per series, e.g. per order within a pair) with its geometric mean dashed, the overall
//! estimate as a line inside its shaded interval, and the tolerance's zone shaded around ×1.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::ccdf::legend_line;
use super::Drawn;

/// One series of (x, ratio) points, drawn as markers.
#[derive(Clone, Debug)]
pub struct RatioSeries {
    pub label: String,
    pub color: RGBColor,
    /// Triangles instead of dots (so that the series differ without their colours too).
    pub triangle: bool,
    pub points: Vec<(f64, f64)>,
    /// The series' mean ratio, drawn as a dashed line across the panel.
    pub mean: Option<f64>,
}

/// One percentile's panel.
#[derive(Clone, Debug)]
pub struct RatioPanel {
    pub title: String,
    pub series: Vec<RatioSeries>,
    /// The overall ratio with its interval (value, lo, hi).
    pub overall: Option<(f64, f64, f64)>,
    pub overall_label: String,
}

#[derive(Clone, Debug)]
pub struct RatioFigure {
    pub x_label: String,
    pub y_label: String,
    /// The verdicts' tolerance (0.1 for 10 %): its zone [1/(1+t), 1+t] is shaded.
    pub tolerance: Option<f64>,
    pub panels: Vec<RatioPanel>,
}

const OVERALL: RGBColor = RGBColor(40, 40, 40);
const ZONE: RGBColor = RGBColor(44, 160, 44);

fn usable(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.1.is_finite() && p.1 > 0.0
}

impl RatioFigure {
    /// Whether any panel has a point to draw.
    pub fn is_empty(&self) -> bool {
        self.panels
            .iter()
            .all(|p| p.series.iter().all(|s| !s.points.iter().any(usable)))
    }
}

/// "×1.25", "×0.8".
fn ratio_tick(v: f64) -> String {
    let s = if v >= 10.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    format!("×{s}")
}

/// Round ratios for a log axis over `[lo, hi]` (which holds 1): ×1 and, outwards from it, the
/// round values at least an eighth of the range apart.
pub(crate) fn ratio_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const MANTISSAS: [f64; 12] = [1.0, 1.1, 1.2, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0];
    let mut nice: Vec<f64> = Vec::new();
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    for e in a..=b {
        for m in MANTISSAS {
            let v = m * 10f64.powi(e);
            if v >= lo && v <= hi {
                nice.push(v);
            }
        }
    }
    let gap = (hi / lo).ln() / 8.0;
    let mut up = vec![1.0];
    for &v in nice.iter().filter(|v| **v > 1.0) {
        if (v / up[up.len() - 1]).ln() >= gap {
            up.push(v);
        }
    }
    let mut down = Vec::new();
    let mut last = 1.0;
    for &v in nice.iter().rev().filter(|v| **v < 1.0) {
        if (last / v).ln() >= gap {
            down.push(v);
            last = v;
        }
    }
    down.reverse();
    down.extend(up);
    down
}

/// The corner of the panel with the fewest points under it (the upper left on a tie): the
/// legend hides no marker when one corner is free.
fn legend_corner(
    panel: &RatioPanel,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::LowerLeft, false, false),
        (SeriesLabelPosition::LowerRight, true, false),
    ];
    let at = |p: &(f64, f64)| {
        let fx = (p.0 - x0) / (x1 - x0);
        let fy = (p.1 / y0).ln() / (y1 / y0).ln();
        (fx, fy)
    };
    let under = |right: bool, upper: bool| {
        panel
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| usable(p))
            .map(at)
            .filter(|(fx, fy)| {
                let x_in = if right { *fx > 0.4 } else { *fx < 0.6 };
                let y_in = if upper { *fy > 0.55 } else { *fy < 0.45 };
                x_in && y_in
            })
            .count()
    };
    let mut best = (SeriesLabelPosition::UpperLeft, usize::MAX);
    for (pos, right, upper) in corners {
        let n = under(right, upper);
        if n < best.1 {
            best = (pos, n);
        }
    }
    best.0
}

pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    f: &RatioFigure,
) -> Drawn<DB::ErrorType> {
    let font = super::super::font::FAMILY;
    let area = root.titled(title, (font, 22))?;
    let n = f.panels.len().max(1);
    let cells = area.split_evenly((1, n));
    // One x range and one y range for every panel, so that the panels read alike.
    let points = || {
        f.panels
            .iter()
            .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter()))
            .filter(|p| usable(p))
    };
    let (mut xa, mut xb) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in points() {
        xa = xa.min(p.0);
        xb = xb.max(p.0);
    }
    if !xa.is_finite() {
        return Ok(());
    }
    let tol = f.tolerance.filter(|t| t.is_finite() && *t > 0.0);
    let ys = points()
        .map(|p| p.1)
        .chain(
            f.panels
                .iter()
                .filter_map(|p| p.overall)
                .flat_map(|(v, lo, hi)| [v, lo, hi]),
        )
        .chain(tol.into_iter().flat_map(|t| [1.0 + t, 1.0 / (1.0 + t)]))
        .filter(|y| y.is_finite() && *y > 0.0);
    let (mut ya, mut yb) = (1.0f64, 1.0f64);
    for y in ys {
        ya = ya.min(y);
        yb = yb.max(y);
    }
    // A little room above and below, on the log scale.
    let pad = ((yb / ya).ln() * 0.08).max(0.02).exp();
    let (y0, y1) = (ya / pad, yb * pad);
    let pad = ((xb - xa) * 0.04).max(0.6);
    let (x0, x1) = (xa - pad, xb + pad);
    for (i, (panel, cell)) in f.panels.iter().zip(cells.iter()).enumerate() {
        draw_panel(cell, panel, f, (x0, x1), (y0, y1), tol, i == 0)?;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    cell: &DrawingArea<DB, Shift>,
    panel: &RatioPanel,
    f: &RatioFigure,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    tol: Option<f64>,
    legend: bool,
) -> Drawn<DB::ErrorType> {
    let font = super::super::font::FAMILY;
    let ticks = ratio_ticks(y0, y1);
    let mut chart = ChartBuilder::on(cell)
        .caption(&panel.title, (font, 19))
        .margin(10)
        .margin_right(20)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, (y0..y1).log_scale().with_key_points(ticks))?;
    chart
        .configure_mesh()
        .x_desc(f.x_label.as_str())
        .y_desc(f.y_label.as_str())
        .label_style((font, 15))
        .axis_desc_style((font, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .x_labels(10)
        .x_max_light_lines(0)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-9 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| ratio_tick(*y))
        .draw()?;
    if let Some(t) = tol {
        let s = chart.draw_series(std::iter::once(Rectangle::new(
            [(x0, 1.0 / (1.0 + t)), (x1, 1.0 + t)],
            ZONE.mix(0.10).filled(),
        )))?;
        if legend {
            s.label(format!(
                "tolerance ±{:.0} % (×{:.3} to ×{:.3})",
                t * 100.0,
                1.0 / (1.0 + t),
                1.0 + t
            ))
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 5), (x + 21, y + 5)], ZONE.mix(0.25).filled())
            });
        }
    }
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(x0, 1.0), (x1, 1.0)],
        BLACK.mix(0.6).stroke_width(1),
    )))?;
    if let Some((v, lo, hi)) = panel.overall {
        if lo.is_finite() && hi.is_finite() && lo > 0.0 && hi > 0.0 {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0, lo), (x1, hi)],
                OVERALL.mix(0.14).filled(),
            )))?;
        }
        if v.is_finite() && v > 0.0 {
            let style = OVERALL.stroke_width(2);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x0, v), (x1, v)],
                    style,
                )))?
                .label(panel.overall_label.clone())
                .legend(legend_line(style, false));
        }
    }
    for s in &panel.series {
        if let Some(m) = s.mean.filter(|m| m.is_finite() && *m > 0.0) {
            chart.draw_series(std::iter::once(DashedPathElement::new(
                vec![(x0, m), (x1, m)],
                8,
                5,
                s.color.stroke_width(2),
            )))?;
        }
    }
    for s in &panel.series {
        let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(usable).collect();
        let color = s.color;
        let drawn = if s.triangle {
            chart.draw_series(
                pts.iter()
                    .map(|&p| TriangleMarker::new(p, 6, color.filled()).into_dyn()),
            )?
        } else {
            chart.draw_series(
                pts.iter()
                    .map(|&p| Circle::new(p, 5, color.filled()).into_dyn()),
            )?
        };
        if legend {
            let label = match s.mean.filter(|m| m.is_finite()) {
                Some(_) => format!("{} (dashed: their mean)", s.label),
                None => s.label.clone(),
            };
            if s.triangle {
                drawn
                    .label(label)
                    .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 6, color.filled()));
            } else {
                drawn
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.filled()));
            }
        }
    }
    chart
        .configure_series_labels()
        .position(legend_corner(panel, (x0, x1), (y0, y1)))
        .label_font((font, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_hold_one_and_round_ratios_only() {
        let t = ratio_ticks(0.85, 1.7);
        assert!(t.contains(&1.0), "{t:?}");
        assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
        assert!(t.iter().all(|v| (0.85..=1.7).contains(v)), "{t:?}");
        assert!(t.len() >= 3, "{t:?}");
        let wide = ratio_ticks(0.2, 9.0);
        assert!(wide.len() <= 12 && wide.contains(&1.0), "{wide:?}");
        assert_eq!(ratio_tick(1.25), "×1.25");
        assert_eq!(ratio_tick(2.0), "×2");
        assert_eq!(ratio_tick(0.8), "×0.8");
    }
}
