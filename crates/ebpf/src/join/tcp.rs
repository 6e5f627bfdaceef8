//! TCP: one connection's requests against its socket's arrivals, reads and writes (see the
//! parent module for the rules). Two passes over the requests the caller hands over: each
//! request's arrival and read, then each read's writes dealt out over the requests it
//! consumed — a read's requests are known only once all of them have been seen, because a
//! data-ready arrival can carry several requests (segments coalesced in the socket's
//! backlog while the server held its lock).

use std::collections::VecDeque;

use super::{end_of, runqueue, seq_le, stack_span, Matched, Miss, Request};
use crate::event::Event;

#[derive(Clone, Copy, Debug)]
pub(super) struct Arrival {
    pub ts: u64,
    pub seq: u32,
    /// The packet's receive stamp, monotonic (0: none).
    pub rx: u64,
}

/// A read, the requests given stamps from it so far and the writes that answer it: kept
/// across calls, as a read's requests may straddle two chunks.
#[derive(Debug)]
struct Group {
    read: Event,
    count: usize,
    writes: Vec<Event>,
    /// The first write of the last request given stamps (the next starts no earlier).
    first: usize,
}

#[derive(Default, Debug)]
pub(super) struct TcpConn {
    pub arrivals: VecDeque<Arrival>,
    pub reads: VecDeque<Event>,
    pub writes: VecDeque<Event>,
    carry: Option<Group>,
}

/// A request's arrival and read.
#[derive(Clone, Copy)]
struct Pick {
    arrival: Arrival,
    read: Event,
    /// The socket's next read with data (the end of this read's writes), if seen.
    next_read: Option<u64>,
}

fn same_read(a: &Event, b: &Event) -> bool {
    a.ts == b.ts && a.tid == b.tid && a.seq == b.seq
}

