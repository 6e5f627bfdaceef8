//! Figures: what the HTML report shows and `--png` writes. Each is data ([`Figure`]) drawn by
//! one function per kind on any plotters backend, so the SVG inlined in a page and the PNG
//! written beside it are the same drawing. Every figure reads without hovering: axes labelled
//! in the paper's terms, a legend, the reference lines (ideal, SLO, max load) drawn and named.

mod bars;
mod ccdf;
mod load;
mod noise;
mod ratio;

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

pub use bars::{height_for as bars_height, StageBar, StagesFigure};
pub use ccdf::{CcdfFigure, Curve};
pub use load::{LoadFigure, LoadLine, LoadPanel, MaxLoadMark};
pub use noise::{gap_cdf, NoiseCurve, NoiseFigure};
pub use ratio::{RatioFigure, RatioPanel, RatioSeries};

use crate::ReportError;

/// Line colours, in order (Tableau 10, which stays distinct in print and for most colour
/// vision deficiencies).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The colour of the `i`-th series.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// What a figure draws.
#[derive(Clone, Debug)]
pub enum Body {
    Ccdf(CcdfFigure),
    Load(LoadFigure),
    Stages(StagesFigure),
    Noise(NoiseFigure),
    Ratio(RatioFigure),
}

/// One figure: its file stem (`run-12-ccdf`), its title and size, what it draws.
#[derive(Clone, Debug)]
pub struct Figure {
    pub name: String,
    pub title: String,
    pub width: u32,
    pub height: u32,
    pub body: Body,
}

type Drawn<E> = Result<(), DrawingAreaErrorKind<E>>;

impl Figure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB::ErrorType> {
        root.fill(&WHITE)?;
        match &self.body {
            Body::Ccdf(c) => ccdf::draw(root, &self.title, c)?,
            Body::Load(l) => load::draw(root, &self.title, l)?,
            Body::Stages(s) => bars::draw(root, &self.title, s)?,
            Body::Noise(n) => noise::draw(root, &self.title, n)?,
            Body::Ratio(r) => ratio::draw(root, &self.title, r)?,
        }
        root.present()
    }

    /// The figure as an SVG document (for inlining in a page).
    pub fn svg(&self) -> Result<String, ReportError> {
        crate::font::register()?;
        let mut s = String::new();
        {
            let root =
                SVGBackend::with_string(&mut s, (self.width, self.height)).into_drawing_area();
            self.draw(&root).map_err(|e| ReportError::Draw {
                figure: self.name.clone(),
                msg: e.to_string(),
            })?;
        }
        Ok(s)
    }

    /// Writes the figure as a PNG file.
    pub fn png(&self, path: &Path) -> Result<(), ReportError> {
        crate::font::register()?;
        let root = BitMapBackend::new(path, (self.width, self.height)).into_drawing_area();
        self.draw(&root).map_err(|e| ReportError::Write {
            path: path.display().to_string(),
            msg: e.to_string(),
        })
    }

    /// Whether there is anything to draw (a figure of empty series is left out of a report).
    pub fn is_empty(&self) -> bool {
        match &self.body {
            Body::Ccdf(c) => c
                .curves
                .iter()
                .all(|c| ccdf::usable(&c.points).next().is_none()),
            Body::Load(l) => l
                .panels
                .iter()
                .all(|p| p.lines.iter().all(|l| l.points.is_empty())),
            Body::Stages(s) => s.rows.is_empty(),
            Body::Noise(n) => n.is_empty(),
            Body::Ratio(r) => r.is_empty(),
        }
    }
}

/// Whole decades around `[lo, hi]` (both positive): the log axes of the paper's figures.
pub(crate) fn decades(lo: f64, hi: f64) -> (f64, f64) {
    let a = 10f64.powf(lo.log10().floor());
    let mut b = 10f64.powf(hi.log10().ceil());
    if b <= a {
        b = a * 10.0;
    }
    (a, b)
}

/// The unit a latency of `us` µs is printed in: (µs per unit, its name), switched at 1 ms and
/// at 1 s.
pub fn us_unit(us: f64) -> (f64, &'static str) {
    if us >= 1e6 {
        (1e6, "s")
    } else if us >= 1e3 {
        (1e3, "ms")
    } else {
        (1.0, "µs")
    }
}

/// `x` to 3 significant digits (two decimals below 10), "-" when it is not finite.
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A latency in µs for an axis or a label: 3 significant digits, the unit switched at 1 ms
/// (seconds keep one decimal from 10 s up).
pub fn fmt_us(us: f64) -> String {
    if !us.is_finite() {
        return "-".into();
    }
    let (scale, unit) = us_unit(us);
    let x = us / scale;
    if unit == "s" && x >= 10.0 {
        format!("{x:.1} s")
    } else {
        format!("{} {unit}", sig3(x))
    }
}

/// A log axis tick in µs: decades and their 2× and 5× only, so labels never crowd.
pub(crate) fn log_tick_us(v: f64) -> String {
    let m = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|k| (m - k).abs() < 1e-6) {
        if v >= 1e6 {
            format!("{} s", trim(v / 1e6))
        } else if v >= 1000.0 {
            format!("{} ms", trim(v / 1000.0))
        } else {
            format!("{} µs", trim(v))
        }
    } else {
        String::new()
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_enclose_the_range() {
        assert_eq!(decades(42.0, 870.0), (10.0, 1000.0));
        assert_eq!(decades(10.0, 10.0), (10.0, 100.0));
    }

    #[test]
    fn latencies_read_in_their_unit() {
        assert_eq!(fmt_us(52.345), "52.3 µs");
        assert_eq!(fmt_us(1520.0), "1.52 ms");
        assert_eq!(fmt_us(0.4), "0.40 µs");
        assert_eq!(log_tick_us(200.0), "200 µs");
        assert_eq!(log_tick_us(5000.0), "5 ms");
        assert_eq!(log_tick_us(300.0), "");
        assert_eq!(log_tick_us(1e7), "10 s");
        assert_eq!(fmt_us(1_193_000.0), "1.19 s");
    }
}
