//! The load sent from this process: the open-loop engine (`load`), with the instruments that
//! watch it here — the attribution sampler in its loop, the record writer, eBPF or
//! user-space stages, a stressor beside the run — and, for a run with a precision goal, the
//! convergence check that stops it when its intervals are tight.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use load::{LoadConfig, RecordSink, RunSummary};

use crate::converge::{ConvergeSink, Convergence, Precision};
use crate::error::LabError;
use crate::instruments::{generator_instrument, writer_instrument, Attribution, ServerInfo};
use crate::observer::Observer;
use crate::records::StoreSink;
use crate::source::{LoadSource, Loaded, Measured, Sending};
use crate::target::Ready;

/// The open-loop engine in this process.
pub struct LocalEngine;

/// CPUs for tailscope's own threads beside the generator (the main thread, the record
/// writer, the spawner; issue 37): those neither the generator's nor the server's where such
/// exist, else the generator's (less the server's), never the server's. Empty when the
/// generator is unpinned (then nothing is placed). With the server's CPUs unknown, the
/// generator's: the server may be anywhere else.
pub fn helper_cpus(generator: &[usize], server: &[usize]) -> Vec<usize> {
    if generator.is_empty() {
        return Vec::new();
    }
    let host: Vec<usize> = (0..host::placement::online_cpus()).collect();
    helper_cpus_of(&host, generator, server)
}

fn helper_cpus_of(host: &[usize], generator: &[usize], server: &[usize]) -> Vec<usize> {
    let spare = attrib::spare_cpus(host, server, generator);
    if !spare.is_empty() {
        return spare;
    }
    let beside: Vec<usize> = generator
        .iter()
        .copied()
        .filter(|c| !server.contains(c))
        .collect();
    if beside.is_empty() {
        generator.to_vec()
    } else {
        beside
    }
}

/// The server the user started, as found on this host.
struct Found {
    pids: Vec<u32>,
    /// Its CPUs when it is pinned to fewer than all (else empty: it may be anywhere).
    cpus: Vec<usize>,
    /// What was found, or why nothing was, for the run's facts and the terminal.
    line: String,
}

/// The process listening on `target`'s address on this host (a loopback target, or one
/// bound to exactly that address), so that the why counts its threads as the server's.
fn find_server(target: &load::Target, proc_root: &Path) -> Found {
    let udp = target.transport == load::Transport::Udp;
    let mut pids = host::listener::listening_pids(proc_root, target.addr, udp);
    // tailscope itself is not the server (an agent's or a test's listener).
    pids.retain(|&p| p != std::process::id());
    if pids.is_empty() {
        return Found {
            pids,
            cpus: Vec::new(),
            line: format!(
                "server: no process of this host listens on {}: its threads, if it runs here, count as other tasks (give --server-pid)",
                target.addr
            ),
        };
    }
    let threads: Vec<host::threads::ThreadPlace> = pids
        .iter()
        .flat_map(|p| host::threads::threads_of(&proc_root.join(p.to_string())))
        .collect();
    let mut cpus: Vec<usize> = threads.iter().flat_map(|t| t.allowed.clone()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let online = host::placement::online_cpus();
    if cpus.len() >= online {
        cpus.clear();
    }
    // A process's name is its main thread's (the thread whose id is the pid).
    let names: Vec<String> = pids
        .iter()
        .map(|&p| {
            let comm = threads.iter().find(|t| t.tid == p).map_or("?", |t| &t.name);
            format!("{p} ({comm})")
        })
        .collect();
    let on = if cpus.is_empty() {
        "any CPU".to_string()
    } else {
        format!("CPUs {}", host::probe::format_cpu_list(&cpus))
    };
    Found {
        pids,
        cpus,
        line: format!(
            "server: pid {} listens on {}, {} thread(s) on {on}: counted as the server's",
            names.join(", "),
            target.addr,
            threads.len()
        ),
    }
}

impl LoadSource for LocalEngine {
    fn send(&self, s: &Sending) -> Result<Loaded, LabError> {
        let (plan, ready, obs) = (s.plan, s.ready, s.obs);
        let mut cfg = plan.load.clone();
        // A converging run: one schedule as long as the longest allowed, stopped by its own
        // flag when the intervals are tight; records reach the check at least every 250 ms.
        let min_ns = match cfg.stop {
            load::StopAt::Duration(d) => (cfg.warmup + d).as_nanos() as u64,
            load::StopAt::Requests(_) => 0,
        };
        if let Some(p) = &plan.precision {
            cfg.stop = load::StopAt::Duration(p.max_duration);
            cfg.flush_every = Some(std::time::Duration::from_millis(250));
        }
        cfg.target = ready.target.clone();
        cfg.churn = ready.churn;
        // A scaled-out server: the connections go round-robin over its instances.
        cfg.spread = ready.spread();
        let mut server_cpus = plan.server_cpus.clone();
        if server_cpus.is_empty() {
            server_cpus = ready.server_cpus();
        }
        let mut pids = plan.extra_pids.clone();
        pids.extend(ready.pids());
        // Neither spawned (a process or the built-in server's threads) nor named by
        // --server-pid: the user's own server, looked for on this host.
        let tids = ready.tids();
        let found = if pids.is_empty() && tids.is_empty() {
            let f = find_server(&cfg.target, Path::new("/proc"));
            obs.note(&f.line);
            pids = f.pids;
            if server_cpus.is_empty() {
                server_cpus = f.cpus;
            }
            Some(f.line)
        } else {
            None
        };
        cfg.writer_cpus = helper_cpus(&cfg.cpus, &server_cpus);
        // The thread that forks servers joins them (the main thread is placed by the engine
        // for the run; the threads started from here on inherit its place).
        if let (Some(tid), false) = (targets::spawner_tid(), cfg.writer_cpus.is_empty()) {
            let _ = host::placement::pin_thread(tid, &cfg.writer_cpus);
        }
        let factory = ready.factory(cfg.seed)?;
        let server = ServerInfo {
            pids,
            tids,
            cpus: server_cpus,
        };
        let mut sink = StoreSink::open(&s.db.path, s.run_id)?;
        let mut stages = crate::stages::Stages::start(
            plan.stages,
            plan.stages_budget,
            ready,
            &server,
            &cfg,
            obs,
        )?;
        // A stressor beside the run and the server's eviction counter (see `interference`).
        let beside = crate::interference::Beside::start(ready, &cfg.cpus, &server.cpus, obs)?;
        let mut attribution = Attribution::start(&server, &cfg.cpus, plan.attribution);
        let engine = Engine {
            cfg: &cfg,
            factory: factory.as_ref(),
            stop: s.stop,
            obs,
        };
        let (result, convergence) = {
            let mut staged = stages.sink(&mut sink);
            match &plan.precision {
                None => (engine.run(&mut staged, &mut attribution), None),
                Some(p) => {
                    let (r, c) = engine.converging(
                        p,
                        plan.confidence,
                        min_ns,
                        &mut staged,
                        &mut attribution,
                    )?;
                    (r, Some(c))
                }
            }
        };
        obs.phase_done("run");
        let mut server_json = beside.finish(ready, obs);
        server_json.found = found;
        let (series, sampler) = attribution.finish();
        let summary = result?;
        let mut instruments = vec![
            generator_instrument(&summary.generator, &cfg.cpus),
            sampler,
            writer_instrument(&summary.writer),
        ];
        instruments.extend(stages.finish(&summary.writer));
        let same_host = cfg.target.addr.ip().is_loopback();
        Ok(Loaded {
            generator_cpus: cfg.cpus.clone(),
            same_host_start_mono_ns: same_host.then_some(summary.start_mono_ns),
            cfg,
            facts: summary,
            measured: Measured::Records,
            instruments,
            server: server_json,
            series,
            convergence,
            agents: None,
            failures: Vec::new(),
            user_late: None,
        })
    }

    fn send_to(
        &self,
        cfg: &LoadConfig,
        ready: &Ready,
        sink: &mut dyn RecordSink,
        stop: &AtomicBool,
        _obs: &dyn Observer,
    ) -> Result<(), LabError> {
        let f = ready.factory(cfg.seed)?;
        load::run_open_loop_into(cfg, f.as_ref(), stop, &|_, _| {}, sink, None)?;
        Ok(())
    }
}

/// One open-loop run of the engine here.
struct Engine<'a> {
    cfg: &'a LoadConfig,
    factory: &'a dyn Fn() -> Box<dyn load::Protocol>,
    stop: &'a AtomicBool,
    obs: &'a dyn Observer,
}

