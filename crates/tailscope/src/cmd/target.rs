//! The target options of `run`, `calibrate` and `sweep`, parsed into `lab`'s typed spec.

use lab::{SpawnSpec, TargetSpec, WorkloadSpec};
use load::{NullRpcWorkload, Popularity, SizeDist};

use super::common::parse_sched;
use crate::cli::TargetArgs;
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

/// The target spec from the URL, the target options and the null-RPC request options.
pub fn spec(
    url: &str,
    t: &TargetArgs,
    server_cpus: &[usize],
    nullrpc: NullRpcWorkload,
) -> anyhow::Result<TargetSpec> {
    let popularity: Popularity = t.popularity.parse().or_usage_ctx("--popularity")?;
    let workload = WorkloadSpec {
        get_ratio: t.get_ratio,
        key_size: t.key_size.parse::<SizeDist>().or_usage_ctx("--key-size")?,
        value_size: t
            .value_size
            .parse::<SizeDist>()
            .or_usage_ctx("--value-size")?,
        items: t.items,
        popularity,
        files: t.files,
        file_size: t.file_size,
        nullrpc,
    };
    let spawn = if t.spawn {
        Some(SpawnSpec {
            threads: t.server_threads,
            cpus: server_cpus.to_vec(),
            sched: parse_sched(t.server_sched.as_deref())?,
            arch: t
                .server_arch
                .as_deref()
                .map(|a| a.parse::<server::Arch>().or_usage_ctx("--server-arch"))
                .transpose()?,
            work: t
                .server_work
                .as_deref()
                .map(super::model::parse_service)
                .transpose()?,
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
        None
    };
    Ok(TargetSpec {
        url: url.to_string(),
        spawn,
        workload,
        churn: t.churn.as_deref().map(parse_churn).transpose()?,
        preload: !t.no_preload,
    })
}

/// A `lab` error as the CLI reports it: bad input is a usage error (exit 2).
pub fn lab_err(e: lab::LabError) -> anyhow::Error {
    if e.is_invalid() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}
