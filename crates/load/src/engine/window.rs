//! The engine's window over its schedule: the requests drawn and not yet handed to the sink,
//! indexed by their thread-local sequence number.
//!
//! A request enters when it falls due (the generator draws the schedule lazily) and leaves,
//! in order, once it and every request before it are done (answered, failed, timed out or
//! dropped). So the window holds the requests in flight, those held in the client for a free
//! connection, and the done ones behind the oldest unfinished request: all bounded by the
//! rate times the timeout, whatever the run's length.

use std::collections::VecDeque;

use crate::record::RequestRecord;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum St {
    Unsent,
    InFlight,
    Done,
}

/// One request in the window.
pub(crate) struct Entry {
    pub rec: RequestRecord,
    pub st: St,
    /// Local slot a trace assigned it, or u32::MAX for any.
    pub forced: u32,
}

#[derive(Default)]
pub(crate) struct Window {
    /// Sequence number of `q[0]`.
    base: u64,
    q: VecDeque<Entry>,
}

impl Window {
    /// Sequence number the next pushed request gets.
    pub fn end(&self) -> u64 {
        self.base + self.q.len() as u64
    }

    pub fn get(&self, i: u64) -> Option<&Entry> {
        i.checked_sub(self.base)
            .and_then(|k| self.q.get(usize::try_from(k).ok()?))
    }

    pub fn get_mut(&mut self, i: u64) -> Option<&mut Entry> {
        let k = usize::try_from(i.checked_sub(self.base)?).ok()?;
        self.q.get_mut(k)
    }

    pub fn push(&mut self, e: Entry) -> u64 {
        self.q.push_back(e);
        self.end() - 1
    }

    /// Takes the oldest request if it is done.
    pub fn pop_done(&mut self) -> Option<RequestRecord> {
        if self.q.front()?.st != St::Done {
            return None;
        }
        self.base += 1;
        self.q.pop_front().map(|e| e.rec)
    }

    /// Every request from `from` on (sequence numbers).
    pub fn iter_from_mut(&mut self, from: u64) -> impl Iterator<Item = &mut Entry> {
        let skip = from.saturating_sub(self.base) as usize;
        self.q.iter_mut().skip(skip)
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.q.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(t: u64) -> Entry {
        Entry {
            rec: RequestRecord::scheduled(t, 0),
            st: St::Unsent,
            forced: u32::MAX,
        }
    }

    #[test]
    fn leaves_in_order_once_done() {
        let mut w = Window::default();
        for t in 0..3 {
            assert_eq!(w.push(entry(t)), t);
        }
        w.get_mut(1).unwrap().st = St::Done;
        assert!(w.pop_done().is_none(), "the oldest is not done");
        w.get_mut(0).unwrap().st = St::Done;
        assert_eq!(w.pop_done().unwrap().intended_ns, 0);
        assert_eq!(w.pop_done().unwrap().intended_ns, 1);
        assert!(w.pop_done().is_none());
        assert!(w.get(1).is_none(), "gone");
        assert_eq!(w.get(2).unwrap().rec.intended_ns, 2);
        assert_eq!(w.end(), 3);
    }
}
