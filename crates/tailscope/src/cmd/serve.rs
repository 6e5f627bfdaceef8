//! `tailscope serve`: the built-in null-RPC server in the foreground until SIGINT/SIGTERM.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;
use server::{Arch, Server, ServerConfig};

use super::common::shutdown_flag;
use crate::cli::ServeArgs;
use crate::exit::usage;
use crate::limits;
use crate::output::{self, outln};

/// Validates `serve` arguments into the server's configuration.
pub fn config(a: &ServeArgs) -> anyhow::Result<ServerConfig> {
    let arch: Arch = a.arch;
    if a.workers == 0 {
        return Err(usage("--workers must be at least 1"));
    }
    limits::at_most("--workers", a.workers, limits::MAX_SERVE_WORKERS)?;
    let work = match &a.work {
        Some(w) => Some(lab::model_query::read_service(w).context("--work")?),
        None => None,
    };
    if a.batch_replies && arch != Arch::Epoll {
        return Err(usage(format!(
            "--batch-replies applies to --arch epoll, not {}",
            arch.name()
        )));
    }
    if a.max_frame < wire::nullrpc::HEADER_LEN || a.max_frame > wire::nullrpc::MAX_FRAME {
        return Err(usage(format!(
            "--max-frame must be between {} and {} bytes, got {}",
            wire::nullrpc::HEADER_LEN,
            wire::nullrpc::MAX_FRAME,
            a.max_frame
        )));
    }
    Ok(ServerConfig {
        arch,
        workers: a.workers,
        work,
        cpus: a.cpus.clone().unwrap_or_default().0,
        sched: a.sched.clone(),
        numa: None,
        stamps: true,
        max_frame: a.max_frame,
        seed: a.seed,
        staged: server::StagedConfig {
            t0_ns: a.t0.0,
            mt_ns_per_byte: a.mt.0,
            r0_ns: a.r0.0,
            mr_ns_per_worker: a.mr.0,
            workers: a.workers,
            priority: a.priority,
            worker_sleep: a.worker_sleep,
        },
        limits: server::Limits::default(),
        batch_replies: a.batch_replies,
    })
}

pub fn run(a: &ServeArgs) -> anyhow::Result<i32> {
    let cfg = config(a)?;
    let addr = a.listen;
    let stop = shutdown_flag()?;
    let handle = if matches!(cfg.arch, Arch::Udp) {
        let sock = std::net::UdpSocket::bind(addr)
            .map_err(|e| usage(format!("cannot bind udp {addr}: {e}")))?;
        Server::start_udp(sock, cfg)?
    } else {
        let l = std::net::TcpListener::bind(addr)
            .map_err(|e| usage(format!("cannot bind {addr}: {e}")))?;
        Server::start_tcp(l, cfg)?
    };
    let bound = handle.local_addr();
    if a.json {
        output::print_json(
            &json!({"listen": bound.to_string(), "arch": a.arch.name(), "workers": a.workers,
                "batch_replies": a.batch_replies}),
        )?;
    } else {
        outln!("{bound}")?;
    }
    // stdout may be a pipe read by a script waiting for the address.
    output::flush_stdout()?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let c = handle.shutdown()?;
    eprintln!(
        "tailscope serve: stopped; served {} requests, {} connections accepted, {} closed for malformed frames",
        c.served, c.connections_accepted, c.malformed_closed
    );
    // The server's memory bounds (server::Limits) at work: each is back-pressure or refusal,
    // never a dropped request, and says that some client was not keeping up.
    eprintln!(
        "tailscope serve: {} times reads paused for undrained replies, {} times reading stopped for a full queue, {} connections refused over the limit",
        c.reads_paused, c.queue_full_pauses, c.connections_refused
    );
    Ok(0)
}
