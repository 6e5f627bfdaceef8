//! Where a run's per-request server stages come from ([`StagesMode`]), and the eBPF
//! collector's place in a measurement.
//!
//! The built-in server returns its own stamps T1..T6 in each reply; real servers return
//! none. With eBPF (crate `ebpf`) the kernel watches the server's threads during the run and
//! the records get T1..T6 from the matched kernel events *before they are stored*, so the
//! stage table, the service time and the "why" read them exactly as they read the built-in
//! server's stamps. The join runs in a [`load::RecordSink`] wrapper, on the record writer
//! thread: idle-class, on a spare CPU when the host has one — so the collector's user-space
//! consumer stays off the generator's and the server's CPUs, or takes only time nobody else
//! wants. Before joining a chunk it drains the kernel's ring buffer; each chunk reaches the
//! sink after all its requests completed, so their server events are already in the buffer,
//! except possibly the last write's return for a reply just read: the join waits until 2 ms
//! after the chunk's last receive (a bounded wait) before draining.
//!
//! With the built-in server and eBPF at once, the server's own T2..T5 are compared with the
//! kernel's (the run's `instruments` detail, `agreement`) and replaced by them; T1 becomes
//! the kernel's receive stamp of the packet queued at data-ready (the same software stamp
//! the server reads from its socket) and the records gain the protocol stack's end
//! (`stack_ns`, Tales' T2), which only the kernel sees.

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::SocketAddr;

use load::{RecordSink, RequestRecord, Transport, WriterStats};
use serde_json::{json, Value};
use stats::{Quantile, Recorder};

use crate::error::{invalid, LabError};
use crate::instruments::{Instrument, ServerInfo};
use crate::observer::Observer;
use crate::target::{Ready, Scheme};

pub use crate::run_config::StagesMode;

impl StagesMode {
    /// For [`StagesMode::Ebpf`], whether this host can run the collector (the reason when
    /// not); every other mode runs anywhere. Checked before anything starts.
    pub fn check_host(self) -> Result<(), LabError> {
        if self != StagesMode::Ebpf {
            return Ok(());
        }
        ebpf::support::check().map_err(|why| {
            invalid(format!(
                "--stages ebpf: {}",
                ebpf::EbpfError::Unsupported(why)
            ))
        })
    }
}

const NAME: &str = "eBPF stage collector";
/// The built-in server's thread names start with this (see `own_server_threads`).
const BUILTIN_PREFIX: &str = "ts-";
/// The bounded wait: a chunk is joined no sooner than this after its last receive.
const JOIN_WAIT_NS: u64 = 2_000_000;
/// Most kernel events held for requests not yet seen (~100 MB at worst; a run holds about
/// a chunk's worth per generator thread).
const MAX_HELD_EVENTS: usize = 1 << 20;
/// Ring buffer bytes per request (4 records of 88 bytes and their 8-byte headers; memcached
/// gives ~2.9 per request).
const RING_BYTES_PER_REQUEST: usize = 4 * 96;
/// Sampled: a request is joined only if its reply reached the client this long before its
/// window closed (the server's write returns after the client can have read the reply).
const WINDOW_MARGIN_NS: u64 = 2_000_000;
/// Exact quantiles up to this many values, a histogram beyond.
const EXACT: u64 = 200_000;

/// The stages of one measurement: decided before the load, a sink wrapper during it, an
/// instrument after it.
pub(crate) struct Stages {
    how: How,
}

enum How {
    /// Records pass unchanged (the server's own stamps, if any).
    Pass,
    /// Records lose their stamps.
    Clear,
    /// eBPF was wanted but this host cannot: the reason, for the run's record.
    Unsupported(String),
    Ebpf(Box<Join>),
}

