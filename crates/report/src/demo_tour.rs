//! What `tailscope demo` shows: each run as it is stored (kept for the plot, the `--json`
//! object and the closing lines), and the tour's end for a person or as one JSON object.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Mutex;

use lab::{Observer, Run, SweepResult, View};
use serde::Serialize;
use serde_json::{json, Value};

use crate::Series;

/// What shows a run as it is stored.
pub type Show<'a> = &'a (dyn Fn(&Run) + Sync);

/// An observer that passes notes and progress on to `inner`, shows each stored run with
/// `show`, and keeps, per run, its CCDFs, its JSON (with its `load_pct`) and what this host
/// allows at its load.
pub struct Tour<'a> {
    inner: &'a dyn Observer,
    /// Pass on the notes' indented detail lines (a calibration's steps) too.
    detail: bool,
    show: Option<Show<'a>>,
    series: Mutex<Vec<Series>>,
    runs: Mutex<Vec<Value>>,
    allows: Mutex<Vec<String>>,
}

/// What a [`Tour`] kept.
pub struct Toured {
    /// Measured and ideal (dashed) CCDF per run.
    pub series: Vec<Series>,
    /// Each run's `--json` object with its `load_pct`.
    pub runs: Vec<Value>,
    /// Per run: its load and what this host allows there (one line each).
    pub allows: Vec<String>,
}

impl<'a> Tour<'a> {
    pub fn new(inner: &'a dyn Observer, show: Option<Show<'a>>) -> Self {
        Tour {
            inner,
            detail: true,
            show,
            series: Mutex::new(Vec::new()),
            runs: Mutex::new(Vec::new()),
            allows: Mutex::new(Vec::new()),
        }
    }

    /// Without the notes' indented detail lines (a calibration's steps): the tour's screen.
    pub fn brief(mut self) -> Self {
        self.detail = false;
        self
    }

    pub fn finish(self) -> Toured {
        Toured {
            series: self.series.into_inner().unwrap_or_default(),
            runs: self.runs.into_inner().unwrap_or_default(),
            allows: self.allows.into_inner().unwrap_or_default(),
        }
    }
}

impl Observer for Tour<'_> {
    fn note(&self, msg: &str) {
        if self.detail || !msg.starts_with("  ") {
            self.inner.note(msg)
        }
    }
    fn progress(&self, phase: &str, done: u64, total: u64) {
        self.inner.progress(phase, done, total)
    }
    fn phase_done(&self, phase: &str) {
        self.inner.phase_done(phase)
    }
    fn run_done(&self, run: &Run) {
        self.inner.run_done(run);
        if let Some(show) = self.show {
            show(run);
        }
        let pct = run.config.load_pct.unwrap_or(0.0);
        let label = format!("{pct:.0}% load");
        if let Ok(mut s) = self.series.lock() {
            // One colour per load (its repeats and its ideal share it): measured solid, the
            // ideal dashed; the repeats carry one label, named once in the legend.
            let mut loads: Vec<String> = Vec::new();
            for x in s.iter() {
                let l = x.label.split_once(' ').map_or("", |(_, l)| l).to_string();
                if !loads.contains(&l) {
                    loads.push(l);
                }
            }
            let group = loads
                .iter()
                .position(|l| *l == label)
                .unwrap_or(loads.len());
            let measured = run.analysis.measured_ccdf_us.clone();
            let mut m = Series::new(format!("measured {label}"), measured);
            m.group = Some(group);
            s.push(m);
            let ideal = run.analysis.ideal_ccdf_us.clone();
            let mut i = Series::new(format!("ideal {label}"), ideal);
            i.dashed = true;
            i.group = Some(group);
            s.push(i);
        }
        if let Ok(mut r) = self.runs.lock() {
            let mut v = run.to_json();
            v["load_pct"] = json!(pct);
            r.push(v);
        }
        if let Ok(mut l) = self.allows.lock() {
            l.push(crate::demo_view::allows(&label, run));
        }
    }
}

/// The demo's server in its `--json` object.
#[derive(Serialize)]
pub struct DemoServer<'a> {
    pub arch: &'static str,
    pub workers: u32,
    pub work: &'a str,
    pub cpu: usize,
}

/// `demo --json`.
#[derive(Serialize)]
pub struct DemoJson<'a> {
    pub experiment_id: i64,
    pub server: DemoServer<'a>,
    pub calibration: Option<Value>,
    pub runs: &'a [Value],
    pub status: &'a lab::SweepStatus,
    pub points: &'a [lab::Point],
    pub host_noise: Option<&'a noise::HostNoise>,
    pub closing: &'a [String],
    pub exit_code: i32,
    pub interrupted: bool,
    pub written: &'a [String],
}

/// The demo's end for a person: the sweep's table by each run's headline view, the files
/// written, the closing lines.
pub fn end(
    w: &mut dyn Write,
    result: &SweepResult,
    runs: &[Value],
    written: &[String],
    closing: &[String],
) -> io::Result<()> {
    writeln!(w)?;
    let heads: BTreeMap<i64, View> = runs
        .iter()
        .filter_map(|v| {
            let view = serde_json::from_value(v["headline_view"].clone()).ok()?;
            Some((v["run_id"].as_i64()?, view))
        })
        .collect();
    crate::sweep_view::sweep_views(w, result, &heads)?;
    for f in written {
        writeln!(w, "wrote {f}")?;
    }
    writeln!(w)?;
    for l in closing {
        writeln!(w, "{l}")?;
    }
    Ok(())
}
