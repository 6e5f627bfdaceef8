//! What tailscope runs beside the load, where, and at what cost (DESIGN.md: instruments must
//! not disturb what they measure).
//!
//! The attribution sampler runs on its own thread only on a *spare* CPU — neither the
//! server's nor the generator's (an unpinned server or generator may be anywhere, so then no
//! CPU is spare). Otherwise it is driven from inside generator thread 0's loop, in the gaps
//! between sends longer than a sample's measured cost ([`load::SlackTask`]): it can delay no
//! send, and the intervals it had no room for are counted as skipped. The record writer is
//! the load generator's own idle-class thread (see `load::run_open_loop_into`). Each run
//! reports, per instrument, where it ran, what a sample cost, and how many it took or skipped.
//! The sampler takes its per-CPU hard-interrupt counts from the eBPF counter
//! (`ebpf::irqcount`, read from memory shared with the kernel) where this process may load
//! BPF, else from /proc/interrupts; its `detail` says which (`hard_irq_source`), what the
//! counter's programs cost in the kernel, or why it could not be loaded.

use serde::{Deserialize, Serialize};

/// One instrument's placement and cost in one run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Instrument {
    /// "attribution sampler", "record writer".
    pub name: String,
    /// "thread", "generator loop (slack only)", "idle-class thread", "off".
    pub mode: String,
    /// CPUs it was pinned to (empty: not pinned, or inside the generator's thread).
    pub cpus: Vec<usize>,
    /// Mean and largest cost of one sample (or chunk), ns.
    pub cost_per_sample_ns: f64,
    pub max_cost_ns: u64,
    pub samples: u64,
    pub skipped: u64,
    /// Total CPU time it used, ns, when measured.
    pub cpu_ns: Option<u64>,
    /// Why it did not run, or anything else the reader should know.
    pub note: Option<String>,
    /// Instrument-specific figures (the eBPF stage collector's counts and agreement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
}

/// Where the server runs, for the attribution: its processes (a spawned server), its threads
/// in this process (the built-in server), its CPUs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerInfo {
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    pub cpus: Vec<usize>,
}

/// The in-loop sampler as the load engine sees it.
struct InLoop(attrib::PacedProbe);

impl load::SlackTask for InLoop {
    fn next_due_ns(&self) -> u64 {
        self.0.next_due_ns()
    }
    fn cost_bound_ns(&self) -> u64 {
        self.0.cost_bound_ns()
    }
    fn run(&mut self, now_mono_ns: u64) {
        self.0.sample(now_mono_ns);
    }
}

/// The eBPF per-CPU hard-interrupt counter as the probe's source: a few memory loads per
/// sample instead of formatting /proc/interrupts (see `ebpf::irqcount` for what it counts).
struct EbpfIrqs(ebpf::irqcount::HardIrqCounter);

impl attrib::HardIrqCounts for EbpfIrqs {
    fn read(&mut self, per_cpu: &mut [u64]) -> Result<(), String> {
        self.0.read(per_cpu).map_err(|e| e.to_string())
    }
    fn name(&self) -> &'static str {
        "ebpf"
    }
    fn counting_cost(&self) -> Option<(u64, u64)> {
        let c = self.0.cost();
        c.measured.then_some((c.runs, c.run_time_ns))
    }
}

/// Gives the probe the eBPF hard-interrupt counter where this process may load it; else the
/// reason it keeps /proc/interrupts.
fn hard_irq_source(probe: &mut attrib::Probe) -> Option<String> {
    if probe.config().proc_root != std::path::Path::new("/proc") {
        return Some("not the host's /proc".into());
    }
    match ebpf::irqcount::HardIrqCounter::open() {
        Ok(c) => {
            probe.set_hard_irq_counts(Box::new(EbpfIrqs(c)));
            None
        }
        Err(e) => Some(e.to_string()),
    }
}

enum Mode {
    Thread(attrib::Sampler),
    InLoop(Box<InLoop>),
    Off(String),
}

/// The attribution sampler of one run.
pub(crate) struct Attribution {
    mode: Mode,
    /// Why the hard interrupts come from /proc/interrupts rather than the eBPF counter.
    irq_fallback: Option<String>,
}

const NAME: &str = "attribution sampler";

impl Attribution {
    /// Starts sampling for a run whose server is `server` and whose generator threads are
    /// pinned to `generator_cpus` (empty: not pinned). `on = false` (or a sampler that cannot
    /// start) runs the measurement without a "why".
    pub fn start(server: &ServerInfo, generator_cpus: &[usize], on: bool) -> Attribution {
        if !on {
            return Attribution {
                mode: Mode::Off("switched off".into()),
                irq_fallback: None,
            };
        }
        let online = host::placement::online_cpus();
        // An unpinned generator may be on any CPU: then none is spare.
        let avoid: Vec<usize> = if generator_cpus.is_empty() {
            (0..online).collect()
        } else {
            generator_cpus.to_vec()
        };
        let cfg = attrib::SamplerConfig {
            server_pids: server.pids.clone(),
            server_tids: server.tids.clone(),
            cpus: server.cpus.clone(),
            avoid_cpus: avoid,
            ..attrib::SamplerConfig::default()
        };
        let mut probe = match attrib::Probe::new(&cfg) {
            Ok(p) => p,
            Err(e) => {
                return Attribution {
                    mode: Mode::Off(e.to_string()),
                    irq_fallback: None,
                }
            }
        };
        let irq_fallback = hard_irq_source(&mut probe);
        let mode = if probe.spare_cpus().is_empty() {
            Mode::InLoop(Box::new(InLoop(attrib::PacedProbe::new(
                probe,
                cfg.interval,
                attrib::mono_now_ns(),
            ))))
        } else {
            match attrib::Sampler::from_probe(probe) {
                Ok(s) => Mode::Thread(s),
                Err(e) => Mode::Off(e.to_string()),
            }
        };
        Attribution { mode, irq_fallback }
    }

