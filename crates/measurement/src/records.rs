//! A run's records on their way to the store and back: [`StoreSink`] takes the load
//! generator's chunks as the run goes (on the generator's writer thread, through its own
//! connection to the store file), and [`StoredRecords`] reads them back chunk by chunk, the
//! streams merged by intended time, for the analysis' passes and for exports.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;

use load::{RecordSink, RequestRecord};
use store::{Columns, Store, StoreError};

pub use ::agents::columns::{from_columns, outcome_code, to_columns, COLUMNS};

/// Writes each chunk of a run's records into the store as it comes (one stream per load
/// generator thread), through a connection of its own (it runs on the writer thread).
pub struct StoreSink {
    store: Store,
    run_id: i64,
    next_seq: Vec<u32>,
}

impl StoreSink {
    pub fn open(path: &Path, run_id: i64) -> Result<StoreSink, StoreError> {
        Ok(StoreSink {
            store: Store::open(path)?,
            run_id,
            next_seq: Vec::new(),
        })
    }
}

impl RecordSink for StoreSink {
    fn write(&mut self, thread: usize, records: &[RequestRecord]) -> Result<(), String> {
        if self.next_seq.len() <= thread {
            self.next_seq.resize(thread + 1, 0);
        }
        let seq = self.next_seq[thread];
        let cols = to_columns(records).map_err(|e| e.to_string())?;
        let stream = u32::try_from(thread).map_err(|_| "too many streams".to_string())?;
        self.store
            .put_chunk(self.run_id, stream, seq, &cols)
            .map_err(|e| e.to_string())?;
        self.next_seq[thread] = seq + 1;
        Ok(())
    }
}

/// A stored run's records, read back in intended-time order: its chunk streams merged, one
/// chunk per stream in memory at a time (runs stored whole, before streaming, are read whole).
pub struct StoredRecords<'a> {
    store: &'a Store,
    run_id: i64,
}

impl<'a> StoredRecords<'a> {
    pub fn new(store: &'a Store, run_id: i64) -> Self {
        StoredRecords { store, run_id }
    }

    /// Calls `f` on every record in intended order; Ok(false) when the run kept none.
    pub fn for_each(&self, f: &mut dyn FnMut(&RequestRecord)) -> Result<bool, StoreError> {
        let streams = self.store.chunk_streams(self.run_id)?;
        if streams.is_empty() {
            let Some(cols) = self.store.columns(self.run_id)? else {
                return Ok(false);
            };
            from_columns(&cols)?.iter().for_each(f);
            return Ok(true);
        }
        struct Cursor {
            stream: u32,
            chunks: u32,
            seq: u32,
            recs: Vec<RequestRecord>,
            pos: usize,
        }
        let load = |c: &mut Cursor| -> Result<bool, StoreError> {
            while c.seq < c.chunks {
                let cols = self
                    .store
                    .chunk(self.run_id, c.stream, c.seq)?
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!(
                            "run {}: stream {} lacks chunk {}",
                            self.run_id, c.stream, c.seq
                        ))
                    })?;
                c.seq += 1;
                c.recs = from_columns(&cols)?;
                c.pos = 0;
                if !c.recs.is_empty() {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        let mut cursors = Vec::new();
        let mut heap = BinaryHeap::new();
        for s in streams {
            let mut c = Cursor {
                stream: s.stream,
                chunks: s.chunks,
                seq: 0,
                recs: Vec::new(),
                pos: 0,
            };
            if load(&mut c)? {
                heap.push(Reverse((c.recs[0].intended_ns, cursors.len())));
                cursors.push(c);
            }
        }
        while let Some(Reverse((_, k))) = heap.pop() {
            let c = &mut cursors[k];
            f(&c.recs[c.pos]);
            c.pos += 1;
            if c.pos < c.recs.len() || load(c)? {
                heap.push(Reverse((c.recs[c.pos].intended_ns, k)));
            }
        }
        Ok(true)
    }
}

impl StoredRecords<'_> {
    /// Every record in intended order, as columns in batches of at most `batch` records;
    /// Ok(false) when the run kept none. Stops at the first error `f` returns.
    pub fn batches(
        &self,
        batch: usize,
        f: &mut dyn FnMut(&Columns) -> Result<(), StoreError>,
    ) -> Result<bool, StoreError> {
        let mut buf: Vec<RequestRecord> = Vec::with_capacity(batch.max(1));
        let mut err = None;
        let kept = self.for_each(&mut |r| {
            if err.is_some() {
                return;
            }
            buf.push(*r);
            if buf.len() >= batch.max(1) {
                if let Err(e) = to_columns(&buf).and_then(|c| f(&c)) {
                    err = Some(e);
                }
                buf.clear();
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if !buf.is_empty() {
            f(&to_columns(&buf)?)?;
        }
        Ok(kept)
    }

    /// Every record as one set of columns (JSON exports; the whole run in memory).
    pub fn all_columns(&self) -> Result<Option<Columns>, StoreError> {
        let mut all: Vec<RequestRecord> = Vec::new();
        let kept = self.for_each(&mut |r| all.push(*r))?;
        Ok(if kept { Some(to_columns(&all)?) } else { None })
    }
}

impl analysis::Records for StoredRecords<'_> {
    fn visit(&mut self, f: &mut dyn FnMut(&RequestRecord)) -> Result<(), String> {
        self.for_each(f).map(|_| ()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_merge_back_in_intended_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.db");
        let st = Store::open(&path).unwrap();
        let id = st
            .begin_run(&store::NewRun {
                kind: "run".into(),
                target: "t".into(),
                started_at: store::now_rfc3339(),
                config: serde_json::json!({}),
                host: serde_json::json!({}),
            })
            .unwrap();
        let mut sink = StoreSink::open(&path, id).unwrap();
        // Thread 0 has the even times, thread 1 the odd ones, in chunks of uneven sizes.
        let t0: Vec<_> = (0..50).map(|k| RequestRecord::fixture(2 * k, 0)).collect();
        let t1: Vec<_> = (0..50)
            .map(|k| RequestRecord::fixture(2 * k + 1, 1))
            .collect();
        sink.write(1, &t1[..7]).unwrap();
        sink.write(0, &t0[..30]).unwrap();
        sink.write(1, &t1[7..]).unwrap();
        sink.write(0, &t0[30..]).unwrap();
        let mut seen = Vec::new();
        assert!(StoredRecords::new(&st, id)
            .for_each(&mut |r| seen.push(r.intended_ns))
            .unwrap());
        assert_eq!(seen, (0..100).collect::<Vec<u64>>());
        assert_eq!(st.get_run(id).unwrap().unwrap().requests, Some(100));
    }
}
