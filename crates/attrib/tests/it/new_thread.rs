//! On the real /proc, this process as the server: a thread started after the probe is found
//! by the re-listing that the task directory's link count calls for, and its CPU time is
//! sampled. One test in its own process, so that no other test's threads come and go.

use attrib::{Probe, SamplerConfig};
use std::sync::mpsc;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn a_thread_started_later_is_found_and_sampled() {
    let mut p = Probe::new(&SamplerConfig {
        server_pids: vec![std::process::id()],
        slow_every: 1,
        ..SamplerConfig::default()
    })
    .unwrap();
    p.sample(0);
    p.sample(1);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let (park_tx, park_rx) = mpsc::channel::<()>();
    let spinner = std::thread::spawn(move || {
        go_rx.recv().unwrap();
        let start = thread_cpu_ns();
        while thread_cpu_ns() - start < 30_000_000 {
            std::hint::spin_loop();
        }
        done_tx.send(thread_cpu_ns() - start).unwrap();
        park_rx.recv().ok();
    });
    // The new thread is listed here (the link count grew) and read from here on.
    p.sample(2);
    go_tx.send(()).unwrap();
    let spun = done_rx.recv().unwrap();
    p.sample(3);
    park_tx.send(()).unwrap();
    spinner.join().unwrap();
    let s = p.finish();
    // Interval 2 holds the spinner's 30 ms of CPU (and whatever the test's own thread ran).
    assert!(s.server_cpu_ns[2] >= spun as f64, "{:?}", s.server_cpu_ns);
}
