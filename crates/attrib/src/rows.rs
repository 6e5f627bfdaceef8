//! Per-sample storage, and how a counter's growth enters it ([`Counter`], [`spread`]).
//!
//! The storage never moves what it holds: fixed-size chunks, one allocated every
//! [`CHUNK_ROWS`] rows. A single `Vec` per series would double now and then, and copying an
//! hour's worth of deltas (megabytes) inside one sample would show up as that sample's cost —
//! exactly the figure that tells the load generator how much slack a sample needs.

/// Rows per chunk: at a 10 ms interval a new chunk every ~5 s.
pub(crate) const CHUNK_ROWS: usize = 512;

#[derive(Debug)]
pub(crate) struct Rows<T> {
    width: usize,
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T: Copy + Default> Rows<T> {
    pub(crate) fn new(width: usize) -> Rows<T> {
        let mut rows = Rows {
            width: width.max(1),
            chunks: Vec::with_capacity(64),
            len: 0,
        };
        rows.add_chunk();
        rows
    }

    fn add_chunk(&mut self) {
        self.chunks
            .push(Vec::with_capacity(CHUNK_ROWS * self.width));
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Append a row of `T::default()`.
    pub(crate) fn push_default(&mut self) {
        // Every chunk so far is full.
        if self.len == self.chunks.len() * CHUNK_ROWS {
            self.add_chunk();
        }
        let width = self.width;
        if let Some(last) = self.chunks.last_mut() {
            last.resize(last.len() + width, T::default());
        }
        self.len += 1;
    }

    /// Row `i`; None past the end.
    pub(crate) fn get(&self, i: usize) -> Option<&[T]> {
        let chunk = self.chunks.get(i / CHUNK_ROWS)?;
        let at = (i % CHUNK_ROWS) * self.width;
        chunk.get(at..at + self.width)
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut [T]> {
        let chunk = self.chunks.get_mut(i / CHUNK_ROWS)?;
        let at = (i % CHUNK_ROWS) * self.width;
        chunk.get_mut(at..at + self.width)
    }

    /// Column `col` of every row, in order (for building the output once, at the end).
    pub(crate) fn column(&self, col: usize) -> Vec<T> {
        (0..self.len)
            .filter_map(|i| self.get(i).and_then(|r| r.get(col)).copied())
            .collect()
    }
}

/// A cumulative counter and the sample at which it was last read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counter {
    value: u64,
    read_at: Option<usize>,
}

impl Counter {
    /// The last reading, if any.
    pub(crate) fn value(&self) -> Option<u64> {
        self.read_at.map(|_| self.value)
    }

    /// Record a reading at sample `k`: the growth since the previous reading, and the sample
    /// that reading was taken at (None for the first reading).
    pub(crate) fn update(&mut self, value: u64, k: usize) -> Option<(usize, u64)> {
        let grown = self
            .read_at
            .map(|at| (at, value.saturating_sub(self.value)));
        self.value = value;
        self.read_at = Some(k);
        grown
    }
}

/// Add the growth `(from, delta)` (× `scale`) of a counter read again at sample `to` to
/// column `col` of intervals `from..to`, in proportion to their lengths (equally when the
/// sample instants coincide).
pub(crate) fn spread(
    rows: &mut Rows<f64>,
    times: &Rows<u64>,
    col: usize,
    (from, delta): (usize, u64),
    to: usize,
    scale: f64,
) {
    let amount = delta as f64 * scale;
    if amount == 0.0 || to <= from {
        return;
    }
    if to == from + 1 {
        if let Some(v) = rows.get_mut(from).and_then(|r| r.get_mut(col)) {
            *v += amount;
        }
        return;
    }
    let t = |i: usize| times.get(i).map_or(0, |r| r[0]);
    let span = t(to).saturating_sub(t(from));
    for i in from..to {
        let share = if span == 0 {
            amount / (to - from) as f64
        } else {
            amount * t(i + 1).saturating_sub(t(i)) as f64 / span as f64
        };
        if let Some(v) = rows.get_mut(i).and_then(|r| r.get_mut(col)) {
            *v += share;
        }
    }
}

/// Set column `col` of intervals `from..to` to total `amount`, keeping its shape: each
/// interval's value is scaled by `amount / sum`. A column with nothing in the span gets
/// `amount` [`spread`] by length.
pub(crate) fn rescale(
    rows: &mut Rows<f64>,
    times: &Rows<u64>,
    col: usize,
    (from, amount): (usize, u64),
    to: usize,
) {
    let sum: f64 = (from..to)
        .filter_map(|i| rows.get(i).and_then(|r| r.get(col)).copied())
        .sum();
    if sum <= 0.0 {
        for i in from..to {
            if let Some(v) = rows.get_mut(i).and_then(|r| r.get_mut(col)) {
                *v = 0.0;
            }
        }
        spread(rows, times, col, (from, amount), to, 1.0);
        return;
    }
    let f = amount as f64 / sum;
    for i in from..to {
        if let Some(v) = rows.get_mut(i).and_then(|r| r.get_mut(col)) {
            *v *= f;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_across_chunks_keep_their_place_and_values() {
        let mut r: Rows<u64> = Rows::new(3);
        let n = 2 * CHUNK_ROWS + 5;
        for i in 0..n {
            r.push_default();
            let row = r.get_mut(i).unwrap();
            row[0] = i as u64;
            row[2] = 2 * i as u64;
        }
        assert_eq!(r.len(), n);
        assert_eq!(r.chunks.len(), 3);
        // No chunk ever grew past its first allocation.
        assert!(r.chunks.iter().all(|c| c.capacity() == CHUNK_ROWS * 3));
        assert_eq!(
            r.get(CHUNK_ROWS).unwrap(),
            &[CHUNK_ROWS as u64, 0, 2 * CHUNK_ROWS as u64]
        );
        assert!(r.get(n).is_none());
        let c = r.column(2);
        assert_eq!(c.len(), n);
        assert_eq!(c[n - 1], 2 * (n as u64 - 1));
    }

    #[test]
    fn rescale_keeps_the_shape_and_sets_the_total() {
        let mut times: Rows<u64> = Rows::new(1);
        let mut rows: Rows<f64> = Rows::new(2);
        for (i, t) in [0u64, 10, 20, 40].iter().enumerate() {
            times.push_default();
            times.get_mut(i).unwrap()[0] = *t;
        }
        for v in [[1.0, 0.0], [3.0, 0.0], [0.0, 0.0]] {
            let i = rows.len();
            rows.push_default();
            rows.get_mut(i).unwrap().copy_from_slice(&v);
        }
        rescale(&mut rows, &times, 0, (0, 8), 3);
        assert_eq!(rows.column(0), vec![2.0, 6.0, 0.0]);
        // Nothing to shape it: by length (10, 10 and 20).
        rescale(&mut rows, &times, 1, (0, 8), 3);
        assert_eq!(rows.column(1), vec![2.0, 2.0, 4.0]);
    }
}
