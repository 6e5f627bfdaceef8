use super::*;

const PORT: u16 = 40_000;

fn ev(kind: Kind, proto: Proto, ts: u64) -> Event {
    Event {
        kind,
        proto,
        ts,
        enter: ts.saturating_sub(1_000),
        sk: 1,
        epoll: 0,
        wakeup: 0,
        oncpu: 0,
        tx: 0,
        rx_realtime: 0,
        rx: 0,
        tid: 7,
        seq: 0,
        bytes: 10,
        lport: 11_211,
        rport: PORT,
        rid: 0,
    }
}

fn arrival(ts: u64, seq: u32) -> Event {
    Event {
        seq,
        ..ev(Kind::Arrival, Proto::Tcp, ts)
    }
}

/// A read returning at `exit`, entered 1 µs before, after an epoll return at `epoll`.
fn read(exit: u64, seq: u32, epoll: u64) -> Event {
    Event {
        seq,
        epoll,
        ..ev(Kind::Read, Proto::Tcp, exit)
    }
}

/// A write entered at `enter`, its packet out 2 µs later, returning 3 µs later.
fn write(enter: u64) -> Event {
    Event {
        enter,
        tx: enter + 2_000,
        ..ev(Kind::Write, Proto::Tcp, enter + 3_000)
    }
}

fn req(sent: u64, received: u64, next_sent: u64) -> Request {
    Request {
        proto: Proto::Tcp,
        port: PORT,
        sent,
        received,
        next_sent,
        rid: None,
    }
}

#[test]
fn one_request_per_read_gets_every_stamp() {
    let mut j = Joiner::new(1_000);
    // Sent at 100 µs; arrives at 105; the thread returns from epoll at 110, reads until 112,
    // writes from 120 (out at 122, back at 123); the client has it at 130.
    j.push(arrival(105_000, 100));
    j.push(read(112_000, 100, 110_000));
    j.push(write(120_000));
    let m = j.join(&req(100_000, 130_000, 0)).unwrap();
    assert_eq!(
        m.stamps,
        [105_000, 110_000, 112_000, 120_000, 120_000, 122_000]
    );
    assert!(!m.pipelined);
    assert_eq!(j.stats().matched, 1);
    // The arrival and the read stay for requests that may share them, until pruned.
    j.prune(u64::MAX);
    assert_eq!(j.held(), 0);
}

#[test]
fn a_reader_already_awake_has_t2_at_the_arrival_and_the_run_queue_is_measured() {
    let mut j = Joiner::new(1_000);
    // The thread's last epoll return was before the arrival: it did not wait to be woken.
    j.push(arrival(105_000, 100));
    j.push(read(112_000, 100, 90_000));
    j.push(write(120_000));
    let m = j.join(&req(100_000, 130_000, 0)).unwrap();
    assert_eq!(m.stamps[1], 105_000);
    assert_eq!(m.runqueue_ns, None);
    // Woken at 106, on a CPU at 108, back from epoll at 110: 2 µs in the run queue.
    let mut r = read(212_000, 200, 210_000);
    r.wakeup = 206_000;
    r.oncpu = 208_000;
    r.enter = 211_000;
    j.push(arrival(205_000, 200));
    j.push(r);
    j.push(write(220_000));
    let m = j.join(&req(200_000, 230_000, 0)).unwrap();
    assert_eq!(m.runqueue_ns, Some(2_000));
}

