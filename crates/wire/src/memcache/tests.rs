use super::udp::{parse_datagram, split_reply, UdpReassembler, UDP_HEADER_LEN};
use super::*;
use proptest::prelude::*;

fn all(mut buf: &[u8]) -> Result<(Vec<String>, usize), McError> {
    let mut out = Vec::new();
    let mut used = 0;
    while let Some((n, r)) = decode(buf)? {
        assert!(n > 0 && n <= buf.len());
        out.push(format!("{r:?}"));
        buf = &buf[n..];
        used += n;
    }
    Ok((out, used))
}

#[test]
fn requests_encode_as_memcached_expects() {
    let mut out = Vec::new();
    encode_get(&mut out, b"key:1").unwrap();
    encode_set(&mut out, b"k", 5, 0, b"abc", false).unwrap();
    encode_set(&mut out, b"k", 0, 10, b"", true).unwrap();
    assert_eq!(
        out,
        b"get key:1\r\nset k 5 0 3\r\nabc\r\nset k 0 10 0 noreply\r\n\r\n".to_vec()
    );
    assert!(encode_get(&mut out, b"").is_err());
    assert!(encode_get(&mut out, b"a b").is_err());
    assert!(encode_get(&mut out, &[b'a'; 251]).is_err());
    assert!(encode_get(&mut out, &[b'a'; 250]).is_ok());
}

#[test]
fn decodes_every_reply_kind_pipelined() {
    let buf = b"VALUE key:1 7 3 99\r\nabc\r\nEND\r\nEND\r\nSTORED\r\nNOT_STORED\r\nERROR\r\n\
CLIENT_ERROR bad data chunk\r\nSERVER_ERROR out of memory\r\nEXISTS\r\nNOT_FOUND\r\n";
    let mut b: &[u8] = buf;
    let mut got = Vec::new();
    while let Some((n, r)) = decode(b).unwrap() {
        got.push((r.is_ok(), format!("{r:?}")));
        b = &b[n..];
    }
    assert!(b.is_empty());
    let (_, hit) = decode(buf).unwrap().unwrap();
    assert_eq!(
        hit,
        Response::Hit {
            key: b"key:1",
            flags: 7,
            data: b"abc"
        }
    );
    let oks: Vec<bool> = got.iter().map(|g| g.0).collect();
    assert_eq!(
        oks,
        [true, true, true, true, false, false, false, true, true]
    );
    assert_eq!(
        decode(b"SERVER_ERROR out of memory\r\n").unwrap(),
        Some((28, Response::ServerError(b"out of memory")))
    );
}

#[test]
fn rejects_garbage_and_absurd_sizes() {
    assert!(matches!(decode(b"HELLO\r\n"), Err(McError::BadLine(_))));
    assert!(matches!(
        decode(b"VALUE k 0 99999999999\r\n"),
        Err(McError::ValueTooLarge { .. })
    ));
    assert!(matches!(
        decode(b"VALUE k x 1\r\n"),
        Err(McError::BadLine(_))
    ));
    assert!(matches!(
        decode(b"VALUE k 0 1 2 3\r\n"),
        Err(McError::BadLine(_))
    ));
    assert!(matches!(
        decode(b"VALUE k 0 1\r\nab\r\nEND\r\n"),
        Err(McError::BadTerminator)
    ));
    // A wrong terminator is seen before the whole reply is there.
    assert!(matches!(
        decode(b"VALUE k 0 1\r\naXY"),
        Err(McError::BadTerminator)
    ));
    assert_eq!(decode(b"VALUE k 0 1\r\na\r\nEN").unwrap(), None);
    assert!(matches!(
        decode(&[b'x'; MAX_LINE + 2]),
        Err(McError::LineTooLong)
    ));
    assert_eq!(decode(&[b'x'; MAX_LINE + 1]).unwrap(), None);
}

#[test]
fn udp_reply_split_over_three_datagrams_out_of_order() {
    let mut reply = Vec::new();
    let data = vec![7u8; 2500];
    encode_response(
        &mut reply,
        &Response::Hit {
            key: b"k",
            flags: 0,
            data: &data,
        },
    );
    let ds = split_reply(42, &reply, 1000);
    assert_eq!(ds.len(), 3);
    let (h, _) = parse_datagram(&ds[2]).unwrap();
    assert_eq!((h.request_id, h.seq, h.count), (42, 2, 3));
    let mut r = UdpReassembler::new(4, 1 << 20);
    assert!(r.push(&ds[2]).unwrap().is_none());
    assert!(r.push(&ds[0]).unwrap().is_none());
    assert!(r.push(&ds[0]).unwrap().is_none()); // duplicate ignored
    assert_eq!(r.pending(), 1);
    let (id, whole) = r.push(&ds[1]).unwrap().unwrap();
    assert_eq!((id, &*whole), (42, &reply[..]));
    assert_eq!((r.pending(), r.buffered_bytes()), (0, 0));
    // Single-datagram replies pass straight through.
    let one = split_reply(9, b"END\r\n", 1400);
    assert_eq!(r.push(&one[0]).unwrap().unwrap().1.as_ref(), b"END\r\n");
    // Bad headers.
    assert!(r.push(&[0; 7]).is_err());
    assert!(r.push(&[0, 1, 0, 3, 0, 3, 0, 0]).is_err());
    assert!(r.push(&[0, 1, 0, 0, 0, 0, 0, 0]).is_err());
}

