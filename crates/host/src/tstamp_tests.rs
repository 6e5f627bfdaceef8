//! Loopback tests of kernel timestamps. Tolerance: a kernel stamp is compared with user-space
//! CLOCK_MONOTONIC readings taken before the send and after the receive; the realtime →
//! monotonic mapping is good to its sample's bracket (typically < 1 µs), so each bound gets
//! `SLACK_NS` = 20 µs of allowance for it (NTP slewing over a 10 ms cache is ≤ 5 µs).

use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;

const SLACK_NS: u64 = 20_000;

/// The kernel switches receive stamping on from a workqueue after the first socket asks for
/// it, so packets right after `enable` may lack a stamp: send datagrams until one has one.
fn warm_up_rx_stamping() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    enable(rx.as_raw_fd(), true, false).unwrap();
    for _ in 0..200 {
        tx.send_to(b"w", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 4];
        if recv_from_with_stamp(rx.as_raw_fd(), &mut buf, 0)
            .unwrap()
            .2
            .is_some()
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("the kernel never attached a receive timestamp");
}

fn within(stamp: u64, lo: u64, hi: u64) -> bool {
    stamp + SLACK_NS >= lo && stamp <= hi + SLACK_NS
}

#[test]
fn clock_map_converts_now_to_now() {
    let m = ClockMap::sample();
    assert!(m.uncertainty_ns() < 1_000_000);
    let before = mono_now_ns();
    let rt = realtime_now_ns();
    let after = mono_now_ns();
    assert!(within(m.realtime_to_mono(rt), before, after));
    assert_eq!(m.realtime_to_mono(0), 0);
}

#[test]
fn udp_rx_stamp_lies_between_send_and_receive() {
    warm_up_rx_stamping();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    enable(rx.as_raw_fd(), true, false).unwrap();
    for i in 0..20u8 {
        let before = mono_now_ns();
        tx.send_to(&[i; 100], rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 256];
        let (n, from, stamp) = recv_from_with_stamp(rx.as_raw_fd(), &mut buf, 0).unwrap();
        let after = mono_now_ns();
        assert_eq!((n, from), (100, tx.local_addr().unwrap()));
        assert_eq!(buf[0], i);
        let s = stamp.expect("kernel rx stamp");
        assert!(within(s, before, after), "{before} <= {s} <= {after}");
    }
}

#[test]
fn no_stamp_when_not_enabled() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
    let mut buf = [0u8; 16];
    let (n, _, stamp) = recv_from_with_stamp(rx.as_raw_fd(), &mut buf, 0).unwrap();
    assert_eq!((n, stamp), (1, None));
}

#[test]
fn tcp_rx_and_tx_stamps_on_loopback() {
    warm_up_rx_stamping();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, _) = l.accept().unwrap();
    enable(server.as_raw_fd(), true, false).unwrap();
    enable(client.as_raw_fd(), false, true).unwrap();
    let mut sent = 0u32;
    for len in [10usize, 1, 300] {
        let before = mono_now_ns();
        client.write_all(&vec![7u8; len]).unwrap();
        sent += len as u32;
        // tx: the stamp's key is the offset of the last byte of this send.
        let mut got = None;
        for _ in 0..100 {
            if let Some(s) = read_tx_stamp(client.as_raw_fd()).unwrap() {
                got = Some(s);
                break;
            }
            wait_error_queue(client.as_raw_fd(), 10).unwrap();
        }
        let (key, t6) = got.expect("kernel tx stamp");
        assert_eq!(key, sent - 1);
        // rx on the other side.
        let mut buf = vec![0u8; len];
        let mut have = 0;
        let mut last = None;
        while have < len {
            let (n, s) = recv_with_stamp(server.as_raw_fd(), &mut buf[have..], 0).unwrap();
            assert!(n > 0);
            have += n;
            last = s.or(last);
        }
        let after = mono_now_ns();
        let t1 = last.expect("kernel rx stamp");
        assert!(within(t6, before, after), "{before} <= {t6} <= {after}");
        assert!(within(t1, before, after), "{before} <= {t1} <= {after}");
        assert!(t6 <= t1 + SLACK_NS, "sent {t6} after received {t1}");
    }
    // Nothing left: a further read says so without blocking.
    assert_eq!(read_tx_stamp(client.as_raw_fd()).unwrap(), None);
    let mut plain = server;
    drop(client);
    let mut rest = Vec::new();
    plain.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
}

#[test]
fn udp_tx_keys_count_datagrams() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    enable(tx.as_raw_fd(), false, true).unwrap();
    for i in 0..3u32 {
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        let mut got = None;
        for _ in 0..100 {
            if let Some(s) = read_tx_stamp(tx.as_raw_fd()).unwrap() {
                got = Some(s);
                break;
            }
            wait_error_queue(tx.as_raw_fd(), 10).unwrap();
        }
        assert_eq!(got.expect("tx stamp").0, i);
    }
}