#[test]
fn pipelined_requests_share_the_read_and_split_its_writes() {
    // Two requests in one read; the server writes `w` times before reading again.
    for (w, expect) in [
        (1usize, [(0usize, 0usize), (0, 0)]), // Redis: one write answers both
        (2, [(0, 0), (1, 1)]),                // memcached: one sendmsg per reply
        (4, [(0, 1), (2, 3)]),                // nginx: header and body per reply
    ] {
        let mut j = Joiner::new(1_000);
        // Sent at 100 and 101 µs, each in the socket before the next send.
        j.push(arrival(100_500, 100));
        j.push(arrival(101_500, 200));
        j.push(read(112_000, 200, 110_000));
        let starts: Vec<u64> = (0..w as u64).map(|k| 120_000 + 10_000 * k).collect();
        for &s in &starts {
            j.push(write(s));
        }
        // The socket's next read: its writes are not this group's.
        j.push(arrival(300_000, 300));
        j.push(read(305_000, 300, 304_000));
        j.push(write(310_000));
        let got = j.join_conn(&[req(100_000, 190_000, 0), req(101_000, 195_000, 0)]);
        let (a, b) = (got[0].unwrap(), got[1].unwrap());
        for (m, (first, last)) in [a, b].iter().zip(expect) {
            assert!(m.pipelined);
            assert_eq!(m.stamps[2], 112_000, "both read by one read");
            assert_eq!(m.stamps[4], starts[first], "w = {w}");
            assert_eq!(m.stamps[5], starts[last] + 2_000, "w = {w}");
        }
        assert_eq!((a.stamps[0], b.stamps[0]), (100_500, 101_500));
        let c = j.join(&req(299_000, 320_000, 0)).unwrap();
        assert_eq!(c.stamps[4], 310_000);
        assert!(!c.pipelined);
    }
}

#[test]
fn one_arrival_may_carry_several_requests() {
    // The server held the socket while requests 1 and 2 came: their segments were
    // coalesced in the backlog and reached the socket together at 110, seq 200.
    let mut j = Joiner::new(1_000);
    j.push(arrival(110_000, 200));
    j.push(read(112_000, 200, 111_000));
    j.push(write(120_000));
    j.push(write(125_000));
    let got = j.join_conn(&[req(100_000, 130_000, 0), req(101_000, 131_000, 0)]);
    let (a, b) = (got[0].unwrap(), got[1].unwrap());
    assert_eq!((a.stamps[0], b.stamps[0]), (110_000, 110_000));
    assert_eq!((a.stamps[4], b.stamps[4]), (120_000, 125_000));
    assert!(a.pipelined && b.pipelined);
    // A request whose reply came but whose arrival never did is not matched to another's.
    let mut j = Joiner::new(1_000);
    j.push(arrival(105_000, 100));
    j.push(read(106_000, 100, 0));
    j.push(write(107_000));
    let got = j.join_conn(&[req(100_000, 110_000, 0), req(108_000, 120_000, 0)]);
    assert!(got[0].is_some());
    assert!(got[1].is_none());
    assert_eq!(j.stats().no_arrival, 1);
}

#[test]
fn a_split_write_arrives_whole_at_its_last_segment() {
    let mut j = Joiner::new(1_000);
    // Request 1 went out in two segments (105, 107); request 2 was sent at 150.
    j.push(arrival(105_000, 50));
    j.push(read(106_000, 50, 0)); // a partial read: no request complete in it
    j.push(arrival(107_000, 100));
    j.push(read(109_000, 100, 0));
    j.push(write(115_000));
    j.push(arrival(151_000, 200));
    j.push(read(153_000, 200, 0));
    j.push(write(160_000));
    let a = j.join(&req(100_000, 130_000, 150_000)).unwrap();
    assert_eq!(&a.stamps[..3], &[107_000, 107_000, 109_000]);
    let b = j.join(&req(150_000, 170_000, 0)).unwrap();
    assert_eq!(b.stamps[0], 151_000);
    assert_eq!(b.stamps[4], 160_000);
}

#[test]
fn timeouts_and_strays_do_not_shift_later_requests() {
    let mut j = Joiner::new(1_000);
    // A request that timed out (never presented with a reply) left its events behind.
    j.push(arrival(105_000, 100));
    j.push(read(108_000, 100, 0));
    j.push(arrival(205_000, 200));
    j.push(read(208_000, 200, 0));
    j.push(write(215_000));
    assert!(j.join(&req(100_000, 0, 200_000)).is_none());
    let m = j.join(&req(200_000, 230_000, 0)).unwrap();
    assert_eq!(m.stamps[0], 205_000);
    assert_eq!(m.stamps[2], 208_000);
    // A request whose events never came is counted, not matched.
    assert!(j.join(&req(300_000, 330_000, 0)).is_none());
    let s = j.stats();
    assert_eq!((s.requests, s.matched, s.no_arrival), (2, 1, 1));
}

