//! The agent's side: `tailscope agent` on another host, driven over its stdin and stdout.
//!
//! It answers the coordinator's hello (same version or nothing), its clock pings, then runs
//! the share of the run it is given from the common start, converted to its own clock. As
//! the run goes it streams, per generator thread, one frame of histograms per interval of
//! intended time (latency of the successful requests from *their own* intended times, so
//! every host's figures are free of coordinated omission; lateness; outcome counts) and, unless
//! told not to, each chunk of raw records in the store's encoding. A stop frame or the end of
//! its stdin (the coordinator is gone) stops the run as Ctrl-C stops a local one. It logs to
//! stderr only: stdout carries frames and nothing else.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use load::{Outcome, RecordSink, RequestRecord};

use crate::error::AgentError;
use crate::frame::{self, put_u32, put_u64, read_frame, write_frame, FrameError, Kind};
use crate::hist::Interval;
use crate::job::{Done, Hello, Job, Sent};

/// The agent's stdout, shared by the record writer thread and the progress callback.
type Out<W> = Arc<Mutex<W>>;

fn send<W: Write>(out: &Out<W>, kind: Kind, payload: &[u8]) -> Result<(), FrameError> {
    // A poisoned lock only means another writer panicked mid-frame; the stream is then
    // broken either way, and the coordinator says so.
    let mut w = out.lock().unwrap_or_else(|p| p.into_inner());
    write_frame(&mut *w, kind, payload)
}

fn send_error<W: Write>(out: &Out<W>, message: &str) {
    eprintln!("tailscope agent: {message}");
    if let Ok(p) = frame::to_json(Kind::Error, &serde_json::json!({ "message": message })) {
        let _ = send(out, Kind::Error, &p);
    }
}

fn failed(e: impl std::fmt::Display) -> AgentError {
    AgentError::Failed(e.to_string())
}

/// Serves one coordinator on `input`/`output` (the process's stdin and stdout): returns when
/// the run is done and reported, or the coordinator went away before starting one.
pub fn serve<R, W>(mut input: R, output: W) -> Result<(), AgentError>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let out: Out<W> = Arc::new(Mutex::new(output));
    let here = Hello::here();
    let Some(job) = handshake(&mut input, &out, &here)? else {
        return Ok(());
    };
    let cfg = job.load_config().map_err(|e| {
        send_error(&out, &format!("cannot run the job: {e}"));
        AgentError::Invalid(e)
    })?;
    let workload = job.work.workload().map_err(|e| {
        send_error(&out, &format!("cannot run the job: {e}"));
        AgentError::Invalid(e)
    })?;
    let tls = job.tls.as_ref().map(|t| t.options()).unwrap_or_default();
    let factory = load::protocol_factory_with(&cfg.target, &workload, job.work_seed, &tls)
        .map_err(|e| {
            send_error(&out, &format!("cannot run the job: {e}"));
            AgentError::from(e)
        })?;
    eprintln!(
        "tailscope agent {} on {}: share {} of {} against {}, {} thread(s), {} connection(s)",
        here.version,
        here.hostname.as_deref().unwrap_or("?"),
        job.share.0 + 1,
        job.share.1,
        cfg.target,
        cfg.effective_threads(),
        cfg.connections
    );

    // From here the coordinator may only say stop; the end of stdin means it is gone.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("tailscope-agent-in".into())
            .spawn(move || {
                while let Ok(Some((kind, _))) = read_frame(&mut input) {
                    if kind == Kind::Stop {
                        break;
                    }
                }
                stop.store(true, Ordering::Relaxed);
            })
            .map_err(failed)?;
    }

    let mut sink = AgentSink::new(Arc::clone(&out), &job);
    let last_progress = Mutex::new(Instant::now());
    let progress = |done: u64, total: u64| {
        let mut last = last_progress.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed().as_millis() >= 1000 {
            *last = Instant::now();
            let mut p = Vec::with_capacity(16);
            put_u64(&mut p, done);
            put_u64(&mut p, total);
            // A failed write shows up at the next chunk; progress is best effort.
            let _ = send(&out, Kind::Progress, &p);
        }
    };
    let result =
        load::run_open_loop_into(&cfg, factory.as_ref(), &stop, &progress, &mut sink, None);
    // What was measured goes out even when the run failed: the coordinator keeps it.
    let flushed = sink.flush_all();
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            send_error(&out, &e.to_string());
            return Err(e.into());
        }
    };
    flushed.map_err(failed)?;
    let done = Done {
        summary,
        sent: sink.sent,
        chunks: sink.chunks,
    };
    send(
        &out,
        Kind::Done,
        &frame::to_json(Kind::Done, &done).map_err(failed)?,
    )
    .map_err(failed)?;
    Ok(())
}

