//! The target of a measurement: its URL, the server behind it (started by tailscope with
//! `--spawn`, placed on CPUs with a policy), the workload sent to it, and what its queue
//! structure is for the ideal.

use std::sync::atomic::AtomicBool;

use analysis::QueueStructure;
use load::{HttpWorkload, KvWorkload, Popularity, Protocol, SizeDist, Target, Transport, Workload};
use serde_json::{json, Value};

use super::common::parse_sched;
use crate::cli::TargetArgs;
use crate::exit::{usage, OrUsage};

/// A protocol factory: one codec per connection.
pub type Factory = Box<dyn Fn() -> Box<dyn Protocol> + Send + Sync>;

/// Everything validated about a target before any server is started or any byte sent.
pub struct Plan {
    pub target: Target,
    pub kind: Option<targets::Kind>,
    pub workload: Workload,
    pub churn: Option<(u32, u32)>,
    spawn: Option<targets::SpawnConfig>,
}

/// A target ready to be measured; a spawned server stops when this is dropped.
pub struct Ready {
    pub target: Target,
    pub url: String,
    pub spawned: Option<targets::Spawned>,
    pub workload: Workload,
    pub churn: Option<(u32, u32)>,
    kind: Option<targets::Kind>,
}

fn kind_of(scheme: &str) -> Option<targets::Kind> {
    match scheme {
        "memcached" => Some(targets::Kind::Memcached),
        "http" => Some(targets::Kind::Nginx),
        "redis" => Some(targets::Kind::Redis),
        _ => None,
    }
}

/// `scheme://[host[:port]][/path]` → `scheme://127.0.0.1:1/path`.
fn spawn_placeholder(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("");
            format!("{scheme}://127.0.0.1:1{path}")
        }
        None => url.to_string(),
    }
}

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

/// Validates the target and its options (no process started, nothing sent).
pub fn plan(url: &str, t: &TargetArgs, cpus: &[usize]) -> anyhow::Result<Plan> {
    // With --spawn the address is the spawned server's: `memcached://` (or any host:port,
    // port 0 included) names only the protocol, so validate the URL with a placeholder address.
    let parse_url = if t.spawn {
        spawn_placeholder(url)
    } else {
        url.to_string()
    };
    let target: Target = parse_url.parse::<Target>().or_usage_ctx("target")?;
    let kind = kind_of(&target.scheme);
    let popularity: Popularity = t.popularity.parse().or_usage_ctx("--popularity")?;
    let workload = match kind {
        Some(targets::Kind::Nginx) => {
            let paths = match t.files {
                Some(0) => return Err(usage("--files must be at least 1")),
                Some(n) => (0..n).map(|i| format!("/f{i}")).collect(),
                None if t.spawn => (0..100).map(|i| format!("/f{i}")).collect(),
                None => vec![target.path.clone().unwrap_or_else(|| "/".into())],
            };
            Workload::Http(HttpWorkload { paths, popularity })
        }
        _ => {
            let w = KvWorkload {
                get_ratio: t.get_ratio,
                key_size: t.key_size.parse::<SizeDist>().or_usage_ctx("--key-size")?,
                value_size: t
                    .value_size
                    .parse::<SizeDist>()
                    .or_usage_ctx("--value-size")?,
                items: t.items,
                popularity,
            };
            if kind.is_some() {
                w.validate().or_usage()?;
            }
            Workload::Kv(w)
        }
    };
    let churn = t.churn.as_deref().map(parse_churn).transpose()?;
    if churn.is_some() && kind != Some(targets::Kind::Nginx) {
        return Err(usage("--churn applies to http targets only"));
    }
    let spawn = if t.spawn {
        let Some(k) = kind else {
            return Err(usage(format!(
                "--spawn starts memcached, nginx or redis; {} targets are started with `tailscope serve`",
                target.scheme
            )));
        };
        let mut c = targets::SpawnConfig::new(k);
        c.threads = t.server_threads;
        c.cpus = cpus.to_vec();
        c.sched = parse_sched(t.server_sched.as_deref())?;
        c.udp = target.transport == Transport::Udp;
        if k == targets::Kind::Nginx {
            c.http_files = Some(targets::HttpFiles::uniform(
                t.files.unwrap_or(100),
                t.file_size,
            ));
        }
        c.validate().or_usage()?;
        // Fail now, with the package to install, rather than after the run is set up.
        targets::find_binary(k).or_usage()?;
        Some(c)
    } else {
        if t.server_threads.is_some() || t.server_sched.is_some() {
            return Err(usage("--server-threads and --server-sched need --spawn"));
        }
        None
    };
    Ok(Plan {
        target,
        kind,
        workload,
        churn,
        spawn,
    })
}

