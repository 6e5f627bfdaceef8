//! Attribution end to end on this host (a small Tales of the Tail §4.1): an in-process "server"
//! thread pinned to CPU 0 serves one request per ms (100 µs of spinning) while a CPU hog on the
//! same CPU is switched on and off every 250 ms. The sampler runs meanwhile; `explain` should
//! put the hog's footprints (run-queue wait, other tasks' CPU time, involuntary switches) first.
//!
//! `cargo run --release -p attrib --example hog` (needs `taskset`; takes about 4 s).

use attrib::{explain, mono_now_ns, Sampler, SamplerConfig};
use std::process::Command;
use std::time::Duration;

fn pin_self_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it, and
    // sched_setaffinity reads it. Pinning is the point of the example, hence libc.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn spin_until(t: u64) {
    while mono_now_ns() < t {
        std::hint::spin_loop();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut hog = Command::new("taskset")
        .args(["-c", "0", "sh", "-c", "while :; do :; done"])
        .spawn()?;
    let hog_pid = hog.id() as i32;
    // SAFETY: signalling our own child.
    let signal = |sig| unsafe { libc::kill(hog_pid, sig) };
    signal(libc::SIGSTOP);

    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<u64>();
    let server = std::thread::spawn(move || {
        pin_self_to(0);
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        tid_tx.send(tid).ok();
        let start = go_rx.recv().unwrap_or(0);
        let mut out = Vec::new();
        for i in 0..4000u64 {
            let intended = start + i * 1_000_000;
            let now = mono_now_ns();
            if intended > now + 50_000 {
                std::thread::sleep(Duration::from_nanos(intended - now - 50_000));
            }
            spin_until(intended);
            let begin = mono_now_ns().max(intended);
            spin_until(begin + 100_000);
            out.push((intended - start, mono_now_ns() - intended));
        }
        out
    });
    let tid = tid_rx.recv()?;
    let sampler = Sampler::start(SamplerConfig {
        server_tids: vec![tid],
        cpus: vec![0],
        ..SamplerConfig::default()
    })?;
    let start = mono_now_ns() + 20_000_000;
    go_tx.send(start)?;
    for k in 0..16 {
        spin_until_sleeping(start + k * 250_000_000);
        signal(if k % 2 == 1 {
            libc::SIGCONT
        } else {
            libc::SIGSTOP
        });
    }
    let requests = server.join().map_err(|_| "server thread panicked")?;
    let out = sampler.stop();
    let series = out.series;
    eprintln!(
        "sampler on CPUs {:?}: {:.1} µs per sample (max {:.1} µs), {} intervals skipped",
        out.cpus,
        out.cost.mean_ns / 1e3,
        out.cost.max_ns as f64 / 1e3,
        out.cost.skipped
    );
    hog.kill()?;
    hog.wait()?;

    let mut lat: Vec<u64> = requests.iter().map(|r| r.1).collect();
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    println!(
        "{} requests, {} intervals; latency p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        requests.len(),
        series.intervals(),
        q(0.5),
        q(0.99),
        q(1.0)
    );
    let why = explain(&series, start, &requests, None);
    println!(
        "slow requests {}, in {} of {} intervals",
        why.slow_requests, why.slow_intervals, why.intervals
    );
    for f in &why.sources {
        println!("{:32} lift {:6.2}  p {:.4}", f.source, f.lift, f.p_value);
    }
    if let Some(f) = why.sources.first() {
        println!(
            "\nfirst: {}\n  evidence: {}\n  fix: {}\n  cost: {}",
            f.source, f.evidence, f.mitigation, f.tradeoff
        );
    }
    Ok(())
}

/// Sleep (not spin: the controller must not compete for CPU 0) until `t`.
fn spin_until_sleeping(t: u64) {
    let now = mono_now_ns();
    if t > now {
        std::thread::sleep(Duration::from_nanos(t - now));
    }
}
