//! `run_open_loop_into`: validate, plan the schedule, open every connection, start the
//! generator threads at one common instant, stream their finished records to a sink through a
//! low-priority writer thread, sample the backlog and report progress.
//!
//! The writer exists so that no generator thread ever waits on storage: a generator hands a
//! full chunk over a channel (a pointer move) and goes on. The writer runs at `SCHED_IDLE`
//! (pinned to `LoadConfig::writer_cpus` when given), so it takes only CPU time nothing else
//! wants; if chunks pile up (both CPUs of a small host saturated) it steps up to normal
//! priority until it has caught up, and counts each such time, so memory stays bounded.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::config::LoadConfig;
use crate::conn::Conn;
use crate::engine::{note_error, Engine, Links, Shared, SlackTask, Slot, ThreadOutput, ToWriter};
use crate::error::LoadError;
use crate::protocol::Protocol;
use crate::record::{BacklogSample, RequestRecord, RunRecords, RunSummary, WriterStats};
use crate::schedule;

/// Lead time between "all threads ready" and the schedule's time zero.
const START_LEAD_NS: u64 = 2_000_000;
/// Progress callback period.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Backlog sampling period.
const BACKLOG_EVERY: Duration = Duration::from_millis(100);
/// Start value meaning "abort: a thread could not be started".
const ABORT: u64 = u64::MAX;
/// Chunks waiting for the writer beyond which it leaves SCHED_IDLE to catch up (~6 MiB).
const WRITER_CATCH_UP_CHUNKS: usize = 8;

/// Where an open-loop run's records go, chunk by chunk, as the run goes. Each generator
/// thread's records arrive in its own intended-time order; chunks of different threads
/// interleave (merge them by `intended_ns` when reading back).
pub trait RecordSink: Send {
    /// Takes one chunk of finished records of generator thread `thread`. An error ends the
    /// run (it is reported as [`LoadError::Sink`]).
    fn write(&mut self, thread: usize, records: &[RequestRecord]) -> Result<(), String>;

    /// The run's time origin (absolute CLOCK_MONOTONIC ns; a record's times are relative
    /// to it), before any record of the run. Each generator thread reports it (the same
    /// value) ahead of its own chunks. Default: ignored.
    fn started(&mut self, _start_mono_ns: u64) {}

    /// Connection `conn` (the records' `conn`) was opened — before the run, or reopened
    /// after a failure or by churn — with local address `local`, at absolute
    /// CLOCK_MONOTONIC `at_mono_ns` (no later than the send stamp of any request sent on
    /// it); always reported before the records of those requests.
    /// The local port is what the server sees as its peer's (an observer of the server
    /// matches its sockets to the run's connections with it). Default: ignored.
    fn connected(&mut self, _conn: u32, _local: SocketAddr, _at_mono_ns: u64) {}
}

/// Keeps every record in memory (tests, short runs).
#[derive(Default)]
pub struct VecSink {
    pub records: Vec<RequestRecord>,
}

impl RecordSink for VecSink {
    fn write(&mut self, _thread: usize, records: &[RequestRecord]) -> Result<(), String> {
        self.records.extend_from_slice(records);
        Ok(())
    }
}

/// Opens one connection per `factory()` call, checking the codec's transport; connection `c`
/// goes to `spread[c % len]` (the target's address when `spread` is empty).
pub(crate) fn open_connections(
    target: &crate::Target,
    spread: &[std::net::SocketAddr],
    factory: &dyn Fn() -> Box<dyn Protocol>,
    count: usize,
    connect_timeout: Duration,
) -> Result<Vec<Conn>, LoadError> {
    let mut conns = Vec::with_capacity(count);
    for c in 0..count {
        let addr = match spread.len() {
            0 => target.addr,
            n => spread[c % n],
        };
        let proto = factory();
        if proto.transport() != target.transport {
            return Err(LoadError::Config(format!(
                "protocol speaks {} but the target is {}",
                proto.transport(),
                target.transport
            )));
        }
        let mut conn = Conn::new(proto);
        conn.open(addr, connect_timeout)
            .map_err(|source| LoadError::Connect { addr, source })?;
        conns.push(conn);
    }
    Ok(conns)
}