impl Stages {
    /// Decides and, for eBPF, loads and attaches the collector to `server`'s processes (or
    /// the built-in server's threads). Fails only when eBPF was asked for explicitly and
    /// cannot run.
    pub fn start(
        mode: StagesMode,
        budget: crate::run_config::StagesBudget,
        ready: &Ready,
        server: &ServerInfo,
        load: &load::LoadConfig,
        obs: &dyn Observer,
    ) -> Result<Stages, LabError> {
        let threads = load.threads.min(load.connections);
        let spawned = ready.owns_server() && !server.pids.is_empty();
        // The built-in server runs in this process: its threads are told by their names.
        let builtin = ready.owns_server() && ready.scheme == Scheme::NullRpc;
        let want = match mode {
            StagesMode::Off => return Ok(Stages { how: How::Clear }),
            StagesMode::Stamps => false,
            StagesMode::Ebpf => true,
            StagesMode::Auto => spawned,
        };
        if !want {
            return Ok(Stages { how: How::Pass });
        }
        if let Some(why) = crate::target::not_joinable(&ready.target) {
            // Refused before the run when asked for (RunSpec's check); by default, said.
            obs.note(&format!("stages: no eBPF stages for this run: {why}"));
            return Ok(Stages {
                how: How::Unsupported(why.to_string()),
            });
        }
        if server.pids.is_empty() && !builtin {
            return Err(invalid(
                "--stages ebpf needs the server's process: --spawn it, or give --server-pid",
            ));
        }
        if let Err(why) = ebpf::support::check() {
            if mode == StagesMode::Ebpf {
                return Err(invalid(format!(
                    "--stages ebpf: {}",
                    ebpf::EbpfError::Unsupported(why)
                )));
            }
            let reason = why.to_string();
            obs.note(&format!("stages: no eBPF stages for this run: {reason}"));
            return Ok(Stages {
                how: How::Unsupported(reason),
            });
        }
        let cfg = ebpf::CollectorConfig {
            tgids: server.pids.clone(),
            tids: Vec::new(),
            thread_prefix: builtin.then(|| (std::process::id(), BUILTIN_PREFIX.to_string())),
            ports: vec![ready.target.addr.port()],
            ring_bytes: ring_bytes(load, threads),
            sampling: match budget {
                crate::run_config::StagesBudget::All => None,
                crate::run_config::StagesBudget::Share(share) => {
                    let cpus = if server.cpus.is_empty() {
                        host::placement::online_cpus()
                    } else {
                        server.cpus.len()
                    };
                    let mut s = ebpf::Sampling::new(share, cpus);
                    // The warm-up's requests are dropped from every view: a window then would
                    // spend the budget on none that count.
                    s.first_after = load.warmup;
                    // On the server's CPUs, whose budget pays for it: each attach and detach
                    // takes 1–2 ms of CPU inside the kernel, where nothing preempts it. On
                    // the generator's CPU they stalled the generator as long (memcached at
                    // 20k req/s: lateness p99.9 1.2–1.6 ms against 43–57 µs without the
                    // collector, and with them on the server's CPU).
                    s.run_on = if server.cpus.is_empty() {
                        load.writer_cpus.clone()
                    } else {
                        server.cpus.clone()
                    };
                    Some(s)
                }
            },
        };
        let collector =
            ebpf::Collector::start(&cfg).map_err(|e| LabError::Failed(e.to_string()))?;
        let udp = ready.target.transport == Transport::Udp;
        obs.note(&format!(
            "stages: eBPF on {} ({} programs{})",
            if builtin {
                format!("this process's {BUILTIN_PREFIX}* threads (the built-in server)")
            } else {
                format!("pid(s) {:?}", server.pids)
            },
            collector.programs(),
            match &cfg.sampling {
                Some(s) => format!(
                    ", attached in windows that keep their cost within {budget} of the server's \
                     {} CPU(s), the first after the warm-up",
                    s.cpus
                ),
                None => " attached throughout".into(),
            }
        ));
        Ok(Stages {
            how: How::Ebpf(Box::new(Join {
                collector,
                ring_bytes: cfg.ring_bytes,
                joiner: ebpf::Joiner::new(MAX_HELD_EVENTS),
                proto: if udp {
                    ebpf::Proto::Udp
                } else {
                    ebpf::Proto::Tcp
                },
                // memcached's UDP frame starts with the request id; other payloads do not.
                check_rid: udp && ready.scheme == Scheme::Memcached,
                threads: threads.max(1),
                sampled: cfg.sampling.is_some(),
                timeout_ns: load.timeout.as_nanos() as u64,
                guard: HashMap::new(),
                outside: 0,
                edge: 0,
                guarded: 0,
                start: None,
                ports: HashMap::new(),
                udp_sends: HashMap::new(),
                last_intended: HashMap::new(),
                buf: Vec::new(),
                answered: 0,
                unknown_conn: 0,
                chunks: 0,
                cpu_ns: 0,
                max_chunk_ns: 0,
                agree: Default::default(),
                runqueue: Recorder::bounded(EXACT),
                error: None,
            })),
        })
    }