/// The hello, then clock pings until the job; None when the coordinator ends (or says stop)
/// before sending one.
fn handshake<R: Read, W: Write>(
    input: &mut R,
    out: &Out<W>,
    here: &Hello,
) -> Result<Option<Job>, AgentError> {
    let mut greeted = false;
    loop {
        let Some((kind, payload)) = read_frame(input).map_err(failed)? else {
            return Ok(None);
        };
        // Stamped at once: the pong's t2 is when the ping arrived.
        let t2 = host::tstamp::mono_now_ns();
        match kind {
            Kind::Hello => {
                let theirs: Hello = frame::from_json(kind, &payload).map_err(failed)?;
                if let Some(m) = here.mismatch(&theirs) {
                    send_error(out, &m);
                    return Err(AgentError::Invalid(m));
                }
                let p = frame::to_json(Kind::Hello, here).map_err(failed)?;
                send(out, Kind::Hello, &p).map_err(failed)?;
                greeted = true;
            }
            Kind::Ping if greeted => {
                let mut r = frame::Reader::new(kind, &payload);
                let (seq, t1) = (r.u64().map_err(failed)?, r.u64().map_err(failed)?);
                let mut p = Vec::with_capacity(32);
                put_u64(&mut p, seq);
                put_u64(&mut p, t1);
                put_u64(&mut p, t2);
                put_u64(&mut p, host::tstamp::mono_now_ns());
                send(out, Kind::Pong, &p).map_err(failed)?;
            }
            Kind::Start if greeted => {
                return frame::from_json(kind, &payload).map(Some).map_err(failed);
            }
            Kind::Stop => return Ok(None),
            other => {
                let m = format!("unexpected {other:?} frame before the run");
                send_error(out, &m);
                return Err(AgentError::Failed(m));
            }
        }
    }
}

/// One generator thread's open interval.
struct ThreadAcc {
    open: Option<Interval>,
    next_seq: u32,
}

/// The agent's record sink: histograms per interval and thread, raw chunks, the span of
/// sends, all written to the coordinator as frames (on the load's writer thread).
struct AgentSink<W: Write> {
    out: Out<W>,
    records: bool,
    warmup_ns: u64,
    interval_ns: u64,
    threads: Vec<ThreadAcc>,
    sent: Sent,
    chunks: u64,
}

impl<W: Write> AgentSink<W> {
    fn new(out: Out<W>, job: &Job) -> Self {
        AgentSink {
            out,
            records: job.records,
            warmup_ns: job.warmup_ns,
            interval_ns: job.interval_ns.max(1),
            threads: Vec::new(),
            sent: Sent::default(),
            chunks: 0,
        }
    }

    fn send_interval(&self, i: &Interval) -> Result<(), String> {
        let p = i.to_payload().map_err(|e| e.to_string())?;
        send(&self.out, Kind::Interval, &p).map_err(|e| e.to_string())
    }

    /// Sends every open interval (at the end of the run, and after a failed one: the
    /// coordinator keeps what was measured).
    fn flush_all(&mut self) -> Result<(), String> {
        let open: Vec<Interval> = self
            .threads
            .iter_mut()
            .filter_map(|t| t.open.take())
            .collect();
        open.iter().try_for_each(|i| self.send_interval(i))
    }

    fn add(&mut self, thread: usize, r: &RequestRecord) -> Result<(), String> {
        if r.intended_ns < self.warmup_ns {
            return Ok(());
        }
        if r.sent_ns != 0 {
            self.sent.add(r.sent_ns);
        }
        let index = r.intended_ns / self.interval_ns;
        let acc = &mut self.threads[thread];
        // A thread's records come in intended order: a later interval closes the open one.
        if acc.open.as_ref().is_some_and(|i| i.index != index) {
            if let Some(done) = acc.open.take() {
                self.send_interval(&done)?;
            }
        }
        let t = u32::try_from(thread).map_err(|_| "too many threads".to_string())?;
        let i = self.threads[thread]
            .open
            .get_or_insert_with(|| Interval::new(t, index));
        let k = match r.outcome {
            Outcome::Ok => 0,
            Outcome::Error => 1,
            Outcome::Timeout => 2,
            // Agents send with catch-up only (`--overdue` other than catch-up is refused
            // with --agent): a skipped request cannot come here; were it to, it is unsent.
            Outcome::Dropped | Outcome::Skipped => 3,
        };
        i.outcomes[k] += 1;
        // Auto-resizing histograms take any u64: these records cannot fail.
        if let Some(l) = r.latency_ns() {
            let _ = i.latency.record(l);
        }
        if let Some(l) = r.lateness_ns() {
            let _ = i.lateness.record(l);
        }
        Ok(())
    }
}

