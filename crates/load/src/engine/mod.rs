//! One generator thread: the engine loop.
//!
//! The loop is driven by the thread's slice of the schedule (data, computed up front):
//! send every request whose intended time has come, flush, poll epoll for replies, and
//! every ~100 µs expire timeouts and retry broken connections. While the next send is
//! near it spins (epoll with timeout 0); when it is far and `yield_when_far` is set it
//! sleeps in epoll until ~100 µs before it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::config::LoadConfig;
use crate::conn::{Conn, ConnFail};
use crate::protocol::Reply;
use crate::record::{Outcome, RequestRecord};
use crate::sys::Epoll;

mod churn;
mod faults;

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

#[derive(Clone, Copy, PartialEq, Eq)]
enum St {
    Unsent,
    InFlight,
    Done,
}

/// A connection and its bookkeeping.
pub(crate) struct Slot {
    conn: Conn,
    /// Index among all the run's connections (what records store).
    global: u32,
    /// Local indices of requests sent on it, in send order (completed ones removed lazily
    /// when replies carry ids; exact FIFO otherwise).
    inflight: VecDeque<u32>,
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
}

impl Slot {
    pub(crate) fn new(conn: Conn, global: u32) -> Self {
        Slot {
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
        }
    }
}

struct Down {
    next_try_ns: u64,
    attempts: u32,
}

/// What one generator thread hands back.
pub(crate) struct ThreadOutput {
    pub records: Vec<RequestRecord>,
    pub errors: Vec<String>,
    pub interrupted: bool,
    /// Connections opened during the run (reconnects and churn).
    pub connects: u64,
    /// Successful replies that were misses.
    pub misses: u64,
}

pub(crate) struct Engine<'a> {
    thread: u64,
    threads: u64,
    addr: SocketAddr,
    timeout_ns: u64,
    max_outstanding: usize,
    yield_when_far: bool,
    carries_id: bool,
    slots: Vec<Slot>,
    recs: Vec<RequestRecord>,
    state: Vec<St>,
    /// Per request: local slot it must use, or u32::MAX for any.
    forced: Option<Vec<u32>>,
    /// Schedule cursor: first request not yet sent or dropped.
    next: usize,
    rr: usize,
    dead_slots: usize,
    epoll: Epoll,
    ready: Vec<u64>,
    replies: Vec<(Reply, u64, Option<u64>)>,
    /// Slots holding output the kernel did not take yet.
    pending_out: Vec<usize>,
    start: u64,
    completed: u64,
    errors: Vec<String>,
    stop: &'a AtomicBool,
    done: &'a AtomicU64,
    /// Churn mode: (min, max) requests per connection, and the quota generator.
    churn: Option<(u32, u32)>,
    churn_rng: rand_xoshiro::Xoshiro256PlusPlus,
    connects: u64,
    misses: u64,
    /// Requests the server never answered because it announced a close before them
    /// (pipelined behind the last reply): sent again, first, on another connection.
    retry: VecDeque<u32>,
}