/// Runs the whole open-loop experiment with every record kept in memory, sorted by intended
/// time. See [`run_open_loop_into`]; fine for tests and short runs.
pub fn run_open_loop(
    cfg: &LoadConfig,
    factory: &dyn Fn() -> Box<dyn Protocol>,
    stop: &AtomicBool,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<RunRecords, LoadError> {
    let mut sink = VecSink::default();
    let summary = run_open_loop_into(cfg, factory, stop, progress, &mut sink, None)?;
    let mut records = sink.records;
    // Each thread's records are in intended order: the stable sort merges runs.
    records.sort_by_key(|r| r.intended_ns);
    Ok(RunRecords { summary, records })
}

/// What the calling thread, the generator threads and the writer share during a run.
struct Coord {
    shared: Vec<Shared>,
    /// Generator threads set up and waiting for the start.
    ready: AtomicUsize,
    /// The schedule's time zero (absolute CLOCK_MONOTONIC ns): 0 until released, [`ABORT`]
    /// when the run is called off before it.
    start: AtomicU64,
    /// Set by the writer when the sink fails, and on `stop`: the generators stop as on Ctrl-C.
    halt: AtomicBool,
    /// Chunks sent to the writer and not yet taken.
    queued: AtomicUsize,
}

type Output = Result<ThreadOutput, LoadError>;
type Handle<'scope> = std::thread::ScopedJoinHandle<'scope, Output>;

/// Runs the whole open-loop experiment; returns when the schedule is done and every
/// outstanding request has been answered or timed out. Records go to `sink` in chunks as the
/// run goes (memory does not grow with the run's length). Setting `stop` ends it early
/// (SIGINT): what was measured so far is kept and `interrupted` is set. `progress` is called
/// about every 250 ms from the calling thread with (requests done, expected total). `slack`,
/// if given, runs inside generator thread 0 when it has time to spare (see [`SlackTask`]).
pub fn run_open_loop_into(
    cfg: &LoadConfig,
    factory: &dyn Fn() -> Box<dyn Protocol>,
    stop: &AtomicBool,
    progress: &(dyn Fn(u64, u64) + Sync),
    sink: &mut dyn RecordSink,
    slack: Option<&mut dyn SlackTask>,
) -> Result<RunSummary, LoadError> {
    cfg.validate()?;
    let plan = schedule::plan(cfg)?;
    let threads = plan.threads.len();
    let expected = plan.expected;
    let per_thread = connect(cfg, factory, sink, threads)?;
    let co = Coord {
        shared: (0..threads).map(|_| Shared::default()).collect(),
        ready: AtomicUsize::new(0),
        start: AtomicU64::new(0),
        halt: AtomicBool::new(false),
        queued: AtomicUsize::new(0),
    };
    // The calling thread supervises the run: it goes where the writer goes (the CPUs
    // neither the generator's nor the server's, or the generator's), off the server's,
    // until the run ends.
    let _placed = (!cfg.writer_cpus.is_empty())
        .then(|| host::threads::PinnedForNow::pin(&cfg.writer_cpus).ok())
        .flatten();
    let (tx, rx) = mpsc::channel::<ToWriter>();
    let mut backlog = Vec::new();
    let mut threads = Vec::new();
    // Re-borrowed for the scope (a trait object's lifetime may shorten behind &mut).
    let mut slack: Option<&mut dyn SlackTask> = slack.map(|s| s as &mut dyn SlackTask);
    let work: Vec<_> = plan.threads.into_iter().zip(per_thread).collect();

    let (outputs, writer) = std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name("tailscope-rec".into())
            .spawn_scoped(scope, || {
                writer_loop(rx, sink, &cfg.writer_cpus, &co.halt, &co.queued)
            });
        let writer = match writer {
            Ok(w) => w,
            Err(e) => {
                let e = LoadError::io("spawning the record writer", e);
                return (vec![Err(e)], Ok((WriterStats::default(), None)));
            }
        };
        let spawned = spawn_generators(scope, cfg, &co, work, &tx, slack.take());
        // Only the generator threads hold senders now: the writer ends when they all have.
        drop(tx);
        let outputs = match spawned {
            Err((e, handles)) => {
                co.start.store(ABORT, Ordering::Release);
                let _ = join_all(handles);
                vec![Err(e)]
            }
            Ok(handles) => match release(cfg, &co, handles) {
                Err(outputs) => outputs,
                Ok((t0, handles)) => {
                    (backlog, threads) = supervise(&co, &handles, t0, stop, &|done| {
                        progress(done, expected.max(done))
                    });
                    join_all(handles)
                }
            },
        };
        let w = writer
            .join()
            .unwrap_or_else(|_| Ok((WriterStats::default(), None)));
        (outputs, w)
    });

    let (writer, sink_error) = writer?;
    let out = RunSummary {
        start_mono_ns: co.start.load(Ordering::Acquire),
        warmup_ns: crate::engine::dur_ns(cfg.warmup),
        interrupted: stop.load(Ordering::Relaxed),
        backlog,
        writer,
        threads,
        ..RunSummary::default()
    };
    let out = fold_outputs(out, outputs, stop.load(Ordering::Relaxed))?;
    if let Some(e) = sink_error {
        return Err(LoadError::Sink(e));
    }
    progress(out.records, out.records);
    Ok(out)
}