impl<W: Write + Send> RecordSink for AgentSink<W> {
    fn write(&mut self, thread: usize, records: &[RequestRecord]) -> Result<(), String> {
        if self.threads.len() <= thread {
            self.threads.resize_with(thread + 1, || ThreadAcc {
                open: None,
                next_seq: 0,
            });
        }
        for r in records {
            self.add(thread, r)?;
        }
        // The chunk's part of its last interval goes now too (the coordinator adds the
        // pieces of an interval): what a thread measured never waits for its next interval,
        // so an agent that dies loses at most its last second.
        if let Some(open) = self.threads[thread].open.take() {
            self.send_interval(&open)?;
        }
        if !self.records || records.is_empty() {
            return Ok(());
        }
        let cols = crate::columns::to_columns(records).map_err(|e| e.to_string())?;
        let blob = store::encode_chunk(&cols).map_err(|e| e.to_string())?;
        let acc = &mut self.threads[thread];
        let mut p = Vec::with_capacity(12 + blob.len());
        put_u32(
            &mut p,
            u32::try_from(thread).map_err(|_| "too many threads")?,
        );
        put_u32(&mut p, acc.next_seq);
        put_u32(
            &mut p,
            u32::try_from(records.len()).map_err(|_| "chunk too large")?,
        );
        p.extend_from_slice(&blob);
        acc.next_seq += 1;
        self.chunks += 1;
        send(&self.out, Kind::Chunk, &p).map_err(|e| format!("sending records: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output the test can read after `serve` took it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn frames(bytes: &[u8]) -> Vec<(Kind, Vec<u8>)> {
        let mut r = bytes;
        std::iter::from_fn(|| read_frame(&mut r).unwrap()).collect()
    }

    fn input(msgs: &[(Kind, Vec<u8>)]) -> std::io::Cursor<Vec<u8>> {
        let mut v = Vec::new();
        for (k, p) in msgs {
            write_frame(&mut v, *k, p).unwrap();
        }
        std::io::Cursor::new(v)
    }

    fn hello(version: &str) -> (Kind, Vec<u8>) {
        let mut h = Hello::here();
        h.version = version.into();
        (Kind::Hello, serde_json::to_vec(&h).unwrap())
    }

    #[test]
    fn another_version_is_refused_with_an_error_frame() {
        let out = Shared::default();
        let r = serve(input(&[hello("9.9.9")]), out.clone());
        assert!(matches!(r, Err(AgentError::Invalid(m)) if m.contains("9.9.9")));
        let f = frames(&out.0.lock().unwrap());
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, Kind::Error);
    }

    #[test]
    fn pings_are_answered_on_the_agents_clock_and_an_end_before_a_job_is_clean() {
        let mut ping = Vec::new();
        put_u64(&mut ping, 7);
        put_u64(&mut ping, 123);
        let out = Shared::default();
        let me = crate::job::VERSION;
        serve(input(&[hello(me), (Kind::Ping, ping)]), out.clone()).unwrap();
        let f = frames(&out.0.lock().unwrap());
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].0, Kind::Hello);
        assert_eq!(f[1].0, Kind::Pong);
        let mut r = frame::Reader::new(Kind::Pong, &f[1].1);
        let (seq, t1, t2, t3) = (
            r.u64().unwrap(),
            r.u64().unwrap(),
            r.u64().unwrap(),
            r.u64().unwrap(),
        );
        assert_eq!((seq, t1), (7, 123));
        assert!(t2 > 0 && t3 >= t2);
    }

    #[test]
    fn a_ping_before_the_hello_or_a_bad_job_is_an_error_frame() {
        let out = Shared::default();
        assert!(serve(input(&[(Kind::Ping, vec![0; 16])]), out.clone()).is_err());
        assert_eq!(frames(&out.0.lock().unwrap())[0].0, Kind::Error);

        let out = Shared::default();
        let me = crate::job::VERSION;
        let cfg = load::LoadConfig::new("nullrpc://127.0.0.1:9".parse().unwrap(), 100.0);
        let mut job = Job::of(&cfg, &load::Workload::NullRpc(Default::default()), (5, 2));
        job.start_mono_ns = 1;
        let start = (Kind::Start, serde_json::to_vec(&job).unwrap());
        let r = serve(input(&[hello(me), start]), out.clone());
        assert!(matches!(r, Err(AgentError::Invalid(_))));
        let f = frames(&out.0.lock().unwrap());
        assert_eq!(f.last().unwrap().0, Kind::Error);
        let v: serde_json::Value = serde_json::from_slice(&f.last().unwrap().1).unwrap();
        assert!(v["message"].as_str().unwrap().contains("share"), "{v}");
    }
}
