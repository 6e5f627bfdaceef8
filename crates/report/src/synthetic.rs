//! A synthetic run with fixed numbers, for the tests of every output (what hyperfine's mock
//! executor is to its exporters): Poisson arrivals from a fixed seed through one FIFO server
//! whose service is the ideal's plus a little exponential jitter, analysed by the real
//! analysis and wrapped as the one [`lab::Run`] type. Same seed, same run, on any machine with
//! the same floating point — which is what a snapshot test needs.

use analysis::{AnalysisConfig, IdealSpec, QueueStructure};
use lab::{Instrument, LoadFacts, Run, RunStatus};
use load::{Outcome, RequestRecord};

/// A small, fixed pseudo-random stream (xorshift64*): no dependency, the same numbers
/// everywhere.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }
}

/// `n` requests at `rate_rps` through one server taking `service_ns` plus jitter (mean 10 %
/// of it), in intended order; the generator is a little late (mean 300 ns).
pub fn records(rate_rps: f64, service_ns: f64, n: usize, seed: u64) -> Vec<RequestRecord> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut t = 1_000.0f64;
    let mut free = 0.0f64;
    (0..n)
        .map(|i| {
            t += rng.exp(1e9 / rate_rps);
            let sent = t + rng.exp(300.0);
            let start = sent.max(free) + 2_000.0;
            free = start + service_ns + rng.exp(service_ns * 0.1);
            let mut r = RequestRecord::scheduled(t as u64, 0);
            r.seen_ns = sent as u64;
            r.sent_ns = sent as u64;
            r.kernel_rx_ns = (free + 2_000.0) as u64;
            r.received_ns = (free + 3_000.0 + rng.exp(500.0)) as u64;
            r.conn = (i % 4) as u32;
            r.outcome = Outcome::Ok;
            r
        })
        .collect()
}

/// The analysis of [`records`] as a stored run's would be (warm-up: the first 5 %).
pub fn run(
    rate_rps: f64,
    service_ns: f64,
    n: usize,
    seed: u64,
) -> Result<Run, analysis::AnalysisError> {
    let recs = records(rate_rps, service_ns, n, seed);
    let warmup_ns = recs.get(n / 20).map_or(0, |r| r.intended_ns);
    let ideal = IdealSpec {
        service_ns,
        workers: 1,
        queues: QueueStructure::Single,
    };
    let cfg = AnalysisConfig {
        window_ns: 0,
        extra_quantiles: Vec::new(),
        ideal: Some(ideal.clone()),
        warmup_ns,
        arrival: model::ArrivalSpec::Poisson,
        confidence: 0.95,
        lateness_threshold_ns: 50_000.0,
        seed,
        same_host_start_mono_ns: None,
    };
    let analysis = analysis::analyse(&recs, &cfg)?;
    let why = attrib::Why {
        stages: Vec::new(),
        sources: vec![attrib::SourceFinding {
            source: "softirqs on CPU 1".into(),
            kind: attrib::SourceKind::SoftIrq,
            lift: 3.2,
            p_value: 0.004,
            evidence: "NET_RX 4.1x the run's mean during slow requests".into(),
            mitigation: "steer NIC interrupts and RPS away from the server's CPUs".into(),
            tradeoff: "fewer CPUs for interrupt processing".into(),
        }],
        slow_requests: (n / 100) as u64,
        intervals: 200,
        slow_intervals: 31,
    };
    let judged = lab::judge(
        &analysis,
        &lab::JudgeInput {
            lateness_threshold_ns: 50_000.0,
            ..lab::JudgeInput::default()
        },
    );
    Ok(Run {
        reproducibility: lab::reproduce::reproducibility(
            analysis.stationarity.as_ref(),
            None,
            judged.views.user.valid,
        ),
        convergence: None,
        window_host: Vec::new(),
        run_id: Some(7),
        status: RunStatus::Ok,
        status_note: judged.status_note,
        views: judged.views,
        lateness_verdict: judged.lateness_verdict,
        host_noise: None,
        target: "nullrpc://127.0.0.1:7000".into(),
        url: "nullrpc://127.0.0.1:7000".into(),
        rate_rps,
        seed,
        config: lab::RunConfig {
            target: Some("nullrpc://127.0.0.1:7000".into()),
            rate: Some(format!("{rate_rps}")),
            rate_rps: Some(rate_rps),
            arrival: Some("poisson".into()),
            duration: Some("10s".into()),
            warmup: Some("500ms".into()),
            connections: Some(4),
            threads: Some(1),
            cpus: Some(vec![0]),
            max_outstanding: Some(64),
            timeout: Some("1s".into()),
            request_size: Some(128),
            stamps: Some(false),
            seed: Some(seed),
            ideal: Some(ideal.clone()),
            server: Some(lab::ServerFacts {
                scheme: Some("nullrpc".into()),
                ..lab::ServerFacts::default()
            }),
            workload: Some("NullRpc(synthetic)".into()),
            ..lab::RunConfig::default()
        },
        server: lab::ServerFacts {
            scheme: Some("nullrpc".into()),
            ..lab::ServerFacts::default()
        },
        ideal_source: Some(lab::IdealSource::given()),
        analysis,
        saturation: None,
        why: Some(why),
        load: LoadFacts {
            warmup_ns,
            records: n as u64,
            ..LoadFacts::default()
        },
        instruments: vec![Instrument {
            name: "attribution sampler".into(),
            mode: "thread".into(),
            cpus: vec![1],
            cost_per_sample_ns: 41_000.0,
            max_cost_ns: 90_000,
            samples: 200,
            skipped: 0,
            cpu_ns: None,
            note: None,
            detail: None,
        }],
        agents: None,
    })
}
