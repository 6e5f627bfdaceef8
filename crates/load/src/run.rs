//! `run_open_loop`: validate, build the schedule, open every connection, start the
//! generator threads at one common instant, report progress, merge their records.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::config::LoadConfig;
use crate::conn::Conn;
use crate::engine::{note_error, Engine, Slot, ThreadOutput};
use crate::error::LoadError;
use crate::protocol::Protocol;
use crate::record::RunRecords;
use crate::schedule;

/// Lead time between "all threads ready" and the schedule's time zero.
const START_LEAD_NS: u64 = 2_000_000;
/// Progress callback period.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Start value meaning "abort: a thread could not be started".
const ABORT: u64 = u64::MAX;

/// Opens one connection per `factory()` call, checking the codec's transport.
pub(crate) fn open_connections(
    target: &crate::Target,
    factory: &dyn Fn() -> Box<dyn Protocol>,
    count: usize,
    connect_timeout: Duration,
) -> Result<Vec<Conn>, LoadError> {
    let mut conns = Vec::with_capacity(count);
    for _ in 0..count {
        let proto = factory();
        if proto.transport() != target.transport {
            return Err(LoadError::Config(format!(
                "protocol speaks {} but the target is {}",
                proto.transport(),
                target.transport
            )));
        }
        let mut conn = Conn::new(proto);
        conn.open(target.addr, connect_timeout)
            .map_err(|source| LoadError::Connect {
                addr: target.addr,
                source,
            })?;
        conns.push(conn);
    }
    Ok(conns)
}

/// Runs the whole open-loop experiment; returns when the schedule is done and every
/// outstanding request has been answered or timed out. Setting `stop` ends it early
/// (SIGINT): records so far are returned with `interrupted = true`. `progress` is called
/// about every 250 ms from the calling thread with (requests done, schedule length).
pub fn run_open_loop(
    cfg: &LoadConfig,
    factory: &dyn Fn() -> Box<dyn Protocol>,
    stop: &AtomicBool,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<RunRecords, LoadError> {
    cfg.validate()?;
    let plans = schedule::build(cfg)?;
    let threads = plans.len();
    let total: u64 = plans.iter().map(|p| p.records.len() as u64).sum();
    let connect_timeout = cfg
        .timeout
        .clamp(Duration::from_millis(100), Duration::from_secs(10));
    let conns = open_connections(&cfg.target, factory, cfg.connections, connect_timeout)?;

    // Connection c goes to thread c % threads (its local index is c / threads).
    let mut per_thread: Vec<Vec<Slot>> = (0..threads).map(|_| Vec::new()).collect();
    for (c, conn) in conns.into_iter().enumerate() {
        per_thread[c % threads].push(Slot::new(conn, c as u32));
    }

    let done: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let ready = AtomicUsize::new(0);
    let start = AtomicU64::new(0);
    let warmup_ns = crate::engine::dur_ns(cfg.warmup);

    let mut outputs: Vec<Result<ThreadOutput, LoadError>> = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for (t, (plan, slots)) in plans.into_iter().zip(per_thread).enumerate() {
            let (done, ready, start) = (&done[t], &ready, &start);
            let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[t % cfg.cpus.len()]);
            let spawned = std::thread::Builder::new()
                .name(format!("tailscope-gen-{t}"))
                .spawn_scoped(scope, move || {
                    let pin_error = cpu.and_then(|c| {
                        host::placement::pin_current_thread(&[c])
                            .err()
                            .map(|e| format!("pinning generator thread {t} to cpu {c}: {e}"))
                    });
                    let engine = Engine::new(
                        cfg,
                        t,
                        threads,
                        slots,
                        plan.records,
                        plan.forced_conn,
                        stop,
                        done,
                    );
                    ready.fetch_add(1, Ordering::Release);
                    let at = wait_for_start(start);
                    let mut engine = engine.map_err(|e| LoadError::io("creating epoll", e))?;
                    if at == ABORT {
                        return Err(LoadError::Config("run aborted before start".into()));
                    }
                    if let Some(e) = pin_error {
                        engine.note_error_pub(e);
                    }
                    Ok(engine.run(at))
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_error = Some(LoadError::io("spawning a generator thread", e));
                    break;
                }
            }
        }
        if let Some(e) = spawn_error {
            start.store(ABORT, Ordering::Release);
            for h in handles {
                let _ = h.join();
            }
            return vec![Err(e)];
        }
        while ready.load(Ordering::Acquire) < threads {
            if handles.iter().any(|h| h.is_finished()) {
                // A thread ended before the start: it panicked while setting up.
                start.store(ABORT, Ordering::Release);
                return join_all(handles);
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        start.store(
            host::tstamp::mono_now_ns() + START_LEAD_NS,
            Ordering::Release,
        );
        let mut last = std::time::Instant::now();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
            if last.elapsed() >= PROGRESS_EVERY {
                last = std::time::Instant::now();
                progress(done.iter().map(|d| d.load(Ordering::Relaxed)).sum(), total);
            }
        }
        join_all(handles)
    });

    let mut out = RunRecords {
        start_mono_ns: start.load(Ordering::Acquire),
        records: Vec::new(),
        warmup_ns,
        interrupted: stop.load(Ordering::Relaxed),
        errors: Vec::new(),
        connects: 0,
        misses: 0,
    };
    // Report a panic in preference to the "aborted" errors it caused in other threads.
    if let Some(i) = outputs
        .iter()
        .position(|o| matches!(o, Err(LoadError::ThreadPanicked(_))))
    {
        return Err(outputs
            .swap_remove(i)
            .err()
            .unwrap_or(LoadError::ThreadPanicked(i)));
    }
    for o in outputs {
        let mut o = o?;
        out.interrupted |= o.interrupted;
        out.connects += o.connects;
        out.misses += o.misses;
        if out.records.is_empty() {
            // Reuse the first thread's vector: peak memory stays near one copy of the run.
            std::mem::swap(&mut out.records, &mut o.records);
            out.records
                .reserve(total as usize - out.records.len().min(total as usize));
        } else {
            out.records.append(&mut o.records);
        }
        for e in o.errors {
            note_error(&mut out.errors, e);
        }
    }
    // Each thread's records are already in intended order: the stable sort merges runs.
    out.records.sort_by_key(|r| r.intended_ns);
    progress(out.records.len() as u64, out.records.len() as u64);
    Ok(out)
}

fn join_all(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Result<ThreadOutput, LoadError>>>,
) -> Vec<Result<ThreadOutput, LoadError>> {
    handles
        .into_iter()
        .enumerate()
        .map(|(t, h)| h.join().unwrap_or(Err(LoadError::ThreadPanicked(t))))
        .collect()
}

fn wait_for_start(start: &AtomicU64) -> u64 {
    loop {
        let s = start.load(Ordering::Acquire);
        if s != 0 {
            return s;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}
