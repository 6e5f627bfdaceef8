//! `noise::run` in-process: short real runs on CPU 0 (properties that hold whatever the
//! machine's noise is) and the validation errors.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

use noise::{run, CpuReport, LoopKind, NoiseConfig, NoiseError};

fn short(kind: LoopKind) -> NoiseConfig {
    NoiseConfig {
        cpus: vec![0],
        duration: Duration::from_millis(200),
        threshold_ns: 1_000,
        loop_kind: kind,
        max_gaps: 1 << 16,
        ..NoiseConfig::default()
    }
}

fn check(r: &CpuReport) {
    assert_eq!(r.cpu, 0);
    assert!(r.loops > 1000, "{} loops", r.loops);
    assert!(
        r.min_loop_ns > 0.0 && r.min_loop_ns < 1_000.0,
        "min loop {} ns",
        r.min_loop_ns
    );
    assert!(r.elapsed_ns > 0);
    // gaps in time order, each above the threshold (rounding of the tick → ns conversion
    // allowed: one tick is well under 1 ns on a GHz TSC)
    assert!(r.gaps.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
    assert!(r.gaps.iter().all(|g| g.len_ns + 1 >= r.threshold_ns));
    assert_eq!(r.gaps_dropped, 0);
    // time lost is exactly the sum of the listed (non-throttle) gaps
    let sum: u64 = r
        .gaps
        .iter()
        .filter(|g| !g.throttle)
        .map(|g| g.len_ns)
        .sum();
    assert_eq!(r.time_lost_ns, sum);
    assert!((0.0..=1.0).contains(&r.time_lost_fraction));
    let expect = sum as f64 / r.elapsed_ns as f64;
    assert!((r.time_lost_fraction - expect).abs() < 1e-12);
    let n = r.gaps.len() as f64;
    assert!((r.gaps_per_s - n / (r.elapsed_ns as f64 / 1e9)).abs() < 1e-9 * (1.0 + n));
    // SNR per its definition
    if sum == 0 {
        assert!(r.snr.is_infinite());
    } else {
        let useful = (r.elapsed_ns - sum) as f64;
        assert!((r.snr - useful / sum as f64).abs() <= 1e-9 * r.snr);
    }
    // CCDF of lost time: x increasing, fraction non-increasing, first point = total
    let c = &r.lost_ccdf;
    assert!(c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 >= w[1].1));
    assert!(c.iter().all(|&(_, f)| (0.0..=1.0).contains(&f)));
    if let Some(&(x0, f0)) = c.first() {
        let min_gap = r.gaps.iter().map(|g| g.len_ns).min().unwrap();
        assert_eq!(x0, min_gap as f64);
        assert!((f0 - r.time_lost_fraction).abs() < 1e-12);
        let s = r.gap_summary.as_ref().unwrap();
        assert_eq!(s.count, r.gaps.len() as u64);
    } else {
        assert!(r.gaps.is_empty() && r.gap_summary.is_none());
    }
    let class_total: u64 = r.gap_classes.iter().map(|c| c.count).sum();
    assert_eq!(class_total, r.gaps.len() as u64);
    let j = r.to_json();
    assert_eq!(j["cpu"], 0);
    assert!(j["min_loop_ns"].as_f64().unwrap() > 0.0);
    assert!(j.get("gaps").is_some() && j.get("snr").is_some());
}

// The real runs spin a CPU; run them one at a time so they do not disturb each other.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn consecutive_run_on_cpu0() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stop = AtomicBool::new(false);
    let calls = std::cell::Cell::new(0);
    let last = std::cell::Cell::new(-1.0);
    let progress = |f: f64| {
        assert!(f >= last.get() && (0.0..=1.0).contains(&f));
        last.set(f);
        calls.set(calls.get() + 1);
    };
    let r = run(&short(LoopKind::Consecutive), &stop, &progress).unwrap();
    assert_eq!(r.len(), 1);
    check(&r[0]);
    assert!(calls.get() >= 2 && last.get() == 1.0);
}

#[test]
fn paired_run_on_cpu0_with_mlock() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stop = AtomicBool::new(false);
    let mut cfg = short(LoopKind::Paired);
    // mlock needs privilege or a high enough RLIMIT_MEMLOCK; without them the run must
    // fail with the Mlock error, never half-run.
    cfg.mlock = true;
    match run(&cfg, &stop, &|_| {}) {
        Ok(r) => check(&r[0]),
        Err(NoiseError::Mlock(_)) => {
            cfg.mlock = false;
            check(&run(&cfg, &stop, &|_| {}).unwrap()[0]);
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn stop_flag_set_before_start_ends_the_run_early() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stop = AtomicBool::new(true);
    let mut cfg = short(LoopKind::Consecutive);
    cfg.duration = Duration::from_secs(3600);
    let r = run(&cfg, &stop, &|_| {}).unwrap();
    // the flag is polled every 4096 iterations: the first poll ends the loop
    assert_eq!(r[0].loops, 4096);
}

#[test]
fn bad_configurations_are_refused_before_anything_runs() {
    let stop = AtomicBool::new(false);
    let online = host::placement::online_cpus();
    let mut cfg = short(LoopKind::Consecutive);
    cfg.cpus = vec![0, online + 3, online];
    match run(&cfg, &stop, &|_| {}) {
        Err(NoiseError::UnknownCpus { cpus, online: o }) => {
            assert_eq!(cpus, vec![online, online + 3]);
            assert_eq!(o, online);
        }
        other => panic!("{other:?}"),
    }
    let e = run(&cfg, &stop, &|_| {}).unwrap_err().to_string();
    assert!(e.contains(&online.to_string()), "{e}");

    let mut cfg = short(LoopKind::Consecutive);
    cfg.duration = Duration::ZERO;
    assert!(matches!(
        run(&cfg, &stop, &|_| {}),
        Err(NoiseError::ZeroDuration)
    ));
    let mut cfg = short(LoopKind::Consecutive);
    cfg.threshold_ns = 0;
    assert!(matches!(
        run(&cfg, &stop, &|_| {}),
        Err(NoiseError::ZeroThreshold)
    ));
    let mut cfg = short(LoopKind::Consecutive);
    cfg.cpus = vec![0, 0];
    assert!(matches!(
        run(&cfg, &stop, &|_| {}),
        Err(NoiseError::DuplicateCpu(0))
    ));
    let mut cfg = short(LoopKind::Consecutive);
    cfg.cpus.clear();
    assert!(matches!(run(&cfg, &stop, &|_| {}), Err(NoiseError::NoCpus)));
    let mut cfg = short(LoopKind::Consecutive);
    cfg.proc_root = PathBuf::from("/nonexistent-root-for-noise-test");
    assert!(matches!(
        run(&cfg, &stop, &|_| {}),
        Err(NoiseError::NoProc { .. })
    ));
}