/// Opens every connection (telling `sink` their local addresses) and deals them to the
/// generator threads: connection c goes to thread c % threads (its local index is
/// c / threads).
fn connect(
    cfg: &LoadConfig,
    factory: &dyn Fn() -> Box<dyn Protocol>,
    sink: &mut dyn RecordSink,
    threads: usize,
) -> Result<Vec<Vec<Slot>>, LoadError> {
    let connect_timeout = cfg
        .timeout
        .clamp(Duration::from_millis(100), Duration::from_secs(10));
    let opened = host::tstamp::mono_now_ns();
    let conns = open_connections(
        &cfg.target,
        &cfg.spread,
        factory,
        cfg.connections,
        connect_timeout,
    )?;
    for (c, conn) in conns.iter().enumerate() {
        if let Some(local) = conn.local_addr() {
            sink.connected(c as u32, local, opened);
        }
    }
    let mut per_thread: Vec<Vec<Slot>> = (0..threads).map(|_| Vec::new()).collect();
    for (c, conn) in conns.into_iter().enumerate() {
        per_thread[c % threads].push(Slot::new(conn, c as u32, cfg.addr_of(c)));
    }
    Ok(per_thread)
}

/// Starts one generator thread per (schedule, connections) of `work`; each sets itself up,
/// counts itself ready and waits for the start. On a failed spawn, the error and the
/// threads already started (to be called off and joined).
fn spawn_generators<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    cfg: &'env LoadConfig,
    co: &'env Coord,
    work: Vec<(schedule::ThreadSchedule, Vec<Slot>)>,
    tx: &mpsc::Sender<ToWriter>,
    mut slack: Option<&'env mut dyn SlackTask>,
) -> Result<Vec<Handle<'scope>>, (LoadError, Vec<Handle<'scope>>)> {
    let threads = work.len();
    let mut handles = Vec::with_capacity(threads);
    for (t, (sched, slots)) in work.into_iter().enumerate() {
        let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[t % cfg.cpus.len()]);
        let links = Links {
            stop: &co.halt,
            shared: &co.shared[t],
            out: tx.clone(),
            queued: &co.queued,
        };
        let task = if t == 0 { slack.take() } else { None };
        let spawned = std::thread::Builder::new()
            .name(format!("tailscope-gen-{t}"))
            .spawn_scoped(scope, move || {
                let pin_error = cpu.and_then(|c| {
                    host::placement::pin_current_thread(&[c])
                        .err()
                        .map(|e| format!("pinning generator thread {t} to cpu {c}: {e}"))
                });
                let engine = Engine::new(cfg, t, threads, slots, sched, links, task);
                co.ready.fetch_add(1, Ordering::Release);
                let at = wait_for_start(&co.start);
                let mut engine = engine.map_err(|e| LoadError::io("creating epoll", e))?;
                if at == ABORT {
                    return Err(LoadError::Config("run aborted before start".into()));
                }
                engine.report_start(at);
                if let Some(e) = pin_error {
                    engine.note_error_pub(e);
                }
                Ok(engine.run(at))
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => return Err((LoadError::io("spawning a generator thread", e), handles)),
        }
    }
    Ok(handles)
}

