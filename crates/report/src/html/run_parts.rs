//! What a run's section draws the same way whether the run is read by field ([`super::run`])
//! or from its stored JSON ([`super::run_legacy`]): the command that reproduces it, a view's
//! CCDF figure, and the host's facts.

use std::fmt::Write as _;

use serde_json::Value;

use super::{esc, thousands};
use crate::figure::{self, Body, CcdfFigure, Curve, Figure};
use crate::stored::{wilson_band, StoredRun, ViewCurves};

const IDEAL_COLOR: plotters::style::RGBColor = plotters::style::RGBColor(40, 40, 40);

/// How to run it again, and what may differ.
pub(super) fn reproduce(out: &mut String, r: &StoredRun) {
    let (cmd, caveats) = super::reproduce(&r.row);
    let _ = writeln!(
        out,
        "<h3>Reproduce</h3><pre>{}</pre>{}",
        esc(&cmd),
        if caveats.is_empty() {
            String::new()
        } else {
            format!(
                "<ul class=\"muted\">{}</ul>",
                caveats
                    .iter()
                    .map(|c| format!("<li>{}</li>", esc(c)))
                    .collect::<String>()
            )
        }
    );
}

/// A view's CCDF figure: measured with its Wilson band, and the ideal (dashed) when there is
/// one.
pub(super) fn view_figure(name: String, title: &str, v: &ViewCurves, ideal_label: &str) -> Figure {
    let mut curves = vec![Curve {
        label: format!("measured (n = {})", thousands(v.measured_n as f64)),
        points: v.measured.clone(),
        band: wilson_band(&v.measured, v.measured_n),
        color: figure::color(0),
        dashed: false,
    }];
    if !v.ideal.is_empty() {
        curves.push(Curve {
            label: ideal_label.to_string(),
            points: v.ideal.clone(),
            band: wilson_band(&v.ideal, v.ideal_n),
            color: IDEAL_COLOR,
            dashed: true,
        });
    }
    Figure {
        name,
        title: title.into(),
        width: 660,
        height: 470,
        body: Body::Ccdf(CcdfFigure { curves }),
    }
}

/// The host facts stored with the run (its row, not its analysis).
pub(super) fn host_facts(out: &mut String, r: &StoredRun) {
    let _ = writeln!(out, "<h3>Host</h3><dl class=\"kv\">");
    if let Some(h) = r.row.host.as_object() {
        for (k, v) in h {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Null => "-".into(),
                other => other.to_string(),
            };
            let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&v));
        }
    }
}