    /// The sink the load writes into: `inner`, behind the join (or the clearing).
    pub fn sink<'a>(&'a mut self, inner: &'a mut dyn RecordSink) -> StagesSink<'a> {
        StagesSink {
            stages: self,
            inner,
        }
    }

    /// The collector's report for the run (None when no eBPF was wanted). `writer`: where
    /// the record writer ran (the join runs on it).
    pub fn finish(self, writer: &WriterStats) -> Option<Instrument> {
        match self.how {
            How::Pass | How::Clear => None,
            How::Unsupported(reason) => Some(Instrument {
                name: NAME.into(),
                mode: "off".into(),
                note: Some(format!("no eBPF stages: {reason}")),
                ..Instrument::default()
            }),
            How::Ebpf(j) => Some(j.report(writer)),
        }
    }
}

/// Records per chunk the load engine hands the sink (its `CHUNK`), for sizing the ring.
fn load_chunk() -> usize {
    8192
}

/// The ring buffer a run needs so that nothing is dropped between two drains. The ring is
/// drained when a chunk of records is joined, and a chunk goes when its oldest request is
/// done: up to a chunk's time at the offered rate, plus a timeout when a request waits for
/// it (at overload), plus the join's wait. Bounded by the rate, not the run's length;
/// `threads` are the generator's (a chunk each).
fn ring_bytes(load: &load::LoadConfig, threads: usize) -> usize {
    let chunks = threads.max(1) * load_chunk() * RING_BYTES_PER_REQUEST;
    let window = load.timeout.as_secs_f64() + JOIN_WAIT_NS as f64 * 1e-9;
    let rate = if load.rate_per_s.is_finite() {
        load.rate_per_s.max(0.0)
    } else {
        0.0
    };
    let late = (rate * window) as usize * RING_BYTES_PER_REQUEST;
    chunks.saturating_add(late)
}

/// The record sink of a run with stages: joins (or clears) and passes on.
pub(crate) struct StagesSink<'a> {
    stages: &'a mut Stages,
    inner: &'a mut dyn RecordSink,
}

impl RecordSink for StagesSink<'_> {
    fn write(&mut self, thread: usize, records: &[RequestRecord]) -> Result<(), String> {
        match &mut self.stages.how {
            How::Pass | How::Unsupported(_) => self.inner.write(thread, records),
            How::Clear => {
                let mut v = records.to_vec();
                v.iter_mut().for_each(|r| {
                    r.stamps = [0; 6];
                    r.stack_ns = 0;
                });
                self.inner.write(thread, &v)
            }
            How::Ebpf(j) => {
                let v = j.chunk(thread, records);
                self.inner.write(thread, &v)
            }
        }
    }

    fn started(&mut self, start_mono_ns: u64) {
        if let How::Ebpf(j) = &mut self.stages.how {
            j.start = Some(start_mono_ns);
        }
        self.inner.started(start_mono_ns);
    }

    fn connected(&mut self, conn: u32, local: SocketAddr, at_mono_ns: u64) {
        if let How::Ebpf(j) = &mut self.stages.how {
            j.ports
                .entry(conn)
                .or_default()
                .push((at_mono_ns, local.port()));
        }
        self.inner.connected(conn, local, at_mono_ns);
    }
}

/// The sampling windows as one chunk's join sees them.
struct Windows<'a> {
    list: &'a [ebpf::Window],
    /// When the ring was drained: no window's events after it are in hand.
    drained_at: u64,
}

impl Windows<'_> {
    /// The end of the window that holds `sent` (an open one's: the drain), if any.
    fn end_of(&self, sent: u64) -> Option<u64> {
        let w = ebpf::sampling::window_of(self.list, sent)?;
        Some(w.end.unwrap_or(self.drained_at).min(self.drained_at))
    }
}

/// Server stamps against the kernel's, one boundary.
struct Agreement {
    /// |kernel − server|, ns.
    abs: Recorder,
    /// Requests whose kernel stamp is at or before the server's.
    kernel_first: u64,
}