/// Control messages as the kernel lays them out (libc's CMSG_* macros): an `IP_TOS` byte
/// first, then `SCM_TIMESTAMPING` with the given software and raw hardware stamps.
fn control(sw: (i64, i64), hw: (i64, i64)) -> Vec<u8> {
    let ts = [
        libc::timespec {
            tv_sec: sw.0,
            tv_nsec: sw.1,
        },
        libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        libc::timespec {
            tv_sec: hw.0,
            tv_nsec: hw.1,
        },
    ];
    let ts_len = std::mem::size_of_val(&ts) as u32;
    // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
    let (tos_space, ts_space) = unsafe { (libc::CMSG_SPACE(1), libc::CMSG_SPACE(ts_len)) };
    let mut buf = vec![0u8; (tos_space + ts_space) as usize];
    // SAFETY: the msghdr points at `buf`, sized by CMSG_SPACE for both messages; each header
    // and its data are written inside it.
    unsafe {
        let mut m: libc::msghdr = std::mem::zeroed();
        m.msg_control = buf.as_mut_ptr().cast();
        m.msg_controllen = buf.len() as _;
        let c = libc::CMSG_FIRSTHDR(&m);
        (*c).cmsg_level = libc::IPPROTO_IP;
        (*c).cmsg_type = libc::IP_TOS;
        (*c).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(c) = 0x10;
        let c = libc::CMSG_NXTHDR(&m, c);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SO_TIMESTAMPING;
        (*c).cmsg_len = libc::CMSG_LEN(ts_len) as _;
        std::ptr::copy_nonoverlapping(
            ts.as_ptr().cast::<u8>(),
            libc::CMSG_DATA(c),
            ts_len as usize,
        );
    }
    buf
}

#[test]
fn a_control_buffer_gives_its_software_and_hardware_stamps() {
    let b = control((1_700_000_000, 5), (42, 7));
    assert_eq!(
        scm_timestamping(&b),
        Some(ScmTimestamping {
            software: Some(1_700_000_000_000_000_005),
            hw_raw: Some(42_000_000_007),
        })
    );
    // A zero timespec is no stamp (the NIC's receive filter is off).
    let b = control((1_700_000_000, 5), (0, 0));
    assert_eq!(scm_timestamping(&b).unwrap().hw_raw, None);
    // No timestamping message, a truncated one, garbage: nothing.
    let full = control((1, 2), (3, 4));
    // SAFETY: pure arithmetic.
    let tos_space = unsafe { libc::CMSG_SPACE(1) } as usize;
    assert_eq!(scm_timestamping(&full[..tos_space]), None);
    assert_eq!(scm_timestamping(&full[..full.len() - 8]), None);
    assert_eq!(scm_timestamping(&[]), None);
    assert_eq!(scm_timestamping(&[0xff; 7]), None);
}

#[test]
fn the_hardware_stamp_is_preferred_when_its_clock_is_mapped() {
    // Realtime is monotonic + 1000 s; the PHC is monotonic + 40 s (both from one bracket of
    // width 100 ns: the midpoint is paired with the other clock's reading).
    let rt = ClockMap::from_bracket(5_000, 1_000_000_005_050, 5_100);
    let phc = ClockMap::from_bracket(5_000, 40_000_005_050, 5_100);
    assert_eq!(rt.offset_ns(), 1_000_000_000_000);
    assert_eq!(
        (phc.offset_ns(), phc.uncertainty_ns()),
        (40_000_000_000, 100)
    );
    let ts = ScmTimestamping {
        software: Some(1_000_000_009_000),
        hw_raw: Some(40_000_008_000),
    };
    assert_eq!(
        choose_rx(ts, &rt, Some(&phc)),
        Some(RxStamp {
            mono_ns: 8_000,
            kind: RxStampKind::Hardware
        })
    );
    // No mapped NIC clock: the hardware stamp cannot be placed on our clock; software.
    assert_eq!(
        choose_rx(ts, &rt, None),
        Some(RxStamp {
            mono_ns: 9_000,
            kind: RxStampKind::Software
        })
    );
    // No hardware stamp: software, whatever the map.
    let sw_only = ScmTimestamping { hw_raw: None, ..ts };
    assert_eq!(
        choose_rx(sw_only, &rt, Some(&phc)).map(|s| s.kind),
        Some(RxStampKind::Software)
    );
    assert_eq!(choose_rx(ScmTimestamping::default(), &rt, Some(&phc)), None);
}

#[test]
fn a_real_receive_reports_a_software_stamp_on_loopback() {
    warm_up_rx_stamping();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Asking for hardware stamps too is harmless where the NIC has none: none arrive.
    enable_with(rx.as_raw_fd(), true, false, true).unwrap();
    let hw = crate::hwstamp::SOF_TIMESTAMPING_RX_HARDWARE
        | crate::hwstamp::SOF_TIMESTAMPING_RAW_HARDWARE;
    assert_eq!(current_flags(rx.as_raw_fd()) & hw, hw);
    // Switching transmit stamps on later keeps them; turning receive stamps off drops them.
    enable(rx.as_raw_fd(), true, true).unwrap();
    assert_eq!(current_flags(rx.as_raw_fd()) & hw, hw);
    let before = mono_now_ns();
    tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
    let mut buf = [0u8; 8];
    let (n, from, stamp) = recv_from_stamped(rx.as_raw_fd(), &mut buf, 0, None).unwrap();
    let after = mono_now_ns();
    assert_eq!((n, from), (1, tx.local_addr().unwrap()));
    let s = stamp.expect("kernel rx stamp");
    assert_eq!(s.kind, RxStampKind::Software);
    assert!(within(s.mono_ns, before, after));
    enable(rx.as_raw_fd(), false, true).unwrap();
    assert_eq!(current_flags(rx.as_raw_fd()) & hw, 0);
}
