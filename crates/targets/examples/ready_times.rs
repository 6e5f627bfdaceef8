//! Start-to-ready and stop times of each real server on this machine.
//!
//! `cargo run --release -p targets --example ready_times [-- N]` starts and stops every
//! installed server N times (default 10) and prints its version and the min/median/max of
//! [`Spawned::ready_after`] (exec to the first passing protocol ping) and of the stop.

use std::time::{Duration, Instant};

use targets::{find_binary, Kind, SpawnConfig, Spawned};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(mut v: Vec<Duration>) -> String {
    v.sort_unstable();
    format!(
        "min {:.1} ms, median {:.1} ms, max {:.1} ms",
        ms(v[0]),
        ms(v[v.len() / 2]),
        ms(v[v.len() - 1])
    )
}

fn main() -> Result<(), targets::TargetError> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10)
        .max(1);
    for kind in Kind::ALL {
        if let Err(e) = find_binary(kind) {
            println!("{kind}: {e}");
            continue;
        }
        let cfg = SpawnConfig::new(kind);
        let (mut ready, mut stop, mut version) = (Vec::new(), Vec::new(), String::new());
        for _ in 0..n {
            let s = Spawned::start(&cfg)?;
            ready.push(s.ready_after());
            version = s.version();
            let t = Instant::now();
            s.stop()?;
            stop.push(t.elapsed());
        }
        println!("{kind} ({version}), {n} starts");
        println!("  ready: {}", summary(ready));
        println!("  stop:  {}", summary(stop));
    }
    Ok(())
}
