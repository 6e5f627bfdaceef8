//! [`Joiner`]: kernel events matched to client requests, giving each its T1..T6.
//!
//! Events are filed by connection — the client's port, which the server's socket knows as
//! its peer (TCP) or each datagram carries as its source (UDP) — and requests are presented
//! per connection in the order they were sent. On one host client and server read the same
//! CLOCK_MONOTONIC, so the client's send and receive stamps bound every server event of a
//! request: nothing of it happens before its send starts, and its reply's write starts
//! before the client has read the reply.
//!
//! **TCP.** The load engine writes each request in one write and queues nothing behind
//! unsent output, so a request reaches the server socket as a data-ready arrival between
//! its send and the next request's send (on loopback the receive runs inside the client's
//! write) — or a few when its write was split: the last of them gives the stamps and the stream
//! position (`rcv_nxt`) of the request's end. When the server held the socket at the time,
//! the segments wait in the socket's backlog, are coalesced, and reach it together when the
//! server lets go: one arrival, after both sends, carries several requests; a request with
//! no arrival in its window takes the first one after its send and shares it with the
//! requests after it. The read that consumed a request is the first whose `copied_seq`
//! reached its arrival's position — exact, whatever the timing. Several requests consumed by
//! one read are *pipelined*: the read's `m` requests share its T2 and T3, and the writes
//! between that read and the socket's next read carrying data (the server answers what one
//! read brought before reading again) are dealt out in order: with `w ≥ m` writes, request
//! `i` gets writes `⌊i·w/m⌋ .. ⌊(i+1)·w/m⌋` (memcached writes one reply per `sendmsg`, nginx
//! two: header and body); with `w < m` several share one (Redis answers a batch in one
//! `write`). Replies differ in size, so each share is then pulled back to the writes that
//! began before the client had the reply (and kept in order): a `sendmsg` carrying three
//! of four replies gives those three its stamps. A read's requests are counted among those presented together
//! ([`Joiner::join_conn`]); one whose requests straddle two calls (two chunks of records)
//! deals the first call's out as if they were all.
//!
//! **UDP.** Per datagram: the server's read of the connection's port whose first two
//! payload bytes are the request id (memcached's frame header), after the send; its arrival
//! is the datagram of that port and id queued on the socket between the send and the read;
//! the reply is the first write to that port with the same id after the read, and the
//! datagrams following it with the same id (a reply in several datagrams).
//!
//! The stamps: T1 the receive stamp of the packet that brought the request into the socket
//! (the stack's entry; without one, the arrival itself), the stack's end ([`Matched::stack`],
//! Tales' T2) the arrival in the socket, T2 the reading thread awake (its last return from
//! `epoll_wait` before the read, or the arrival when it was already awake), T3 the read's
//! return, T4 = T5 the start of the reply's write (the application's time is T3→T5), T6
//! its last packet handed to the device (the kernel's software transmit point), or the
//! write's return when no packet left inside the call. Always
//! T1 ≤ stack end ≤ T2 ≤ T3 ≤ T4 = T5 ≤ T6.
//!
//! Memory is bounded: the caller prunes events older than any request it can still present
//! ([`Joiner::prune`]), and beyond [`Joiner::new`]'s cap new events are dropped and counted.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use crate::event::{Event, Kind, Proto};

mod tcp;

use tcp::{Arrival, TcpConn};

/// How far ahead of a request the UDP matcher looks for its datagram.
const UDP_SCAN: usize = 64;

/// One client request, as the joiner needs it. Times are absolute CLOCK_MONOTONIC ns.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    pub proto: Proto,
    /// The client's local port.
    pub port: u16,
    pub sent: u64,
    /// The client's receive (0: no reply).
    pub received: u64,
    /// The next request's send on the same connection (0: not known yet).
    pub next_sent: u64,
    /// UDP: the request id it carried (None: do not check).
    pub rid: Option<u16>,
}

