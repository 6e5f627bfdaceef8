//! Calibration (Tales of the Tail §3.2): saturate the target with a closed loop, measure
//! its peak throughput, and take the inverse as the amortised per-request service time.
//!
//! Closed loop needs no precise clock, so one thread drives all connections.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::conn::Conn;
use crate::engine::dur_ns;
use crate::error::LoadError;
use crate::protocol::{Protocol, Reply};
use crate::run::open_connections;
use crate::sys::Epoll;
use crate::target::Target;

/// A request unanswered this long is presumed lost (UDP) and replaced.
const LOST_AFTER_NS: u64 = 1_000_000_000;

/// Result of [`calibrate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// Replies per second during the measurement window (whole target, all workers).
    pub peak_rps: f64,
    /// 1 / peak_rps in ns: the amortised service time of one request on the whole target
    /// (multiply by the target's worker count for the per-worker service time).
    pub service_ns: f64,
    /// Replies counted in the measurement window.
    pub requests: u64,
    /// Length of the measurement window.
    pub duration_ns: u64,
}

struct Cal {
    conn: Conn,
    /// (id, sent at) of requests in flight, oldest first.
    out: VecDeque<(u64, u64)>,
}

fn conn_err(e: &dyn std::fmt::Display) -> LoadError {
    LoadError::Connection(e.to_string())
}

impl Cal {
    /// Reads the replies that arrived, retires the requests they answer, and returns how
    /// many were answered within `[from, end)` and whether the server announced a close.
    fn read(
        &mut self,
        replies: &mut Vec<(Reply, u64)>,
        from: u64,
        end: u64,
    ) -> Result<(u64, bool), LoadError> {
        replies.clear();
        let res = self
            .conn
            .read_replies(host::tstamp::mono_now_ns, |r, t, _| replies.push((r, t)));
        // A server that announced a close (HTTP keep-alive limit) may already have
        // closed: the caller reopens instead of failing the calibration.
        let closing = replies.iter().any(|(r, _)| r.closes);
        if !closing {
            res.map_err(|e| conn_err(&e))?;
        }
        let carries_id = self.conn.proto.carries_id();
        let mut counted = 0;
        for &(r, t) in replies.iter() {
            if r.is_follow_up() {
                continue;
            }
            let matched = if carries_id {
                match r
                    .id
                    .and_then(|id| self.out.iter().position(|&(i, _)| i == id))
                {
                    Some(p) => self.out.remove(p).is_some(),
                    None => false,
                }
            } else {
                self.out.pop_front().is_some()
            };
            if matched && t >= from && t < end {
                counted += 1;
            }
        }
        Ok((counted, closing))
    }

    /// Opens the connection again (watched by `epoll` as `tok`) after the server closed it;
    /// requests pipelined behind the closing reply were never processed.
    fn reopen(&mut self, target: &Target, epoll: &mut Epoll, tok: u64) -> Result<(), LoadError> {
        self.out.clear();
        self.conn
            .open(target.addr, Duration::from_secs(5))
            .map_err(|source| LoadError::Connect {
                addr: target.addr,
                source,
            })?;
        if let Some(fd) = self.conn.fd() {
            epoll
                .add(fd, tok)
                .map_err(|e| LoadError::io("epoll_ctl", e))?;
        }
        Ok(())
    }
}

/// Saturates `target` with `outstanding` requests in flight on each of `connections`
/// connections for `warmup + duration`, counting replies only after the warm-up.
pub fn calibrate(
    target: &Target,
    factory: &dyn Fn() -> Box<dyn Protocol>,
    connections: usize,
    outstanding: usize,
    duration: Duration,
    warmup: Duration,
    stop: &AtomicBool,
) -> Result<Calibration, LoadError> {
    if connections == 0 || outstanding == 0 {
        return Err(LoadError::Config(
            "calibration needs at least one connection and one outstanding request".into(),
        ));
    }
    if duration.is_zero() {
        return Err(LoadError::Config(
            "calibration duration must be positive".into(),
        ));
    }
    let conns = open_connections(target, &[], factory, connections, Duration::from_secs(5))?;
    let mut epoll = Epoll::new(connections).map_err(|e| LoadError::io("creating epoll", e))?;
    let mut cals: Vec<Cal> = Vec::with_capacity(connections);
    for (i, conn) in conns.into_iter().enumerate() {
        if let Some(fd) = conn.fd() {
            epoll
                .add(fd, i as u64)
                .map_err(|e| LoadError::io("epoll_ctl", e))?;
        }
        cals.push(Cal {
            conn,
            out: VecDeque::with_capacity(outstanding),
        });
    }
    let clock = host::tstamp::mono_now_ns;
    let t0 = clock();
    let measure_from = t0 + dur_ns(warmup);
    let end = measure_from + dur_ns(duration);
    let mut next_id = 0u64;
    let mut counted = 0u64;
    for c in &mut cals {
        top_up(c, outstanding, &mut next_id, clock()).map_err(|e| conn_err(&e))?;
    }
    let mut ready = Vec::new();
    let mut replies: Vec<(Reply, u64)> = Vec::new();
    let mut last_t = t0;
    loop {
        let now = clock();
        last_t = last_t.max(now);
        if now >= end || stop.load(Ordering::Relaxed) {
            break;
        }
        ready.clear();
        ready.extend(
            epoll
                .wait(1_000_000)
                .map_err(|e| LoadError::io("epoll_wait", e))?,
        );
        for &tok in &ready {
            let Some(c) = cals.get_mut(tok as usize) else {
                continue;
            };
            let (n, closing) = c.read(&mut replies, measure_from, end)?;
            counted += n;
            if closing {
                c.reopen(target, &mut epoll, tok)?;
            }
            top_up(c, outstanding, &mut next_id, clock()).map_err(|e| conn_err(&e))?;
        }
        // Replace requests that seem lost (datagrams), so the loop stays saturated.
        let now = clock();
        for c in &mut cals {
            while c
                .out
                .front()
                .is_some_and(|&(_, s)| s + LOST_AFTER_NS <= now)
            {
                c.out.pop_front();
            }
            top_up(c, outstanding, &mut next_id, now).map_err(|e| conn_err(&e))?;
        }
    }
    let window_end = last_t.min(end);
    let duration_ns = window_end.saturating_sub(measure_from);
    if counted == 0 || duration_ns == 0 {
        return Err(LoadError::NoReplies(target.addr));
    }
    let peak_rps = counted as f64 * 1e9 / duration_ns as f64;
    Ok(Calibration {
        peak_rps,
        service_ns: 1e9 / peak_rps,
        requests: counted,
        duration_ns,
    })
}

/// Refills the connection's window; all missing requests go out in one write.
fn top_up(
    c: &mut Cal,
    outstanding: usize,
    next_id: &mut u64,
    now: u64,
) -> Result<(), crate::conn::ConnFail> {
    if c.conn.has_pending_output() || c.out.len() >= outstanding {
        return Ok(());
    }
    while c.out.len() < outstanding {
        c.conn.queue(*next_id, 0);
        c.out.push_back((*next_id, now));
        *next_id += 1;
    }
    c.conn.flush()
}
