//! An observer that passes everything on and keeps each stored run's views: the rows of a
//! sweep carry their status, not their views, and `sweep --json` and its table show both.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::slo::View;
use crate::sweep::SweepResult;
use measurement::Observer;
use measurement::{Run, Views};

/// Passes everything on to `inner` and keeps each stored run's views, by run id.
pub struct Headlines<'a> {
    pub inner: &'a dyn Observer,
    pub views: Mutex<BTreeMap<i64, Views>>,
}

impl<'a> Headlines<'a> {
    pub fn new(inner: &'a dyn Observer) -> Headlines<'a> {
        Headlines {
            inner,
            views: Mutex::new(BTreeMap::new()),
        }
    }

    /// Each run's headline view, by run id.
    pub fn headlines(&self) -> BTreeMap<i64, View> {
        self.views
            .lock()
            .map(|m| m.iter().map(|(k, v)| (*k, v.headline)).collect())
            .unwrap_or_default()
    }

    /// The sweep's JSON with each row's `views` and `headline_view` added.
    pub fn json_of(&self, result: &SweepResult) -> Value {
        let mut v = result.to_json();
        let views = self.views.lock().map(|m| m.clone()).unwrap_or_default();
        if let Some(rows) = v.get_mut("rows").and_then(|r| r.as_array_mut()) {
            for row in rows {
                let Some(x) = row["run_id"].as_i64().and_then(|id| views.get(&id)) else {
                    continue;
                };
                row["headline_view"] = json!(x.headline);
                row["views"] = json!(x);
            }
        }
        v
    }
}

impl Observer for Headlines<'_> {
    fn note(&self, msg: &str) {
        self.inner.note(msg)
    }
    fn progress(&self, phase: &str, done: u64, total: u64) {
        self.inner.progress(phase, done, total)
    }
    fn phase_done(&self, phase: &str) {
        self.inner.phase_done(phase)
    }
    fn run_done(&self, run: &Run) {
        if let (Some(id), Ok(mut m)) = (run.run_id, self.views.lock()) {
            m.insert(id, run.views.clone());
        }
        self.inner.run_done(run)
    }
}
