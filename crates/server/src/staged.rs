//! [`Arch::Staged`](crate::Arch::Staged): the tandem server of the LNS paper (§3), with
//! synthetic, exactly known stage costs, so that its closed-form p99 predictions (model crate,
//! formulas 1–12) can be checked against a real server.
//!
//! # Stages
//!
//! 1. **Network stack** — one thread (`ts-stack`) accepts, reads and decodes every connection
//!    (epoll), then spends T = T0 + L·mT busy-spinning per request (L = the request's payload
//!    length in bytes, formula 12) and passes it on.
//! 2. **Dispatcher** — one thread (`ts-dispatch`) moves requests from stage 1's queue to the
//!    workers' shared queue, at no synthetic cost.
//! 3. **Workers** — k threads (`ts-worker-i`) each spend R = R0 + k·mR busy-spinning per
//!    request (formula 11), then write the response themselves.
//!
//! The response does not go back through stage 1: the paper's model also cuts the loop from
//! the workers back to the TCP/IP stage (its §3, modelling assumptions). The paper's dispatcher
//! deals requests round-robin to per-worker queues; this one feeds one shared queue (any idle
//! worker), as the issue asks.
//!
//! # Labels and discipline
//!
//! A request's label travels in the **first payload byte** (the null-RPC header has no spare
//! flag bit: the codec rejects unknown flags and non-zero reserved bytes). It is the load
//! generator's class: byte value [`DELAY_SENSITIVE_CLASS`] (0) marks a delay-sensitive
//! request, any other value a delay-insensitive one; a request without payload is class 0.
//! The byte is echoed like the rest of the payload, so a labelling client must not check it
//! against the id pattern. Note that the plain id pattern puts `id mod 256` there, so a client
//! that does not label at all sees every 256th request treated as delay-sensitive — which only
//! matters when priority is on.
//!
//! With `priority` off every queue is FCFS. With it on, every stage serves delay-sensitive
//! requests first (full-stack priority): stage 1 keeps decoded requests in a two-class queue
//! and polls the sockets again before each request it processes, so a delay-sensitive request
//! that arrived meanwhile overtakes the delay-insensitive ones still waiting; the queues
//! between stages are two-class too; within a class the order is FCFS. The priority is
//! **non-preemptive**: a request whose busy spin has begun finishes it. The paper models the
//! LNS server with a *pre-emptive* priority discipline (its §3.1: every stage first tries to
//! take a high-priority request, and the interference of low-priority work is folded into the
//! constant M), so for the delay-sensitive class this server can lag the model by up to one
//! residual service time per stage.
//!
//! # Stage stamps in staged mode
//!
//! | stamp | taken                                                                  |
//! |-------|------------------------------------------------------------------------|
//! | T1    | kernel software receive stamp, as in the other architectures (0 if unknown) |
//! | T2    | stage 1 takes the request from its queue and starts its T0 + L·mT spin |
//! | T3    | stage 1's spin is done, just before the hand-off to the dispatcher      |
//! | T4    | the worker's R0 + k·mR spin is done                                     |
//! | T5    | just before the response's `write`                                      |
//! | T6    | kernel transmit stamp, in the follow-up (as elsewhere)                 |
//!
//! So T1→T2 is kernel, wake-up and the wait in stage 1's queue; T2→T3 is exactly stage 1's
//! cost (plus preemption by the OS); T3→T4 is the dispatcher, the wait in the workers' queue
//! and the worker's cost; T4→T5 the response encoding.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::{Arc, Condvar, Mutex};

use host::tstamp::mono_now_ns;
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollEvent, EpollTimeout};
use wire::nullrpc::Header;

use crate::backpressure::Backlog;
use crate::common::{place, spin_until, AtomicCounters, Pre, Work};
use crate::dispatch_arch::{
    close_all, frame_bytes, listener_epoll, on_events, reply, Conns, DConn, Request,
};
use crate::{spawn, ServerError, Shared, StagedConfig, Started};

/// The class byte value of a delay-sensitive request (the load generator's class 0).
pub const DELAY_SENSITIVE_CLASS: u8 = 0;

/// Offset of the class byte in a request frame (the first payload byte).
pub const CLASS_OFFSET: usize = wire::nullrpc::HEADER_LEN;

/// The class of a request with this payload: its first byte, 0 when it has none.
pub fn request_class(payload: &[u8]) -> u8 {
    payload.first().copied().unwrap_or(DELAY_SENSITIVE_CLASS)
}

/// Whether a request with this payload is delay-sensitive (class [`DELAY_SENSITIVE_CLASS`]).
pub fn is_delay_sensitive(payload: &[u8]) -> bool {
    request_class(payload) == DELAY_SENSITIVE_CLASS
}

