//! Prints the minimum loop time and gap rate of the noise probe on each CPU given.
//!
//! `cargo run --release -p noise --example min_loop -- [SECONDS] [CPU…]` (default 5 s, CPU 0).
//! Both loops run in turn: paired reads (Listing 1.1) and consecutive reads (Listing 1.2).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use noise::{run, LoopKind, NoiseConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let cpus: Vec<usize> = args.iter().skip(1).filter_map(|a| a.parse().ok()).collect();
    let cpus = if cpus.is_empty() { vec![0] } else { cpus };
    println!(
        "clock: {} ({:.4} ns/tick)",
        noise::clock_kind().describe(),
        noise::tsc_ns_per_tick()
    );
    let stop = AtomicBool::new(false);
    for kind in [LoopKind::Paired, LoopKind::Consecutive] {
        for &cpu in &cpus {
            let cfg = NoiseConfig {
                cpus: vec![cpu],
                duration: Duration::from_secs_f64(secs),
                loop_kind: kind,
                ..NoiseConfig::default()
            };
            match run(&cfg, &stop, &|_| {}) {
                Ok(reports) => {
                    for r in reports {
                        let max = r.gap_summary.as_ref().map_or(0.0, |s| s.max_ns / 1e3);
                        println!(
                            "{kind:?} cpu {}: min loop {:.1} ns, {} loops, {:.1} gaps/s > 1 µs, \
                             max gap {:.1} µs, lost {:.4} %, snr {:.0}",
                            r.cpu,
                            r.min_loop_ns,
                            r.loops,
                            r.gaps_per_s,
                            max,
                            r.time_lost_fraction * 100.0,
                            r.snr
                        );
                    }
                }
                Err(e) => {
                    eprintln!("cpu {cpu}: {e}");
                    std::process::exit(2);
                }
            }
        }
    }
}
