//! The one font every figure is drawn with, embedded: plotters' bitmap backend draws glyphs
//! itself (a PNG without a font has no text), and with a font registered the SVG labels are laid
//! out with real metrics too. A subset of DejaVu Sans (18 KB; see `assets/LICENSE-DejaVu.txt`)
//! keeps the binary small and the figures the same on every machine, fonts installed or not.

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

use crate::ReportError;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");

/// The family name every figure asks for.
pub(crate) const FAMILY: &str = "sans-serif";

/// Registers the embedded font under [`FAMILY`] (once per process).
pub(crate) fn register() -> Result<(), ReportError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        // Bold and italic fall back to the normal face (plotters' lookup does that).
        register_font(FAMILY, FontStyle::Normal, FONT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(ReportError::Font)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_embedded_font_registers() {
        super::register().unwrap();
        super::register().unwrap();
    }
}
