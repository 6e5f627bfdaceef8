//! The target options of `run`, `calibrate` and `sweep`, parsed into `lab`'s typed spec.

use lab::{SpawnSpec, TargetSpec, WorkloadSpec};
use load::NullRpcWorkload;

use crate::cli::{ServerSideArgs, TargetArgs};
use crate::exit::{usage, OrUsage};

fn parse_churn(s: &str) -> anyhow::Result<(u32, u32)> {
    let bad = || {
        usage(format!(
            "--churn must be MIN,MAX requests per connection (e.g. 20,40), got '{s}'"
        ))
    };
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    let (a, b): (u32, u32) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a == 0 || b < a {
        return Err(bad());
    }
    Ok((a, b))
}

/// The target of `run` or `sweep` and the server-side flags they share, all checked before
/// anything starts: `--server-cpus`, the target's spec, `--workers`, every `--server-pid`.
pub fn side_spec(
    url: &str,
    s: &ServerSideArgs,
    nullrpc: NullRpcWorkload,
) -> anyhow::Result<(Vec<usize>, TargetSpec)> {
    let server_cpus = s.server_cpus.clone().unwrap_or_default().0;
    let spec = spec(url, &s.server, &server_cpus, nullrpc)?;
    if s.workers == Some(0) {
        return Err(usage("--workers must be at least 1"));
    }
    for &pid in &s.server_pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).is_dir() {
            return Err(usage(format!("--server-pid: no process {pid}")));
        }
    }
    Ok((server_cpus, spec))
}

/// The target spec from the URL, the target options and the null-RPC request options.
pub fn spec(
    url: &str,
    t: &TargetArgs,
    server_cpus: &[usize],
    nullrpc: NullRpcWorkload,
) -> anyhow::Result<TargetSpec> {
    let workload = WorkloadSpec {
        get_ratio: t.get_ratio,
        key_size: t.key_size.value,
        value_size: t.value_size.value,
        items: t.items,
        popularity: t.popularity,
        files: t.files,
        file_size: t.file_size,
        nullrpc,
    };
    let spawn = if t.spawn {
        Some(SpawnSpec {
            threads: t.server_threads,
            cpus: server_cpus.to_vec(),
            sched: t.server_sched.clone(),
            arch: t.server_arch,
            work: t
                .server_work
                .as_deref()
                .map(super::model::parse_service)
                .transpose()?,
            ..isolation_spec(t)?
        })
    } else {
        if t.server_threads.is_some()
            || t.server_sched.is_some()
            || t.server_arch.is_some()
            || t.server_work.is_some()
        {
            return Err(usage(
                "--server-threads, --server-sched, --server-arch and --server-work need --spawn",
            ));
        }
        let placed = t.server_memory_mb.is_some()
            || t.open_file_cache
            || t.server_instances.is_some()
            || t.server_smt.is_some()
            || t.server_numa.is_some()
            || t.server_cpuset.is_some()
            || t.server_memory.is_some()
            || t.server_cpu_quota.is_some()
            || t.net_rate.is_some()
            || t.net_dev.is_some()
            || t.llc_ways.is_some();
        if placed {
            return Err(usage(
                "--server-memory-mb, --open-file-cache, --server-instances, --server-smt, --server-numa, --server-cpuset, --server-memory, --server-cpu-quota, --net-rate, --net-dev and --llc-ways need --spawn (a server tailscope starts and places)",
            ));
        }
        None
    };
    Ok(TargetSpec {
        url: url.to_string(),
        spawn,
        workload,
        churn: t.churn.as_deref().map(parse_churn).transpose()?,
        preload: !t.no_preload,
        stress: t.stress.clone(),
    })
}

/// The scale-out, SMT and isolation flags as a spawn spec (the other fields default).
fn isolation_spec(t: &TargetArgs) -> anyhow::Result<SpawnSpec> {
    Ok(SpawnSpec {
        memory_mb: t.server_memory_mb,
        open_file_cache: t.open_file_cache,
        instances: t.server_instances,
        smt: t.server_smt,
        numa: t.server_numa.clone(),
        cpuset: t.server_cpuset.clone().unwrap_or_default().0,
        memory_limit_bytes: t
            .server_memory
            .as_deref()
            .map(|s| lab::parse_bytes(s).map_err(|e| usage(format!("--server-memory: {e}"))))
            .transpose()?,
        cpu_quota: t
            .server_cpu_quota
            .as_deref()
            .map(|s| {
                s.trim().parse::<f64>().map_err(|_| {
                    usage(format!(
                        "--server-cpu-quota: '{s}' is not a fraction of a CPU (e.g. 0.5)"
                    ))
                })
            })
            .transpose()?,
        net_rate_bps: t
            .net_rate
            .as_deref()
            .map(|s| host::isolate::parse_rate_bps(s).or_usage_ctx("--net-rate"))
            .transpose()?,
        net_dev: t.net_dev.clone(),
        llc_ways: t.llc_ways,
        ..SpawnSpec::default()
    })
}

pub use super::common::lab_err;
