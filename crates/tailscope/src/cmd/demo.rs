//! `tailscope demo`: the one-command tour. Starts the built-in server on its own CPU with a
//! known synthetic service time, calibrates it, runs Poisson load at three utilisations, prints
//! measured vs ideal for each, stores the runs and writes the CCDF plot.

use std::sync::atomic::Ordering;
use std::time::Duration;

use analysis::{IdealSpec, QueueStructure};
use serde_json::{json, Value};
use server::{Arch, Server, ServerConfig};

use super::common::{
    host_facts, now_rfc3339, open_store, parse_duration, parse_sched, shutdown_flag,
};
use super::run::{factory, load_config, measure_and_store, plan, print_human, run_json};
use crate::cli::{DemoArgs, LoadArgs, OutputArgs};
use crate::exit::usage;
use crate::output::{self, fmt_ns};

fn load_args(duration: &str, cpu: usize) -> LoadArgs {
    LoadArgs {
        arrival: "poisson".into(),
        trace_unit: "ns".into(),
        duration: duration.into(),
        requests: None,
        warmup: "2s".into(),
        connections: 8,
        threads: 1,
        cpus: Some(cpu.to_string()),
        max_outstanding: 64,
        timeout: "1s".into(),
        request_size: wire::nullrpc::DEFAULT_REQUEST_LEN,
        no_stamps: false,
        yield_when_far: false,
        lateness_threshold: "50us".into(),
        alpha: None,
        seed: 1,
        confidence: 0.95,
    }
}

pub fn run(a: &DemoArgs) -> anyhow::Result<i32> {
    let online = host::placement::online_cpus();
    let server_cpu = a.server_cpu.unwrap_or(if online > 1 { 1 } else { 0 });
    let client_cpu = a.client_cpu.unwrap_or(0);
    for (flag, c) in [("--server-cpu", server_cpu), ("--client-cpu", client_cpu)] {
        if c >= online {
            return Err(usage(format!(
                "{flag}: CPU {c} does not exist (this machine has {online})"
            )));
        }
    }
    if a.loads.is_empty() || a.loads.iter().any(|l| !(*l > 0.0 && *l < 100.0)) {
        return Err(usage(
            "--loads must be percentages in (0, 100), e.g. 30,60,85",
        ));
    }
    let work = super::model::parse_service(&a.work)?;
    let sched = parse_sched(a.sched.as_deref())?;
    let la = load_args(&a.duration, client_cpu);
    let p = plan(&la)?;
    let calib_time = parse_duration("--duration", "3s")?;
    let out = OutputArgs {
        json: a.json,
        ccdf: None,
        plot: Some(a.plot.clone()),
    };
    output::check_outputs(&out)?;
    let st = open_store(&a.db)?;
    let stop = shutdown_flag()?;

    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let scfg = ServerConfig {
        arch: Arch::Epoll,
        workers: 1,
        work: Some(work),
        cpus: vec![server_cpu],
        sched,
        stamps: true,
        max_frame: wire::nullrpc::MAX_FRAME,
        seed: 1,
        staged: Default::default(),
        limits: Default::default(),
    };
    let server = Server::start_tcp(listener, scfg)?;
    let addr = server.local_addr();
    let url = format!("nullrpc://{addr}");
    let target = super::run::parse_target(&url)?;
    eprintln!(
        "demo: built-in server ({}, 1 epoll worker) on CPU {server_cpu} at {addr}; generator on CPU {client_cpu}",
        a.work
    );

    // Calibrate: saturate the single worker, invert its peak throughput, with the same
    // requests as the runs (stamps included: they cost the server work).
    let f = factory(&target, wire::nullrpc::DEFAULT_REQUEST_LEN, true)?;
    eprintln!("demo: calibrating for 3 s…");
    let calibrated = super::calibrate::calibrate_and_store(
        &st,
        &url,
        &url,
        &target,
        f.as_ref(),
        (4, 8),
        (calib_time, Duration::from_secs(1)),
        1,
        json!({"duration": "3s", "warmup": "1s", "connections": 4, "outstanding": 8}),
        &stop,
    );
    let (cal, cal_json) = match calibrated {
        Ok(s) => (s.cal, s.summary),
        Err(e) => {
            let _ = server.shutdown();
            return Err(e.context("demo calibration failed"));
        }
    };
    if !a.json {
        println!(
            "calibration: peak {:.0} req/s → amortised service time {} (synthetic work {})",
            cal.peak_rps,
            fmt_ns(cal.service_ns),
            a.work
        );
    }

    let mut runs: Vec<Value> = Vec::new();
    let mut series = Vec::new();
    let mut worst = 0;
    for (i, pct) in a.loads.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let rate = pct / 100.0 * 1e9 / cal.service_ns;
        let ideal = IdealSpec {
            service_ns: cal.service_ns,
            workers: 1,
            queues: QueueStructure::Single,
        };
        let mut la = la.clone();
        la.seed = 1 + i as u64;
        let cfg = load_config(&target, &la, &p, rate);
        let id = st.begin_run(&store::NewRun {
            kind: "run".into(),
            target: url.clone(),
            started_at: now_rfc3339(),
            config: json!({"demo": true, "load_pct": pct, "rate_rps": rate, "duration": a.duration,
                           "connections": la.connections, "server_cpu": server_cpu, "client_cpu": client_cpu,
                           "work": a.work, "ideal": ideal}),
            host: host_facts(),
        })?;
        let label = format!("{pct:.0}% load");
        let server_info = super::run::ServerInfo {
            pids: Vec::new(),
            tids: super::run::own_server_threads(),
            cpus: vec![server_cpu],
        };
        let (rec, an, status, code) = match measure_and_store(
            &st,
            id,
            &target,
            &cfg,
            f.as_ref(),
            &stop,
            Some(ideal),
            &p,
            &la,
            &label,
            &server_info,
        ) {
            Ok(v) => v,
            Err(e) => {
                let _ = server.shutdown();
                return Err(e);
            }
        };
        worst = worst.max(code);
        if !a.json {
            println!();
            print_human(
                status,
                Some(id),
                &format!("{url} at {label} ({rate:.0} req/s)"),
                &an,
            );
        }
        series.push(report::Series::new(
            format!("measured {label}"),
            an.measured_ccdf_us.clone(),
        ));
        let mut s = report::Series::new(format!("ideal {label}"), an.ideal_ccdf_us.clone());
        s.dashed = true;
        series.push(s);
        let mut v = run_json(Some(id), status, &url, &rec, &an);
        v["load_pct"] = json!(pct);
        runs.push(v);
    }
    let counters = server.shutdown()?;
    let written = if series.is_empty() {
        Vec::new()
    } else {
        output::write_ccdf_outputs(
            &out,
            "tailscope demo: built-in server, measured vs ideal",
            &series,
        )?
    };
    if a.json {
        output::print_json(&json!({
            "server": {"address": addr.to_string(), "arch": "epoll", "workers": 1, "work": a.work,
                       "cpu": server_cpu, "served": counters.served},
            "calibration": cal_json,
            "runs": runs,
            "interrupted": stop.load(Ordering::Relaxed),
            "written": written,
        }))?;
    } else {
        for w in written {
            println!("wrote {w}");
        }
    }
    if stop.load(Ordering::Relaxed) {
        return Ok(1);
    }
    Ok(worst)
}
