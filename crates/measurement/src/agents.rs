//! Agents as a run's load source: `tailscope agent` processes on other hosts send the load,
//! driven by the coordinator of the `agents` crate (the protocol, the clocks, the merged
//! histograms and records, the agent's own side); here they become a [`LoadSource`]: the run
//! is opened in the store, the agents run it (`agents::run`), and what they sent becomes one
//! [`crate::run::Run`] — analysed from all agents' stored records merged by intended time (the
//! exact distribution, and the ideal on the merged arrival stream), or, without records, from
//! their added histograms — with one [`AgentReport`] per agent: its requests, rate,
//! lateness, clock and status. `measure` finishes it as any other run.
//!
//! The types a run with agents is asked and reports ([`Agents`], [`AgentReport`]) are in
//! `agent_spec`, re-exported here and from the crate root.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use ::agents::{hist, AgentError, AgentState, Collected, Sent, Sink};
use analysis::{AnalysisError, Outcomes, RunAnalysis};
use hdrhistogram::Histogram;
use load::{BacklogSample, LoadConfig, RecordSink, RunSummary, WriterStats};
use stats::{Recorder, Summary, P99};

pub use crate::agent_spec::{
    agents_file, AgentClock, AgentCommand, AgentReport, AgentStatus, Agents, AgentsMerged,
    AgentsReport, MAX_AGENTS,
};
pub use ::agents::ClockOffset;

use crate::error::{invalid, LabError};
use crate::instruments::{writer_instrument, Instrument};
use crate::observer::Observer;
use crate::source::{LoadSource, Loaded, Measured, RunPlan, Sending};
use crate::target::Ready;

/// Serves one coordinator on `input`/`output` (the process's stdin and stdout): the agent's
/// side, `tailscope agent` (see `agents::serve`).
pub fn serve<R, W>(input: R, output: W) -> Result<(), LabError>
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    ::agents::serve(input, output).map_err(LabError::from)
}

impl From<AgentError> for LabError {
    fn from(e: AgentError) -> LabError {
        match e {
            AgentError::Invalid(m) => LabError::Invalid(m),
            AgentError::Load(e) => LabError::Load(e),
            other => LabError::Failed(other.to_string()),
        }
    }
}

/// An experiment's observer as the coordinator's progress.
struct Watch<'a>(&'a dyn Observer);

impl ::agents::Progress for Watch<'_> {
    fn note(&self, msg: &str) {
        self.0.note(msg);
    }

    fn progress(&self, phase: &str, done: u64, total: u64) {
        self.0.progress(phase, done, total);
    }
}

impl Agents {
    /// What the coordinator starts and how, for `ready`'s target.
    fn plan(&self, ready: &Ready) -> Result<::agents::Plan, LabError> {
        Ok(::agents::Plan {
            launch: self
                .commands
                .iter()
                .map(|c| ::agents::Launch {
                    label: c.label.clone(),
                    argv: c.argv.clone(),
                })
                .collect(),
            records: self.records,
            lead: self.lead,
            tls: job_tls(ready)?,
        })
    }
}

/// What a run without raw records cannot say.
const WITHOUT_RECORDS: &str = "agents sent histograms only (--agent-records off): the ideal, the excess, the server's view, the per-class and per-stage figures and the arrival check need every request's times";

fn add_all<'a>(hs: impl Iterator<Item = &'a Histogram<u64>>) -> Histogram<u64> {
    let mut out = hist::empty();
    for h in hs {
        // An auto-resizing histogram takes any other's values.
        let _ = out.add(h);
    }
    out
}

fn summary(h: &Histogram<u64>, conf: f64) -> Option<Summary> {
    (!h.is_empty())
        .then(|| Recorder::from_histogram(h.clone()).summarize(conf).ok())
        .flatten()
}

fn p99(s: &Option<Summary>) -> Option<f64> {
    s.as_ref().and_then(|s| s.get(P99)).map(|e| e.value)
}

