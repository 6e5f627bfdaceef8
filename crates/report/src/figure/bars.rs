//! The stage breakdown as bars (the ThunderX study's per-stage latency, Tales §3.3.1's
//! stamps): per stage, the median time of the slowest 1 % of requests against that of median
//! requests, each bar with a whisker out to its p99, and the value written at its end.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{fmt_us, Drawn};

/// One stage: its p50 and p99 (µs) among the slowest 1 % and among median requests.
#[derive(Clone, Debug)]
pub struct StageBar {
    pub stage: String,
    pub slow_p50: f64,
    pub slow_p99: f64,
    pub median_p50: f64,
    pub median_p99: f64,
}

#[derive(Clone, Debug)]
pub struct StagesFigure {
    pub rows: Vec<StageBar>,
    pub slow_label: String,
    pub median_label: String,
}

const SLOW: RGBColor = RGBColor(214, 39, 40);
const MEDIAN: RGBColor = RGBColor(31, 119, 180);

/// The height a figure of `rows` stages needs, in pixels.
pub fn height_for(rows: usize) -> u32 {
    130 + 46 * rows.max(1) as u32
}

pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    f: &StagesFigure,
) -> Drawn<DB::ErrorType> {
    let font = super::super::font::FAMILY;
    let n = f.rows.len();
    if n == 0 {
        return Ok(());
    }
    let xmax = f
        .rows
        .iter()
        .flat_map(|r| [r.slow_p50, r.slow_p99, r.median_p50, r.median_p99])
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let area = root.titled(title, (font, 20))?;
    // The legend goes between the title and the bars, where no bar or label can be.
    let legend_y = area.get_pixel_range().1.start + 10;
    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .margin_right(40)
        .margin_top(34)
        .x_label_area_size(40)
        .y_label_area_size(210)
        .build_cartesian_2d(0.0..xmax * 1.18, 0.0..n as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("time in the stage")
        .x_label_formatter(&|x| fmt_us(*x))
        .label_style((font, 13))
        .axis_desc_style((font, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    // Stage i from the top: the slow bar above the median one inside the band [y, y + 1).
    let y_of = |i: usize| (n - 1 - i) as f64;
    let label = (font, 13).into_font().color(&BLACK);
    let mut slow = Vec::new();
    let mut median = Vec::new();
    for (i, r) in f.rows.iter().enumerate() {
        let y = y_of(i);
        slow.push(Rectangle::new(
            [(0.0, y + 0.53), (r.slow_p50.max(0.0), y + 0.88)],
            SLOW.filled(),
        ));
        median.push(Rectangle::new(
            [(0.0, y + 0.12), (r.median_p50.max(0.0), y + 0.47)],
            MEDIAN.filled(),
        ));
    }
    chart.draw_series(slow)?;
    chart.draw_series(median)?;
    let (mut x, y) = (chart.backend_coord(&(0.0, n as f64)).0, legend_y);
    for (c, t) in [(SLOW, &f.slow_label), (MEDIAN, &f.median_label)] {
        root.draw(&Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()))?;
        root.draw(&Text::new(
            t.clone(),
            (x + 20, y),
            label.pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        x += 40 + 7 * t.chars().count() as i32;
    }
    for (i, r) in f.rows.iter().enumerate() {
        let y = y_of(i);
        for (p50, p99, mid, c) in [
            (r.slow_p50, r.slow_p99, y + 0.705, SLOW),
            (r.median_p50, r.median_p99, y + 0.295, MEDIAN),
        ] {
            if p99 > p50 {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(p50, mid), (p99, mid)],
                    c.mix(0.7).stroke_width(1),
                )))?;
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(p99, mid - 0.1), (p99, mid + 0.1)],
                    c.mix(0.7).stroke_width(1),
                )))?;
            }
            let at = chart.backend_coord(&(p50.max(p99), mid));
            root.draw(&Text::new(
                format!("{} (p99 {})", fmt_us(p50), fmt_us(p99)),
                (at.0 + 5, at.1),
                label.pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        // The stage's name, left of the axis, centred on its band.
        let at = chart.backend_coord(&(0.0, y + 0.5));
        root.draw(&Text::new(
            r.stage.clone(),
            (at.0 - 8, at.1),
            label.pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
    }
    Ok(())
}
