//! `tailscope tune`: parse the options into a `lab::TunePlan`, walk, print.

use lab::Db;

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use crate::cli::TuneArgs;
use crate::exit::usage;
use crate::output;

pub fn run(a: &TuneArgs) -> anyhow::Result<i32> {
    let o = &a.opts;
    let mut tplan = o.plan(&a.target)?;
    let gate = report::gate::Gate::new(&o.gate)?;
    tplan.slo = gate.slo.clone();
    tplan.template.extra_quantiles = gate.extra.clone();
    let db = db_path(&a.db)?;
    tplan.check(&db)?;
    let obs = Progress::new(a.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let result = lab::tune(&tplan, &db, &stop, &obs)?;
    let (gated, all) = result.suites();
    let written = if gate.slo.is_some() {
        gate.write_split(&gated, &all)?
    } else {
        Vec::new()
    };
    if a.json {
        let mut v = serde_json::to_value(&result)?;
        v["tuned"] = serde_json::json!(result.tuned().map(|t| &t.name));
        v["written"] = serde_json::json!(written);
        output::print_json(&v)?;
    } else {
        output::print_with(|w| report::outcome_view::tune(w, &result))?;
        output::print_with(|w| report::outcome_view::written(w, &written))?;
    }
    Ok(result.exit_code(gate.undecided_fails))
}
