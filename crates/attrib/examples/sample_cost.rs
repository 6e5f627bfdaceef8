//! What sampling costs on this host: `cargo run --release -p attrib --example sample_cost`.
//! Samples this process (its main thread and four idle ones, as a small server would have) and
//! every CPU back to back, with the default schedule (a full sample every 10th), and prints the
//! probe's own measure of its cost: the mean and maximum per sample, and the share of one CPU
//! that sampling every 10 ms would take.

use attrib::{mono_now_ns, Probe, SamplerConfig};

fn main() -> Result<(), attrib::AttribError> {
    let _threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(5))))
        .collect();
    let cfg = SamplerConfig {
        server_pids: vec![std::process::id()],
        ..SamplerConfig::default()
    };
    let mut probe = Probe::new(&cfg)?;
    probe.sample(mono_now_ns());
    for _ in 0..2000 {
        probe.sample(mono_now_ns());
    }
    let cost = probe.cost();
    let s = probe.finish();
    println!(
        "{} sources, 5 threads, a full sample every {}: {:.1} µs per sample (max {:.1} µs over {} samples), {:.2} % of a CPU at a 10 ms interval",
        s.sources.len(),
        cfg.slow_every,
        cost.mean_ns / 1e3,
        cost.max_ns as f64 / 1e3,
        cost.samples,
        cost.mean_ns / 1e7 * 100.0
    );
    Ok(())
}