fn outcomes(o: [u64; 4]) -> Outcomes {
    Outcomes {
        ok: o[0],
        error: o[1],
        timeout: o[2],
        dropped: o[3],
        skipped: 0,
    }
}

fn agent_report(
    i: usize,
    a: &AgentState,
    n: usize,
    plan: &RunPlan,
    interrupted: bool,
) -> AgentReport {
    let conf = plan.confidence;
    let lateness = summary(&a.lateness, conf);
    let late = p99(&lateness).is_some_and(|p| p > plan.lateness_threshold_ns);
    let status = if a.failure.is_some() {
        AgentStatus::Failed
    } else if late {
        AgentStatus::Late
    } else if interrupted || a.done.as_ref().is_some_and(|d| d.summary.interrupted) {
        AgentStatus::Interrupted
    } else {
        AgentStatus::Ok
    };
    AgentReport {
        agent: i + 1,
        command: a.cmd.label.clone(),
        host: a.hello.as_ref().and_then(|h| h.hostname.clone()),
        status,
        error: a.failure.clone().or_else(|| {
            late.then(|| {
                format!(
                    "it fell behind its schedule: lateness p99 {:.1} µs above the {:.1} µs threshold",
                    p99(&lateness).unwrap_or(0.0) / 1e3,
                    plan.lateness_threshold_ns / 1e3
                )
            })
        }),
        requests: a.requests(),
        outcomes: outcomes(a.outcomes),
        achieved_rate_rps: a.done.as_ref().map_or(0.0, |d| d.sent.rate_rps()),
        offered_rate_rps: plan.load.rate_per_s / n as f64,
        lateness_p99_us: p99(&lateness).map(|p| p / 1e3),
        measured: summary(&a.latency, conf).map(|s| s.distribution()),
        offset_ns: a.clock.map(|_| a.applied_offset_ns),
        measured_offset_ns: a.clock.map(|c| c.offset_ns),
        uncertainty_ns: a.clock.map(|c| if a.shared_clock { 0 } else { c.uncertainty_ns }),
        min_rtt_ns: a.clock.map(|c| c.min_rtt_ns),
        clock: if a.shared_clock {
            AgentClock::Shared
        } else {
            AgentClock::Measured
        },
        records: a.stored_records,
    }
}

/// The run's analysis from the agents' added histograms alone (no records).
fn from_histograms(c: &Collected, plan: &RunPlan) -> Result<RunAnalysis, AnalysisError> {
    let conf = plan.confidence;
    let latency = add_all(c.agents.iter().map(|a| &a.latency));
    if latency.is_empty() {
        return Err(AnalysisError::NoData);
    }
    let mut rec = Recorder::from_histogram(latency);
    let measured = rec.summarize(conf)?;
    let entropy = analysis::entropy_of(&rec);
    let measured_ccdf_us = rec
        .ccdf(10)
        .into_iter()
        .map(|(x, p)| (x / 1e3, p))
        .collect();
    let lateness_h = add_all(c.agents.iter().map(|a| &a.lateness));
    let lateness = match summary(&lateness_h, conf) {
        Some(s) => s,
        None => {
            let mut z = Recorder::exact(1);
            z.record(0);
            z.summarize(conf)?
        }
    };
    let lateness_flagged = lateness
        .get(P99)
        .is_some_and(|e| e.value > plan.lateness_threshold_ns);
    let mut o = [0u64; 4];
    let mut sent = Sent::default();
    for a in &c.agents {
        o.iter_mut().zip(a.outcomes).for_each(|(t, x)| *t += x);
        if let Some(s) = a.done.as_ref().map(|d| d.sent).filter(|s| s.count > 0) {
            // One span over every agent's sends (they share the time axis).
            sent.first_ns = if sent.count == 0 {
                s.first_ns
            } else {
                sent.first_ns.min(s.first_ns)
            };
            sent.last_ns = sent.last_ns.max(s.last_ns);
            sent.count += s.count;
        }
    }
    Ok(RunAnalysis {
        // The agents send merged histograms, not records in time: their intervals are the
        // order-statistic ones, which assume independent samples.
        interval_method: "order statistics of the agents' merged histograms (assumes independent samples: no time blocks across agents)".into(),
        windows: Vec::new(),
        stationarity: None,
        requests: o.iter().sum(),
        outcomes: outcomes(o),
        achieved_rate_rps: sent.rate_rps(),
        measured,
        classes: Vec::new(),
        ideal: None,
        ideal_transient: None,
        ideal_spec: plan.ideal.clone(),
        ideal_note: Some(WITHOUT_RECORDS.into()),
        excess: Vec::new(),
        lateness,
        lateness_flagged,
        held_in_client: None,
        server_view: None,
        decomposition: None,
        excess_split: Vec::new(),
        throughput: None,
        stamped_service_ns: None,
        ideal_check: None,
        arrival_check: None,
        stages: None,
        client_wakeup: None,
        why: None,
        span_ns: None,
        slow_from_ns: None,
        measured_ccdf_us,
        ideal_ccdf_us: Vec::new(),
        entropy,
    })
}

