//! Property tests: any `i64` columns survive the store bit-exactly.

use proptest::prelude::*;
use store::{Columns, NewRun, Store};

fn extreme_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(0i64),
        Just(-1i64),
        any::<i64>(),
        -1_000i64..1_000,
    ]
}

fn columns() -> impl Strategy<Value = Columns> {
    (0usize..300, 0usize..4).prop_flat_map(|(len, ncols)| {
        proptest::collection::vec(proptest::collection::vec(extreme_i64(), len), ncols).prop_map(
            move |vs| {
                let mut c = Columns::new(len);
                for (i, v) in vs.into_iter().enumerate() {
                    c.push_column(&format!("c{i}"), v).unwrap();
                }
                c
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn any_columns_round_trip(cols in columns()) {
        let store = Store::open_in_memory().unwrap();
        let id = store.begin_run(&NewRun {
            kind: "run".into(),
            target: "t".into(),
            started_at: store::now_rfc3339(),
            config: serde_json::json!({}),
            host: serde_json::json!({}),
        }).unwrap();
        store.put_columns(id, &cols).unwrap();
        prop_assert_eq!(store.columns(id).unwrap(), Some(cols));
    }

    #[test]
    fn monotone_timestamps_round_trip(start in any::<i64>(), gaps in proptest::collection::vec(0i64..1 << 40, 0..500)) {
        let mut t = start;
        let v: Vec<i64> = gaps.iter().map(|g| { t = t.wrapping_add(*g); t }).collect();
        let mut cols = Columns::new(v.len());
        cols.push_column("t", v).unwrap();
        let store = Store::open_in_memory().unwrap();
        let id = store.begin_run(&NewRun {
            kind: "run".into(),
            target: "t".into(),
            started_at: store::now_rfc3339(),
            config: serde_json::Value::Null,
            host: serde_json::Value::Null,
        }).unwrap();
        store.put_columns(id, &cols).unwrap();
        prop_assert_eq!(store.columns(id).unwrap(), Some(cols));
    }
}
