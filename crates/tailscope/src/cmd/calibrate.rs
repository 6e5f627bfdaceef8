//! `tailscope calibrate`: the paper's method (§3.2) — saturate the target, invert the peak
//! throughput to get the amortised time per request; stored for later `--rate N%` runs. For a
//! target with W workers the per-worker service time is W times that (the ideal uses it).

use lab::Db;

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use crate::cli::CalibrateArgs;
use crate::exit::usage;
use crate::output;

pub fn run(a: &CalibrateArgs) -> anyhow::Result<i32> {
    let (tplan, cspec) = a.opts.plan(&a.target)?;
    let db = db_path(&a.db)?;
    let obs = Progress::new(a.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(&stop, &obs)?;
    let (workers, _) = ready.ideal_shape(None, None)?;
    let result = lab::calibrate(&ready, &cspec, workers, &db, &stop, &obs);
    let url = ready.url.clone();
    let stopped = ready.stop();
    let c = result?;
    stopped?;
    if a.json {
        output::print_json(&c.to_json(&a.target, &url))?;
    } else {
        output::print_with(|w| report::terminal::calibration(w, &url, &c))?;
    }
    Ok(if c.interrupted { 1 } else { 0 })
}