    /// The in-loop sampler, for generator thread 0.
    pub fn slack(&mut self) -> Option<&mut dyn load::SlackTask> {
        match &mut self.mode {
            Mode::InLoop(p) => Some(p.as_mut()),
            _ => None,
        }
    }

    /// Stops sampling: the series (None when off) and the instrument's report.
    pub fn finish(self) -> (Option<attrib::Series>, Instrument) {
        let mut ins = Instrument {
            name: NAME.into(),
            ..Instrument::default()
        };
        let irq_fallback = self.irq_fallback;
        let (series, cost) = match self.mode {
            Mode::Off(why) => {
                ins.mode = "off".into();
                ins.note = Some(why);
                return (None, ins);
            }
            Mode::Thread(s) => {
                let out = s.stop();
                ins.mode = "thread".into();
                ins.cpus = out.cpus;
                (out.series, out.cost)
            }
            Mode::InLoop(p) => {
                let InLoop(p) = *p;
                ins.mode = "generator loop (slack only)".into();
                ins.note = Some(
                    "no spare CPU: sampled inside generator thread 0 only when its next send \
                     was further away than a sample's cost"
                        .into(),
                );
                p.finish_at(attrib::mono_now_ns())
            }
        };
        ins.cost_per_sample_ns = cost.mean_ns;
        ins.max_cost_ns = cost.max_ns;
        ins.samples = cost.samples;
        ins.skipped = cost.skipped;
        ins.cpu_ns = Some((cost.mean_ns * cost.samples as f64) as u64);
        let mut detail = serde_json::json!({ "hard_irq_source": cost.hard_irq_source });
        if let Some((runs, ns)) = cost.hard_irq_counting {
            // The eBPF counter's programs, run by the kernel on every interrupt of every CPU.
            detail["hard_irq_counting_runs"] = runs.into();
            detail["hard_irq_counting_ns"] = ns.into();
        }
        if let Some(why) = irq_fallback {
            detail["hard_irq_ebpf_unavailable"] = why.into();
        }
        ins.detail = Some(detail);
        (Some(series), ins)
    }
}

/// The record writer's report, from the load generator's statistics.
pub fn writer_instrument(w: &load::WriterStats) -> Instrument {
    Instrument {
        name: "record writer".into(),
        mode: format!("{}-class thread", w.policy),
        cpus: w.cpus.clone(),
        cost_per_sample_ns: if w.chunks > 0 {
            w.cpu_ns as f64 / w.chunks as f64
        } else {
            0.0
        },
        max_cost_ns: 0,
        samples: w.chunks,
        skipped: 0,
        cpu_ns: Some(w.cpu_ns),
        note: (w.escalations > 0).then(|| {
            format!(
                "stepped up to normal priority {} time(s) to catch up (up to {} chunks queued)",
                w.escalations, w.max_queued_chunks
            )
        }),
        detail: None,
    }
}

/// The load generator itself as an instrument: what its loop's work costs per request, the
/// rate one core could send at that cost, and how it recovered from the host's stalls
/// (`load::GeneratorCost`). `cpus` are the generator's CPUs.
pub fn generator_instrument(g: &load::GeneratorCost, cpus: &[usize]) -> Instrument {
    let per_request = g.busy_per_request_ns().unwrap_or(0.0);
    let ms = |ns: u64| ns as f64 / 1e6;
    Instrument {
        name: "load generator".into(),
        mode: format!("{} open-loop thread(s)", g.threads),
        cpus: cpus.to_vec(),
        cost_per_sample_ns: per_request,
        max_cost_ns: 0,
        samples: g.sends,
        skipped: 0,
        cpu_ns: Some(g.thread_cpu_ns),
        note: (g.stalls > 0).then(|| {
            format!(
                "host stalls: {} over {:.0} µs (longest {:.1} ms, {:.1} ms in all), {} requests due during them; catch-up: longest {:.2} ms",
                g.stalls,
                load::STALL_NS as f64 / 1e3,
                ms(g.longest_stall_ns),
                ms(g.stalled_ns),
                g.due_in_stalls,
                ms(g.longest_catch_up_ns),
            )
        }),
        detail: Some(serde_json::json!({
            "busy_ns": g.busy_ns,
            "busy_per_request_ns": g.busy_per_request_ns(),
            "ceiling_per_core_rps": g.ceiling_per_core_rps(),
            "sends": g.sends,
            "writes": g.writes,
            "requests_per_write": (g.writes > 0).then(|| g.sends as f64 / g.writes as f64),
            "replies": g.replies,
            "thread_cpu_ns": g.thread_cpu_ns,
            "stall_threshold_ns": load::STALL_NS,
            "stalls": g.stalls,
            "stalled_ns": g.stalled_ns,
            "longest_stall_ns": g.longest_stall_ns,
            "due_in_stalls": g.due_in_stalls,
            "catch_ups": g.catch_ups,
            "catch_up_ns": g.catch_up_ns,
            "longest_catch_up_ns": g.longest_catch_up_ns,
        }))
        .map(|mut d| {
            // Only when the catch-up benchmark's testing knob injected pauses (see
            // `load::engine::inject`): each pause's catch-up ÷ its length, the figure the
            // generator ceiling's bound is checked on (bench/generator.sh).
            if let Some((median, max)) = g.injected_ratios() {
                d["injected_pauses"] = g.injected_pauses.len().into();
                d["injected_catch_up_ratio_median"] = median.into();
                d["injected_catch_up_ratio_max"] = max.into();
            }
            d
        }),
    }
}
