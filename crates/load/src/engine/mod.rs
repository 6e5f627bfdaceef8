//! One generator thread: the engine loop.
//!
//! The loop is driven by the thread's share of the schedule (data, drawn lazily in intended
//! order): take in every request whose intended time has come, send it, flush, poll epoll
//! for replies, and every ~100 µs expire timeouts and retry broken connections. While the
//! next send is near it spins (epoll with timeout 0); when it is far and `yield_when_far` is
//! set it sleeps in epoll until ~100 µs before it.
//!
//! Requests live in a [`window::Window`] from the moment they fall due until they and all
//! before them are done; then they go to the record sink in chunks. Memory is bounded by the
//! rate times the timeout, never by the run's length.
//!
//! Thread 0 may carry a [`SlackTask`] (an instrument such as the attribution sampler on a
//! host with no spare CPU): it runs only when nothing waits to be sent, nothing of the thread
//! is in flight and the next send is further away than the task's cost bound, so it can delay
//! neither a send nor the reading of a reply.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use crate::config::LoadConfig;
use crate::conn::{Conn, ConnFail};
use crate::protocol::Reply;
use crate::record::{Outcome, RequestRecord};
use crate::schedule::ThreadSchedule;
use crate::sys::Epoll;

/// What the generator threads hand the writer thread, in order.
pub(crate) enum ToWriter {
    Chunk(usize, Vec<RequestRecord>),
    Started(u64),
    Connected {
        conn: u32,
        local: SocketAddr,
        at_mono_ns: u64,
    },
}

mod churn;
pub(crate) mod cost;
mod faults;
pub(crate) mod inject;
pub(crate) mod window;

use window::{Entry, St, Window};

/// Sleep in epoll only when the next send is further away than this...
const FAR_NS: u64 = 200_000;
/// ...and then wake this much before it, to spin the rest of the way.
const WAKE_EARLY_NS: u64 = 100_000;
/// Within this of the next send, spin on the clock without polling for replies.
const SPIN_ONLY_NS: u64 = 3_000;
/// Timeouts, reconnects and the progress counter are looked after this often.
const MAINTENANCE_NS: u64 = 100_000;
/// Longest single sleep, so the stop flag and progress stay responsive.
const MAX_SLEEP_NS: u64 = 5_000_000;
/// After the stop flag, outstanding requests get at most this long to come back.
const STOP_GRACE_NS: u64 = 100_000_000;
/// Reconnect attempts per failure, with exponential backoff from 1 ms capped at 250 ms.
const MAX_RECONNECTS: u32 = 12;
const MAX_BACKOFF_NS: u64 = 250_000_000;
/// A FIFO-matched connection whose oldest timed-out request is still unanswered after
/// this many timeouts is reset (its byte stream is presumably stuck).
const FIFO_RESET_TIMEOUTS: u64 = 4;
/// Output the kernel did not take (full buffer, connect in progress) is retried this often.
const PENDING_RETRY_NS: u64 = 20_000;
/// Distinct error messages kept for the user.
pub(crate) const MAX_ERRORS: usize = 8;
/// Records handed to the sink per chunk.
pub(crate) const CHUNK: usize = 8192;
/// A slack task runs only when the next send is at least this much further away than its
/// cost bound (the margin covers the loop's own overhead around it).
const SLACK_MARGIN_NS: u64 = 5_000;

/// Work that may run inside generator thread 0's loop when it has time to spare: an
/// instrument on a host with no spare CPU. The engine calls [`SlackTask::run`] only when no
/// request waits to be sent, none of thread 0's requests is in flight, and the next send is
/// more than [`SlackTask::cost_bound_ns`] away.
pub trait SlackTask: Send {
    /// Absolute CLOCK_MONOTONIC ns at which the task next wants to run.
    fn next_due_ns(&self) -> u64;
    /// A conservative bound on one run's duration, ns.
    fn cost_bound_ns(&self) -> u64;
    /// Runs once; `now_mono_ns` is the absolute CLOCK_MONOTONIC time.
    fn run(&mut self, now_mono_ns: u64);
}

/// A thread's counters, read by the coordinator while the run lasts.
#[derive(Default)]
pub(crate) struct Shared {
    /// Requests done (answered, failed, timed out or dropped).
    pub done: AtomicU64,
    /// Requests sent and not yet answered.
    pub in_flight: AtomicU64,
    /// Requests due but held in the client for a free connection slot.
    pub held: AtomicU64,
}