impl Default for Agreement {
    fn default() -> Self {
        Agreement {
            abs: Recorder::bounded(EXACT),
            kernel_first: 0,
        }
    }
}

/// The eBPF join of one run.
struct Join {
    collector: ebpf::Collector,
    ring_bytes: usize,
    joiner: ebpf::Joiner,
    proto: ebpf::Proto,
    check_rid: bool,
    threads: usize,
    /// The programs are attached in windows (`ebpf::sampling`): only requests a window saw
    /// whole are joined.
    sampled: bool,
    /// The load's request timeout (a request never answered was read by then, or never).
    timeout_ns: u64,
    /// Sampled: per connection, the latest its earlier requests outside every window can
    /// have been read (their reply's receive, or their timeout). A read at or before it may
    /// have consumed one of them with a request inside a window, which would then count
    /// the reads' requests and deal out its writes wrongly: such requests are not joined.
    guard: HashMap<u32, u64>,
    /// Sampled: answered requests outside every window, and inside one but not whole (too
    /// near its end, or read together with an earlier request outside).
    outside: u64,
    edge: u64,
    /// Of `edge`: requests the joiner matched but a read outside every window may have taken
    /// (see `guard`), so their stamps were dropped; the joiner counts them as matched, the
    /// run does not (each answered request is matched, outside or at an edge, once).
    guarded: u64,
    start: Option<u64>,
    /// Connection → (opened at, local port), oldest first.
    ports: HashMap<u32, Vec<(u64, u16)>>,
    /// UDP: requests sent so far per connection (memcached's request ids count them).
    udp_sends: HashMap<u32, u64>,
    /// Generator thread → the last intended time it handed over.
    last_intended: HashMap<usize, u64>,
    buf: Vec<ebpf::Event>,
    answered: u64,
    unknown_conn: u64,
    chunks: u64,
    cpu_ns: u64,
    max_chunk_ns: u64,
    /// T2..T5: the built-in server's stamps against the kernel's.
    agree: [Agreement; 4],
    runqueue: Recorder,
    error: Option<String>,
}

impl Join {
    /// The local port connection `conn` had when it sent at `sent` (absolute).
    fn port_of(&self, conn: u32, sent: u64) -> Option<u16> {
        let opens = self.ports.get(&conn)?;
        opens
            .iter()
            .rev()
            .find(|(at, _)| *at <= sent)
            .or(opens.first())
            .map(|(_, p)| *p)
    }

