//! Exports of a stored run: CSV (records only) and JSON (run and records).

use std::io::{BufWriter, Write};

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::{Columns, RunRow, StoreError};

/// Writes `cols` as CSV: a header row of column names, then one row per record.
pub fn export_csv(cols: &Columns, w: &mut impl Write) -> Result<(), StoreError> {
    cols.validate()?;
    let mut w = BufWriter::new(w);
    export_csv_header(cols.names(), &mut w)?;
    export_csv_rows(cols, &mut w)?;
    w.flush()?;
    Ok(())
}

/// The CSV header row alone (for exports written batch by batch).
pub fn export_csv_header<'a>(
    names: impl IntoIterator<Item = &'a str>,
    w: &mut impl Write,
) -> Result<(), StoreError> {
    let header: Vec<String> = names.into_iter().map(csv_field).collect();
    writeln!(w, "{}", header.join(","))?;
    Ok(())
}

/// The rows of `cols` alone, one per record (for exports written batch by batch).
pub fn export_csv_rows(cols: &Columns, w: &mut impl Write) -> Result<(), StoreError> {
    cols.validate()?;
    let mut w = BufWriter::new(w);
    for i in 0..cols.len {
        for (j, (_, v)) in cols.cols.iter().enumerate() {
            if j > 0 {
                w.write_all(b",")?;
            }
            write!(w, "{}", v[i])?;
        }
        w.write_all(b"\n")?;
    }
    w.flush()?;
    Ok(())
}

/// Quotes a CSV field when it holds a separator, quote or line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Writes `{"run": {...}, "records": {"<column>": [..], ...}}`; `records` is `null` when
/// the run kept no raw records. Columns keep their stored order.
pub fn export_json(
    run: &RunRow,
    cols: Option<&Columns>,
    w: &mut impl Write,
) -> Result<(), StoreError> {
    if let Some(c) = cols {
        c.validate()?;
    }
    #[derive(Serialize)]
    struct Export<'a> {
        run: &'a RunRow,
        records: Option<Records<'a>>,
    }
    let mut w = BufWriter::new(w);
    serde_json::to_writer(
        &mut w,
        &Export {
            run,
            records: cols.map(Records),
        },
    )?;
    w.write_all(b"\n")?;
    w.flush()?;
    Ok(())
}

/// Serialises columns as a JSON object in column order (a `serde_json::Map` would sort).
struct Records<'a>(&'a Columns);

impl Serialize for Records<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.cols.len()))?;
        for (name, v) in &self.0.cols {
            m.serialize_entry(name, v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Columns {
        let mut c = Columns::new(3);
        c.push_column("sent_ns", vec![10, 20, i64::MAX]).unwrap();
        c.push_column("odd, \"name\"", vec![-1, 0, i64::MIN])
            .unwrap();
        c
    }

    #[test]
    fn csv_has_header_and_one_row_per_record() {
        let mut out = Vec::new();
        export_csv(&sample(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "sent_ns,\"odd, \"\"name\"\"\"\n10,-1\n20,0\n9223372036854775807,-9223372036854775808\n"
        );
    }

    #[test]
    fn json_keeps_column_order_and_run_fields() {
        let run = RunRow {
            id: 7,
            kind: "run".into(),
            status: crate::RowStatus::Finished("ok".into()),
            target: "127.0.0.1:11211".into(),
            started_at: "2026-01-01T00:00:00.000Z".into(),
            finished_at: None,
            config: json!({"rate_rps": 1000}),
            host: json!({}),
            summary: Some(json!({"p99": 12.5})),
            requests: Some(3),
        };
        let mut out = Vec::new();
        export_json(&run, Some(&sample()), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        // "sent_ns" is written before the (alphabetically earlier) quoted name.
        assert!(text.find("sent_ns").unwrap() < text.find("odd").unwrap());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["run"]["id"], 7);
        assert_eq!(v["run"]["summary"]["p99"], 12.5);
        assert_eq!(v["records"]["sent_ns"], json!([10, 20, i64::MAX]));
        assert_eq!(v["records"]["odd, \"name\""], json!([-1, 0, i64::MIN]));

        let mut out = Vec::new();
        export_json(&run, None, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["records"], serde_json::Value::Null);
    }

    #[test]
    fn invalid_columns_are_refused() {
        let bad = Columns {
            len: 2,
            cols: vec![("a".into(), vec![1])],
        };
        assert!(export_csv(&bad, &mut Vec::new()).is_err());
    }
}