/// A matched request's stamps and what the scheduler said about its reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Matched {
    /// T1..T6, absolute CLOCK_MONOTONIC ns.
    pub stamps: [u64; 6],
    /// The end of the protocol stack, the data queued on the socket (Tales' T2), absolute
    /// CLOCK_MONOTONIC ns; 0 when the packet carried no receive stamp, and T1 is then this
    /// instant (the split of T1→T2 into stack and wake-up is not known).
    pub stack: u64,
    /// The reading thread was woken for it (it slept in epoll_wait): from its wake-up to
    /// running on a CPU, ns.
    pub runqueue_ns: Option<u64>,
    /// The read took more than one request (pipelined).
    pub pipelined: bool,
}

/// Why a request found no stamps, and what the joiner held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JoinStats {
    pub requests: u64,
    pub matched: u64,
    pub pipelined: u64,
    /// No arrival (TCP) or datagram read (UDP) of the connection within the request's span.
    pub no_arrival: u64,
    /// No read consumed the arrival.
    pub no_read: u64,
    /// No write answered the read.
    pub no_write: u64,
    /// UDP: the datagram's arrival in the socket was not seen; T1 = T2.
    pub t1_missing: u64,
    /// Matched, but the packet carried no usable receive stamp (none, or one outside the
    /// request's send → data-ready span by more than [`RX_SLACK_NS`]): T1 is the data-ready
    /// instant and the protocol stack is not split from the wake-up.
    pub stack_entry_missing: u64,
    /// Events dropped because the joiner was full.
    pub overflow: u64,
    /// Most events held at once.
    pub held_max: u64,
}

/// How far a packet's receive stamp may fall outside its request's send → data-ready span
/// and still be used (clamped into it): the realtime → monotonic mapping is good to its
/// bracket (about a µs) and NTP slewing moves it by ≤ 500 ppm between samples.
pub const RX_SLACK_NS: u64 = 20_000;

/// T1 and the stack's end from an arrival at `ready` (data-ready) whose packet was stamped
/// `rx` (monotonic, 0: none), for a request sent at `sent`: (T1, stack end), the stack's end
/// 0 when `rx` is unusable and T1 is `ready`.
pub fn stack_span(sent: u64, ready: u64, rx: u64) -> (u64, u64) {
    if rx == 0 || rx.saturating_add(RX_SLACK_NS) < sent || rx > ready.saturating_add(RX_SLACK_NS) {
        return (ready, 0);
    }
    (rx.clamp(sent.min(ready), ready), ready)
}

/// `a` is at or before `b` in a sequence space that wraps.
pub(super) fn seq_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

#[derive(Default, Debug)]
struct UdpConn {
    /// (arrival time, request id, receive stamp) of each datagram queued on a server socket.
    arrivals: VecDeque<(u64, u16, u64)>,
    reads: VecDeque<Event>,
    writes: VecDeque<Event>,
}

/// The kernel events of a run, waiting for their requests.
#[derive(Debug)]
pub struct Joiner {
    tcp: HashMap<u16, TcpConn>,
    udp: HashMap<u16, UdpConn>,
    held: usize,
    cap: usize,
    stats: JoinStats,
}

pub(super) fn end_of(w: &Event) -> u64 {
    if w.tx >= w.enter && w.tx > 0 && w.tx <= w.ts {
        w.tx
    } else {
        w.ts
    }
}

/// The run-queue wait of a reader woken for a request that arrived at `t1`.
pub(super) fn runqueue(read: &Event, t1: u64) -> Option<u64> {
    let (w, c) = (read.wakeup, read.oncpu);
    (w >= t1 && c >= w && c <= read.enter && read.epoll >= c).then(|| c - w)
}

impl Joiner {
    /// A joiner holding at most `cap` events.
    pub fn new(cap: usize) -> Joiner {
        Joiner {
            tcp: HashMap::new(),
            udp: HashMap::new(),
            held: 0,
            cap,
            stats: JoinStats::default(),
        }
    }

    pub fn stats(&self) -> JoinStats {
        self.stats
    }