impl TcpConn {
    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.arrivals.is_empty()
            && self.reads.is_empty()
            && self.writes.is_empty()
            && self.carry.is_none()
    }

    /// Forgets a carried read before `horizon` (no request to come can have been read by
    /// it); returns the writes it held.
    pub fn prune_carry(&mut self, horizon: u64) -> usize {
        match &self.carry {
            Some(g) if g.read.ts < horizon => {
                let n = g.writes.len();
                self.carry = None;
                n
            }
            _ => 0,
        }
    }

    /// Stamps for `reqs` (one connection's, in send order): None for a request without a
    /// reply, else the match or why not. Also returns how many events left the queues.
    pub fn join(&mut self, reqs: &[Request]) -> (Vec<Option<Result<Matched, Miss>>>, usize) {
        let mut used = 0usize;
        let picks: Vec<Result<Pick, Miss>> = reqs
            .iter()
            .enumerate()
            .map(|(k, r)| {
                let next = reqs.get(k + 1).map_or(r.next_sent, |n| n.sent);
                self.pick(r, next, &mut used)
            })
            .collect();
        let mut out: Vec<Option<Result<Matched, Miss>>> = reqs
            .iter()
            .zip(&picks)
            .map(|(r, p)| match p {
                Err(m) if r.received > 0 => Some(Err(*m)),
                _ => None,
            })
            .collect();
        // Groups of consecutive requests read by one read.
        let mut k = 0;
        while k < reqs.len() {
            let Ok(first) = picks[k] else {
                k += 1;
                continue;
            };
            let mut members = vec![k];
            let mut e = k + 1;
            while e < reqs.len() {
                match &picks[e] {
                    Ok(p) if same_read(&p.read, &first.read) => members.push(e),
                    Ok(_) => break,
                    Err(_) => {}
                }
                e += 1;
            }
            self.answer(&first, &members, reqs, &picks, &mut out, &mut used);
            k = e;
        }
        (out, used)
    }

    /// A request's arrival (the last before the next request's send, else the first after
    /// its own, which later requests may share) and the read that consumed it.
    fn pick(&mut self, r: &Request, next: u64, used: &mut usize) -> Result<Pick, Miss> {
        while self.arrivals.front().is_some_and(|a| a.ts < r.sent) {
            self.arrivals.pop_front();
            *used += 1;
        }
        let mut arrival = None;
        while next > 0 && self.arrivals.front().is_some_and(|a| a.ts < next) {
            arrival = self.arrivals.pop_front();
            *used += 1;
        }
        let arrival = arrival
            .or_else(|| self.arrivals.front().copied())
            .filter(|a| r.received == 0 || a.ts <= r.received)
            .ok_or(Miss::Arrival)?;
        while self
            .reads
            .front()
            .is_some_and(|rd| !seq_le(arrival.seq, rd.seq))
        {
            self.reads.pop_front();
            *used += 1;
        }
        let read = self
            .reads
            .front()
            .copied()
            .filter(|rd| r.received == 0 || rd.ts <= r.received)
            .ok_or(Miss::Read)?;
        Ok(Pick {
            arrival,
            read,
            next_read: self.reads.get(1).map(|rd| rd.ts),
        })
    }

    /// Deals the writes between `p.read` and the socket's next read over the requests it
    /// consumed (`members`; with those given stamps from it in an earlier call first).
    fn answer(
        &mut self,
        p: &Pick,
        members: &[usize],
        reqs: &[Request],
        picks: &[Result<Pick, Miss>],
        out: &mut [Option<Result<Matched, Miss>>],
        used: &mut usize,
    ) {
        let read = p.read;
        let carried = self.carry.take().filter(|g| same_read(&g.read, &read));
        let (mut writes, offset, carried_first) = match carried {
            Some(g) => (g.writes, g.count, g.first),
            None => (Vec::new(), 0, 0),
        };
        while self.writes.front().is_some_and(|w| w.enter < read.ts) {
            self.writes.pop_front();
            *used += 1;
        }
        while let Some(w) = self.writes.front() {
            if p.next_read.is_some_and(|n| w.enter >= n) {
                break;
            }
            if let Some(w) = self.writes.pop_front() {
                writes.push(w);
                *used += 1;
            }
        }
        let m = offset + members.len();
        let w = writes.len();
        // Even shares, then each kept within what the client's receive allows (a reply was
        // written before it was read) and in order: replies differ in size, so a write may
        // carry more of them than an even share says.
        let mut floor = carried_first;
        for (j, &idx) in members.iter().enumerate() {
            let r = &reqs[idx];
            let Ok(pk) = &picks[idx] else {
                continue;
            };
            let i = offset + j;
            let (a, b) = if w >= m {
                (i * w / m, ((i + 1) * w / m).max(i * w / m + 1))
            } else {
                (i * w / m, i * w / m + 1)
            };
            let limit = if r.received == 0 {
                Some(w.saturating_sub(1))
            } else {
                writes.iter().rposition(|x| x.enter <= r.received)
            };
            let share = limit.filter(|_| w > 0).map(|last| {
                let a = a.max(floor).min(last);
                (a, b.min(last + 1).max(a + 1))
            });
            if let Some((a, _)) = share {
                floor = a;
            }
            if r.received == 0 {
                continue;
            }
            out[idx] = Some(match share {
                Some((a, b)) => {
                    let (start, end) = (writes[a].enter, end_of(&writes[b - 1]));
                    let t3 = read.ts;
                    let ready = pk.arrival.ts.min(t3);
                    let (t1, stack) = stack_span(r.sent, ready, pk.arrival.rx);
                    let t2 = ready.max(read.epoll).min(t3);
                    Ok(Matched {
                        stamps: [t1, t2, t3, start, start, end.max(start)],
                        stack,
                        runqueue_ns: runqueue(&read, ready),
                        pipelined: m > 1,
                    })
                }
                None => Err(Miss::Write),
            });
        }
        self.carry = Some(Group {
            read,
            count: m,
            writes,
            first: floor,
        });
    }
}