/// The load generators' facts, added up over the agents (backlog samples by 100 ms slot of
/// the common time axis).
fn load_facts(c: &Collected, warmup_ns: u64) -> RunSummary {
    let mut slots: BTreeMap<u64, BacklogSample> = BTreeMap::new();
    let mut f = RunSummary {
        start_mono_ns: c.start_mono_ns.unwrap_or(0),
        warmup_ns,
        writer: WriterStats {
            policy: "per agent".into(),
            ..WriterStats::default()
        },
        ..RunSummary::default()
    };
    for (i, a) in c.agents.iter().enumerate() {
        // Records stored: what arrived, also from an agent that died.
        f.records += a.stored_records;
        let Some(d) = a.done.as_ref().map(|d| &d.summary) else {
            continue;
        };
        if a.stored_records == 0 {
            f.records += d.records;
        }
        f.connects += d.connects;
        f.misses += d.misses;
        f.add_error_codes(&d.error_codes);
        if let Some(t) = &d.tls {
            f.tls.get_or_insert_with(Default::default).add(t);
        }
        f.drain_ns = f.drain_ns.max(d.drain_ns);
        f.errors
            .extend(d.errors.iter().map(|e| format!("agent {}: {e}", i + 1)));
        f.writer.chunks += d.writer.chunks;
        f.writer.records += d.writer.records;
        f.writer.cpu_ns += d.writer.cpu_ns;
        f.generator.add(&d.generator);
        for b in &d.backlog {
            let slot = b.t_ns / 100_000_000;
            let s = slots.entry(slot).or_insert(BacklogSample {
                t_ns: slot * 100_000_000,
                ..BacklogSample::default()
            });
            s.in_flight += b.in_flight;
            s.held += b.held;
        }
    }
    f.backlog = slots.into_values().collect();
    f
}

fn instruments(c: &Collected) -> Vec<Instrument> {
    let mut v = vec![Instrument {
        name: "attribution sampler".into(),
        mode: "off".into(),
        note: Some(
            "the load ran in agents: no generator loop here to sample from, and their CPUs \
             are theirs"
                .into(),
        ),
        ..Instrument::default()
    }];
    for (i, a) in c.agents.iter().enumerate() {
        if let Some(d) = &a.done {
            let mut w = writer_instrument(&d.summary.writer);
            w.name = format!("record writer (agent {})", i + 1);
            v.push(w);
        }
    }
    v
}

impl Agents {
    /// The run's load as the agents take it: the started target, one address.
    fn job_load(&self, cfg: &LoadConfig, ready: &Ready) -> LoadConfig {
        let mut cfg = cfg.clone();
        cfg.target = ready.target.clone();
        cfg.churn = ready.churn;
        cfg
    }
}

/// Why the agents failed a run, naming them (and the store's refusal).
fn failures_of(c: &Collected) -> Vec<String> {
    let mut failures: Vec<String> = c
        .agents
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let f = a.failure.as_ref()?;
            Some(format!("agent {} ({}): {f}", i + 1, a.cmd.label))
        })
        .collect();
    failures.extend(c.store_error.clone());
    failures
}