impl Plan {
    /// Starts the server when asked and preloads the items of a key-value workload.
    pub fn start(self, preload: bool, stop: &AtomicBool) -> anyhow::Result<Ready> {
        let (target, url, spawned) = match &self.spawn {
            Some(cfg) => {
                let s = targets::Spawned::start(cfg)?;
                let url = s.url();
                let target: Target = url.parse::<Target>()?;
                eprintln!(
                    "spawned {} at {} ({} worker thread(s)); ready after {:.1} ms",
                    s.version(),
                    s.addr(),
                    s.worker_threads(),
                    s.ready_after().as_secs_f64() * 1e3
                );
                (target, url, Some(s))
            }
            None => (self.target.clone(), self.target.to_string(), None),
        };
        if preload && matches!(self.workload, Workload::Kv(_)) && self.kind.is_some() {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_message("preloading items");
            let st = load::preload(&target, &self.workload, 4, stop, &|done, total| {
                bar.set_length(total);
                bar.set_position(done);
            })?;
            bar.finish_and_clear();
            if st.failed > 0 {
                eprintln!(
                    "tailscope: preload: {} of {} items were not stored",
                    st.failed, st.items
                );
            }
        }
        Ok(Ready {
            target,
            url,
            spawned,
            workload: self.workload,
            churn: self.churn,
            kind: self.kind,
        })
    }
}

impl Ready {
    /// The codec factory for this target.
    pub fn factory(&self, request_size: usize, stamps: bool, seed: u64) -> anyhow::Result<Factory> {
        if self.target.scheme == "nullrpc" {
            return super::run::factory(&self.target, request_size, stamps);
        }
        load::protocol_factory(&self.target, &self.workload, seed).or_usage()
    }

    /// The target's worker count and queue structure for the ideal, unless the user said.
    pub fn ideal_shape(
        &self,
        workers: Option<u32>,
        queues: &str,
    ) -> anyhow::Result<(u32, QueueStructure)> {
        let spawned_workers = self.spawned.as_ref().map(|s| s.worker_threads());
        let (auto_workers, auto_queues) = match (self.kind, self.target.transport) {
            (Some(targets::Kind::Redis), _) => (1, QueueStructure::Single),
            (Some(targets::Kind::Memcached), Transport::Udp) => {
                (spawned_workers.unwrap_or(1), QueueStructure::Single)
            }
            (Some(_), _) => (spawned_workers.unwrap_or(1), QueueStructure::PerWorker),
            (None, _) => (1, QueueStructure::Single),
        };
        let q = match queues {
            "auto" => auto_queues,
            "single" => QueueStructure::Single,
            "per-worker" => QueueStructure::PerWorker,
            other => {
                return Err(usage(format!(
                    "--queues must be auto, single or per-worker, got '{other}'"
                )))
            }
        };
        let w = workers.unwrap_or(auto_workers);
        if w == 0 {
            return Err(usage("--workers must be at least 1"));
        }
        Ok((w, q))
    }

    /// The server's pids for the attribution sampler.
    pub fn pids(&self) -> Vec<u32> {
        self.spawned.as_ref().map(|s| s.pids()).unwrap_or_default()
    }

    /// What the store keeps about the server.
    pub fn server_json(&self) -> Value {
        match &self.spawned {
            Some(s) => json!({
                "spawned": true,
                "kind": s.kind().name(),
                "version": s.version(),
                "command_line": s.command_line(),
                "worker_threads": s.worker_threads(),
                "pids": s.pids(),
            }),
            None => json!({"spawned": false, "scheme": self.target.scheme}),
        }
    }
}
