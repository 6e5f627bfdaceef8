//! The engine's fault handling: broken connections, timeouts, reconnects, error notes.

use super::{note_error, Down, Engine, St, FIFO_RESET_TIMEOUTS, MAX_BACKOFF_NS, MAX_RECONNECTS};
use crate::conn::ConnFail;
use crate::record::Outcome;

impl Engine<'_> {
    /// The connection broke: its outstanding requests fail, and it is retried later.
    pub(super) fn fail(&mut self, s: usize, why: &ConnFail) {
        self.note_error(why.to_string());
        let now = self.now();
        let inflight = std::mem::take(&mut self.slots[s].inflight);
        for (i, _) in inflight {
            if let Some(e) = self.win.get_mut(i).filter(|e| e.st == St::InFlight) {
                e.rec.outcome = Outcome::Error;
                e.st = St::Done;
                self.completed += 1;
            }
        }
        let slot = &mut self.slots[s];
        slot.live = 0;
        slot.zombies = 0;
        slot.closing = false;
        slot.parked = false;
        slot.conn.close();
        slot.down = Some(Down {
            next_try_ns: now + backoff_ns(0),
            attempts: 0,
        });
    }

    pub(super) fn expire(&mut self, now: u64) {
        let timeout = self.timeout_ns;
        let mut reset = Vec::new();
        let win = &mut self.win;
        for (s, slot) in self.slots.iter_mut().enumerate() {
            if self.carries_id {
                while let Some(&(i, _)) = slot.inflight.front() {
                    match win.get_mut(i) {
                        Some(e) if e.st == St::InFlight => {
                            if e.rec.sent_ns + timeout > now {
                                break;
                            }
                            e.rec.outcome = Outcome::Timeout;
                            e.st = St::Done;
                            self.completed += 1;
                            slot.live -= 1;
                            slot.inflight.pop_front();
                        }
                        // Answered (or already handed to the sink): forget it.
                        _ => {
                            slot.inflight.pop_front();
                        }
                    }
                }
            } else {
                while let Some(&(i, sent)) = slot.inflight.get(slot.zombies) {
                    if sent + timeout > now {
                        break;
                    }
                    // Not yet a zombie, so still in flight and in the window.
                    if let Some(e) = win.get_mut(i) {
                        e.rec.outcome = Outcome::Timeout;
                        e.st = St::Done;
                        self.completed += 1;
                    }
                    slot.live -= 1;
                    slot.zombies += 1;
                }
                if let Some(&(_, sent)) = slot.inflight.front().filter(|_| slot.zombies > 0) {
                    if sent.saturating_add(FIFO_RESET_TIMEOUTS.saturating_mul(timeout)) <= now {
                        reset.push(s);
                    }
                }
            }
        }
        // Retries wait for a usable connection; past the timeout they give up.
        while let Some(&i) = self.retry.front() {
            if let Some(e) = self.win.get_mut(i) {
                if e.rec.sent_ns + timeout > now {
                    break;
                }
                e.rec.outcome = Outcome::Timeout;
                e.st = St::Done;
                self.completed += 1;
            }
            self.retry.pop_front();
        }
        for s in 0..self.slots.len() {
            if !reset.contains(&s) {
                self.park_if_done(s);
            }
        }
        for s in reset {
            self.fail(
                s,
                &ConnFail::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "replies stopped on a FIFO-matched connection; reconnecting",
                )),
            );
        }
    }

    pub(super) fn reconnect(&mut self, now: u64) {
        let connect_timeout = self.connect_timeout();
        for s in 0..self.slots.len() {
            let due = self.slots[s]
                .down
                .as_ref()
                .is_some_and(|d| d.next_try_ns <= now);
            if !due {
                continue;
            }
            let at = host::tstamp::mono_now_ns();
            let slot = &mut self.slots[s];
            let addr = slot.addr;
            // Over TLS the handshake is finished by the loop, as for a parked connection's
            // reopen: shaking hands here would hold up the thread's sends by milliseconds.
            let res = slot
                .conn
                .reopen(addr, connect_timeout)
                .and_then(|()| match slot.conn.fd() {
                    Some(fd) => self.epoll.add(fd, s as u64),
                    None => Ok(()),
                });
            match res {
                Ok(()) => {
                    slot.down = None;
                    self.reopened_after_failure(s, at);
                }
                Err(e) => {
                    slot.conn.close();
                    let attempts = slot.down.as_ref().map_or(0, |d| d.attempts) + 1;
                    if attempts >= MAX_RECONNECTS {
                        slot.down = None;
                        slot.dead = true;
                        self.dead_slots += 1;
                    } else {
                        let t = host::tstamp::mono_now_ns().saturating_sub(self.start);
                        slot.down = Some(Down {
                            next_try_ns: t + backoff_ns(attempts),
                            attempts,
                        });
                    }
                    self.note_error(format!("reconnect to {addr}: {e}"));
                }
            }
        }
    }

    pub(super) fn collect_soft_errors(&mut self) {
        for s in 0..self.slots.len() {
            if let Some(e) = self.slots[s].conn.soft_error.take() {
                self.note_error(e);
            }
        }
    }

    pub(super) fn note_error(&mut self, msg: String) {
        note_error(&mut self.errors, msg);
    }
}

pub(super) fn backoff_ns(attempt: u32) -> u64 {
    (1_000_000u64 << attempt.min(20)).min(MAX_BACKOFF_NS)
}
