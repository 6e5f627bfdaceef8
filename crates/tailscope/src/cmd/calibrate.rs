//! `tailscope calibrate`: the paper's method (§3.2) — saturate the target, invert the peak
//! throughput to get the amortised time per request; stored for later `--rate N%` runs. For a
//! target with W workers the per-worker service time is W times that (the ideal uses it).

use lab::{CalibrateSpec, Db, TargetPlan};

use super::common::{db_path, parse_cpus_flag, parse_duration, shutdown_flag};
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::CalibrateArgs;
use crate::exit::usage;
use crate::output::{self, outln};

pub fn run(a: &CalibrateArgs) -> anyhow::Result<i32> {
    let cpus = parse_cpus_flag("--server-cpus", a.server_cpus.as_deref())?;
    let nullrpc = load::NullRpcWorkload {
        request_size: a.request_size,
        stamps: !a.no_stamps,
    };
    let spec = super::target::spec(&a.target, &a.server, &cpus, nullrpc)?;
    let tplan = TargetPlan::new(&spec).map_err(lab_err)?;
    let duration = parse_duration("--duration", &a.duration)?;
    let warmup = parse_duration("--warmup", &a.warmup)?;
    if a.connections == 0 || a.outstanding == 0 {
        return Err(usage("--connections and --outstanding must be at least 1"));
    }
    if a.connections > 100_000 || a.outstanding > 100_000 {
        return Err(usage(
            "--connections and --outstanding must be at most 100000",
        ));
    }
    if duration.is_zero() {
        return Err(usage("--duration must be positive"));
    }
    let cspec = CalibrateSpec {
        connections: a.connections,
        outstanding: a.outstanding,
        duration,
        warmup,
    };
    let db = db_path(&a.db)?;
    let obs = Progress::new(a.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(&stop, &obs).map_err(lab_err)?;
    let (workers, _) = ready.ideal_shape(None, None).map_err(lab_err)?;
    let result = lab::calibrate(&ready, &cspec, workers, &db, &stop, &obs);
    let url = ready.url.clone();
    let stopped = ready.stop();
    let c = result.map_err(lab_err)?;
    stopped.map_err(lab_err)?;
    if a.json {
        output::print_json(&c.to_json(&a.target, &url))?;
    } else {
        outln!(
            "{url}: peak {:.0} req/s over {} requests → {} per request ({} per request per worker with {} worker(s)) (run {})",
            c.peak_rps,
            c.requests,
            report::terminal::fmt_ns(c.service_ns),
            report::terminal::fmt_ns(c.per_worker_service_ns),
            c.workers,
            c.run_id
        )?;
    }
    Ok(if c.interrupted { 1 } else { 0 })
}