#[test]
fn reassembler_memory_is_bounded() {
    // Each datagram below is charged 30 payload bytes + 64 overhead = 94.
    let mut r = UdpReassembler::new(2, 200);
    for id in 0..5u16 {
        let ds = split_reply(id, &[1u8; 60], 30);
        r.push(&ds[0]).unwrap();
        assert!(r.pending() <= 2 && r.buffered_bytes() <= 200);
    }
    // Only the newest incomplete replies are kept: 3 and 4.
    assert_eq!(r.pending(), 2);
    assert_eq!(r.dropped(), 3);
    assert!(r.drop_incomplete(4));
    assert!(!r.drop_incomplete(4));
    // Finishing id 3 still works.
    let ds = split_reply(3, &[1u8; 60], 30);
    assert_eq!(r.push(&ds[1]).unwrap().unwrap().1.len(), 60);
    // A part larger than the byte bound is never held.
    let big = split_reply(8, &[2u8; 400], 200);
    assert!(r.push(&big[0]).unwrap().is_none());
    assert_eq!(r.pending(), 0);
    r.clear();
    // A header announcing 65535 datagrams costs only what actually arrived.
    let mut d = Vec::new();
    udp::encode_header(
        &mut d,
        udp::UdpHeader {
            request_id: 1,
            seq: 5,
            count: u16::MAX,
        },
    );
    d.push(b'x');
    assert!(r.push(&d).unwrap().is_none());
    assert_eq!(r.buffered_bytes(), 1 + 64);
}

fn arb_response() -> impl Strategy<Value = Vec<u8>> {
    let key = "[a-z:0-9]{1,20}";
    prop_oneof![
        (
            key,
            any::<u32>(),
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(k, f, d)| {
                let mut o = Vec::new();
                encode_response(
                    &mut o,
                    &Response::Hit {
                        key: k.as_bytes(),
                        flags: f,
                        data: &d,
                    },
                );
                o
            }),
        Just(b"END\r\n".to_vec()),
        Just(b"STORED\r\n".to_vec()),
        Just(b"ERROR\r\n".to_vec()),
        "[a-z ]{0,30}".prop_map(|m| format!("SERVER_ERROR {m}\r\n").into_bytes()),
        "[a-z ]{0,30}".prop_map(|m| format!("CLIENT_ERROR {m}\r\n").into_bytes()),
    ]
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(Some((n, _))) = decode(&bytes) {
            prop_assert!(n > 0 && n <= bytes.len());
        }
        let mut r = UdpReassembler::new(3, 1000);
        let _ = r.push(&bytes);
        if bytes.len() > 8 {
            let _ = r.push(&bytes[..bytes.len() / 2]);
        }
    }

    #[test]
    fn encode_decode_round_trip(key in "[!-~]{1,250}", flags: u32,
                                data in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let mut o = Vec::new();
        encode_response(&mut o, &Response::Hit { key: key.as_bytes(), flags, data: &data });
        let (n, r) = decode(&o).unwrap().unwrap();
        prop_assert_eq!(n, o.len());
        prop_assert_eq!(r, Response::Hit { key: key.as_bytes(), flags, data: &data });
    }

    /// Feeding a pipelined stream in any chunks gives the same replies as the whole.
    #[test]
    fn any_split_gives_the_same_replies(
        replies in proptest::collection::vec(arb_response(), 1..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
        tail in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let mut stream: Vec<u8> = replies.concat();
        stream.extend_from_slice(&tail);
        let whole = all(&stream);
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.push(stream.len());
        cuts.sort();
        let mut got = Vec::new();
        let mut start = 0;
        let mut err = None;
        for &c in &cuts {
            let mut buf = &stream[start..c];
            loop {
                match decode(buf) {
                    Ok(Some((n, r))) => { got.push(format!("{r:?}")); buf = &buf[n..]; start += n; }
                    Ok(None) => break,
                    Err(e) => { err = Some(e); break; }
                }
            }
            if err.is_some() { break; }
        }
        match whole {
            Ok((w, used)) => { prop_assert!(err.is_none()); prop_assert_eq!(&got, &w); prop_assert_eq!(start, used); }
            Err(e) => { prop_assert_eq!(err, Some(e)); }
        }
        // Every whole reply before the tail was decoded.
        prop_assert!(got.len() >= replies.len());
    }

    /// Any order of datagrams reassembles the same reply.
    #[test]
    fn udp_any_order(len in 0usize..5000, mtu in 100usize..1500, seed: u64) {
        let reply: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
        let mut ds = split_reply(7, &reply, mtu);
        // Fisher-Yates with a tiny LCG (proptest supplies the seed).
        let mut s = seed;
        for i in (1..ds.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ds.swap(i, (s >> 33) as usize % (i + 1));
        }
        let mut r = UdpReassembler::new(2, 10_000);
        let mut done = None;
        for (k, d) in ds.iter().enumerate() {
            prop_assert!(d.len() <= UDP_HEADER_LEN + mtu);
            if let Some((id, w)) = r.push(d).unwrap() {
                prop_assert_eq!(k, ds.len() - 1);
                done = Some((id, w.into_owned()));
            }
        }
        prop_assert_eq!(done, Some((7u16, reply)));
    }
}
