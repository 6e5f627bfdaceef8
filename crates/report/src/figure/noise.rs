//! The host-noise figures of Where Has My Time Gone? (Figs. 7 and 8), one curve per probed
//! CPU: left, the CDF of the gaps the probe loop saw (length across, log; fraction of gaps
//! up to it, linear); right, the CCDF of aggregated time lost (gap length across; the
//! fraction of the observation window lost to gaps at least that long, log).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::ccdf::legend_line;
use super::{decades, log_tick_us, Drawn};

/// One CPU's curves, lengths in µs.
#[derive(Clone, Debug)]
pub struct NoiseCurve {
    pub label: String,
    pub color: RGBColor,
    /// (gap length, fraction of gaps ≤ it), non-decreasing in both.
    pub gap_cdf: Vec<(f64, f64)>,
    /// (gap length, fraction of the window lost to gaps ≥ it), non-increasing in the second.
    pub lost_ccdf: Vec<(f64, f64)>,
}

/// The two panels over the probed CPUs.
#[derive(Clone, Debug, Default)]
pub struct NoiseFigure {
    pub curves: Vec<NoiseCurve>,
}

/// The empirical CDF of `lens_ns` as (µs, fraction ≤), one point per distinct length.
pub fn gap_cdf(lens_ns: &[u64]) -> Vec<(f64, f64)> {
    let mut sorted = lens_ns.to_vec();
    sorted.sort_unstable();
    let n = sorted.len() as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, &x) in sorted.iter().enumerate() {
        let us = x as f64 / 1000.0;
        let f = (i + 1) as f64 / n;
        match out.last_mut() {
            Some(last) if last.0 == us => last.1 = f,
            _ => out.push((us, f)),
        }
    }
    out
}

fn positive(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y > 0.0)
}

impl NoiseFigure {
    /// Whether any curve has a point to draw.
    pub fn is_empty(&self) -> bool {
        self.curves.iter().all(|c| {
            positive(&c.gap_cdf).next().is_none() && positive(&c.lost_ccdf).next().is_none()
        })
    }
}

pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    f: &NoiseFigure,
) -> Drawn<DB::ErrorType> {
    let font = super::super::font::FAMILY;
    let root = root.titled(title, (font, 20))?;
    let (left, right) = root.split_horizontally(root.dim_in_pixel().0 / 2);
    draw_cdf(&left, f)?;
    draw_lost(&right, f)
}

fn x_range(f: &NoiseFigure, pick: fn(&NoiseCurve) -> &Vec<(f64, f64)>) -> Option<(f64, f64)> {
    let xs: Vec<f64> = f
        .curves
        .iter()
        .flat_map(|c| positive(pick(c)).map(|p| p.0).collect::<Vec<_>>())
        .collect();
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(0.0, f64::max);
    lo.is_finite().then(|| decades(lo, hi))
}

fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, impl plotters::coord::CoordTranslate>,
    pos: SeriesLabelPosition,
) -> Drawn<DB::ErrorType> {
    let font = super::super::font::FAMILY;
    chart
        .configure_series_labels()
        .position(pos)
        .label_font((font, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}

fn draw_cdf<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    f: &NoiseFigure,
) -> Drawn<DB::ErrorType> {
    let Some((x0, x1)) = x_range(f, |c| &c.gap_cdf) else {
        return Ok(());
    };
    let font = super::super::font::FAMILY;
    let mut chart = ChartBuilder::on(area)
        .caption("CDF of gaps (Fig. 7)", (font, 16))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d((x0..x1).log_scale(), 0.0..1.0f64)?;
    chart
        .configure_mesh()
        .x_desc("gap length")
        .y_desc("fraction of gaps ≤ x")
        .label_style((font, 14))
        .axis_desc_style((font, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .x_label_formatter(&|x| log_tick_us(*x))
        .draw()?;
    for c in &f.curves {
        // A step function: each length holds its fraction until the next.
        let mut pts: Vec<(f64, f64)> = Vec::new();
        let mut prev = 0.0;
        for (x, y) in positive(&c.gap_cdf) {
            pts.push((x, prev));
            pts.push((x, y));
            prev = y;
        }
        let style = c.color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(pts, style))?
            .label(c.label.clone())
            .legend(legend_line(style, false));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}

fn draw_lost<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    f: &NoiseFigure,
) -> Drawn<DB::ErrorType> {
    let Some((x0, x1)) = x_range(f, |c| &c.lost_ccdf) else {
        return Ok(());
    };
    let ymin = f
        .curves
        .iter()
        .flat_map(|c| positive(&c.lost_ccdf).map(|p| p.1).collect::<Vec<_>>())
        .fold(1.0f64, f64::min);
    let ymax = f
        .curves
        .iter()
        .flat_map(|c| positive(&c.lost_ccdf).map(|p| p.1).collect::<Vec<_>>())
        .fold(0.0f64, f64::max);
    let (y0, y1) = decades(ymin, ymax.max(ymin));
    let font = super::super::font::FAMILY;
    let mut chart = ChartBuilder::on(area)
        .caption("CCDF of aggregated time lost (Fig. 8)", (font, 16))
        .margin(12)
        .margin_right(24)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (x0..x1).log_scale(),
            // Slightly below the lowest decade so that its tick is labelled.
            (y0 * 0.98..y1.min(1.0).max(y0 * 10.0)).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("gap length ≥ x")
        .y_desc("fraction of time lost")
        .label_style((font, 14))
        .axis_desc_style((font, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .x_label_formatter(&|x| log_tick_us(*x))
        .y_label_formatter(&|y| {
            let k = y.log10();
            if (k - k.round()).abs() < 1e-6 {
                format!("{}%", trim_pct(y * 100.0))
            } else {
                String::new()
            }
        })
        .draw()?;
    for c in &f.curves {
        let style = c.color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(positive(&c.lost_ccdf), style))?
            .label(c.label.clone())
            .legend(legend_line(style, false));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn trim_pct(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cdf_of_gaps_steps_at_each_distinct_length() {
        let c = gap_cdf(&[2_000, 1_000, 5_000, 2_000]);
        assert_eq!(c, vec![(1.0, 0.25), (2.0, 0.75), (5.0, 1.0)]);
        assert!(gap_cdf(&[]).is_empty());
    }

    #[test]
    fn a_noise_figure_draws_as_svg() {
        let f = super::super::Figure {
            name: "noise".into(),
            title: "host noise".into(),
            width: 900,
            height: 380,
            body: super::super::Body::Noise(NoiseFigure {
                curves: vec![NoiseCurve {
                    label: "CPU 0".into(),
                    color: super::super::color(0),
                    gap_cdf: gap_cdf(&[1_500, 2_000, 40_000, 3_000_000]),
                    lost_ccdf: vec![(1.5, 0.03), (2.0, 0.029), (40.0, 0.028), (3000.0, 0.02)],
                }],
            }),
        };
        assert!(!f.is_empty());
        let svg = f.svg().unwrap();
        assert!(
            svg.contains("CDF of gaps") && svg.contains("time lost"),
            "{}",
            &svg[..200]
        );
        assert!(svg.contains("CPU 0"));
    }
}