#[test]
fn sequence_numbers_wrap() {
    let mut j = Joiner::new(1_000);
    j.push(arrival(105_000, u32::MAX - 5));
    j.push(arrival(106_000, 10)); // wrapped past zero
    j.push(read(112_000, 10, 0));
    j.push(write(120_000));
    j.push(write(121_000));
    let got = j.join_conn(&[req(100_000, 130_000, 0), req(101_000, 131_000, 0)]);
    let (a, b) = (got[0].unwrap(), got[1].unwrap());
    assert!(a.pipelined && b.pipelined);
    assert_eq!((a.stamps[4], b.stamps[4]), (120_000, 121_000));
}

/// A UDP read also pushes its datagram's arrival 3 µs before it returns.
fn udp(j: &mut Joiner, kind: Kind, ts: u64, rid: u16) {
    if kind == Kind::Read {
        j.push(Event {
            rid,
            ..ev(Kind::Arrival, Proto::Udp, ts - 3_000)
        });
    }
    j.push(udp_ev(kind, ts, rid));
}

fn udp_ev(kind: Kind, ts: u64, rid: u16) -> Event {
    Event {
        rid,
        epoll: if kind == Kind::Read { ts - 2_000 } else { 0 },
        tx: if kind == Kind::Write { ts - 1_000 } else { 0 },
        ..ev(kind, Proto::Udp, ts)
    }
}

fn udp_req(sent: u64, received: u64, rid: u16) -> Request {
    Request {
        proto: Proto::Udp,
        port: PORT,
        sent,
        received,
        next_sent: 0,
        rid: Some(rid),
    }
}

#[test]
fn udp_matches_by_datagram_and_survives_a_lost_one() {
    let mut j = Joiner::new(1_000);
    // rid 0 answered in two datagrams; rid 1 lost by the kernel; rid 2 answered.
    udp(&mut j, Kind::Read, 110_000, 0);
    udp(&mut j, Kind::Write, 120_000, 0);
    udp(&mut j, Kind::Write, 121_000, 0);
    // The lost datagram's arrival was seen, its read never came.
    j.push(Event {
        rid: 1,
        ..ev(Kind::Arrival, Proto::Udp, 205_000)
    });
    udp(&mut j, Kind::Read, 310_000, 2);
    udp(&mut j, Kind::Write, 320_000, 2);
    let a = j.join(&udp_req(100_000, 140_000, 0)).unwrap();
    assert_eq!(
        a.stamps,
        [107_000, 108_000, 110_000, 119_000, 119_000, 120_000]
    );
    assert!(j.join(&udp_req(200_000, 0, 1)).is_none(), "timed out");
    let c = j.join(&udp_req(300_000, 340_000, 2)).unwrap();
    assert_eq!(c.stamps[2], 310_000);
    assert_eq!(j.held(), 0);
    assert_eq!(j.stats().matched, 2);
}

#[test]
fn udp_reads_out_of_send_order_each_find_their_request() {
    // Two datagrams written together (one send stamp); two server threads sharing the
    // socket read the second (rid 1) before the first (rid 0).
    let mut j = Joiner::new(1_000);
    udp(&mut j, Kind::Read, 110_000, 1);
    udp(&mut j, Kind::Read, 111_000, 0);
    udp(&mut j, Kind::Write, 115_000, 1);
    udp(&mut j, Kind::Write, 116_000, 0);
    let got = j.join_conn(&[udp_req(100_000, 130_000, 0), udp_req(100_000, 129_000, 1)]);
    let (a, b) = (got[0].unwrap(), got[1].unwrap());
    assert_eq!((a.stamps[2], a.stamps[4]), (111_000, 115_000));
    assert_eq!((b.stamps[2], b.stamps[4]), (110_000, 114_000));
    assert_eq!(j.stats().no_arrival, 0);
    assert_eq!(j.held(), 0);
}

#[test]
fn memory_is_bounded_by_pruning_and_the_cap() {
    let mut j = Joiner::new(100);
    for k in 0..200u64 {
        j.push(arrival(k * 1_000, k as u32));
    }
    assert_eq!(j.held(), 100);
    assert_eq!(j.stats().overflow, 100);
    j.prune(50_000);
    assert_eq!(j.held(), 50);
    j.prune(u64::MAX);
    assert_eq!(j.held(), 0);
    // Events without a peer (listening sockets) are not kept.
    j.push(Event {
        rport: 0,
        ..arrival(1, 1)
    });
    assert_eq!(j.held(), 0);
}

