use super::*;
use proptest::prelude::*;

#[test]
fn commands_are_arrays_of_bulk_strings() {
    let mut o = Vec::new();
    encode_get(&mut o, b"key:1");
    encode_set(&mut o, b"k", b"");
    assert_eq!(
        o,
        b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n".to_vec()
    );
    // A command is itself a valid array value.
    let (n, v) = decode(&o).unwrap().unwrap();
    assert_eq!(
        v,
        Value::Array(Some(vec![
            Value::Bulk(Some(b"GET")),
            Value::Bulk(Some(b"key:1"))
        ]))
    );
    assert!(decode(&o[n..]).unwrap().is_some());
}

#[test]
fn every_reply_type() {
    let s =
        b"+OK\r\n-ERR wrong type\r\n:-12\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n*2\r\n:1\r\n*1\r\n-E\r\n";
    let mut b: &[u8] = s;
    let mut got = Vec::new();
    while let Some((n, v)) = decode(b).unwrap() {
        got.push((v.is_ok(), v.clone()));
        b = &b[n..];
    }
    assert!(b.is_empty());
    assert_eq!(
        got,
        [
            (true, Value::Simple(b"OK")),
            (false, Value::Error(b"ERR wrong type")),
            (true, Value::Integer(-12)),
            (true, Value::Bulk(Some(b"abc"))),
            (true, Value::Bulk(None)),
            (true, Value::Array(None)),
            (
                false,
                Value::Array(Some(vec![
                    Value::Integer(1),
                    Value::Array(Some(vec![Value::Error(b"E")]))
                ]))
            ),
        ]
    );
}

#[test]
fn rejects_garbage_and_absurd_sizes() {
    assert_eq!(decode(b"hello\r\n"), Err(RespError::BadType(b'h')));
    assert!(matches!(decode(b":x\r\n"), Err(RespError::BadNumber(_))));
    assert!(matches!(decode(b"$-2\r\n"), Err(RespError::BadNumber(_))));
    assert_eq!(
        decode(b"$999999999999\r\n"),
        Err(RespError::TooLarge("bulk string"))
    );
    assert_eq!(
        decode(b"*999999999999\r\n"),
        Err(RespError::TooLarge("array"))
    );
    assert_eq!(decode(b"$1\r\nab\r\n"), Err(RespError::BadTerminator));
    assert_eq!(decode(&[b'+'; MAX_LINE + 3]), Err(RespError::LineTooLong));
    let deep = "*1\r\n".repeat(MAX_DEPTH + 1);
    assert_eq!(
        decode(deep.as_bytes()),
        Err(RespError::TooLarge("array nesting"))
    );
    assert_eq!(decode(b"*1000000\r\n:1\r\n"), Ok(None));
}

fn arb_value() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        "[a-zA-Z ]{0,20}".prop_map(|s| format!("+{s}\r\n").into_bytes()),
        "[a-zA-Z ]{0,20}".prop_map(|s| format!("-{s}\r\n").into_bytes()),
        any::<i64>().prop_map(|i| format!(":{i}\r\n").into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..200).prop_map(|b| {
            let mut o = Vec::new();
            encode_value(&mut o, &Value::Bulk(Some(&b)));
            o
        }),
        Just(b"$-1\r\n".to_vec()),
        Just(b"*-1\r\n".to_vec()),
    ];
    leaf.prop_recursive(3, 30, 5, |inner| {
        proptest::collection::vec(inner, 0..5).prop_map(|items| {
            let mut o = format!("*{}\r\n", items.len()).into_bytes();
            for i in items {
                o.extend_from_slice(&i);
            }
            o
        })
    })
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(Some((n, _))) = decode(&bytes) {
            prop_assert!(n > 0 && n <= bytes.len());
        }
    }

    #[test]
    fn round_trip(bytes in arb_value()) {
        let (n, v) = decode(&bytes).unwrap().unwrap();
        prop_assert_eq!(n, bytes.len());
        let mut again = Vec::new();
        encode_value(&mut again, &v);
        prop_assert_eq!(again, bytes);
    }

    #[test]
    fn any_split_gives_the_same_replies(
        vs in proptest::collection::vec(arb_value(), 1..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
        tail in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let mut stream = vs.concat();
        stream.extend_from_slice(&tail);
        let mut whole = Vec::new();
        let mut b: &[u8] = &stream;
        let whole_res = loop {
            match decode(b) {
                Ok(Some((n, v))) => { whole.push(v); b = &b[n..]; }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.push(stream.len());
        cuts.sort();
        let (mut got, mut start, mut res) = (Vec::new(), 0, Ok(()));
        'outer: for &c in &cuts {
            loop {
                match decode(&stream[start..c]) {
                    Ok(Some((n, v))) => { got.push(v); start += n; }
                    Ok(None) => break,
                    Err(e) => { res = Err(e); break 'outer; }
                }
            }
        }
        prop_assert_eq!(&got, &whole);
        prop_assert_eq!(res, whole_res);
        prop_assert!(got.len() >= vs.len());
    }
}
