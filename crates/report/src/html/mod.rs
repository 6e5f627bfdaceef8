//! The HTML report: one self-contained page for stored runs ([`runs_page`]) or a stored
//! experiment ([`experiment_page`]). Everything is inline — styles, figures as SVG, a few lines
//! of script — and the page's Content-Security-Policy forbids every fetch, so it works offline
//! and no request leaves it. Every figure reads as a static picture (a screenshot, a print);
//! the figures also come back as data so that the caller can write them as PNG.

mod ab;
mod command;
mod experiment;
mod run;
mod run_legacy;
mod run_parts;
mod timeline;

use std::fmt::Write as _;

use crate::figure::Figure;
use crate::ReportError;

pub use command::reproduce;
pub use experiment::experiment_page;
pub use run::runs_page;

/// Where a report comes from, printed in its footer.
#[derive(Clone, Debug)]
pub struct Context {
    /// The store the runs were read from.
    pub db: String,
    /// When the page was made (RFC 3339).
    pub generated_at: String,
}

/// A page and the figures it shows (for `--png`).
#[derive(Debug)]
pub struct Report {
    pub html: String,
    pub figures: Vec<Figure>,
}

/// Text for HTML: `<`, `>`, `&`, quotes escaped.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The badge of a status or an SLO verdict as stored: its colour is that of the run status
/// the text reads as (for an experiment's points counted per status, "2 ok, 1 invalid",
/// their worst's) or of the verdict; a row still running, abandoned or of another kind is
/// shown plain.
pub(crate) fn badge(status: &str) -> String {
    use lab::{RunStatus, SweepStatus, Verdict};
    let run_status = status
        .parse::<RunStatus>()
        .or_else(|_| status.parse::<SweepStatus>().map(|s| s.worst()));
    let class = match (run_status, status.parse::<Verdict>()) {
        (Ok(RunStatus::Ok), _) | (_, Ok(Verdict::Meets)) => "ok",
        (Ok(RunStatus::Invalid), _) | (_, Ok(Verdict::Undecided)) => "warn",
        (Ok(RunStatus::Saturated), _) => "sat",
        (Ok(RunStatus::Failed), _) | (_, Ok(Verdict::Violates)) => "bad",
        _ => "other",
    };
    format!("<span class=\"badge {class}\">{}</span>", esc(status))
}

/// A figure in the page: its SVG inline, its caption below. `figures` collects it for PNG.
pub(crate) fn figure_html(
    out: &mut String,
    f: Figure,
    caption: &str,
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    if f.is_empty() {
        return Ok(());
    }
    let svg = f.svg()?;
    let _ = writeln!(
        out,
        "<figure class=\"fig\" data-figure=\"{}\">{svg}<figcaption>{caption}</figcaption></figure>",
        esc(&f.name)
    );
    figures.push(f);
    Ok(())
}

pub(crate) use crate::thousands;

const STYLE: &str = r#"
:root{--fg:#1d2330;--muted:#5b6475;--line:#d9dde5;--bg:#fff;--soft:#f5f7fa}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px 28px 40px}
h1{font-size:26px;margin:0 0 6px}h2{font-size:21px;margin:34px 0 10px;padding-top:14px;border-top:2px solid var(--line)}
h3{font-size:16px;margin:22px 0 8px}
.lede{font-size:17px;margin:6px 0 14px}.muted{color:var(--muted)}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;font-size:13px;font-weight:600;vertical-align:middle}
.badge.ok{background:#dff3e4;color:#17602c}.badge.warn{background:#fff1d6;color:#8a5300}
.badge.sat{background:#ece3fb;color:#5b2a9e}.badge.bad{background:#fde0df;color:#a01c16}.badge.other{background:#e8eaef;color:#434a57}
table{border-collapse:collapse;margin:6px 0 12px;font-size:14px}
th,td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{background:var(--soft);font-weight:600}td.l,th.l{text-align:left;white-space:normal}
tr.insig td{color:var(--muted)}td.hi{background:#fff1d6}td.vhi{background:#fde0df}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:14px}
figure.fig{margin:8px 0;border:1px solid var(--line);border-radius:6px;padding:6px;background:#fff}
figure.fig svg{display:block;width:100%;height:auto}
figcaption{font-size:13px;color:var(--muted);padding:4px 4px 0}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:10px 12px;white-space:pre-wrap;word-break:break-all;font-size:13px}
.note{border-left:4px solid #e0a100;background:#fffaf0;padding:6px 10px;margin:8px 0}
.note.bad{border-color:#c62828;background:#fff5f5}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;font-size:14px}dl.kv dt{color:var(--muted)}dl.kv dd{margin:0}
nav.toc{font-size:14px;margin:8px 0 0}nav.toc a{margin-right:12px}
footer{margin-top:40px;font-size:12px;color:var(--muted)}
.v-worse{color:#a01c16;font-weight:600}.v-better,.v-same{color:#17602c;font-weight:600}.v-undecided{color:#8a5300;font-weight:600}
tr.read td{font-weight:600}ul.carry li.bad{color:#a01c16}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:middle}
"#;

/// A few lines, no library: each figure records where it was laid out (`data-box`, CSS pixels
/// in the page) so that a checker — the test suite — can find it in a screenshot; table cells
/// with a `title` already show their exact values on hover without any script.
const SCRIPT: &str = r#"
(function(){var f=document.querySelectorAll('figure.fig');for(var i=0;i<f.length;i++){var r=f[i].getBoundingClientRect();
f[i].setAttribute('data-box',[Math.round(r.left+window.scrollX),Math.round(r.top+window.scrollY),Math.round(r.width),Math.round(r.height)].join(','));}
document.body.setAttribute('data-page-height',String(Math.ceil(document.documentElement.scrollHeight)));})();
"#;

/// The whole page around `body`.
pub(crate) fn page(title: &str, body: &str, ctx: &Context) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{t}</title>\n<style>{STYLE}</style></head>\n\
<body><main>\n{body}\n<footer>Made by tailscope {v} from {db} at {at}. This page is self-contained: no script, style or font \
is fetched and no request leaves it.</footer></main>\n<script>{SCRIPT}</script></body></html>\n",
        t = esc(title),
        v = env!("CARGO_PKG_VERSION"),
        db = esc(&ctx.db),
        at = esc(&ctx.generated_at),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
    }

    #[test]
    fn a_badge_is_coloured_by_the_status_its_text_reads_as() {
        for (text, class) in [
            ("ok", "ok"),
            ("invalid", "warn"),
            ("saturated", "sat"),
            ("failed", "bad"),
            ("interrupted", "other"),
            ("2 ok, 1 invalid", "warn"),
            ("3 ok, 1 saturated, 1 failed", "bad"),
            ("4 saturated", "sat"),
            ("meets", "ok"),
            ("undecided", "warn"),
            ("violates", "bad"),
            ("running", "other"),
            ("abandoned", "other"),
            ("2 fine", "other"),
        ] {
            assert_eq!(
                badge(text),
                format!("<span class=\"badge {class}\">{text}</span>"),
                "{text}"
            );
        }
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(-1000.0), "-1,000");
    }

    #[test]
    fn the_page_forbids_every_fetch() {
        let p = page(
            "t",
            "<p>x</p>",
            &Context {
                db: "d".into(),
                generated_at: "now".into(),
            },
        );
        assert!(p.contains("default-src 'none'"));
        assert!(!p.contains("http://") && !p.contains("https://"));
    }
}