/// Writes `class` into an encoded request `frame` (one made by
/// `wire::nullrpc::encode_request`); false, and nothing written, if it has no payload.
pub fn set_request_class(frame: &mut [u8], class: u8) -> bool {
    match frame.get_mut(CLASS_OFFSET) {
        Some(b) => {
            *b = class;
            true
        }
        None => false,
    }
}

/// A request on its way through the stages.
struct Job {
    conn: Arc<DConn>,
    header: Header,
    payload: Vec<u8>,
    t1: Option<u64>,
    sensitive: bool,
    pre: Option<Pre>,
}

/// A two-class queue: delay-sensitive first when `priority`, otherwise one FIFO.
struct ClassQueue {
    priority: bool,
    high: VecDeque<Job>,
    low: VecDeque<Job>,
}

impl ClassQueue {
    fn new(priority: bool) -> Self {
        ClassQueue {
            priority,
            high: VecDeque::new(),
            low: VecDeque::new(),
        }
    }

    fn push(&mut self, j: Job) {
        if self.priority && j.sensitive {
            self.high.push_back(j);
        } else {
            self.low.push_back(j);
        }
    }

    fn pop(&mut self) -> Option<Job> {
        self.high.pop_front().or_else(|| self.low.pop_front())
    }

    fn is_empty(&self) -> bool {
        self.high.is_empty() && self.low.is_empty()
    }
}

/// A queue between two stages.
struct Link {
    q: Mutex<ClassQueue>,
    ready: Condvar,
}

impl Link {
    fn new(priority: bool) -> Self {
        Link {
            q: Mutex::new(ClassQueue::new(priority)),
            ready: Condvar::new(),
        }
    }

    /// False if the lock is poisoned.
    fn push(&self, j: Job) -> bool {
        let Ok(mut q) = self.q.lock() else {
            return false;
        };
        q.push(j);
        drop(q);
        self.ready.notify_one();
        true
    }

    /// The next job by the queue's discipline; None once the server stops.
    fn pop_wait(&self, shared: &Shared) -> Option<Job> {
        let mut q = self.q.lock().ok()?;
        loop {
            if shared.stop.is_set() {
                return None;
            }
            if let Some(j) = q.pop() {
                return Some(j);
            }
            q = self.ready.wait(q).ok()?;
        }
    }

    /// Wakes every waiter; taking the lock orders this after any waiter's stop check.
    fn wake_all(&self) {
        let _guard = self.q.lock();
        self.ready.notify_all();
    }
}

pub(crate) fn start(listener: TcpListener, shared: &Arc<Shared>) -> Result<Started, ServerError> {
    let ep = listener_epoll(&listener, shared)?;
    let sc = &shared.cfg.staged;
    let to_dispatch = Arc::new(Link::new(sc.priority));
    let to_workers = Arc::new(Link::new(sc.priority));
    // Every request from the moment stage 1 reads it until a worker takes it: stage 1's own
    // queue and both links.
    let backlog = Arc::new(Backlog::new(&shared.cfg.limits));
    let mut threads = Vec::new();
    let result = (|| {
        for i in 0..sc.workers {
            let (q, e, b, sh) = (
                Arc::clone(&to_workers),
                Arc::clone(&ep),
                Arc::clone(&backlog),
                Arc::clone(shared),
            );
            threads.push(spawn(format!("ts-worker-{i}"), move || {
                worker(&q, &e, &b, &sh)
            })?);
        }
        let (a, b, sh) = (
            Arc::clone(&to_dispatch),
            Arc::clone(&to_workers),
            Arc::clone(shared),
        );
        threads.push(spawn("ts-dispatch".into(), move || {
            dispatcher(&a, &b, &sh)
        })?);
        let (a, e, b, sh) = (
            Arc::clone(&to_dispatch),
            Arc::clone(&ep),
            Arc::clone(&backlog),
            Arc::clone(shared),
        );
        threads.push(spawn("ts-stack".into(), move || {
            stack(&listener, &e, &a, &b, &sh)
        })?);
        Ok(())
    })();
    let wake = move || {
        to_dispatch.wake_all();
        to_workers.wake_all();
        backlog.wake();
    };
    Started::finish(result, threads, shared, Box::new(wake))
}

