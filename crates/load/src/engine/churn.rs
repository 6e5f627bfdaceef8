//! Connection churn (Tales of the Tail §4.3's HTTP clients: each client opens a
//! connection, sends a random number of requests, and closes it), and the orderly close
//! a server announces (HTTP `Connection: close`). Both park the connection; the next
//! request that picks it reopens it.

use rand::Rng;

use super::{Engine, St};
use crate::record::Outcome;

impl Engine<'_> {
    /// At the start of a churn run every connection is parked, so that every client's
    /// first request pays its connect; quotas are drawn on each open.
    pub(super) fn start_churn(&mut self) {
        if self.churn.is_none() {
            return;
        }
        for s in 0..self.slots.len() {
            let slot = &mut self.slots[s];
            slot.conn.close();
            slot.parked = true;
        }
    }

    fn draw_quota(&mut self) -> u32 {
        match self.churn {
            Some((lo, hi)) => self.churn_rng.gen_range(lo.max(1)..=hi.max(lo.max(1))),
            None => u32::MAX,
        }
    }

    /// Opens a parked connection without waiting for the handshake (the request queued
    /// next goes out when it completes). `at_mono_ns`: the send stamp of the request that
    /// opens it (taken before the connect).
    pub(super) fn unpark(&mut self, s: usize, at_mono_ns: u64) -> std::io::Result<()> {
        let quota = self.draw_quota();
        let slot = &mut self.slots[s];
        slot.parked = false;
        slot.conn.open_nonblocking(slot.addr)?;
        if let Some(fd) = slot.conn.fd() {
            self.epoll.add(fd, s as u64)?;
        }
        self.on_opened(s, quota, at_mono_ns);
        Ok(())
    }

    /// Bookkeeping of every successful (re)open, begun at `at_mono_ns` (no later than any
    /// send stamp on the new socket).
    pub(super) fn on_opened(&mut self, s: usize, quota: u32, at_mono_ns: u64) {
        let slot = &mut self.slots[s];
        slot.sent_on_conn = 0;
        slot.quota = quota;
        slot.closing = false;
        self.connects += 1;
        self.report_connected(s, at_mono_ns);
    }

    /// A fresh quota for a connection reopened after a failure (begun at `at_mono_ns`).
    pub(super) fn reopened_after_failure(&mut self, s: usize, at_mono_ns: u64) {
        let quota = self.draw_quota();
        self.on_opened(s, quota, at_mono_ns);
    }

    /// Parks a connection whose quota is used up and whose requests are all answered or
    /// timed out.
    pub(super) fn park_if_done(&mut self, s: usize) {
        let slot = &self.slots[s];
        if !slot.parked && slot.conn.is_open() && slot.live == 0 && slot.sent_on_conn >= slot.quota
        {
            self.park(s);
        }
    }

    /// Closes a connection on purpose. Requests still out on it were pipelined behind a
    /// reply that announced the close, so the server never processed them: they are sent
    /// again on the next usable connection (as an HTTP client retries idempotent GETs).
    pub(super) fn park(&mut self, s: usize) {
        let inflight = std::mem::take(&mut self.slots[s].inflight);
        for (i, _) in inflight {
            if self.state(i) == St::InFlight {
                self.retry.push_back(i);
            }
        }
        let slot = &mut self.slots[s];
        slot.live = 0;
        slot.zombies = 0;
        slot.closing = false;
        slot.conn.close();
        slot.parked = true;
    }

    /// Sends the requests waiting for a retry, oldest first, while connections are
    /// usable, in the pass that began at `now`. Returns false when every connection is dead
    /// (the retries then fail).
    pub(super) fn send_retries(&mut self, now: u64) -> bool {
        if self.dead_slots == self.slots.len() {
            for i in std::mem::take(&mut self.retry) {
                if let Some(e) = self.win.get_mut(i) {
                    e.rec.outcome = Outcome::Error;
                    e.st = St::Done;
                    self.completed += 1;
                }
            }
            return false;
        }
        while let Some(&i) = self.retry.front() {
            let forced = self.forced_of(i);
            match self.pick(forced) {
                Some(s) => {
                    self.retry.pop_front();
                    self.transmit(i, s, false, now);
                }
                None => break,
            }
        }
        true
    }

    pub(super) fn connect_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.timeout_ns.clamp(1_000_000, 50_000_000))
    }
}