    /// Events held now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Files one event under its connection.
    pub fn push(&mut self, e: Event) {
        if e.rport == 0 {
            return; // a listening socket's, or one without a peer
        }
        if self.held >= self.cap {
            self.stats.overflow += 1;
            return;
        }
        match (e.proto, e.kind) {
            (Proto::Tcp, Kind::Arrival) => {
                self.tcp
                    .entry(e.rport)
                    .or_default()
                    .arrivals
                    .push_back(Arrival {
                        ts: e.ts,
                        seq: e.seq,
                        rx: e.rx,
                    });
            }
            (Proto::Tcp, Kind::Read) => self.tcp.entry(e.rport).or_default().reads.push_back(e),
            (Proto::Tcp, Kind::Write) => self.tcp.entry(e.rport).or_default().writes.push_back(e),
            (Proto::Udp, Kind::Read) => self.udp.entry(e.rport).or_default().reads.push_back(e),
            (Proto::Udp, Kind::Write) => self.udp.entry(e.rport).or_default().writes.push_back(e),
            (Proto::Udp, Kind::Arrival) => self
                .udp
                .entry(e.rport)
                .or_default()
                .arrivals
                .push_back((e.ts, e.rid, e.rx)),
        }
        self.held += 1;
        self.stats.held_max = self.stats.held_max.max(self.held as u64);
    }

    /// Drops every event before `horizon` (absolute ns): no request still to come can own
    /// one (each is after its request's send, and every request sent before the horizon has
    /// been presented).
    pub fn prune(&mut self, horizon: u64) {
        let mut dropped = 0usize;
        fn front_before<T>(q: &mut VecDeque<T>, horizon: u64, ts: impl Fn(&T) -> u64) -> usize {
            let mut n = 0;
            while q.front().is_some_and(|x| ts(x) < horizon) {
                q.pop_front();
                n += 1;
            }
            n
        }
        self.tcp.retain(|_, c| {
            dropped += front_before(&mut c.arrivals, horizon, |a| a.ts);
            dropped += front_before(&mut c.reads, horizon, |e| e.ts);
            dropped += front_before(&mut c.writes, horizon, |e| e.enter);
            dropped += c.prune_carry(horizon);
            !c.is_empty()
        });
        self.udp.retain(|_, c| {
            dropped += front_before(&mut c.arrivals, horizon, |a| a.0);
            dropped += front_before(&mut c.reads, horizon, |e| e.ts);
            dropped += front_before(&mut c.writes, horizon, |e| e.enter);
            !(c.arrivals.is_empty() && c.reads.is_empty() && c.writes.is_empty())
        });
        self.held = self.held.saturating_sub(dropped);
    }

    /// The stamps of one request; requests of a connection must come in the order they were
    /// sent. Prefer [`Joiner::join_conn`] with all of a connection's requests at hand.
    pub fn join(&mut self, r: &Request) -> Option<Matched> {
        self.join_conn(std::slice::from_ref(r)).pop().flatten()
    }

    /// The stamps of one connection's requests, given in the order they were sent (one
    /// call's requests after the previous call's). Requests without a reply get None and
    /// count for nothing, but are best presented too: a read may have consumed them with
    /// others, and its writes are dealt out over all of them.
    pub fn join_conn(&mut self, reqs: &[Request]) -> Vec<Option<Matched>> {
        let Some(first) = reqs.first() else {
            return Vec::new();
        };
        let results: Vec<Option<Result<Matched, Miss>>> = match first.proto {
            Proto::Tcp => match self.tcp.get_mut(&first.port) {
                Some(c) => {
                    let (out, used) = c.join(reqs);
                    self.held = self.held.saturating_sub(used);
                    out
                }
                None => reqs
                    .iter()
                    .map(|r| (r.received > 0).then_some(Err(Miss::Arrival)))
                    .collect(),
            },
            Proto::Udp => reqs
                .iter()
                .map(|r| (r.received > 0).then(|| self.join_udp(r)))
                .collect(),
        };
        results
            .into_iter()
            .map(|res| {
                let res = res?;
                self.stats.requests += 1;
                match res {
                    Ok(m) => {
                        self.stats.matched += 1;
                        self.stats.stack_entry_missing += u64::from(m.stack == 0);
                        self.stats.pipelined += u64::from(m.pipelined);
                        Some(m)
                    }
                    Err(Miss::Arrival) => {
                        self.stats.no_arrival += 1;
                        None
                    }
                    Err(Miss::Read) => {
                        self.stats.no_read += 1;
                        None
                    }
                    Err(Miss::Write) => {
                        self.stats.no_write += 1;
                        None
                    }
                }
            })
            .collect()
    }