/// Stage 1: reads and decodes, then spends T0 + L·mT on one request at a time, polling the
/// sockets again (without blocking) before each, so that new arrivals join the queue first.
/// While the backlog is full it reads nothing: it works off its own queue, then waits for
/// the workers to take half of the backlog.
fn stack(listener: &TcpListener, ep: &Epoll, out: &Link, backlog: &Backlog, shared: &Shared) {
    let _ = place(&shared.cfg);
    let sc: &StagedConfig = &shared.cfg.staged;
    let stamps = shared.cfg.stamps;
    let mut conns = Conns::new();
    let mut waiting = ClassQueue::new(sc.priority);
    let mut events = vec![EpollEvent::empty(); 64];
    // Reads are stopped for a full backlog (a stop is counted once, however long it lasts).
    let mut held = false;
    loop {
        let full = backlog.is_full();
        if full && !held {
            AtomicCounters::add(&shared.counters.queue_full_pauses, 1);
        }
        held = full;
        if full && waiting.is_empty() {
            if !backlog.wait_for_room(&shared.stop) {
                break;
            }
            held = false;
            continue;
        }
        if !full {
            let timeout = if waiting.is_empty() {
                EpollTimeout::NONE
            } else {
                EpollTimeout::ZERO
            };
            let n = match ep.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(_) => break,
            };
            let go_on = on_events(
                &events[..n],
                listener,
                ep,
                &mut conns,
                backlog,
                shared,
                &mut |d| {
                    waiting.push(Job {
                        sensitive: is_delay_sensitive(&d.payload),
                        conn: d.conn,
                        header: d.header,
                        payload: d.payload,
                        t1: d.t1,
                        pre: None,
                    })
                },
            );
            if !go_on {
                break;
            }
        }
        if shared.stop.is_set() {
            break;
        }
        if let Some(mut j) = waiting.pop() {
            let t2 = mono_now_ns();
            let t3 = spin_until(t2, sc.stack_cost_ns(j.payload.len()));
            if stamps && j.header.flags.want_stamps {
                j.pre = Some(Pre::new(j.t1, t2, t3));
            }
            if !out.push(j) {
                break;
            }
        }
    }
    close_all(ep, conns);
}

/// Stage 2: hands requests on, by the discipline of its input queue.
fn dispatcher(input: &Link, out: &Link, shared: &Shared) {
    let _ = place(&shared.cfg);
    while let Some(j) = input.pop_wait(shared) {
        if !out.push(j) {
            return;
        }
    }
}

/// Stage 3: spends R0 + k·mR, then answers.
/// Sleeps until CLOCK_MONOTONIC reaches `deadline` (retrying after signals); returns the time
/// read on waking (≥ `deadline`).
fn sleep_until(deadline: u64) -> u64 {
    let ts = libc::timespec {
        tv_sec: (deadline / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: clock_nanosleep with a valid timespec and a null remainder (TIMER_ABSTIME).
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        let now = mono_now_ns();
        if rc != libc::EINTR || now >= deadline {
            return now.max(deadline);
        }
    }
}

fn worker(input: &Link, ep: &Epoll, backlog: &Backlog, shared: &Shared) {
    if shared.cfg.staged.worker_sleep {
        // Wake as close to the deadline as the kernel can (default slack is 50 µs).
        // SAFETY: prctl with integer arguments only affects this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0);
        }
    }
    let _ = place(&shared.cfg);
    let work = Work::without_work(&shared.cfg);
    let cost = shared.cfg.staged.worker_cost_ns();
    while let Some(j) = input.pop_wait(shared) {
        backlog.remove(frame_bytes(&j.payload));
        let t4 = if shared.cfg.staged.worker_sleep {
            sleep_until(mono_now_ns().saturating_add(cost))
        } else {
            spin_until(mono_now_ns(), cost)
        };
        let req = Request {
            conn: &j.conn,
            header: &j.header,
            payload: &j.payload,
            pre: j.pre,
        };
        if !reply(req, t4, &work, ep, shared) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_live_in_the_first_payload_byte() {
        let mut f = Vec::new();
        wire::nullrpc::encode_request(&mut f, 7, 0, 40, Default::default()).unwrap();
        assert_eq!(request_class(&f[CLASS_OFFSET..]), 7);
        assert!(!is_delay_sensitive(&f[CLASS_OFFSET..]));
        assert!(set_request_class(&mut f, DELAY_SENSITIVE_CLASS));
        assert!(is_delay_sensitive(&f[CLASS_OFFSET..]));
        // The codec still accepts the labelled frame.
        assert!(matches!(
            wire::nullrpc::decode(&f).unwrap(),
            wire::nullrpc::Decoded::Frame { .. }
        ));
        let mut bare = Vec::new();
        wire::nullrpc::encode_request(&mut bare, 7, 0, 32, Default::default()).unwrap();
        assert!(!set_request_class(&mut bare, 1));
        assert!(is_delay_sensitive(&[]));
    }
}