#[test]
fn a_write_carrying_more_replies_than_an_even_share_keeps_them() {
    // Four requests in one read, two writes: the first carried three replies (the client
    // had the third at 125 µs, before the second write began at 130).
    let mut j = Joiner::new(1_000);
    for k in 0..4u64 {
        j.push(arrival(100_500 + k * 1_000, 100 * (k as u32 + 1)));
    }
    j.push(read(110_000, 400, 108_000));
    j.push(write(120_000));
    j.push(write(130_000));
    let reqs: Vec<Request> = (0..4u64)
        .map(|k| {
            let rx = [124_000, 124_000, 125_000, 140_000][k as usize];
            req(100_000 + k * 1_000, rx, 0)
        })
        .collect();
    let got = j.join_conn(&reqs);
    let starts: Vec<u64> = got.iter().map(|m| m.unwrap().stamps[4]).collect();
    assert_eq!(starts, [120_000, 120_000, 120_000, 130_000]);
}

#[test]
fn the_packets_receive_stamp_is_t1_and_the_data_ready_is_the_stacks_end() {
    // Sent at 100 µs, stamped at the stack's entry at 103, queued on the socket at 105; the
    // reader was already awake (last epoll at 90): T2 is the stack's end, not T1.
    let mut j = Joiner::new(1_000);
    j.push(Event {
        rx: 103_000,
        ..arrival(105_000, 100)
    });
    j.push(read(112_000, 100, 90_000));
    j.push(write(120_000));
    let m = j.join(&req(100_000, 130_000, 0)).unwrap();
    assert_eq!(m.stack, 105_000);
    assert_eq!(
        m.stamps,
        [103_000, 105_000, 112_000, 120_000, 120_000, 122_000]
    );
    assert_eq!(j.stats().stack_entry_missing, 0);
    // Without a stamp: T1 is the data-ready, and the split is unknown (counted).
    j.push(arrival(205_000, 200));
    j.push(read(212_000, 200, 210_000));
    j.push(write(220_000));
    let m = j.join(&req(200_000, 230_000, 0)).unwrap();
    assert_eq!((m.stamps[0], m.stamps[1], m.stack), (205_000, 210_000, 0));
    assert_eq!(j.stats().stack_entry_missing, 1);
}

#[test]
fn receive_stamps_are_clamped_within_the_slack_and_refused_beyond() {
    let (sent, ready) = (100_000, 105_000);
    assert_eq!(stack_span(sent, ready, 103_000), (103_000, ready));
    // Within the mapping's slack on either side: clamped into send → data-ready.
    assert_eq!(stack_span(sent, ready, sent - RX_SLACK_NS), (sent, ready));
    assert_eq!(stack_span(sent, ready, ready + RX_SLACK_NS), (ready, ready));
    // Beyond it (another packet's stamp, a clock of another kind): not used.
    assert_eq!(stack_span(sent, ready, sent - RX_SLACK_NS - 1), (ready, 0));
    assert_eq!(stack_span(sent, ready, ready + RX_SLACK_NS + 1), (ready, 0));
    assert_eq!(stack_span(sent, ready, 0), (ready, 0));
    // A realtime value never mapped (decades off) is refused.
    assert_eq!(
        stack_span(sent, ready, 1_700_000_000_000_000_000),
        (ready, 0)
    );
}

#[test]
fn a_udp_datagrams_receive_stamp_splits_the_stack_from_the_wake_up() {
    let mut j = Joiner::new(1_000);
    let mut a = udp_ev(Kind::Arrival, 105_000, 7);
    a.rx = 102_000;
    j.push(a);
    let mut r = udp_ev(Kind::Read, 112_000, 7);
    r.epoll = 110_000;
    j.push(r);
    j.push(udp_ev(Kind::Write, 121_000, 7));
    let m = j
        .join(&Request {
            proto: Proto::Udp,
            port: PORT,
            sent: 100_000,
            received: 130_000,
            next_sent: 0,
            rid: Some(7),
        })
        .unwrap();
    assert_eq!(m.stack, 105_000);
    assert_eq!(&m.stamps[..3], &[102_000, 110_000, 112_000]);
}
