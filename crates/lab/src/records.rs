//! A run's records on their way to the store and back: [`StoreSink`] takes the load
//! generator's chunks as the run goes (on the generator's writer thread, through its own
//! connection to the store file), and [`StoredRecords`] reads them back chunk by chunk, the
//! streams merged by intended time, for the analysis' passes and for exports.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;

use load::{Outcome, RecordSink, RequestRecord};
use store::{Columns, Store, StoreError};

/// Column names of a stored record, in order (`seen_ns` came with streamed runs: last, so
/// that exports keep the positions of the columns before it).
pub const COLUMNS: [&str; 14] = [
    "intended_ns",
    "sent_ns",
    "received_ns",
    "kernel_rx_ns",
    "conn",
    "class",
    "outcome",
    "t1_ns",
    "t2_ns",
    "t3_ns",
    "t4_ns",
    "t5_ns",
    "t6_ns",
    "seen_ns",
];

/// Outcome codes in the stored `outcome` column.
pub fn outcome_code(o: Outcome) -> i64 {
    match o {
        Outcome::Ok => 0,
        Outcome::Error => 1,
        Outcome::Timeout => 2,
        Outcome::Dropped => 3,
    }
}

fn outcome_of(code: i64) -> Option<Outcome> {
    Some(match code {
        0 => Outcome::Ok,
        1 => Outcome::Error,
        2 => Outcome::Timeout,
        3 => Outcome::Dropped,
        _ => return None,
    })
}

/// Records as named columns for the store.
pub fn to_columns(records: &[RequestRecord]) -> Result<Columns, StoreError> {
    let n = records.len();
    let mut c = Columns::new(n);
    let col = |f: &dyn Fn(&RequestRecord) -> i64| records.iter().map(f).collect::<Vec<i64>>();
    let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    c.push_column(COLUMNS[0], col(&|r| i(r.intended_ns)))?;
    c.push_column(COLUMNS[1], col(&|r| i(r.sent_ns)))?;
    c.push_column(COLUMNS[2], col(&|r| i(r.received_ns)))?;
    c.push_column(COLUMNS[3], col(&|r| i(r.kernel_rx_ns)))?;
    c.push_column(COLUMNS[4], col(&|r| i64::from(r.conn)))?;
    c.push_column(COLUMNS[5], col(&|r| i64::from(r.class)))?;
    c.push_column(COLUMNS[6], col(&|r| outcome_code(r.outcome)))?;
    for k in 0..6 {
        c.push_column(COLUMNS[7 + k], col(&|r| i(r.stamps[k])))?;
    }
    c.push_column(COLUMNS[13], col(&|r| i(r.seen_ns)))?;
    Ok(c)
}

/// Records back from named columns (a column a store version lacked reads as 0).
pub fn from_columns(c: &Columns) -> Result<Vec<RequestRecord>, StoreError> {
    let bad = |m: String| StoreError::Corrupt(m);
    let get = |name: &str| c.get(name);
    let zeros = vec![0i64; c.len];
    let col = |name: &str| get(name).unwrap_or(&zeros);
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    let intended = get("intended_ns").ok_or_else(|| bad("no intended_ns column".into()))?;
    let (seen, sent, recv, krx) = (
        col("seen_ns"),
        col("sent_ns"),
        col("received_ns"),
        col("kernel_rx_ns"),
    );
    let (conn, class, outcome) = (col("conn"), col("class"), col("outcome"));
    let t: Vec<&[i64]> = (1..=6).map(|k| col(&format!("t{k}_ns"))).collect();
    (0..c.len)
        .map(|j| {
            Ok(RequestRecord {
                intended_ns: u(intended[j]),
                seen_ns: u(seen[j]),
                sent_ns: u(sent[j]),
                received_ns: u(recv[j]),
                kernel_rx_ns: u(krx[j]),
                conn: u32::try_from(conn[j]).map_err(|_| bad(format!("conn {}", conn[j])))?,
                class: u8::try_from(class[j]).map_err(|_| bad(format!("class {}", class[j])))?,
                outcome: outcome_of(outcome[j])
                    .ok_or_else(|| bad(format!("outcome code {}", outcome[j])))?,
                stamps: [0, 1, 2, 3, 4, 5].map(|k| u(t[k][j])),
            })
        })
        .collect()
}

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

    fn rec(t: u64, thread: u32) -> RequestRecord {
        let mut r = RequestRecord::scheduled(t, (t % 3) as u8);
        r.seen_ns = t + 1;
        r.sent_ns = t + 2;
        r.received_ns = t + 50;
        r.kernel_rx_ns = t + 40;
        r.conn = thread;
        r.outcome = Outcome::Ok;
        r.stamps = [t + 10, t + 11, t + 12, t + 13, t + 14, 0];
        r
    }

    #[test]
    fn columns_round_trip() {
        let v: Vec<_> = (0..100).map(|t| rec(t * 1000, 1)).collect();
        assert_eq!(from_columns(&to_columns(&v).unwrap()).unwrap(), v);
    }

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
        let t0: Vec<_> = (0..50).map(|k| rec(2 * k, 0)).collect();
        let t1: Vec<_> = (0..50).map(|k| rec(2 * k + 1, 1)).collect();
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