/// The agents' histograms added up, as the run reports them (µs).
fn merged(requests: u64, latency: &Summary, lateness: Option<&Summary>) -> AgentsMerged {
    AgentsMerged {
        requests,
        measured: latency.distribution(),
        measured_ci: latency.distribution_ci(),
        lateness: lateness.map(Summary::distribution),
    }
}

/// The agents' part of the run's report: each agent, and their histograms added up.
fn agents_report(
    c: &Collected,
    agents: &Agents,
    plan: &RunPlan,
    failures: &[String],
) -> AgentsReport {
    let n = c.agents.len();
    let conf = plan.confidence;
    let merged_latency = summary(&add_all(c.agents.iter().map(|a| &a.latency)), conf);
    let merged_lateness = summary(&add_all(c.agents.iter().map(|a| &a.lateness)), conf);
    AgentsReport {
        agents: (0..n)
            .map(|i| agent_report(i, &c.agents[i], n, plan, c.interrupted))
            .collect(),
        records: agents.records,
        merged: merged_latency.as_ref().map(|m| {
            merged(
                c.agents.iter().map(AgentState::requests).sum(),
                m,
                merged_lateness.as_ref(),
            )
        }),
        missing: (!agents.records).then(|| WITHOUT_RECORDS.to_string()),
        error: (!failures.is_empty()).then(|| failures.join("; ")),
        notes: c.notes.clone(),
    }
}

/// The agents as a run's load source: they send the load (each its share of the one
/// schedule), their records go into the run's row; `measure` finishes the run.
///
/// A TLS target's options travel with the jobs: the CA's certificates themselves (the
/// coordinator's `--ca` file, or a spawned server's own CA, is not on another host), and the
/// server's name (a job names the address only).
fn job_tls(ready: &Ready) -> Result<Option<::agents::JobTls>, LabError> {
    if !ready.target.tls {
        return Ok(None);
    }
    let t = &ready.tls;
    let ca_pem = match &t.ca {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| {
            invalid(format!(
                "--ca {}: {e}",
                crate::error::clip(&p.display().to_string())
            ))
        })?),
        None => None,
    };
    Ok(Some(::agents::JobTls {
        insecure: t.insecure,
        ca_pem,
        server_name: t
            .server_name
            .clone()
            .unwrap_or_else(|| ready.target.host.clone()),
        handshake_per_request: t.handshake_per_request,
    }))
}

impl LoadSource for Agents {
    fn check(&self, plan: &RunPlan, ready: &Ready) -> Result<(), LabError> {
        // An agent's job names one address and its connections are not this host's: a
        // server spread over instances and eBPF stages need the load sent from here.
        if ready.spread().len() > 1 {
            return Err(invalid(
                "a server spread over several instances cannot take its load from agents yet",
            ));
        }
        if plan.stages == crate::stages::StagesMode::Ebpf {
            return Err(invalid(
                "eBPF stages join kernel events to this host's connections, not an agent's",
            ));
        }
        Ok(())
    }

    fn config(&self, plan: &RunPlan) -> crate::run_config::RunConfig {
        crate::run_config::RunConfig {
            agents: Some(self.clone()),
            ..plan.config.clone()
        }
    }