/// A connection and its bookkeeping.
pub(crate) struct Slot {
    conn: Conn,
    /// Index among all the run's connections (what records store).
    global: u32,
    /// (sequence number, first send time) of requests sent on it, in send order (completed
    /// ones removed lazily when replies carry ids; exact FIFO otherwise). The send time is
    /// kept here because a timed-out request may leave the window before its late reply.
    inflight: VecDeque<(u64, u64)>,
    /// Requests sent and not yet answered, timed out or failed.
    live: usize,
    /// FIFO matching only: leading `inflight` entries that timed out but whose (late)
    /// replies must still be consumed to keep the stream in step.
    zombies: usize,
    /// Set while the connection is broken and waiting to be retried.
    down: Option<Down>,
    /// Reconnecting gave up; nothing more is sent on it.
    dead: bool,
    /// Requests sent since the connection was (re)opened.
    sent_on_conn: u32,
    /// Churn mode: requests this connection carries before it is closed (else u32::MAX).
    quota: u32,
    /// Closed on purpose (quota done, or the server announced a close): reopened when the
    /// next request needs it, and the connect counts in that request's latency.
    parked: bool,
    /// A reply said the server closes after it: park once the read is processed.
    closing: bool,
    /// Where it connects (and reconnects) to: one of several instances' addresses.
    addr: SocketAddr,
    /// Requests are queued on it in this pass and not yet written (it is in `Engine::dirty`).
    batched: bool,
    /// When its last batch was written (the send stamp of the requests in it).
    flushed_at: u64,
}

impl Slot {
    pub(crate) fn new(conn: Conn, global: u32, addr: SocketAddr) -> Self {
        Slot {
            addr,
            conn,
            global,
            inflight: VecDeque::new(),
            live: 0,
            zombies: 0,
            down: None,
            dead: false,
            sent_on_conn: 0,
            quota: u32::MAX,
            parked: false,
            closing: false,
            batched: false,
            flushed_at: 0,
        }
    }
}

struct Down {
    next_try_ns: u64,
    attempts: u32,
}

/// What one generator thread hands back (its records went to the sink as it ran).
pub(crate) struct ThreadOutput {
    pub records: u64,
    pub errors: Vec<String>,
    pub interrupted: bool,
    /// Connections opened during the run (reconnects and churn).
    pub connects: u64,
    /// Successful replies that were misses.
    pub misses: u64,
    /// Error replies by the code they carried.
    pub codes: std::collections::BTreeMap<crate::protocol::ErrorCode, u64>,
    /// Run-relative ns: the last intended time taken from the schedule, and when the thread
    /// was done with everything (its drain after the schedule ended).
    pub last_intended_ns: u64,
    pub done_ns: u64,
    /// The loop's cost and catch-up.
    pub cost: cost::GeneratorCost,
    /// Its connections' TLS handshakes (none without TLS).
    pub tls: crate::tls::TlsStats,
}

/// What ties a generator thread to the run: the stop flag, the counters it publishes, and
/// its end of the channel to the record writer with the shared count of queued chunks.
pub(crate) struct Links<'a> {
    pub stop: &'a AtomicBool,
    pub shared: &'a Shared,
    pub out: Sender<ToWriter>,
    pub queued: &'a AtomicUsize,
}

/// Where an iteration of the loop started: the time, the deliberate waits and stalls so far,
/// and the sends and replies so far.
#[derive(Clone, Copy)]
struct IterMark {
    at: u64,
    waited: u64,
    stalled: u64,
    sends: u64,
    replies: u64,
}

pub(crate) struct Engine<'a> {
    thread: u64,
    threads: u64,
    timeout_ns: u64,
    max_outstanding: usize,
    yield_when_far: bool,
    carries_id: bool,
    slots: Vec<Slot>,
    /// The thread's share of the schedule, drawn as requests fall due.
    sched: ThreadSchedule,
    /// Requests taken from the schedule and not yet handed to the sink.
    win: Window,
    /// First request in the window not yet sent or dropped (all after it are unsent).
    next: u64,
    /// The latest intended time taken from the schedule.
    last_intended: u64,
    /// Requests before this sequence number were in the window while no connection could
    /// take them (the backlog): their wait from `seen` to `sent` was time held in the client.
    blocked_end: u64,
    rr: usize,
    dead_slots: usize,
    epoll: Epoll,
    ready: Vec<u64>,
    replies: Vec<(Reply, u64, Option<u64>)>,
    /// Slots holding output the kernel did not take yet.
    pending_out: Vec<usize>,
    /// Slots with requests queued in this pass, written once the pass has queued everything
    /// due (one write per connection), and the first sends among those requests (their
    /// send stamp is the write's).
    dirty: Vec<usize>,
    batch: Vec<(u64, usize)>,
    /// Testing knobs (see [`inject`]): one write per request; injected pauses.
    per_request_writes: bool,
    pauses: inject::Pauses,
    start: u64,
    completed: u64,
    errors: Vec<String>,
    stop: &'a AtomicBool,
    shared: &'a Shared,
    /// Finished records on their way to the sink, and where they go.
    chunk: Vec<RequestRecord>,
    out: Sender<ToWriter>,
    /// Chunks sent and not yet taken by the writer (it leaves idle priority when they pile up).
    queued: &'a AtomicUsize,
    emitted: u64,
    /// Hand a partial chunk to the sink once its oldest record has waited this long (None:
    /// only full chunks), and when the last chunk went.
    flush_every_ns: Option<u64>,
    last_chunk_ns: u64,
    slack: Option<&'a mut (dyn SlackTask + 'a)>,
    /// Churn mode: (min, max) requests per connection, and the quota generator.
    churn: Option<(u32, u32)>,
    churn_rng: rand_xoshiro::Xoshiro256PlusPlus,
    connects: u64,
    misses: u64,
    /// Error replies by the code they carried.
    codes: std::collections::BTreeMap<crate::protocol::ErrorCode, u64>,
    /// Requests the server never answered because it announced a close before them
    /// (pipelined behind the last reply): sent again, first, on another connection.
    retry: VecDeque<u64>,
    /// The loop's clock (stall detection) and what its cost and catch-up came to.
    clock: cost::LoopClock,
    cost: cost::GeneratorCost,
    /// A stall's backlog being sent: the stall's end (run-relative ns).
    catching_up: Option<u64>,
    /// What to do with requests seen due late (`LoadConfig::overdue`), the thread's mean gap
    /// between requests (ns; 0 when unknown, e.g. a trace replayed at its own pace), and,
    /// pacing, when the next overdue request may go.
    overdue: crate::Overdue,
    mean_gap_ns: u64,
    pace_next: u64,
}