    fn join_udp(&mut self, r: &Request) -> Result<Matched, Miss> {
        let c = self.udp.get_mut(&r.port).ok_or(Miss::Arrival)?;
        let mut used = 0usize;
        while c.reads.front().is_some_and(|e| e.ts < r.sent) {
            c.reads.pop_front();
            used += 1;
        }
        let want = |e: &Event| r.rid.is_none() || r.rid == Some(e.rid);
        let pos = c
            .reads
            .iter()
            .take(UDP_SCAN)
            .take_while(|e| e.ts <= r.received)
            .position(want);
        let Some(pos) = pos else {
            self.held -= used;
            return Err(Miss::Arrival);
        };
        let read = if r.rid.is_some() {
            // Only our read: a server whose threads share the socket (memcached's workers)
            // may read the next request's datagram before ours, and its read event can come
            // first in the ring. Those left in front go once a later request's send passes
            // them, or with the horizon.
            used += 1;
            c.reads.remove(pos)
        } else {
            // Without ids, reads before ours are of earlier requests whose replies were
            // lost or late.
            let mut read = None;
            for _ in 0..=pos {
                read = c.reads.pop_front();
                used += 1;
            }
            read
        };
        let Some(read) = read else {
            self.held -= used;
            return Err(Miss::Arrival);
        };
        let t3 = read.ts;
        let pos = c
            .writes
            .iter()
            .take(UDP_SCAN)
            .position(|w| w.enter >= t3 && want(w) && w.enter <= r.received);
        let Some(pos) = pos else {
            self.held -= used;
            return Err(Miss::Write);
        };
        let first = c.writes.remove(pos);
        used += 1;
        let Some(first) = first else {
            self.held -= used;
            return Err(Miss::Write);
        };
        let mut last = first;
        // The rest of a reply sent as several datagrams.
        while let Some(w) = c.writes.get(pos) {
            if w.rid != first.rid || r.rid.is_none() {
                break;
            }
            if let Some(w) = c.writes.remove(pos) {
                last = w;
                used += 1;
            }
        }
        // Its arrival: the datagram with its id queued after the send, before the read.
        while c.arrivals.front().is_some_and(|a| a.0 < r.sent) {
            c.arrivals.pop_front();
            used += 1;
        }
        let at = c
            .arrivals
            .iter()
            .take(UDP_SCAN)
            .take_while(|a| a.0 <= t3)
            .position(|a| r.rid.is_none() || r.rid == Some(a.1));
        let arrival = at.and_then(|p| c.arrivals.remove(p));
        used += usize::from(arrival.is_some());
        self.held -= used;
        let (t1, stack) = match arrival {
            Some((ts, _, rx)) => stack_span(r.sent, ts.min(t3), rx),
            None => {
                self.stats.t1_missing += 1;
                (t3.min(read.epoll.max(read.enter)), 0)
            }
        };
        let ready = stack.max(t1);
        let t2 = ready.max(read.epoll).min(t3);
        let start = first.enter;
        Ok(Matched {
            stamps: [t1, t2, t3, start, start, end_of(&last).max(start)],
            stack,
            runqueue_ns: runqueue(&read, ready),
            pipelined: false,
        })
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Miss {
    Arrival,
    Read,
    Write,
}

#[cfg(test)]
mod tests;
