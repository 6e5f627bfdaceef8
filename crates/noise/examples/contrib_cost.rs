//! What the eBPF contributors' timer costs the probe: the noise probe's gaps with the
//! programs attached (`--contributors ebpf`) and without (`counters`), runs alternated, the
//! median of each side printed side by side, with the programs' own run time.
//!
//! `cargo run --release -p noise --example contrib_cost -- [SECONDS] [REPEATS] [CPU…]`
//! (default 5 s, 3 repeats, CPU 0; needs root for the eBPF side). `SCHED=fifo:50` runs the
//! probe threads under that policy (other tasks then no longer preempt them, and what is
//! left is the interrupts the programs time).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use noise::{run, Contributors, CpuReport, NoiseConfig};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Per run, summed over CPUs: (time lost %, gaps/s, p99 gap ns, loops/s, BPF ns per s).
fn figures(rs: &[CpuReport]) -> [f64; 5] {
    let n = rs.len().max(1) as f64;
    let lost = rs.iter().map(|r| r.time_lost_fraction).sum::<f64>() / n * 100.0;
    let gaps = rs.iter().map(|r| r.gaps_per_s).sum::<f64>() / n;
    let p99 = rs
        .iter()
        .filter_map(|r| r.gap_summary.as_ref()?.get("p99").map(|e| e.value))
        .fold(0.0, f64::max);
    let loops = rs
        .iter()
        .map(|r| r.loops as f64 / (r.elapsed_ns.max(1) as f64 / 1e9))
        .sum::<f64>()
        / n;
    let bpf = rs.first().and_then(|r| r.ebpf.as_ref()).map_or(0.0, |t| {
        t.cost.run_time_ns as f64 / (t.attached_ns.max(1) as f64 / 1e9)
    });
    [lost, gaps, p99, loops, bpf]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let repeats: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let cpus: Vec<usize> = args.iter().skip(2).filter_map(|a| a.parse().ok()).collect();
    let cpus = if cpus.is_empty() { vec![0] } else { cpus };
    let sched = match std::env::var("SCHED")
        .ok()
        .map(|s| s.parse::<noise::SchedSpec>())
    {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            eprintln!("SCHED: {e}");
            std::process::exit(2);
        }
    };
    let stop = AtomicBool::new(false);
    let mut sides: [Vec<[f64; 5]>; 2] = [Vec::new(), Vec::new()];
    for i in 0..repeats {
        for (s, mode) in [Contributors::Counters, Contributors::Ebpf]
            .into_iter()
            .enumerate()
        {
            let cfg = NoiseConfig {
                cpus: cpus.clone(),
                duration: Duration::from_secs_f64(secs),
                contributors: mode,
                sched: sched.clone(),
                ..NoiseConfig::default()
            };
            match run(&cfg, &stop, &|_| {}) {
                Ok(rs) => {
                    let f = figures(&rs);
                    println!(
                        "run {i} {mode:>8}: lost {:.4} %, {:.0} gaps/s, p99 gap {:.0} ns, \
                         {:.3e} loops/s, BPF {:.0} ns/s",
                        f[0], f[1], f[2], f[3], f[4]
                    );
                    sides[s].push(f);
                }
                Err(e) => {
                    eprintln!("{mode}: {e}");
                    std::process::exit(2);
                }
            }
        }
    }
    let col = |s: usize, k: usize| median(sides[s].iter().map(|f| f[k]).collect());
    println!("\nmedian of {repeats}, CPUs {cpus:?}, {secs} s each:");
    println!("{:<22} {:>14} {:>14}", "", "without eBPF", "with eBPF");
    for (k, name) in [
        "time lost (%)",
        "gaps/s (> 1 µs)",
        "p99 gap (ns)",
        "loops/s",
        "BPF run time (ns/s)",
    ]
    .iter()
    .enumerate()
    {
        println!("{name:<22} {:>14.4} {:>14.4}", col(0, k), col(1, k));
    }
}
