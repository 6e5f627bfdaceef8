//! What one sample costs on this host: `cargo run --release -p attrib --example sample_cost`.
//! Samples this process (its threads) and every CPU back to back and prints the mean time per
//! sample and the share of one CPU that sampling every 10 ms would take.

use attrib::{mono_now_ns, Probe, SamplerConfig};

fn main() -> Result<(), attrib::AttribError> {
    // A few idle threads, as a small server would have.
    let _threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(5))))
        .collect();
    let cfg = SamplerConfig {
        server_pids: vec![std::process::id()],
        ..SamplerConfig::default()
    };
    let mut probe = Probe::new(&cfg)?;
    let n = 2000u64;
    let t0 = mono_now_ns();
    for _ in 0..n {
        probe.sample(mono_now_ns());
    }
    let per = (mono_now_ns() - t0) as f64 / n as f64;
    let s = probe.finish();
    println!(
        "{} sources, {} threads sampled: {:.1} µs per sample, {:.2} % of a CPU at a 10 ms interval",
        s.sources.len(),
        5,
        per / 1e3,
        per / 1e7 * 100.0
    );
    Ok(())
}