impl<'a> Engine<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        cfg: &LoadConfig,
        thread: usize,
        threads: usize,
        slots: Vec<Slot>,
        recs: Vec<RequestRecord>,
        forced_global: Option<Vec<u32>>,
        stop: &'a AtomicBool,
        done: &'a AtomicU64,
    ) -> std::io::Result<Self> {
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
        // Global connection c lives on thread c % threads at local index c / threads.
        let forced = forced_global.map(|v| {
            v.into_iter()
                .map(|g| if g == u32::MAX { g } else { g / threads as u32 })
                .collect()
        });
        let n = recs.len();
        let churn_rng = <rand_xoshiro::Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(
            crate::schedule::mix_seed(cfg.seed, 0xc4 + thread as u64),
        );
        let mut engine = Engine {
            thread: thread as u64,
            threads: threads as u64,
            addr: cfg.target.addr,
            timeout_ns: dur_ns(cfg.timeout),
            max_outstanding: cfg.max_outstanding_per_conn,
            yield_when_far: cfg.yield_when_far,
            carries_id,
            slots,
            recs,
            state: vec![St::Unsent; n],
            forced,
            next: 0,
            rr: 0,
            dead_slots: 0,
            epoll,
            ready: Vec::with_capacity(64),
            replies: Vec::with_capacity(64),
            pending_out: Vec::new(),
            start: 0,
            completed: 0,
            errors: Vec::new(),
            stop,
            done,
            churn: cfg.churn,
            churn_rng,
            connects: 0,
            misses: 0,
            retry: VecDeque::new(),
        };
        engine.start_churn();
        Ok(engine)
    }

    #[inline]
    fn now(&self) -> u64 {
        host::tstamp::mono_now_ns().saturating_sub(self.start)
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
        let mut interrupted = false;
        let mut drain_deadline: Option<u64> = None;
        let mut last_maintenance = 0u64;
        loop {
            let now = self.now();
            if !interrupted && self.stop.load(Ordering::Relaxed) {
                interrupted = true;
                self.cut_schedule(now);
                drain_deadline = Some(now + STOP_GRACE_NS.min(self.timeout_ns));
            }
            self.send_due(now);
            self.flush_pending();
            let now = self.now();
            if let Some(r) = self.recs.get(self.next) {
                if r.intended_ns > now && r.intended_ns - now <= SPIN_ONLY_NS {
                    // The next send is a few µs away: an epoll syscall now could make it
                    // late, so spin on the clock alone and send it on time.
                    let due = r.intended_ns;
                    while self.now() < due {
                        std::hint::spin_loop();
                    }
                    continue;
                }
            }
            let budget = self.wait_budget(now);
            if let Err(e) = self.poll(budget) {
                self.note_error(format!("epoll: {e}"));
            }
            let now = self.now();
            let finished = self.next == self.recs.len();
            if finished || now >= last_maintenance + MAINTENANCE_NS {
                last_maintenance = now;
                self.expire(now);
                self.reconnect(now);
                self.collect_soft_errors();
                self.done.store(self.completed, Ordering::Relaxed);
            }
            if finished && self.retry.is_empty() && self.slots.iter().all(|s| s.live == 0) {
                break;
            }
            if drain_deadline.is_some_and(|d| now >= d) {
                break;
            }
        }
        // Whatever is still out when the stop grace ends counts as timed out.
        for (r, st) in self.recs.iter_mut().zip(&self.state) {
            if *st == St::InFlight {
                r.outcome = Outcome::Timeout;
            }
        }
        self.done.store(self.recs.len() as u64, Ordering::Relaxed);
        ThreadOutput {
            records: self.recs,
            errors: self.errors,
            interrupted,
            connects: self.connects,
            misses: self.misses,
        }
    }

    /// On stop: requests not yet due leave the run; due but unsent ones stay as Dropped.
    fn cut_schedule(&mut self, now: u64) {
        let cut = self.next + self.recs[self.next..].partition_point(|r| r.intended_ns <= now);
        self.recs.truncate(cut);
        self.state.truncate(cut);
        if let Some(f) = self.forced.as_mut() {
            f.truncate(cut);
        }
        for i in self.next..cut {
            self.state[i] = St::Done;
            self.completed += 1;
        }
        self.next = cut;
    }

    fn send_due(&mut self, now: u64) {
        if self.dead_slots == self.slots.len() && self.next < self.recs.len() {
            // Every connection is gone for good: nothing more can be sent, so the rest
            // of the schedule is Dropped now and the run can end promptly.
            for i in self.next..self.recs.len() {
                self.state[i] = St::Done;
            }
            self.completed += (self.recs.len() - self.next) as u64;
            self.next = self.recs.len();
        }
        if !self.send_retries() {
            return;
        }
        while self.next < self.recs.len() {
            let i = self.next;
            let intended = self.recs[i].intended_ns;
            if intended > now {
                return;
            }
            let forced = self.forced_slot(i);
            match self.pick(forced) {
                Some(s) => self.send(i, s),
                None => {
                    let hopeless = match forced {
                        Some(s) => self.slots[s].dead,
                        None => self.dead_slots == self.slots.len(),
                    };
                    if hopeless || now - intended > self.timeout_ns {
                        // Never sent: stays Dropped.
                        if let Some(s) = forced {
                            self.recs[i].conn = self.slots[s].global;
                        }
                        self.state[i] = St::Done;
                        self.completed += 1;
                        self.next += 1;
                    } else {
                        // Backlog: wait (in order) for a connection to free up.
                        return;
                    }
                }
            }
        }
    }

    fn usable(&self, s: usize) -> bool {
        let slot = &self.slots[s];
        if slot.parked {
            return slot.down.is_none() && !slot.dead;
        }
        slot.conn.is_open()
            && !slot.closing
            && slot.sent_on_conn < slot.quota
            && !slot.conn.has_pending_output()
            && slot.live + slot.zombies < self.max_outstanding
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

    fn forced_slot(&self, i: usize) -> Option<usize> {
        self.forced
            .as_ref()
            .map(|f| f[i] as usize)
            .filter(|&s| s != u32::MAX as usize && s < self.slots.len())
    }

    fn send(&mut self, i: usize, s: usize) {
        self.next += 1;
        self.state[i] = St::InFlight;
        self.transmit(i, s, true);
    }

    /// Writes request `i` on slot `s`; `first` = not a retry (a retry keeps its first
    /// send stamp, so its timeout and lateness count from the first attempt).
    fn transmit(&mut self, i: usize, s: usize, first: bool) {
        let id = i as u64 * self.threads + self.thread;
        let class = self.recs[i].class;
        // A parked connection is opened for this request: the connect happens after the
        // send stamp, so it counts in this request's latency and not in its lateness.
        let before_connect = self.now().max(1);
        let reopened = self.slots[s].parked;
        if reopened {
            if let Err(e) = self.unpark(s) {
                self.recs[i].conn = self.slots[s].global;
                if first {
                    self.recs[i].sent_ns = before_connect;
                }
                self.slots[s].inflight.push_back(i as u32);
                self.slots[s].live += 1;
                self.fail(s, &ConnFail::Io(e));
                return;
            }
        }
        let slot = &mut self.slots[s];
        slot.sent_on_conn += 1;
        slot.conn.queue(id, class);
        slot.inflight.push_back(i as u32);
        slot.live += 1;
        self.recs[i].conn = slot.global;
        // Stamped just before the write that carries the request (or before the connect).
        if first {
            self.recs[i].sent_ns = if reopened {
                before_connect
            } else {
                self.now().max(1)
            };
        }
        let slot = &mut self.slots[s];
        match slot.conn.flush() {
            Ok(()) if slot.conn.has_pending_output() => self.pending_out.push(s),
            Ok(()) => {}
            Err(f) => self.fail(s, &f),
        }
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
    /// (full socket buffer, connect in progress) at most `PENDING_RETRY_NS`.
    fn wait_budget(&self, now: u64) -> u64 {
        let budget = self.schedule_budget(now);
        if self.pending_out.is_empty() {
            budget
        } else {
            budget.min(PENDING_RETRY_NS)
        }
    }

    fn schedule_budget(&self, now: u64) -> u64 {
        match self.recs.get(self.next) {
            Some(r) if r.intended_ns > now => {
                let gap = r.intended_ns - now;
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
        for k in 0..self.ready.len() {
            let s = self.ready[k] as usize;
            if s < self.slots.len() && self.slots[s].conn.is_open() {
                self.read(s);
            }
        }
        Ok(())
    }

    fn read(&mut self, s: usize) {
        let start = self.start;
        let replies = &mut self.replies;
        replies.clear();
        let res = self.slots[s].conn.read_replies(
            || host::tstamp::mono_now_ns().saturating_sub(start),
            |r, t, k| replies.push((r, t, k)),
        );
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

    fn index_of(&self, id: u64) -> Option<usize> {
        (id % self.threads == self.thread)
            .then(|| (id / self.threads) as usize)
            .filter(|&i| i < self.recs.len())
    }

    fn on_reply(&mut self, s: usize, reply: Reply, t: u64, krx: Option<u64>) {
        if reply.is_follow_up() {
            if let Some((id, t6)) = reply.tx_stamp_for {
                if let Some(i) = self.index_of(id) {
                    self.recs[i].stamps[5] = t6;
                }
            }
            return;
        }
        let i = if self.carries_id {
            match reply.id.and_then(|id| self.index_of(id)) {
                Some(i)
                    if self.state[i] == St::InFlight
                        && self.recs[i].conn == self.slots[s].global =>
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
                Some(i) => i as usize,
            }
        };
        let slot = &mut self.slots[s];
        slot.live -= 1;
        slot.closing |= reply.closes;
        self.misses += u64::from(reply.ok && reply.miss);
        let r = &mut self.recs[i];
        r.received_ns = t.max(1);
        r.kernel_rx_ns = krx.map_or(0, |k| k.saturating_sub(self.start));
        r.outcome = if reply.ok {
            Outcome::Ok
        } else {
            Outcome::Error
        };
        if let Some(st) = reply.stamps {
            r.stamps = st;
        }
        self.state[i] = St::Done;
        self.completed += 1;
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