/// Waits until every generator is ready and sets the common start: now plus a lead, or the
/// start given by `cfg.start_at_mono_ns`. Calls the run off instead (and returns what the
/// threads end with) when a thread ended while setting up (it panicked), or the given start
/// has already passed: starting late would shift this share's schedule against the other
/// processes'.
fn release<'scope>(
    cfg: &LoadConfig,
    co: &Coord,
    handles: Vec<Handle<'scope>>,
) -> Result<(u64, Vec<Handle<'scope>>), Vec<Output>> {
    while co.ready.load(Ordering::Acquire) < handles.len() {
        if handles.iter().any(|h| h.is_finished()) {
            co.start.store(ABORT, Ordering::Release);
            return Err(join_all(handles));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let now = host::tstamp::mono_now_ns();
    let t0 = match cfg.start_at_mono_ns {
        Some(at) if at <= now => {
            co.start.store(ABORT, Ordering::Release);
            let _ = join_all(handles);
            return Err(vec![Err(LoadError::Config(format!(
                "the common start passed {:.1} ms before this generator was ready (its connections took too long): give the start more lead",
                (now - at) as f64 / 1e6
            )))]);
        }
        Some(at) => at,
        None => now + START_LEAD_NS,
    };
    co.start.store(t0, Ordering::Release);
    Ok((t0, handles))
}

/// When the process's threads are listed: this far into the run, when every thread the run
/// starts is up.
const THREADS_AT_NS: u64 = 100_000_000;

/// Watches the running generators until all have ended: passes `stop` on to them, samples
/// the backlog and lists the process's threads once (both returned), and reports the
/// requests done to `progress`.
fn supervise(
    co: &Coord,
    handles: &[Handle<'_>],
    t0: u64,
    stop: &AtomicBool,
    progress: &dyn Fn(u64),
) -> (Vec<BacklogSample>, Vec<host::threads::ThreadPlace>) {
    let mut backlog = Vec::new();
    let mut threads = Vec::new();
    let mut last_progress = std::time::Instant::now();
    let mut last_backlog = std::time::Instant::now();
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
        if stop.load(Ordering::Relaxed) {
            co.halt.store(true, Ordering::Relaxed);
        }
        if last_backlog.elapsed() >= BACKLOG_EVERY {
            last_backlog = std::time::Instant::now();
            let now = host::tstamp::mono_now_ns();
            if threads.is_empty() && now >= t0 + THREADS_AT_NS {
                // A few /proc reads, off the generator's CPUs (this thread is placed with
                // the writer), once.
                threads = host::threads::threads_of(std::path::Path::new("/proc/self"));
            }
            if now >= t0 {
                let sum = |f: fn(&Shared) -> u64| co.shared.iter().map(f).sum();
                backlog.push(BacklogSample {
                    t_ns: now - t0,
                    in_flight: sum(|s| s.in_flight.load(Ordering::Relaxed)),
                    held: sum(|s| s.held.load(Ordering::Relaxed)),
                });
            }
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = std::time::Instant::now();
            progress(
                co.shared
                    .iter()
                    .map(|s| s.done.load(Ordering::Relaxed))
                    .sum(),
            );
        }
    }
    (backlog, threads)
}

/// Adds the generator threads' outputs to `out`; a thread's error ends the run, a panic in
/// preference to the "aborted" errors it caused in the other threads.
fn fold_outputs(
    mut out: RunSummary,
    mut outputs: Vec<Output>,
    stopped: bool,
) -> Result<RunSummary, LoadError> {
    if let Some(i) = outputs
        .iter()
        .position(|o| matches!(o, Err(LoadError::ThreadPanicked(_))))
    {
        return Err(outputs
            .swap_remove(i)
            .err()
            .unwrap_or(LoadError::ThreadPanicked(i)));
    }
    let (mut last_intended, mut done) = (0u64, 0u64);
    for o in outputs {
        let o: ThreadOutput = o?;
        last_intended = last_intended.max(o.last_intended_ns);
        done = done.max(o.done_ns);
        out.interrupted |= o.interrupted && stopped;
        out.connects += o.connects;
        out.misses += o.misses;
        for (c, n) in o.codes {
            *out.error_codes.entry(c.to_string()).or_default() += n;
        }
        out.records += o.records;
        out.generator.add(&o.cost);
        if o.tls.handshakes > 0 {
            out.tls.get_or_insert_with(Default::default).add(&o.tls);
        }
        for e in o.errors {
            note_error(&mut out.errors, e);
        }
    }
    out.drain_ns = done.saturating_sub(last_intended);
    if let Some(t) = &mut out.tls {
        t.finish();
    }
    Ok(out)
}

/// The writer thread: hands every chunk to the sink; returns its cost and the sink's first
/// error (after which it drains the channel without writing, so no generator is held up).
fn writer_loop(
    rx: mpsc::Receiver<ToWriter>,
    sink: &mut dyn RecordSink,
    cpus: &[usize],
    halt: &AtomicBool,
    queued: &AtomicUsize,
) -> Result<(WriterStats, Option<String>), LoadError> {
    let mut stats = WriterStats {
        cpus: cpus.to_vec(),
        ..WriterStats::default()
    };
    if !cpus.is_empty() {
        // Best effort: an unpinned writer is still idle-class.
        let _ = host::placement::pin_current_thread(cpus);
    }
    let mut idle = host::placement::set_idle_current_thread().is_ok();
    stats.policy = if idle { "idle" } else { "other" }.into();
    let mut error = None;
    for msg in rx {
        let (thread, chunk) = match msg {
            ToWriter::Chunk(thread, chunk) => (thread, chunk),
            ToWriter::Started(t0) => {
                sink.started(t0);
                continue;
            }
            ToWriter::Connected {
                conn,
                local,
                at_mono_ns,
            } => {
                sink.connected(conn, local, at_mono_ns);
                continue;
            }
        };
        let waiting = queued.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        stats.max_queued_chunks = stats.max_queued_chunks.max(waiting as u64 + 1);
        if idle && waiting >= WRITER_CATCH_UP_CHUNKS {
            // Starved: both CPUs busy. Catch up at normal priority rather than let chunks
            // (memory) pile up; back to idle once drained.
            if host::placement::apply_sched_current_thread(&host::placement::SchedSpec::Other {
                nice: 0,
            })
            .is_ok()
            {
                idle = false;
                stats.escalations += 1;
            }
        } else if !idle && waiting == 0 && stats.policy == "idle" {
            idle = host::placement::set_idle_current_thread().is_ok();
        }
        if error.is_some() {
            continue;
        }
        match sink.write(thread, &chunk) {
            Ok(()) => {
                stats.chunks += 1;
                stats.records += chunk.len() as u64;
            }
            Err(e) => {
                error = Some(e);
                halt.store(true, Ordering::Relaxed);
            }
        }
    }
    stats.cpu_ns = host::tstamp::thread_cpu_ns();
    Ok((stats, error))
}

fn join_all(handles: Vec<Handle<'_>>) -> Vec<Output> {
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
