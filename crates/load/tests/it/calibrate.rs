//! Calibration against a server with an exactly known service time.

use crate::common;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::{Behaviour, TcpEcho};
use load::{calibrate, NullRpc, Protocol, Transport};

/// Calibrations saturate the CPU; running them one at a time keeps them from
/// starving each other on a 2-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn calibration_recovers_a_known_service_time() {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // One connection to a thread-per-connection server: requests are served one at a
    // time, paced at 500 µs each, so peak throughput is 2000/s and service 500 µs as long
    // as the client keeps the server backlogged: 256 outstanding = 128 ms of queued work,
    // enough to ride out either thread being descheduled on this busy 2-core machine.
    // The brief allows ±20 %.
    let server = TcpEcho::start(Behaviour {
        spin_ns: 500_000,
        paced: true,
        ..Default::default()
    });
    let target = format!("nullrpc://{}", server.addr).parse().unwrap();
    let factory = || Box::new(NullRpc::new(Transport::Tcp, 128, false, false)) as Box<dyn Protocol>;
    let stop = AtomicBool::new(false);
    let cal = calibrate(
        &target,
        &factory,
        1,
        256,
        Duration::from_millis(400),
        Duration::from_millis(50),
        &stop,
    )
    .unwrap();
    let rel = cal.service_ns / 500_000.0 - 1.0;
    eprintln!("calibration: {cal:?}");
    assert!(rel.abs() < 0.2, "service {} ns", cal.service_ns);
    assert!(cal.requests > 100);
    assert!((cal.peak_rps * cal.service_ns / 1e9 - 1.0).abs() < 1e-9);
}

#[test]
fn calibration_of_an_unreachable_target_fails_cleanly() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let target = format!("nullrpc://{addr}").parse().unwrap();
    let factory = || Box::new(NullRpc::new(Transport::Tcp, 128, false, false)) as Box<dyn Protocol>;
    let stop = AtomicBool::new(false);
    let e = calibrate(
        &target,
        &factory,
        1,
        1,
        Duration::from_millis(10),
        Duration::ZERO,
        &stop,
    )
    .unwrap_err();
    assert!(matches!(e, load::LoadError::Connect { .. }), "{e}");
}

#[test]
fn calibration_over_udp_counts_replies() {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The UDP echo answers at once; check only that batching keeps one request per
    // datagram (every request answered: the server drops nothing here) and counts add up.
    let server = common::UdpEcho::start(0);
    let target = format!("nullrpc+udp://{}", server.addr).parse().unwrap();
    let factory = || Box::new(NullRpc::new(Transport::Udp, 128, false, false)) as Box<dyn Protocol>;
    let stop = AtomicBool::new(false);
    let cal = calibrate(
        &target,
        &factory,
        2,
        8,
        Duration::from_millis(100),
        Duration::from_millis(20),
        &stop,
    )
    .unwrap();
    assert!(cal.requests > 100, "{cal:?}");
    assert_eq!(cal.duration_ns, 100_000_000);
}
