//! Which of the slow reads a sample makes: they are spread over the cycle of
//! [`SamplerConfig::slow_every`](crate::SamplerConfig::slow_every) samples instead of all
//! falling into one *full* sample.
//!
//! A slow read is a *piece*: /proc/stat, re-listing the server's task directories,
//! /proc/interrupts, or one thread's status. Each piece is read once per cycle, so each
//! counter keeps the resolution it had (one reading every `slow_every` samples), but no sample
//! reads more than its share: with `p` pieces and a cycle of `s` samples, piece `j` falls in
//! slot `⌊j·s/p⌋` — at most one piece per sample while `p ≤ s`, evenly more when the server has
//! more threads than the cycle has samples.

/// One slow read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// /proc/stat: steal and busy time of the server's CPUs (and the system-wide interrupt
    /// count in the lean mode).
    Stat,
    /// Re-list the server processes' task directories.
    Rescan,
    /// /proc/interrupts (per-CPU hard interrupts; not a piece when a cheaper per-CPU source
    /// is read in every sample instead).
    Interrupts,
    /// Thread `i`'s status (context switches), in the probe's task order.
    Status(usize),
}

/// The pieces of one cycle, in slot order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pieces {
    /// Whether /proc/interrupts is one of them.
    pub interrupts: bool,
    pub threads: usize,
}

impl Pieces {
    pub(crate) fn count(&self) -> usize {
        2 + usize::from(self.interrupts) + self.threads
    }

    pub(crate) fn get(&self, j: usize) -> Piece {
        let fixed = 2 + usize::from(self.interrupts);
        match j {
            0 => Piece::Stat,
            1 => Piece::Rescan,
            2 if self.interrupts => Piece::Interrupts,
            _ => Piece::Status(j - fixed),
        }
    }

    /// The pieces (as a range of indices) that sample `k` of a cycle of `every` samples reads;
    /// sample `k` is in slot `k mod every`, so the slot of /proc/stat (0) comes every
    /// `every`-th sample, as the full sample used to.
    pub(crate) fn slot(&self, k: usize, every: u32) -> std::ops::Range<usize> {
        let s = every.max(1) as usize;
        let p = self.count();
        let pos = k % s;
        // Piece j is in slot ⌊j·s/p⌋: the first piece of slot `pos` is ⌈pos·p/s⌉.
        let first = |pos: usize| (pos * p).div_ceil(s);
        first(pos)..first(pos + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(p: Pieces, every: u32) -> Vec<Vec<Piece>> {
        (0..every as usize)
            .map(|k| p.slot(k, every).map(|j| p.get(j)).collect())
            .collect()
    }

    #[test]
    fn every_piece_is_read_once_per_cycle_and_at_most_one_per_sample_when_they_fit() {
        let p = Pieces {
            interrupts: true,
            threads: 5,
        };
        let s = slots(p, 10);
        assert!(s.iter().all(|v| v.len() <= 1), "{s:?}");
        let all: Vec<Piece> = s.into_iter().flatten().collect();
        assert_eq!(all.len(), 8);
        assert_eq!(&all[..3], &[Piece::Stat, Piece::Rescan, Piece::Interrupts]);
        assert_eq!(
            &all[3..],
            &(0..5).map(Piece::Status).collect::<Vec<_>>()[..]
        );
        // /proc/stat in slot 0, i.e. at samples 10, 20, …
        assert_eq!(p.slot(10, 10), 0..1);
        assert_eq!(p.slot(20, 10), 0..1);
    }

    #[test]
    fn more_pieces_than_samples_are_shared_out_evenly() {
        let p = Pieces {
            interrupts: false,
            threads: 20,
        };
        let s = slots(p, 10);
        let lens: Vec<usize> = s.iter().map(Vec::len).collect();
        assert!(lens.iter().all(|&n| n == 2 || n == 3), "{lens:?}");
        assert_eq!(lens.iter().sum::<usize>(), 22);
        // A cycle of one sample reads everything every time.
        assert_eq!(p.slot(7, 1), 0..22);
        assert_eq!(p.slot(0, 0), 0..22);
    }
}
