//! Records stored while a run goes: chunks of columns per writer *stream* (one per load
//! generator thread), each chunk one row holding all its columns compressed.
//!
//! A long run never holds its records in memory: the load generator hands chunks to a writer
//! that calls [`Store::put_chunk`], and readers fetch chunk by chunk ([`Store::chunk`]),
//! merging the streams themselves (the order within a stream is the writer's; the store does
//! not interpret columns).
//!
//! A chunk's blob: `u16` column count, then per column a `u16` name length, the UTF-8 name,
//! a `u32` length and the column compressed by the `codec` module (little-endian).

use rusqlite::{params, OptionalExtension};

use crate::{codec, Columns, Store, StoreError};

/// How many chunks one stream of a run holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    pub stream: u32,
    pub chunks: u32,
    pub records: u64,
}

/// A chunk's blob (the format above), as [`Store::put_chunk`] stores it: also the wire
/// format of records streamed between tailscope processes (agents), so that there is one
/// encoding of records to trust.
pub fn encode(cols: &Columns) -> Result<Vec<u8>, StoreError> {
    let n = u16::try_from(cols.cols.len())
        .map_err(|_| StoreError::Corrupt("more than 65535 columns".into()))?;
    let mut out = Vec::new();
    out.extend_from_slice(&n.to_le_bytes());
    for (name, v) in &cols.cols {
        let nl = u16::try_from(name.len())
            .map_err(|_| StoreError::Corrupt(format!("column name too long: {name}")))?;
        out.extend_from_slice(&nl.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        let blob = codec::encode(v)?;
        let bl = u32::try_from(blob.len())
            .map_err(|_| StoreError::Corrupt("column blob over 4 GiB".into()))?;
        out.extend_from_slice(&bl.to_le_bytes());
        out.extend_from_slice(&blob);
    }
    Ok(out)
}

/// Columns of `len` records back from a blob written by [`encode`]. Damage (truncation, a
/// wrong record count, garbage) is [`StoreError::Corrupt`], never a panic, and memory stays
/// bounded by what `len` records can legitimately need.
pub fn decode(blob: &[u8], len: usize) -> Result<Columns, StoreError> {
    let bad = |m: &str| StoreError::Corrupt(format!("chunk: {m}"));
    let mut pos = 0usize;
    let mut take = |n: usize| -> Result<&[u8], StoreError> {
        let end = pos.checked_add(n).filter(|&e| e <= blob.len());
        let end = end.ok_or_else(|| bad("truncated"))?;
        let s = &blob[pos..end];
        pos = end;
        Ok(s)
    };
    let u16_of = |b: &[u8]| u16::from_le_bytes([b[0], b[1]]);
    let ncols = u16_of(take(2)?);
    let mut out = Columns::new(len);
    for _ in 0..ncols {
        let nl = u16_of(take(2)?) as usize;
        let name = std::str::from_utf8(take(nl)?)
            .map_err(|_| bad("column name is not UTF-8"))?
            .to_string();
        let b = take(4)?;
        let bl = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let v = codec::decode(take(bl)?, len)?;
        out.push_column(&name, v)?;
    }
    Ok(out)
}

impl Store {
    /// Stores chunk `seq` of `stream` of run `id` (replacing one stored under the same key)
    /// and adds its records to the run's count.
    pub fn put_chunk(
        &self,
        id: i64,
        stream: u32,
        seq: u32,
        cols: &Columns,
    ) -> Result<(), StoreError> {
        cols.validate()?;
        let len = i64::try_from(cols.len)
            .map_err(|_| StoreError::Corrupt("record count exceeds i64".into()))?;
        // Compress before taking the write lock, so other writers wait only for the insert.
        let blob = encode(cols)?;
        let tx = self.write_tx()?;
        let old: Option<i64> = tx
            .query_row(
                "SELECT len FROM chunks WHERE run_id = ?1 AND stream = ?2 AND seq = ?3",
                params![id, stream, seq],
                |r| r.get(0),
            )
            .optional()?;
        let n = tx.execute(
            "UPDATE runs SET requests = COALESCE(requests, 0) + ?2 WHERE id = ?1",
            params![id, len - old.unwrap_or(0)],
        )?;
        if n == 0 {
            return Err(StoreError::UnknownRun(id));
        }
        tx.execute(
            "INSERT OR REPLACE INTO chunks (run_id, stream, seq, len, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, stream, seq, len, blob],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The streams of run `id` that hold chunks, in stream order (empty when none).
    pub fn chunk_streams(&self, id: i64) -> Result<Vec<StreamInfo>, StoreError> {
        let mut q = self.conn.prepare(
            "SELECT stream, COUNT(*), SUM(len) FROM chunks WHERE run_id = ?1 GROUP BY stream ORDER BY stream",
        )?;
        let rows = q.query_map([id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (stream, chunks, records) = row?;
            let bad = || StoreError::Corrupt(format!("run {id}: chunk index"));
            out.push(StreamInfo {
                stream: u32::try_from(stream).map_err(|_| bad())?,
                chunks: u32::try_from(chunks).map_err(|_| bad())?,
                records: u64::try_from(records).map_err(|_| bad())?,
            });
        }
        Ok(out)
    }

    /// Chunk `seq` of `stream` of run `id`, or None.
    pub fn chunk(&self, id: i64, stream: u32, seq: u32) -> Result<Option<Columns>, StoreError> {
        let row: Option<(i64, Vec<u8>)> = self
            .conn
            .query_row(
                "SELECT len, data FROM chunks WHERE run_id = ?1 AND stream = ?2 AND seq = ?3",
                params![id, stream, seq],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((len, blob)) = row else {
            return Ok(None);
        };
        let len = usize::try_from(len)
            .map_err(|_| StoreError::Corrupt(format!("run {id}: chunk length {len}")))?;
        decode(&blob, len).map(Some).map_err(|e| match e {
            StoreError::Corrupt(m) => {
                StoreError::Corrupt(format!("run {id}, stream {stream}, chunk {seq}: {m}"))
            }
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NewRun;

    fn run(st: &Store) -> i64 {
        st.begin_run(&NewRun {
            kind: "run".into(),
            target: "t".into(),
            started_at: "2026-01-01T00:00:00.000Z".into(),
            config: serde_json::json!({}),
            host: serde_json::json!({}),
        })
        .unwrap()
    }

    fn cols(base: i64, n: usize) -> Columns {
        let mut c = Columns::new(n);
        c.push_column("intended_ns", (0..n as i64).map(|i| base + i * 7).collect())
            .unwrap();
        c.push_column("outcome", (0..n as i64).map(|i| i % 3).collect())
            .unwrap();
        c
    }

    #[test]
    fn chunks_round_trip_and_count_records() {
        let st = Store::open_in_memory().unwrap();
        let id = run(&st);
        st.put_chunk(id, 0, 0, &cols(0, 100)).unwrap();
        st.put_chunk(id, 0, 1, &cols(700, 50)).unwrap();
        st.put_chunk(id, 1, 0, &cols(3, 10)).unwrap();
        // Replacing a chunk replaces its count.
        st.put_chunk(id, 1, 0, &cols(3, 20)).unwrap();
        assert_eq!(st.get_run(id).unwrap().unwrap().requests, Some(170));
        let streams = st.chunk_streams(id).unwrap();
        assert_eq!(
            streams,
            vec![
                StreamInfo {
                    stream: 0,
                    chunks: 2,
                    records: 150
                },
                StreamInfo {
                    stream: 1,
                    chunks: 1,
                    records: 20
                }
            ]
        );
        let c = st.chunk(id, 0, 1).unwrap().unwrap();
        assert_eq!(c, cols(700, 50));
        assert!(st.chunk(id, 0, 2).unwrap().is_none());
        assert!(st.delete_run(id).unwrap());
        assert!(st.chunk_streams(id).unwrap().is_empty());
    }

    #[test]
    fn chunk_for_an_unknown_run_is_refused() {
        let st = Store::open_in_memory().unwrap();
        assert!(matches!(
            st.put_chunk(42, 0, 0, &cols(0, 3)),
            Err(StoreError::UnknownRun(42))
        ));
    }

    #[test]
    fn truncated_chunks_are_corrupt_not_a_panic() {
        let blob = encode(&cols(0, 10)).unwrap();
        for cut in [0, 1, 3, blob.len() / 2, blob.len() - 1] {
            assert!(decode(&blob[..cut], 10).is_err(), "cut at {cut}");
        }
        assert_eq!(decode(&blob, 10).unwrap(), cols(0, 10));
    }
}