    /// One chunk of one thread: the records with their stamps from the kernel.
    fn chunk<'r>(
        &mut self,
        thread: usize,
        records: &'r [RequestRecord],
    ) -> Cow<'r, [RequestRecord]> {
        let cpu0 = host::tstamp::thread_cpu_ns();
        let Some(start) = self.start else {
            return Cow::Borrowed(records);
        };
        if self.sampled {
            let windows = self.collector.windows();
            let touches = records.iter().any(|r| {
                r.sent_ns > 0 && ebpf::sampling::window_of(&windows, start + r.sent_ns).is_some()
            });
            if !touches {
                let out = self.outside_chunk(start, records);
                self.done(thread, records, start, cpu0);
                return out;
            }
        }
        let mut out = records.to_vec();
        // The bounded wait for the last replies' write events.
        let last_rx = records.iter().map(|r| r.received_ns).max().unwrap_or(0);
        let due = start + last_rx + JOIN_WAIT_NS;
        let now = host::tstamp::mono_now_ns();
        if due > now {
            std::thread::sleep(std::time::Duration::from_nanos(
                (due - now).min(JOIN_WAIT_NS),
            ));
        }
        let drained_at = host::tstamp::mono_now_ns();
        self.drain();
        let windows = if self.sampled {
            self.collector.windows()
        } else {
            Vec::new()
        };
        let mut order: Vec<usize> = (0..records.len())
            .filter(|&i| records[i].sent_ns > 0)
            .collect();
        // Requests written together share their send stamp (one write per connection and
        // pass): among them the intended order is the order they were queued in.
        order.sort_by_key(|&i| (records[i].conn, records[i].sent_ns, records[i].intended_ns));
        // One connection's requests at a time, in the order they were sent.
        let mut from = 0;
        while from < order.len() {
            let conn = records[order[from]].conn;
            let to = from
                + order[from..]
                    .iter()
                    .take_while(|&&i| records[i].conn == conn)
                    .count();
            let windows = Windows {
                list: &windows,
                drained_at,
            };
            self.join_conn(start, records, &order[from..to], &windows, &mut out);
            from = to;
        }
        self.done(thread, records, start, cpu0);
        Cow::Owned(out)
    }

    /// A chunk none of whose requests was sent inside a window (most of them, sampled): no
    /// wait, no sort, no join; its requests count as outside and raise their connections'
    /// guards. Sorted and joined like the others, such chunks cost ~70 ns a request on the
    /// writer thread, which at the server's peak shares the generator's CPU.
    fn outside_chunk<'r>(
        &mut self,
        start: u64,
        records: &'r [RequestRecord],
    ) -> Cow<'r, [RequestRecord]> {
        self.drain();
        for r in records.iter().filter(|r| r.sent_ns > 0) {
            let ok = r.outcome == load::Outcome::Ok && r.received_ns > 0;
            self.answered += u64::from(ok);
            if self.proto == ebpf::Proto::Udp {
                *self.udp_sends.entry(r.conn).or_insert(0) += 1;
            }
            self.outside_request(r.conn, start + r.sent_ns, ok, start + r.received_ns);
        }
        if records
            .iter()
            .all(|r| r.stamps == [0; 6] && r.stack_ns == 0)
        {
            return Cow::Borrowed(records);
        }
        // The built-in server's own stamps: replaced by the kernel's where joined, so
        // cleared where not.
        let mut out = records.to_vec();
        for r in &mut out {
            r.stamps = [0; 6];
            r.stack_ns = 0;
        }
        Cow::Owned(out)
    }

    /// Moves the kernel's records from the ring buffer into the joiner.
    fn drain(&mut self) {
        if let Err(e) = self.collector.drain(&mut self.buf) {
            self.error.get_or_insert(e.to_string());
        }
        for e in self.buf.drain(..) {
            self.joiner.push(e);
        }
    }

    /// A request sent outside every window (`ok`: answered, then at `received`): counted,
    /// and its connection's guard raised to when it was read at the latest.
    fn outside_request(&mut self, conn: u32, sent: u64, ok: bool, received: u64) {
        self.outside += u64::from(ok);
        let read_by = if ok {
            received
        } else {
            sent.saturating_add(self.timeout_ns)
        };
        let g = self.guard.entry(conn).or_insert(0);
        *g = (*g).max(read_by);
    }

    /// After a chunk: where its thread is, what can be forgotten, what it cost.
    fn done(&mut self, thread: usize, records: &[RequestRecord], start: u64, cpu0: u64) {
        if let Some(last) = records.last() {
            self.last_intended.insert(thread, last.intended_ns);
        }
        self.prune(start);
        let cost = host::tstamp::thread_cpu_ns().saturating_sub(cpu0);
        self.chunks += 1;
        self.cpu_ns += cost;
        self.max_chunk_ns = self.max_chunk_ns.max(cost);
    }

    /// Stamps for one connection's records `idx` (in send order) into `out`.
    fn join_conn(
        &mut self,
        start: u64,
        records: &[RequestRecord],
        idx: &[usize],
        windows: &Windows,
        out: &mut [RequestRecord],
    ) {
        let mut reqs = Vec::with_capacity(idx.len());
        let mut kept = Vec::with_capacity(idx.len());
        // Per presented request: a read at or before this instant may have consumed a
        // request outside every window too (see `guard`); 0 when not sampled.
        let mut guards = Vec::with_capacity(idx.len());
        for &i in idx {
            let r = &records[i];
            let ok = r.outcome == load::Outcome::Ok && r.received_ns > 0;
            self.answered += u64::from(ok);
            out[i].stamps = [0; 6];
            out[i].stack_ns = 0;
            // memcached's UDP request ids count the connection's requests from 0.
            let rid = (self.proto == ebpf::Proto::Udp).then(|| {
                let n = self.udp_sends.entry(r.conn).or_insert(0);
                *n += 1;
                (*n - 1) as u16
            });
            let sent = start + r.sent_ns;
            let mut received = if ok { start + r.received_ns } else { 0 };
            let mut guard = 0;
            if self.sampled {
                let Some(end) = windows.end_of(sent) else {
                    // Not presented: its events, if any, are partial.
                    self.outside_request(r.conn, sent, ok, received);
                    continue;
                };
                if ok && received.saturating_add(WINDOW_MARGIN_NS) > end {
                    // Presented (a read may have taken it with others) but not joined.
                    self.edge += 1;
                    received = 0;
                }
                guard = self.guard.get(&r.conn).copied().unwrap_or(0);
            }
            let Some(port) = self.port_of(r.conn, sent) else {
                self.unknown_conn += u64::from(ok);
                continue;
            };
            reqs.push(ebpf::Request {
                proto: self.proto,
                port,
                sent,
                received,
                next_sent: 0,
                rid: rid.filter(|_| self.check_rid),
            });
            kept.push(i);
            guards.push(guard);
        }
        // A reconnect changes the port: each port's requests go together.
        let mut from = 0;
        while from < reqs.len() {
            let port = reqs[from].port;
            let to = from + reqs[from..].iter().take_while(|q| q.port == port).count();
            let got = self.joiner.join_conn(&reqs[from..to]);
            for (k, m) in got.into_iter().enumerate() {
                let i = kept[from + k];
                let m = match m {
                    Some(m) if m.stamps[2] <= guards[from + k] => {
                        self.edge += 1;
                        self.guarded += 1;
                        None
                    }
                    m => m,
                };
                if let Some(m) = m {
                    self.compare(&records[i].stamps, &m.stamps);
                    if let Some(w) = m.runqueue_ns {
                        self.runqueue.record(w);
                    }
                    out[i].stamps = m.stamps;
                    out[i].stack_ns = m.stack;
                }
            }
            from = to;
        }
    }

    /// Forgets what no request still to come can need: every thread has handed over its
    /// records up to its last intended time, and a request's events all come after its
    /// send, which is after its intended time.
    fn prune(&mut self, start: u64) {
        if self.last_intended.len() < self.threads {
            return;
        }
        let Some(min) = self.last_intended.values().min() else {
            return;
        };
        let horizon = start + min;
        self.joiner.prune(horizon);
        self.collector.forget_windows_before(horizon);
        for opens in self.ports.values_mut() {
            // Keep the last open at or before the horizon and everything after it.
            let keep_from = opens
                .iter()
                .rposition(|(at, _)| *at <= horizon)
                .unwrap_or(0);
            opens.drain(..keep_from);
        }
    }

    /// The built-in server's own T2..T5 against the kernel's (when it sent them).
    fn compare(&mut self, server: &[u64; 6], kernel: &[u64; 6]) {
        if server[1..5].contains(&0) {
            return;
        }
        for (k, a) in self.agree.iter_mut().enumerate() {
            let (s, e) = (server[k + 1], kernel[k + 1]);
            a.abs.record(s.abs_diff(e));
            a.kernel_first += u64::from(e <= s);
        }
    }

    fn report(mut self, writer: &WriterStats) -> Instrument {
        let c = self.collector.counters();
        let k = self.collector.kernel_cost();
        let j = self.joiner.stats();
        let matched = j.matched.saturating_sub(self.guarded);
        let q = |r: &mut Recorder, p: f64| {
            Quantile::new(p)
                .ok()
                .and_then(|p| r.quantile(p))
                .map(|v| v / 1e3)
        };
        let agreement: Vec<Value> = ["T2", "T3", "T4", "T5"]
            .iter()
            .zip(self.agree.iter_mut())
            .filter(|(_, a)| !a.abs.is_empty())
            .map(|(name, a)| {
                let n = a.abs.len();
                json!({
                    "stamp": name, "requests": n,
                    "p50_abs_us": q(&mut a.abs, 0.5), "p99_abs_us": q(&mut a.abs, 0.99),
                    "kernel_first_fraction": a.kernel_first as f64 / n as f64,
                })
            })
            .collect();
        let rq = self.runqueue.len();
        let sampling = self.collector.sampling();
        let detail = json!({
            "source": "ebpf",
            "programs": self.collector.loaded(),
            "sampling": sampling.as_ref().map(|r| json!({
                "budget_fraction": r.budget,
                "server_cpus": r.cpus,
                "measured": r.measured,
                "windows": r.windows,
                "attached_fraction": r.duty(),
                "attached_ns": r.attached_ns,
                "elapsed_ns": r.elapsed_ns,
                "program_ns": r.program_ns,
                "sampler_cpu_ns": r.sampler_cpu_ns,
                "spent_fraction": (r.elapsed_ns > 0).then(|| (r.program_ns + r.sampler_cpu_ns) as f64 / (r.elapsed_ns as f64 * r.cpus.max(1) as f64)),
                "attach_max_ns": r.attach_max_ns,
                "detach_max_ns": r.detach_max_ns,
                "events_outside_windows": r.outside_events,
                "answered_outside_windows": self.outside,
                "answered_at_window_edges": self.edge,
                "error": r.error,
            })),
            "ring_bytes": self.ring_bytes,
            "user_cpu_ns": self.cpu_ns,
            "kernel_events": c.events,
            "kernel_cost": {
                "measured": k.measured,
                "runs": k.runs,
                "run_time_ns": k.run_time_ns,
                "ns_per_run": (k.runs > 0).then(|| k.run_time_ns as f64 / k.runs as f64),
                "programs": k.programs.iter().map(|(n, r, t)| json!({"program": n, "runs": r, "run_time_ns": t})).collect::<Vec<_>>(),
            },
            "kernel_dropped": c.dropped,
            "malformed": self.collector.malformed(),
            "answered": self.answered,
            "matched": matched,
            "unknown_connection": self.unknown_conn,
            "join": j,
            "agreement": agreement,
            "runqueue_wait_us": (rq > 0).then(|| json!({
                "requests": rq,
                "p50": q(&mut self.runqueue, 0.5),
                "p99": q(&mut self.runqueue, 0.99),
            })),
            "error": self.error,
        });
        let pct = if self.answered > 0 {
            100.0 * matched as f64 / self.answered as f64
        } else {
            0.0
        };
        Instrument {
            name: NAME.into(),
            mode: format!(
                "kernel: tracepoints into a ring buffer; user space: on the record writer ({}-class) per chunk",
                writer.policy
            ),
            cpus: writer.cpus.clone(),
            cost_per_sample_ns: if self.chunks > 0 {
                self.cpu_ns as f64 / self.chunks as f64
            } else {
                0.0
            },
            max_cost_ns: self.max_chunk_ns,
            samples: self.chunks,
            skipped: c.dropped,
            // All of it: the join on the writer thread, the programs in the kernel and the
            // sampling thread.
            cpu_ns: Some(
                self.cpu_ns + k.run_time_ns + sampling.as_ref().map_or(0, |r| r.sampler_cpu_ns),
            ),
            note: Some(format!(
                "stages from eBPF: {}{} of {} answered requests matched ({pct:.1} %); {} kernel events, {} dropped; in the kernel {}{}",
                sampling.as_ref().map(|r| format!(
                    "attached in {} window(s), {:.1} % of the run, to keep within {:.3} % of the server's {} CPU(s) (spent {:.3} %{}{}): ",
                    r.windows,
                    100.0 * r.duty(),
                    100.0 * r.budget,
                    r.cpus,
                    if r.elapsed_ns > 0 {
                        100.0 * (r.program_ns + r.sampler_cpu_ns) as f64 / (r.elapsed_ns as f64 * r.cpus.max(1) as f64)
                    } else {
                        0.0
                    },
                    if r.measured { "" } else { ", not measured: no BPF run-time statistics, a fixed 10 % duty" },
                    r.error.as_ref().map(|e| format!("; sampling stopped: {e}")).unwrap_or_default(),
                )).unwrap_or_default(),
                matched,
                self.answered,
                c.events,
                c.dropped,
                if k.measured && k.runs > 0 {
                    format!(
                        "{} program runs, {:.1} ms ({:.0} ns each)",
                        k.runs,
                        k.run_time_ns as f64 / 1e6,
                        k.run_time_ns as f64 / k.runs as f64
                    )
                } else {
                    "not measured (no BPF run-time statistics)".into()
                },
                self.error.as_ref().map(|e| format!("; {e}")).unwrap_or_default()
            )),
            detail: Some(detail),
        }
    }
}
