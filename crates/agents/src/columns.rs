//! A request record as named columns: the one layout of a record the store keeps and the
//! agents ship over their pipe (`seen_ns` came with streamed runs: last, so that exports keep
//! the positions of the columns before it).

use load::{Outcome, RequestRecord};
use store::{Columns, StoreError};

/// Column names of a stored record, in order (`seen_ns` came with streamed runs, `stack_ns`
/// — the server's protocol stack end, Tales' T2 — after it: each last, so that exports keep
/// the positions of the columns before it).
pub const COLUMNS: [&str; 15] = [
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
    "stack_ns",
];

/// Outcome codes in the stored `outcome` column.
pub fn outcome_code(o: Outcome) -> i64 {
    match o {
        Outcome::Ok => 0,
        Outcome::Error => 1,
        Outcome::Timeout => 2,
        Outcome::Dropped => 3,
        Outcome::Skipped => 4,
    }
}

fn outcome_of(code: i64) -> Option<Outcome> {
    Some(match code {
        0 => Outcome::Ok,
        1 => Outcome::Error,
        2 => Outcome::Timeout,
        3 => Outcome::Dropped,
        4 => Outcome::Skipped,
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
    c.push_column(COLUMNS[14], col(&|r| i(r.stack_ns)))?;
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
    let stack = col("stack_ns");
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
                stack_ns: u(stack[j]),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_round_trip() {
        let v: Vec<_> = (0..100)
            .map(|t| RequestRecord::fixture(t * 1000, 1))
            .collect();
        assert_eq!(from_columns(&to_columns(&v).unwrap()).unwrap(), v);
        assert!(
            from_columns(&Columns::new(3)).is_err(),
            "no intended_ns column"
        );
    }
}