    fn send(&self, s: &Sending) -> Result<Loaded, LabError> {
        let (plan, ready, obs) = (s.plan, s.ready, s.obs);
        let cfg = self.job_load(&plan.load, ready);
        let mut server_cpus = plan.server_cpus.clone();
        if server_cpus.is_empty() {
            server_cpus = ready.server_cpus();
        }
        // A stressor beside the run and the server's eviction counter, as for a local run.
        let beside = crate::interference::Beside::start(ready, &cfg.cpus, &server_cpus, obs)?;
        let sink = Sink::Store {
            store: &s.db.store,
            run_id: s.run_id,
        };
        let c = ::agents::run(
            &cfg,
            &ready.workload,
            &self.plan(ready)?,
            sink,
            s.stop,
            &Watch(obs),
        );
        obs.phase_done("run");
        let server = beside.finish(ready, obs);
        let failures = failures_of(&c);
        let report = agents_report(&c, self, plan, &failures);
        let mut facts = load_facts(&c, u64::try_from(cfg.warmup.as_nanos()).unwrap_or(u64::MAX));
        facts.interrupted = c.interrupted;
        // The server's stamps and the agents' times are on one clock only when the server
        // is on this host and every agent reads this host's clock: then the network legs
        // are exact.
        let server_here = ready.owns_server() || cfg.target.addr.ip().is_loopback();
        let one_clock = server_here && c.agents.iter().all(|a| a.shared_clock);
        // One agent behind its schedule taints the merged stream's user view, however
        // punctual the rest.
        let late: Vec<String> = report
            .agents
            .iter()
            .filter(|a| a.status == AgentStatus::Late)
            .map(|a| a.agent.to_string())
            .collect();
        Ok(Loaded {
            measured: if self.records {
                Measured::Records
            } else {
                Measured::Histograms(Box::new(from_histograms(&c, plan)))
            },
            same_host_start_mono_ns: one_clock.then_some(facts.start_mono_ns),
            cfg,
            facts,
            generator_cpus: Vec::new(),
            instruments: instruments(&c),
            server,
            series: None,
            convergence: None,
            agents: Some(report),
            failures,
            user_late: (!late.is_empty())
                .then(|| format!("agent(s) {} fell behind their schedule", late.join(", "))),
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
        if ready.spread().len() > 1 {
            return Err(invalid(
                "a server spread over several instances cannot take its load from agents yet",
            ));
        }
        let cfg = self.job_load(cfg, ready);
        // Counting needs every reply's time: the agents stream their records.
        let agents = Agents {
            records: true,
            ..self.clone()
        };
        // A calibration's many short steps: their agents' greetings are not news.
        let c = ::agents::run(
            &cfg,
            &ready.workload,
            &agents.plan(ready)?,
            Sink::Records(sink),
            stop,
            &Watch(&crate::observer::Quiet),
        );
        let failures = failures_of(&c);
        if !failures.is_empty() {
            return Err(LabError::Failed(failures.join("; ")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn summary_of(values: impl IntoIterator<Item = u64>) -> Summary {
        let mut r = Recorder::exact(0);
        values.into_iter().for_each(|v| r.record(v));
        r.summarize(0.95).unwrap()
    }

    /// What `merged` was before it was typed: the JSON built by hand.
    fn untyped(requests: u64, latency: &Summary, lateness: Option<&Summary>) -> Value {
        json!({
            "requests": requests,
            "measured": latency.distribution_json(),
            "measured_ci": latency.intervals_json(),
            "lateness": lateness.map(Summary::distribution_json),
        })
    }

    #[test]
    fn merged_keeps_the_shape_it_had_as_json() {
        let latency = summary_of((1..=500).map(|i| 20_000 + 37 * i));
        let lateness = summary_of((1..=500).map(|i| 3 * i));
        for lateness in [Some(&lateness), None] {
            let typed = merged(500, &latency, lateness);
            let report = AgentsReport {
                agents: Vec::new(),
                records: false,
                merged: Some(typed.clone()),
                missing: None,
                error: None,
                notes: Vec::new(),
            };
            let want = untyped(500, &latency, lateness);
            let v = serde_json::to_value(&report).unwrap();
            assert_eq!(v["merged"], want);
            // `--json` prints it as `json!(a.merged)`.
            assert_eq!(json!(report.merged), want);
            // The JSON reads back into the same value.
            let back: AgentsMerged = serde_json::from_value(want.clone()).unwrap();
            assert_eq!(back, typed);
            // A run stored before it was typed kept the JSON value in its CBOR form: it
            // reads back too.
            let mut old = Vec::new();
            ciborium::into_writer(&want, &mut old).unwrap();
            let back: AgentsMerged = ciborium::from_reader(old.as_slice()).unwrap();
            assert_eq!(back, typed);
        }
    }
}
