//! The sampler over a real child process that spins, then sleeps. Bounded: the spin is a fixed
//! number of shell loop iterations, and the child is killed at the end.

use attrib::{mono_now_ns, Probe, Sampler, SamplerConfig};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A shell that waits for a line on stdin, counts to 20000 (busy), says "spun", then becomes
/// `sleep 30`.
fn spinner() -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("read go; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo spun; exec sleep 30")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

/// Let the child spin (after the baseline sample, so all of its spin is sampled) and wait for
/// its end.
fn go_and_wait_spun(child: &mut Child, out: &mut BufReader<std::process::ChildStdout>) {
    use std::io::Write;
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "spun");
}

/// Wait (without any time bound asserted) until the child has become `sleep` and sleeps.
fn wait_asleep(pid: u32) {
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        if stat.contains("(sleep) S") {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Every sample full, so that each interval holds its own context switches.
fn cfg(pid: u32, interval_ms: u64) -> SamplerConfig {
    SamplerConfig {
        server_pids: vec![pid],
        interval: Duration::from_millis(interval_ms),
        slow_every: 1,
        ..SamplerConfig::default()
    }
}

#[test]
fn spinning_shows_cpu_time_and_sleeping_shows_none() {
    let (mut child, mut out) = spinner();
    let pid = child.id();
    let mut p = Probe::new(&cfg(pid, 10)).unwrap();
    p.sample(mono_now_ns());
    go_and_wait_spun(&mut child, &mut out);
    p.sample(mono_now_ns()); // interval 0: (part of) the spin
    wait_asleep(pid);
    p.sample(mono_now_ns()); // interval 1: from the spin to asleep
    std::thread::sleep(Duration::from_millis(20));
    p.sample(mono_now_ns()); // interval 2: asleep throughout
    child.kill().unwrap();
    child.wait().unwrap();
    let s = p.finish();
    assert_eq!(s.intervals(), 3);
    // The shell ran its loop in interval 0.
    assert!(s.server_cpu_ns[0] > 0.0, "{:?}", s.server_cpu_ns);
    // It went to sleep after saying "spun" (interval 0 or 1, the parent cannot tell which):
    // at least one voluntary switch there.
    let vol = &s.source("voluntary context switches").unwrap().deltas;
    assert!(vol[0] + vol[1] >= 1.0, "{vol:?}");
    // A sleeping task neither runs, nor waits for a CPU, nor switches.
    assert_eq!(s.server_cpu_ns[2], 0.0);
    assert_eq!(s.source("run-queue wait").unwrap().deltas[2], 0.0);
    assert_eq!(vol[2], 0.0);
    assert_eq!(
        s.source("involuntary context switches").unwrap().deltas[2],
        0.0
    );
}

#[test]
fn the_sampler_thread_records_whole_intervals_and_stops() {
    let (mut child, mut out) = spinner();
    let pid = child.id();
    // The sampler needs a CPU that is not the server's: say the (unpinned) child is on CPU 0.
    let mut c = cfg(pid, 2);
    c.cpus = vec![0];
    c.slow_every = 3;
    let spare = Probe::new(&c).unwrap().spare_cpus();
    if spare.is_empty() {
        eprintln!("skipped: a single CPU leaves none spare for the sampler thread");
        child.kill().unwrap();
        child.wait().unwrap();
        return;
    }
    let sampler = Sampler::start(c).unwrap();
    go_and_wait_spun(&mut child, &mut out);
    wait_asleep(pid);
    let out = sampler.stop();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(out.cpus, spare);
    assert_eq!(out.cost.samples as usize, out.series.intervals());
    let s = out.series;
    // At least the baseline and the closing sample.
    assert!(s.intervals() >= 1);
    assert!(s.t_mono_ns.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(s.server_cpu_ns.len(), s.intervals());
    for src in &s.sources {
        assert_eq!(src.deltas.len(), s.intervals(), "{}", src.name);
        assert!(src.deltas.iter().all(|d| *d >= 0.0), "{}", src.name);
    }
    // The whole spin fell inside the sampled span.
    assert!(s.server_cpu_ns.iter().sum::<f64>() > 0.0);
    let js = serde_json::to_value(&s).unwrap();
    assert!(js["sources"][0]["deltas"].is_array());
}