impl<'a> Engine<'a> {
    pub(crate) fn new(
        cfg: &LoadConfig,
        thread: usize,
        threads: usize,
        slots: Vec<Slot>,
        sched: ThreadSchedule,
        links: Links<'a>,
        slack: Option<&'a mut (dyn SlackTask + 'a)>,
    ) -> std::io::Result<Self> {
        let Links {
            stop,
            shared,
            out,
            queued,
        } = links;
        let epoll = Epoll::new(slots.len())?;
        for (i, s) in slots.iter().enumerate() {
            if let Some(fd) = s.conn.fd() {
                epoll.add(fd, i as u64)?;
            }
        }
        let carries_id = match slots.first() {
            Some(s) => s.conn.proto.carries_id(),
            None => true,
        };
        let knobs = inject::Knobs::from_env(thread as u64);
        let churn_rng = <rand_xoshiro::Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(
            crate::schedule::mix_seed(cfg.seed, 0xc4 + thread as u64),
        );
        let mut engine = Engine {
            thread: thread as u64,
            threads: threads as u64,
            timeout_ns: dur_ns(cfg.timeout),
            max_outstanding: cfg.max_outstanding_per_conn,
            yield_when_far: cfg.yield_when_far,
            carries_id,
            slots,
            sched,
            win: Window::default(),
            next: 0,
            last_intended: 0,
            blocked_end: 0,
            rr: 0,
            dead_slots: 0,
            epoll,
            ready: Vec::with_capacity(64),
            replies: Vec::with_capacity(64),
            pending_out: Vec::new(),
            dirty: Vec::new(),
            batch: Vec::new(),
            per_request_writes: knobs.per_request_writes,
            pauses: inject::Pauses::new(knobs.pause),
            start: 0,
            completed: 0,
            errors: Vec::new(),
            stop,
            shared,
            chunk: Vec::with_capacity(CHUNK),
            out,
            queued,
            emitted: 0,
            flush_every_ns: cfg.flush_every.map(dur_ns),
            last_chunk_ns: 0,
            slack,
            churn: cfg.churn,
            churn_rng,
            connects: 0,
            misses: 0,
            codes: Default::default(),
            retry: VecDeque::new(),
            clock: cost::LoopClock::new(),
            cost: cost::GeneratorCost::default(),
            catching_up: None,
            overdue: cfg.overdue,
            mean_gap_ns: if cfg.rate_per_s > 0.0 {
                (threads as f64 * cfg.share.1.max(1) as f64 * 1e9 / cfg.rate_per_s) as u64
            } else {
                0
            },
            pace_next: 0,
        };
        engine.start_churn();
        Ok(engine)
    }

    #[inline]
    fn now(&self) -> u64 {
        self.clock.read()
    }

    /// Runs the thread's schedule from the absolute CLOCK_MONOTONIC instant `start`.
    pub(crate) fn run(mut self, start: u64) -> ThreadOutput {
        self.start = start;
        // Time zero is a little in the future (all threads start together): wait for it,
        // sleeping most of the way, so that a request scheduled at 0 is not sent early.
        loop {
            let t = host::tstamp::mono_now_ns();
            if t >= start {
                break;
            }
            if start - t > FAR_NS {
                std::thread::sleep(Duration::from_nanos(start - t - WAKE_EARLY_NS));
            } else {
                std::hint::spin_loop();
            }
        }
        let cpu_at_start = host::tstamp::thread_cpu_ns();
        self.clock.start_at(start);
        let mut mark = self.mark(self.now());
        let mut interrupted = false;
        let mut drain_deadline: Option<u64> = None;
        let mut last_maintenance = 0u64;
        loop {
            let now = self.now();
            mark = self.account(now, mark);
            if !interrupted && self.stop.load(Ordering::Relaxed) {
                interrupted = true;
                self.cut_schedule(now);
                drain_deadline = Some(now + STOP_GRACE_NS.min(self.timeout_ns));
            }
            let now = self
                .pauses
                .maybe_pause(now, &self.clock, self.cost.due_in_stalls);
            let done = self.send_due(now);
            self.flush_batch();
            if done {
                self.caught_up();
            }
            self.flush_pending();
            let now = self.now();
            if let Some(due) = self.next_intended() {
                if due > now && due - now <= SPIN_ONLY_NS && self.next == self.win.end() {
                    // The next send is a few µs away: an epoll syscall now could make it
                    // late, so spin on the clock alone and send it on time.
                    while self.now() < due {
                        std::hint::spin_loop();
                    }
                    continue;
                }
            }
            self.run_slack(now);
            let budget = self.wait_budget(self.now());
            if let Err(e) = self.poll(budget) {
                self.note_error(format!("epoll: {e}"));
            }
            let now = self.now();
            let finished = self.schedule_exhausted();
            if finished || now >= last_maintenance + MAINTENANCE_NS {
                last_maintenance = now;
                self.expire(now);
                self.reconnect(now);
                self.collect_soft_errors();
                self.publish();
                if self
                    .flush_every_ns
                    .is_some_and(|f| now >= self.last_chunk_ns + f)
                {
                    self.emit(false);
                    if !self.chunk.is_empty() {
                        self.send_chunk();
                    }
                    self.last_chunk_ns = now;
                }
            }
            self.emit(false);
            // Maintenance and handing records on are the loop's own work, with no clock read
            // inside: their time is not taken for a stall.
            self.clock.own();
            if finished && self.retry.is_empty() && self.slots.iter().all(|s| s.live == 0) {
                break;
            }
            if drain_deadline.is_some_and(|d| now >= d) {
                break;
            }
        }
        // Whatever is still out when the stop grace ends counts as timed out.
        for e in self.win.iter_mut() {
            if e.st == St::InFlight {
                e.rec.outcome = Outcome::Timeout;
            }
            e.st = St::Done;
        }
        self.emit(true);
        self.shared.done.store(self.emitted, Ordering::Relaxed);
        self.shared.in_flight.store(0, Ordering::Relaxed);
        self.shared.held.store(0, Ordering::Relaxed);
        let done_ns = self.now();
        self.account(done_ns, mark);
        self.cost.threads = 1;
        self.cost.writes = self.slots.iter().map(|s| s.conn.writes).sum();
        self.cost.thread_cpu_ns = host::tstamp::thread_cpu_ns().saturating_sub(cpu_at_start);
        self.clock.fill(&mut self.cost);
        ThreadOutput {
            records: self.emitted,
            errors: self.errors,
            interrupted,
            connects: self.connects,
            misses: self.misses,
            codes: self.codes,
            last_intended_ns: self.last_intended,
            done_ns,
            cost: self.cost,
            tls: self.slots.iter().fold(Default::default(), |mut t, s| {
                t.add(&s.conn.tls_stats);
                t
            }),
        }
    }

    /// Where an iteration of the loop starts, for [`Engine::account`].
    fn mark(&self, at: u64) -> IterMark {
        let (waited, stalled) = self.clock.excluded();
        IterMark {
            at,
            waited,
            stalled,
            sends: self.cost.sends,
            replies: self.cost.replies,
        }
    }

    /// Adds the iteration since `m` to the loop's work when it sent or read something (less
    /// its deliberate waits and stalls); returns the next iteration's mark.
    fn account(&mut self, now: u64, m: IterMark) -> IterMark {
        let next = self.mark(now);
        if next.sends > m.sends || next.replies > m.replies {
            let excluded = (next.waited - m.waited) + (next.stalled - m.stalled);
            self.cost.busy_ns += now.saturating_sub(m.at).saturating_sub(excluded);
        }
        next
    }

    /// The intended time of the next request not yet taken from the schedule.
    fn next_intended(&mut self) -> Option<u64> {
        self.sched.peek().map(|it| it.intended_ns)
    }

    /// Every request has been taken from the schedule and sent or dropped.
    fn schedule_exhausted(&mut self) -> bool {
        self.next == self.win.end() && self.sched.peek().is_none()
    }

    /// Hands finished requests, oldest first, to the sink in chunks (all of them at the end).
    fn emit(&mut self, last: bool) {
        while let Some(r) = self.win.pop_done() {
            self.chunk.push(r);
            self.emitted += 1;
            if self.chunk.len() >= CHUNK {
                self.send_chunk();
            }
        }
        if last && !self.chunk.is_empty() {
            self.send_chunk();
        }
    }

    fn send_chunk(&mut self) {
        let full = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK));
        self.queued.fetch_add(1, Ordering::Relaxed);
        // The receiver lives until every generator thread has ended; if it is gone the run is
        // being torn down and the records have nowhere to go.
        let _ = self.out.send(ToWriter::Chunk(self.thread as usize, full));
    }

    /// Tells the writer the run's time origin, ahead of this thread's records.
    pub(crate) fn report_start(&self, start_mono_ns: u64) {
        let _ = self.out.send(ToWriter::Started(start_mono_ns));
    }

    /// Tells the writer that slot `s` opened a socket (its local address) at `at_mono_ns`,
    /// ahead of the records of the requests sent on it.
    fn report_connected(&self, s: usize, at_mono_ns: u64) {
        let slot = &self.slots[s];
        if let Some(local) = slot.conn.local_addr() {
            let _ = self.out.send(ToWriter::Connected {
                conn: slot.global,
                local,
                at_mono_ns,
            });
        }
    }

    /// Publishes the thread's counters for the coordinator.
    fn publish(&self) {
        let in_flight: usize = self.slots.iter().map(|s| s.live).sum();
        let held = (self.win.end() - self.next) + self.retry.len() as u64;
        self.shared.done.store(self.completed, Ordering::Relaxed);
        self.shared
            .in_flight
            .store(in_flight as u64, Ordering::Relaxed);
        self.shared.held.store(held, Ordering::Relaxed);
    }

    /// Runs the slack task when it is due, nothing waits to be sent, no output is pending, no
    /// request is in flight (so no reply can arrive and wait for it) and the next send is
    /// further away than the task's cost bound: it can delay neither a send nor a receive.
    fn run_slack(&mut self, now: u64) {
        let Some(task) = self.slack.as_deref() else {
            return;
        };
        let abs = self.start + now;
        if task.next_due_ns() > abs
            || self.next != self.win.end()
            || !self.pending_out.is_empty()
            || self.slots.iter().any(|s| s.live > 0)
        {
            return;
        }
        let need = task.cost_bound_ns().saturating_add(SLACK_MARGIN_NS);
        let room = match self.sched.peek() {
            Some(it) => it.intended_ns.saturating_sub(now),
            None => u64::MAX,
        };
        if room > need {
            if let Some(task) = self.slack.as_deref_mut() {
                task.run(abs);
            }
            // The slack task ran in a gap the schedule left: not a stall.
            self.clock.resume();
        }
    }

    /// On stop: requests not yet due leave the run; due but unsent ones stay as Dropped.
    fn cut_schedule(&mut self, now: u64) {
        self.take_due(now);
        self.sched.cut();
        let next = self.next;
        for e in self.win.iter_from_mut(next) {
            e.st = St::Done;
            self.completed += 1;
        }
        self.next = self.win.end();
    }

    /// Takes every request whose intended time has come from the schedule into the window,
    /// stamping when the loop saw it due.
    fn take_due(&mut self, now: u64) {
        let stall = self.clock.take_open();
        while self.sched.peek().is_some_and(|it| it.intended_ns <= now) {
            let Some(it) = self.sched.next_item() else {
                break;
            };
            if let Some((from, to)) = stall {
                if it.intended_ns > from && it.intended_ns <= to {
                    self.cost.due_in_stalls += 1;
                    self.catching_up = Some(to);
                }
            }
            self.last_intended = it.intended_ns;
            let mut rec = RequestRecord::scheduled(it.intended_ns, it.class);
            rec.seen_ns = now.max(1);
            // Global connection c lives on thread c % threads at local index c / threads.
            let forced = match it.forced_conn {
                Some(g) => {
                    rec.conn = g;
                    g / self.threads as u32
                }
                None => u32::MAX,
            };
            self.win.push(Entry {
                rec,
                st: St::Unsent,
                forced,
            });
        }
    }

    /// Queues every request due at `now` on a usable connection (written by
    /// [`Engine::flush_batch`]). Returns whether the loop has done what it could with what is
    /// due: everything queued, or the rest held for a connection.
    fn send_due(&mut self, now: u64) -> bool {
        if self.dead_slots == self.slots.len() && !self.schedule_exhausted() {
            // Every connection is gone for good: nothing more can be sent, so the rest of the
            // schedule is Dropped now (streamed to the sink) and the run can end promptly.
            self.drop_rest();
        }
        if !self.send_retries(now) {
            return false;
        }
        self.take_due(now);
        while self.next < self.win.end() {
            let i = self.next;
            let (intended, seen, forced) = match self.win.get(i) {
                Some(e) => (e.rec.intended_ns, e.rec.seen_ns, self.forced_slot(e.forced)),
                None => return false,
            };
            match self.overdue {
                crate::Overdue::CatchUp => {}
                // Seen due past the bound (the generator's own stall): never sent.
                crate::Overdue::Shed { bound_ns } if seen.saturating_sub(intended) > bound_ns => {
                    if let Some(e) = self.win.get_mut(i) {
                        e.rec.outcome = Outcome::Skipped;
                    }
                    self.finish(i);
                    self.next += 1;
                    continue;
                }
                crate::Overdue::Shed { .. } => {}
                // A backlog (overdue by more than a mean gap) goes out at most `factor` × the
                // mean rate: not yet its turn, so the loop comes back (it spins meanwhile).
                crate::Overdue::Pace { factor } => {
                    if self.mean_gap_ns > 0 && now.saturating_sub(intended) > self.mean_gap_ns {
                        if now < self.pace_next {
                            return false;
                        }
                        self.pace_next = now + (self.mean_gap_ns as f64 / factor) as u64;
                    }
                }
            }
            match self.pick(forced) {
                Some(s) => self.send(i, s, now),
                None => {
                    let hopeless = match forced {
                        Some(s) => self.slots[s].dead,
                        None => self.dead_slots == self.slots.len(),
                    };
                    if hopeless || now.saturating_sub(intended) > self.timeout_ns {
                        // Never sent: stays Dropped.
                        self.finish(i);
                        self.next += 1;
                    } else {
                        // Backlog: wait (in order) for a connection to free up. Everything
                        // due so far is now held in the client (its own figure): the loop has
                        // done what it could.
                        self.blocked_end = self.win.end();
                        return true;
                    }
                }
            }
        }
        true
    }

    /// Everything due has been sent (or is held for a connection): a stall's backlog, if any,
    /// is caught up — unless the loop stalled again meanwhile: then the catch-up runs from
    /// that stall's end (its backlog is taken with the next requests due).
    fn caught_up(&mut self) {
        if let (Some(_), Some(later)) = (self.catching_up, self.clock.open_until()) {
            self.catching_up = Some(later);
            return;
        }
        if self.next == self.win.end() {
            let now = self.now();
            if let Some(p) = self.pauses.caught_up(now, self.cost.due_in_stalls) {
                self.cost.injected_pauses.push(p);
            }
        }
        if let Some(stall_end) = self.catching_up.take() {
            let took = self.now().saturating_sub(stall_end);
            self.cost.catch_ups += 1;
            self.cost.catch_up_ns += took;
            self.cost.longest_catch_up_ns = self.cost.longest_catch_up_ns.max(took);
        }
    }

    /// Marks every request left (due or not) as Dropped, streaming them out.
    fn drop_rest(&mut self) {
        let next = self.next;
        for e in self.win.iter_from_mut(next) {
            e.st = St::Done;
            self.completed += 1;
        }
        self.next = self.win.end();
        while let Some(it) = self.sched.next_item() {
            let mut rec = RequestRecord::scheduled(it.intended_ns, it.class);
            rec.conn = it.forced_conn.unwrap_or(0);
            self.win.push(Entry {
                rec,
                st: St::Done,
                forced: u32::MAX,
            });
            self.completed += 1;
            self.next = self.win.end();
            self.emit(false);
        }
    }

    /// Marks request `i` done (its outcome already set).
    fn finish(&mut self, i: u64) {
        if let Some(e) = self.win.get_mut(i) {
            if e.st != St::Done {
                e.st = St::Done;
                self.completed += 1;
            }
        }
    }

    /// The state of request `i` (requests already handed to the sink are done).
    fn state(&self, i: u64) -> St {
        self.win.get(i).map_or(St::Done, |e| e.st)
    }

    fn rec_mut(&mut self, i: u64) -> Option<&mut RequestRecord> {
        self.win.get_mut(i).map(|e| &mut e.rec)
    }

    fn usable(&self, s: usize) -> bool {
        let slot = &self.slots[s];
        if slot.parked {
            return slot.down.is_none() && !slot.dead;
        }
        slot.conn.is_open()
            && !slot.closing
            && slot.sent_on_conn < slot.quota
            && !slot.conn.write_blocked()
            && slot.live + slot.zombies
                < slot
                    .conn
                    .proto
                    .in_flight_limit()
                    .map_or(self.max_outstanding, |l| l.min(self.max_outstanding))
    }

    fn pick(&mut self, forced: Option<usize>) -> Option<usize> {
        if let Some(s) = forced {
            return self.usable(s).then_some(s);
        }
        let n = self.slots.len();
        for k in 0..n {
            let s = (self.rr + k) % n;
            if self.usable(s) {
                self.rr = s + 1;
                return Some(s);
            }
        }
        None
    }

    fn forced_slot(&self, forced: u32) -> Option<usize> {
        Some(forced as usize).filter(|&s| forced != u32::MAX && s < self.slots.len())
    }

    fn forced_of(&self, i: u64) -> Option<usize> {
        self.win.get(i).and_then(|e| self.forced_slot(e.forced))
    }

    /// Sends request `i` on slot `s` in the pass that began at `pass_ns`.
    fn send(&mut self, i: u64, s: usize, pass_ns: u64) {
        self.next += 1;
        self.cost.sends += 1;
        if let Some(e) = self.win.get_mut(i) {
            e.st = St::InFlight;
        }
        self.transmit(i, s, true, pass_ns);
    }

    /// Writes request `i` on slot `s`; `first` = not a retry (a retry keeps its first
    /// send stamp, so its timeout and lateness count from the first attempt). `pass_ns`: when
    /// the loop's pass began; a first send batched on an open connection takes it as its
    /// stamp until the write that carries it restamps it (flush_batch), so the clock is not
    /// read per request (two reads were ~40 ns of the ~115 ns a request cost when a stall's
    /// backlog was sent).
    fn transmit(&mut self, i: u64, s: usize, first: bool, pass_ns: u64) {
        let id = i * self.threads + self.thread;
        let class = self.win.get(i).map_or(0, |e| e.rec.class);
        let reopened = self.slots[s].parked;
        let global = self.slots[s].global;
        // A parked connection is opened for this request: the connect happens after the
        // send stamp, so it counts in this request's latency and not in its lateness.
        let before_connect = reopened.then(|| self.now().max(1));
        if let Some(at) = before_connect {
            if let Err(e) = self.unpark(s, self.start + at) {
                let sent = self.stamp_sent(i, global, at, first);
                self.slots[s].inflight.push_back((i, sent));
                self.slots[s].live += 1;
                self.fail(s, &ConnFail::Io(e));
                return;
            }
        }
        self.slots[s].conn.queue(id, class);
        // A first send on an open connection is stamped again just before the write that
        // carries it (flush_batch); one written alone now is stamped here, one on a reopened
        // connection keeps the stamp taken before the connect.
        let at = match before_connect {
            Some(at) => at,
            None if self.per_request_writes => self.now().max(1),
            None => pass_ns.max(1),
        };
        let sent = self.stamp_sent(i, global, at, first);
        let slot = &mut self.slots[s];
        slot.sent_on_conn += 1;
        slot.inflight.push_back((i, sent));
        slot.live += 1;
        if self.per_request_writes {
            match slot.conn.flush() {
                Ok(()) if slot.conn.has_pending_output() => self.pending_out.push(s),
                Ok(()) => {}
                Err(f) => self.fail(s, &f),
            }
            return;
        }
        // Written with everything else due on this connection in the pass, by flush_batch;
        // a first send on an open connection takes that write's time as its send stamp.
        if first && !reopened {
            self.batch.push((i, s));
        }
        if !slot.batched {
            slot.batched = true;
            self.dirty.push(s);
        }
    }

    /// Writes what the pass queued: one write per connection, each request stamped sent just
    /// before the write that carries it (the timeouts keep the stamp taken when it was
    /// queued, at most one pass earlier).
    fn flush_batch(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        for &s in &dirty {
            let at = self.now().max(1);
            let slot = &mut self.slots[s];
            slot.batched = false;
            slot.flushed_at = at;
            match slot.conn.flush() {
                Ok(()) if slot.conn.has_pending_output() => self.pending_out.push(s),
                Ok(()) => {}
                Err(ConnFail::Closed) if !slot.conn.is_open() => {}
                Err(f) => self.fail(s, &f),
            }
        }
        dirty.clear();
        self.dirty = dirty;
        let mut batch = std::mem::take(&mut self.batch);
        for &(i, s) in &batch {
            let at = self.slots[s].flushed_at;
            if let Some(r) = self.rec_mut(i) {
                // Sent on the loop's first try (stamp_sent made seen = sent): still so. One
                // held for a slot keeps when it was seen. (`blocked_end` may have moved past
                // it later in the pass, so it cannot tell.)
                if r.seen_ns == r.sent_ns {
                    r.seen_ns = at;
                }
                r.sent_ns = at;
            }
        }
        batch.clear();
        self.batch = batch;
    }

    /// Records that request `i` goes out on connection `global` at `at` (the first attempt
    /// only: a retry keeps its first send stamp); returns its send stamp.
    fn stamp_sent(&mut self, i: u64, global: u32, at: u64, first: bool) -> u64 {
        let held = i < self.blocked_end;
        let Some(r) = self.rec_mut(i) else {
            return at;
        };
        r.conn = global;
        if first {
            r.sent_ns = at;
            if !held {
                // Sent on the loop's first try: its whole delay is the generator's own
                // (including the sends before it in the same pass), none of it held.
                r.seen_ns = at;
            }
        }
        r.sent_ns
    }

    fn flush_pending(&mut self) {
        if self.pending_out.is_empty() {
            return;
        }
        let list = std::mem::take(&mut self.pending_out);
        for s in list {
            match self.slots[s].conn.flush() {
                Ok(()) if self.slots[s].conn.has_pending_output() => self.pending_out.push(s),
                Ok(()) => {}
                Err(ConnFail::Closed) if !self.slots[s].conn.is_open() => {}
                Err(f) => self.fail(s, &f),
            }
        }
    }

    /// How long the next epoll wait may sleep: while some output waits for the kernel
    /// (full socket buffer, connect in progress) at most `PENDING_RETRY_NS`; never past the
    /// slack task's next due time.
    fn wait_budget(&mut self, now: u64) -> u64 {
        let mut budget = self.schedule_budget(now);
        if !self.pending_out.is_empty() {
            budget = budget.min(PENDING_RETRY_NS);
        }
        if let Some(task) = self.slack.as_deref() {
            budget = budget.min(task.next_due_ns().saturating_sub(self.start + now));
        }
        budget
    }

    fn schedule_budget(&mut self, now: u64) -> u64 {
        if self.next < self.win.end() {
            return 0; // held requests: poll for replies that free a slot
        }
        match self.next_intended() {
            Some(t) if t > now => {
                let gap = t - now;
                if self.yield_when_far && gap > FAR_NS {
                    (gap - WAKE_EARLY_NS).min(MAX_SLEEP_NS)
                } else {
                    0
                }
            }
            Some(_) => 0,
            // Schedule done: only replies, timeouts and reconnects remain.
            None => {
                let reconnecting = self.slots.iter().any(|s| s.down.is_some());
                if reconnecting {
                    MAINTENANCE_NS
                } else {
                    1_000_000
                }
            }
        }
    }

    fn poll(&mut self, budget_ns: u64) -> std::io::Result<()> {
        self.ready.clear();
        self.ready.extend(self.epoll.wait(budget_ns)?);
        if budget_ns > 0 {
            // A wait the loop asked for is not a stall.
            self.clock.resume();
        }
        for k in 0..self.ready.len() {
            let s = self.ready[k] as usize;
            if s < self.slots.len() && self.slots[s].conn.is_open() {
                self.read(s);
            }
        }
        Ok(())
    }

    fn read(&mut self, s: usize) {
        let clock = &self.clock;
        let replies = &mut self.replies;
        replies.clear();
        let res = self.slots[s]
            .conn
            .read_replies(|| clock.read(), |r, t, k| replies.push((r, t, k)));
        for k in 0..self.replies.len() {
            let (reply, t, krx) = self.replies[k];
            self.on_reply(s, reply, t, krx);
        }
        if self.slots[s].closing {
            // The server said it closes: whatever it does next (EOF, reset) is expected.
            self.park(s);
        } else if let Err(f) = res {
            self.fail(s, &f);
        } else {
            self.park_if_done(s);
        }
    }

    fn index_of(&self, id: u64) -> Option<u64> {
        (id % self.threads == self.thread)
            .then_some(id / self.threads)
            .filter(|&i| self.win.get(i).is_some())
    }

    fn on_reply(&mut self, s: usize, reply: Reply, t: u64, krx: Option<u64>) {
        self.cost.replies += u64::from(!reply.is_follow_up());
        if reply.is_follow_up() {
            // A control message may announce the close (HTTP/2's graceful GOAWAY): the
            // connection is reopened and what was still out on it sent again, as after an
            // HTTP/1.1 `Connection: close`.
            self.slots[s].closing |= reply.closes;
            if let Some((id, t6)) = reply.tx_stamp_for {
                if let Some(r) = self.index_of(id).and_then(|i| self.rec_mut(i)) {
                    r.stamps[5] = t6;
                }
            }
            return;
        }
        let i = if self.carries_id {
            match reply.id.and_then(|id| self.index_of(id)) {
                Some(i)
                    if self.state(i) == St::InFlight
                        && self.win.get(i).map(|e| e.rec.conn) == Some(self.slots[s].global) =>
                {
                    i
                }
                // Late (already timed out), duplicate or foreign id: ignore.
                _ => return,
            }
        } else {
            let slot = &mut self.slots[s];
            match slot.inflight.pop_front() {
                None => return,
                Some(_) if slot.zombies > 0 => {
                    slot.zombies -= 1;
                    return;
                }
                Some((i, _)) => i,
            }
        };
        let slot = &mut self.slots[s];
        slot.live -= 1;
        slot.closing |= reply.closes;
        self.misses += u64::from(reply.ok && reply.miss);
        if let (false, Some(c)) = (reply.ok, reply.code) {
            *self.codes.entry(c).or_default() += 1;
        }
        let start = self.start;
        if let Some(r) = self.rec_mut(i) {
            r.received_ns = t.max(1);
            r.kernel_rx_ns = krx.map_or(0, |k| k.saturating_sub(start));
            r.outcome = if reply.ok {
                Outcome::Ok
            } else {
                Outcome::Error
            };
            if let Some(st) = reply.stamps {
                r.stamps = st;
            }
        }
        self.finish(i);
    }

    /// Records a problem found while setting the thread up (e.g. pinning).
    pub(crate) fn note_error_pub(&mut self, msg: String) {
        self.note_error(msg);
    }
}

/// Keeps the first few distinct messages.
pub(crate) fn note_error(errors: &mut Vec<String>, msg: String) {
    if errors.len() < MAX_ERRORS && !errors.contains(&msg) {
        errors.push(msg);
    }
}

pub(crate) fn dur_ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128 / 2) as u64
}
