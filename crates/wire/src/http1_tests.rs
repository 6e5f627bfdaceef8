use super::*;
use proptest::prelude::*;

#[test]
fn get_requests() {
    let mut o = Vec::new();
    encode_get(&mut o, "127.0.0.1:80", "/f/1.html", true).unwrap();
    assert_eq!(o, b"GET /f/1.html HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n");
    o.clear();
    encode_get(&mut o, "h", "/", false).unwrap();
    assert_eq!(o, b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    assert!(encode_get(&mut o, "h", "/a b", true).is_err());
    assert!(encode_get(&mut o, "h", "x", true).is_err());
    assert!(encode_get(&mut o, "h\r\nX: y", "/", true).is_err());
}

#[test]
fn content_length_and_chunked_pipelined() {
    let mut s = Vec::new();
    encode_response(&mut s, 200, b"hello", 0, false);
    encode_response(&mut s, 200, &[b'x'; 100], 7, false);
    encode_response(&mut s, 503, b"busy", 0, true);
    s.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
    s.extend_from_slice(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
    s.extend_from_slice(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n");
    let mut b: &[u8] = &s;
    let mut got = Vec::new();
    while let Some((n, r)) = decode(b).unwrap() {
        got.push(r);
        b = &b[n..];
    }
    assert!(b.is_empty());
    let summary: Vec<(u16, bool, u64, bool, bool)> = got
        .iter()
        .map(|r| (r.status, r.close, r.body_len, r.chunked, r.is_ok()))
        .collect();
    assert_eq!(
        summary,
        [
            (200, false, 5, false, true),
            (200, false, 100, true, true),
            (503, true, 4, false, false),
            (204, false, 0, false, true),
            (200, true, 0, false, true),
            (200, false, 3, true, true),
        ]
    );
}

#[test]
fn rejects_garbage_and_absurd_sizes() {
    assert!(matches!(
        decode(b"garbage\r\n\r\n"),
        Err(HttpError::BadHead(_))
    ));
    assert!(matches!(
        decode(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n"),
        Err(HttpError::BodyTooLarge(_))
    ));
    assert!(matches!(
        decode(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
        Err(HttpError::BadFraming(_))
    ));
    assert!(matches!(
        decode(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        Err(HttpError::BadFraming(_))
    ));
    assert!(matches!(
        decode(b"HTTP/1.1 200 OK\r\n\r\n"),
        Err(HttpError::BadFraming(_))
    ));
    assert!(matches!(
        decode(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
        Err(HttpError::BadChunk(_))
    ));
    assert!(matches!(
        decode(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc"),
        Err(HttpError::BadChunk(_))
    ));
    assert!(matches!(
        dechunk(b"fffffffffffffff\r\n"),
        Err(HttpError::BodyTooLarge(_))
    ));
    let mut long = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    long.resize(MAX_HEAD + 10, b'a');
    assert_eq!(decode(&long), Err(HttpError::HeadTooLong));
    assert_eq!(decode(&long[..1000]), Ok(None));
}

fn arb_response() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(200u16), Just(404), Just(500), Just(204)],
        proptest::collection::vec(any::<u8>(), 0..400),
        0usize..50,
        any::<bool>(),
    )
        .prop_map(|(st, body, chunk, close)| {
            let mut o = Vec::new();
            if st == 204 {
                o.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
            } else {
                encode_response(&mut o, st, &body, chunk, close);
            }
            o
        })
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(Some((n, _))) = decode(&bytes) {
            prop_assert!(n > 0 && n <= bytes.len());
        }
        let _ = dechunk(&bytes);
    }

    #[test]
    fn round_trip(st in prop_oneof![200u16..204, 205u16..304, 305u16..600], body in proptest::collection::vec(any::<u8>(), 0..3000),
                  chunk in 0usize..600, close: bool) {
        let mut o = Vec::new();
        encode_response(&mut o, st, &body, chunk, close);
        let (n, r) = decode(&o).unwrap().unwrap();
        prop_assert_eq!(n, o.len());
        prop_assert_eq!(r, Response { status: st, close, body_len: body.len() as u64, chunked: chunk > 0 });
    }

    #[test]
    fn any_split_gives_the_same_responses(
        rs in proptest::collection::vec(arb_response(), 1..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
        tail in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let mut stream = rs.concat();
        stream.extend_from_slice(&tail);
        let whole = {
            let mut b: &[u8] = &stream;
            let mut v = Vec::new();
            let res = loop {
                match decode(b) {
                    Ok(Some((n, r))) => { v.push(r); b = &b[n..]; }
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                }
            };
            (v, res)
        };
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.push(stream.len());
        cuts.sort();
        let (mut got, mut start, mut res) = (Vec::new(), 0, Ok(()));
        'outer: for &c in &cuts {
            loop {
                match decode(&stream[start..c]) {
                    Ok(Some((n, r))) => { got.push(r); start += n; }
                    Ok(None) => break,
                    Err(e) => { res = Err(e); break 'outer; }
                }
            }
        }
        prop_assert_eq!(&got, &whole.0);
        prop_assert_eq!(res, whole.1);
        prop_assert!(got.len() >= rs.len());
    }
}
