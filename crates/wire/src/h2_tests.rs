use super::*;
use proptest::prelude::*;

fn one(buf: &[u8]) -> Frame<'_> {
    let (n, f) = decode_frame(buf, DEFAULT_MAX_FRAME).unwrap().unwrap();
    assert_eq!(n, buf.len());
    f
}

#[test]
fn the_preface_is_the_rfcs_and_carries_the_settings() {
    let mut out = Vec::new();
    encode_preface(
        &mut out,
        &[
            (setting::ENABLE_PUSH, 0),
            (setting::INITIAL_WINDOW_SIZE, MAX_WINDOW),
        ],
    );
    assert_eq!(&out[..24], b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    // A SETTINGS frame header: length 12, type 4, no flags, stream 0.
    assert_eq!(&out[24..33], &[0, 0, 12, 4, 0, 0, 0, 0, 0]);
    assert_eq!(
        one(&out[24..]),
        Frame::Settings {
            ack: false,
            params: vec![(2, 0), (4, MAX_WINDOW)]
        }
    );
}

#[test]
fn padding_and_priority_are_removed() {
    // HEADERS, PADDED | PRIORITY | END_HEADERS, stream 3: pad length 2, 5 priority bytes,
    // a 3-byte block, 2 bytes of padding.
    let mut f = vec![
        0,
        0,
        11,
        HEADERS,
        PADDED | PRIORITY_FLAG | END_HEADERS,
        0,
        0,
        0,
        3,
    ];
    f.extend_from_slice(&[2, 0, 0, 0, 1, 16, 0x82, 0x86, 0x84, 0, 0]);
    assert_eq!(
        one(&f),
        Frame::Headers {
            stream: 3,
            end_stream: false,
            end_headers: true,
            block: &[0x82, 0x86, 0x84]
        }
    );
    // DATA padded with more than it holds.
    let bad = [0, 0, 2, DATA, PADDED, 0, 0, 0, 1, 5, 0];
    assert!(matches!(
        decode_frame(&bad, DEFAULT_MAX_FRAME),
        Err(H2Error::BadPadding { .. })
    ));
    // Flow control counts the padding.
    let data = [
        0,
        0,
        4,
        DATA,
        PADDED | END_STREAM,
        0,
        0,
        0,
        1,
        1,
        b'h',
        b'i',
        0,
    ];
    assert_eq!(
        one(&data),
        Frame::Data {
            stream: 1,
            end_stream: true,
            data: b"hi",
            flow_len: 4
        }
    );
}

#[test]
fn what_the_rfc_makes_a_connection_error_is_refused() {
    let bad: &[(&[u8], &str)] = &[
        (&[0, 0, 0, DATA, 0, 0, 0, 0, 0], "DATA on stream 0"),
        (&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 1], "SETTINGS on a stream"),
        (
            &[0, 0, 5, SETTINGS, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            "SETTINGS of 5 bytes",
        ),
        (
            &[0, 0, 6, SETTINGS, ACK, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0],
            "SETTINGS ack with a payload",
        ),
        (
            &[0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2],
            "ENABLE_PUSH 2",
        ),
        (
            &[0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0x10, 0],
            "MAX_FRAME_SIZE 4096",
        ),
        (
            &[0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 4, 0x80, 0, 0, 0],
            "a window above 2^31-1",
        ),
        (
            &[0, 0, 4, PING, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            "PING of 4 bytes",
        ),
        (
            &[0, 0, 4, WINDOW_UPDATE, 0, 0, 0, 0, 1, 0, 0, 0, 0],
            "a WINDOW_UPDATE of 0",
        ),
        (
            &[0, 0, 3, RST_STREAM, 0, 0, 0, 0, 1, 0, 0, 0],
            "RST_STREAM of 3 bytes",
        ),
        (
            &[0, 0, 4, GOAWAY, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            "GOAWAY of 4 bytes",
        ),
        (
            &[0, 0, 0, CONTINUATION, 0, 0, 0, 0, 0],
            "CONTINUATION on stream 0",
        ),
    ];
    for (bytes, what) in bad {
        assert!(
            decode_frame(bytes, DEFAULT_MAX_FRAME).is_err(),
            "{what} was accepted"
        );
    }
    // Longer than announced: refused from the header alone.
    let big = [0, 0x40, 1, DATA, 0, 0, 0, 0, 1];
    assert_eq!(
        decode_frame(&big, DEFAULT_MAX_FRAME),
        Err(H2Error::FrameTooLarge {
            len: 16_385,
            max: DEFAULT_MAX_FRAME
        })
    );
    // An unknown type is read and ignored.
    assert_eq!(
        one(&[0, 0, 1, 0xfa, 0, 0, 0, 0, 7, 9]),
        Frame::Unknown {
            kind: 0xfa,
            stream: 7
        }
    );
}

#[test]
fn a_request_block_decodes_to_its_fields_and_a_response_to_its_status() {
    let mut client = Hpack::new();
    let mut server = Hpack::new();
    for path in ["/", "/a.html", "/a.html"] {
        let mut block = Vec::new();
        client.encode_request(
            &Request {
                method: "GET",
                scheme: "https",
                authority: "127.0.0.1:8443",
                path,
                headers: &[("te", "trailers")],
            },
            &mut block,
        );
        let f = server.decode(&block).unwrap();
        assert_eq!(f.get(":method"), Some(&b"GET"[..]));
        assert_eq!(f.get(":path"), Some(path.as_bytes()));
        assert_eq!(f.get(":authority"), Some(&b"127.0.0.1:8443"[..]));
        assert_eq!(f.get("te"), Some(&b"trailers"[..]));
        let mut head = Vec::new();
        server.encode_fields(&[(b":status", b"404"), (b"server", b"t")], &mut head);
        assert_eq!(client.decode(&head).unwrap().status(), Ok(404));
    }
    let mut bad = Vec::new();
    server.encode_fields(&[(b":status", b"20x")], &mut bad);
    assert_eq!(
        client.decode(&bad).unwrap().status(),
        Err(H2Error::NoStatus)
    );
    // An index beyond both tables.
    assert!(matches!(
        client.decode(&[0xff, 0x7f]),
        Err(H2Error::Hpack(_))
    ));
}

#[test]
fn a_long_block_continues_and_long_data_is_split() {
    let block = vec![7u8; 2 * DEFAULT_MAX_FRAME + 10];
    let mut out = Vec::new();
    encode_headers(&mut out, 5, &block, true, DEFAULT_MAX_FRAME).unwrap();
    let mut at = 0;
    let mut joined = Vec::new();
    let mut kinds = Vec::new();
    while let Some((n, f)) = decode_frame(&out[at..], DEFAULT_MAX_FRAME).unwrap() {
        match f {
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
            } => {
                assert!(stream == 5 && end_stream && !end_headers);
                kinds.push("H");
                joined.extend_from_slice(block);
            }
            Frame::Continuation {
                stream,
                end_headers,
                block,
            } => {
                assert_eq!(stream, 5);
                kinds.push(if end_headers { "C$" } else { "C" });
                joined.extend_from_slice(block);
            }
            f => panic!("{f:?}"),
        }
        at += n;
    }
    assert_eq!(kinds, ["H", "C", "C$"]);
    assert_eq!(joined, block);
    assert!(encode_headers(&mut out, 0, b"x", true, DEFAULT_MAX_FRAME).is_err());
    assert!(encode_data(&mut out, 1, b"x", true, 100).is_err());
    assert!(encode_window_update(&mut out, 0, 0).is_err());
}

fn frame_strategy() -> impl Strategy<Value = Vec<u8>> {
    let stream = 1u32..=MAX_WINDOW;
    prop_oneof![
        (
            stream.clone(),
            prop::collection::vec(any::<u8>(), 0..40_000),
            any::<bool>()
        )
            .prop_map(|(s, d, end)| {
                let mut o = Vec::new();
                encode_data(&mut o, s, &d, end, DEFAULT_MAX_FRAME).unwrap();
                o
            }),
        (
            stream.clone(),
            prop::collection::vec(any::<u8>(), 0..40_000),
            any::<bool>()
        )
            .prop_map(|(s, b, end)| {
                let mut o = Vec::new();
                encode_headers(&mut o, s, &b, end, DEFAULT_MAX_FRAME).unwrap();
                o
            }),
        prop::collection::vec((any::<u16>(), 0u32..=MAX_WINDOW), 0..8).prop_map(|p| {
            // Values every parameter accepts.
            let p: Vec<(u16, u32)> = p
                .into_iter()
                .map(|(id, v)| match id {
                    setting::ENABLE_PUSH => (id, v & 1),
                    setting::MAX_FRAME_SIZE => (id, DEFAULT_MAX_FRAME as u32),
                    _ => (id, v),
                })
                .collect();
            let mut o = Vec::new();
            encode_settings(&mut o, &p);
            o
        }),
        (any::<bool>(), any::<[u8; 8]>()).prop_map(|(ack, d)| {
            let mut o = Vec::new();
            encode_ping(&mut o, ack, d);
            o
        }),
        (0u32..=MAX_WINDOW, 1u32..=MAX_WINDOW).prop_map(|(s, i)| {
            let mut o = Vec::new();
            encode_window_update(&mut o, s, i).unwrap();
            o
        }),
        (stream.clone(), any::<u32>()).prop_map(|(s, c)| {
            let mut o = Vec::new();
            encode_rst_stream(&mut o, s, c);
            o
        }),
        (
            0u32..=MAX_WINDOW,
            any::<u32>(),
            prop::collection::vec(any::<u8>(), 0..50)
        )
            .prop_map(|(l, c, d)| {
                let mut o = Vec::new();
                encode_goaway(&mut o, l, c, &d);
                o
            }),
    ]
}

/// What an encoder was asked for, read back from its frames.
fn decode_all(buf: &[u8]) -> Vec<String> {
    let mut at = 0;
    let mut out = Vec::new();
    while let Some((n, f)) = decode_frame(&buf[at..], DEFAULT_MAX_FRAME).unwrap() {
        out.push(format!("{f:?}"));
        at += n;
    }
    assert_eq!(at, buf.len());
    out
}

proptest! {
    #[test]
    fn frames_decode_whole_from_any_split(frames in prop::collection::vec(frame_strategy(), 1..4), cut in 0usize..100_000) {
        let buf: Vec<u8> = frames.concat();
        let whole = decode_all(&buf);
        prop_assert!(!whole.is_empty());
        // A prefix decodes to a prefix of the frames and then asks for more.
        let cut = cut.min(buf.len());
        let mut at = 0;
        let mut got = Vec::new();
        while let Some((n, f)) = decode_frame(&buf[at..cut], DEFAULT_MAX_FRAME).unwrap() {
            got.push(format!("{f:?}"));
            at += n;
        }
        prop_assert_eq!(&got[..], &whole[..got.len()]);
    }

    #[test]
    fn encoded_frames_say_what_was_encoded(stream in 1u32..=MAX_WINDOW, data in prop::collection::vec(any::<u8>(), 0..100), end in any::<bool>(), code in any::<u32>()) {
        let mut o = Vec::new();
        encode_data(&mut o, stream, &data, end, DEFAULT_MAX_FRAME).unwrap();
        prop_assert_eq!(one(&o), Frame::Data { stream, end_stream: end, data: &data, flow_len: data.len() });
        let mut o = Vec::new();
        encode_rst_stream(&mut o, stream, code);
        prop_assert_eq!(one(&o), Frame::RstStream { stream, code });
        let mut o = Vec::new();
        encode_goaway(&mut o, stream, code, &data);
        prop_assert_eq!(one(&o), Frame::GoAway { last_stream: stream, code, debug: &data });
    }

    #[test]
    fn any_bytes_decode_ask_for_more_or_fail(data in prop::collection::vec(any::<u8>(), 0..200), max in DEFAULT_MAX_FRAME..=MAX_FRAME_LIMIT) {
        if let Ok(Some((n, _))) = decode_frame(&data, max) {
            prop_assert!(n >= HEADER_LEN && n <= data.len());
        }
    }

    #[test]
    fn any_header_block_decodes_to_fields_that_round_trip_or_fails(block in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut h = Hpack::new();
        if let Ok(fields) = h.decode(&block) {
            let pairs: Vec<(&[u8], &[u8])> =
                fields.0.iter().map(|(n, v)| (n.as_slice(), v.as_slice())).collect();
            let mut again = Vec::new();
            Hpack::new().encode_fields(&pairs, &mut again);
            prop_assert_eq!(Hpack::new().decode(&again).unwrap(), fields);
        }
    }
}