type Sent = Result<RunSummary, load::LoadError>;

impl Engine<'_> {
    fn run(&self, sink: &mut dyn RecordSink, attribution: &mut Attribution) -> Sent {
        let progress = |done: u64, total: u64| self.obs.progress("run", done, total);
        load::run_open_loop_into(
            self.cfg,
            self.factory,
            self.stop,
            &progress,
            sink,
            attribution.slack(),
        )
    }

    /// A run stopped by its own flag as soon as its intervals are tight (or by the user's
    /// Ctrl-C, which stops it too).
    fn converging(
        &self,
        p: &Precision,
        confidence: f64,
        min_ns: u64,
        sink: &mut dyn RecordSink,
        attribution: &mut Attribution,
    ) -> Result<(Sent, Convergence), LabError> {
        let halt = AtomicBool::new(false);
        let warmup_ns = self.cfg.warmup.as_nanos() as u64;
        let mut conv = ConvergeSink::new(sink, p, confidence, warmup_ns, min_ns, &halt)?;
        let progress = |done: u64, total: u64| self.obs.progress("run", done, total);
        // `halt` alone means it converged.
        let done = AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    if self.stop.load(Ordering::Relaxed) {
                        halt.store(true, Ordering::Relaxed);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            });
            let r = load::run_open_loop_into(
                self.cfg,
                self.factory,
                &halt,
                &progress,
                &mut conv,
                attribution.slack(),
            );
            done.store(true, Ordering::Relaxed);
            r
        });
        let interrupted = self.stop.load(Ordering::Relaxed);
        let c = conv.finish(interrupted);
        self.obs.note(&match &c.why_not {
            None => format!("converged after {:.1} s ({})", c.after_s, p.text),
            Some(w) => format!("did not converge: {w}"),
        });
        let r = r.map(|mut s| {
            s.interrupted = interrupted;
            s
        });
        Ok((r, c))
    }
}

#[cfg(test)]
mod tests {
    use super::helper_cpus_of;

    #[test]
    fn helpers_go_to_spare_cpus_else_beside_the_generator_never_on_the_server() {
        let four = [0, 1, 2, 3];
        assert_eq!(helper_cpus_of(&four, &[0], &[1]), vec![2, 3]);
        // Two CPUs: no spare one, so the generator's.
        assert_eq!(helper_cpus_of(&[0, 1], &[0], &[1]), vec![0]);
        // The server's CPUs unknown: the generator's.
        assert_eq!(helper_cpus_of(&four, &[0], &[]), vec![0]);
        // Generator and server share CPUs: those of the generator's that are not the server's.
        assert_eq!(helper_cpus_of(&[0, 1], &[0, 1], &[1]), vec![0]);
        // No way off the server's: the generator's (it asked to share them).
        assert_eq!(helper_cpus_of(&[0, 1], &[1], &[0, 1]), vec![1]);
    }
}
