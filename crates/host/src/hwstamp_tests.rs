//! Hardware timestamping capabilities: the parser against fixed answers, a capability answer
//! injected through [`TsInfoSource`], and the running kernel's answer for loopback (which has
//! no hardware stamps).

use super::*;
use std::net::Ipv4Addr;

/// `struct ethtool_ts_info` as the kernel fills it.
fn raw(so: u32, phc: i32, tx: u32, rx: u32) -> Vec<u8> {
    let words = [
        ETHTOOL_GET_TS_INFO,
        so,
        phc as u32,
        tx,
        0,
        0,
        0,
        rx,
        0,
        0,
        0,
    ];
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

const SOFTWARE_ONLY: u32 =
    SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
/// What a PTP-capable NIC (igb, ixgbe, mlx5) reports.
const HARDWARE: u32 = SOFTWARE_ONLY
    | SOF_TIMESTAMPING_TX_HARDWARE
    | SOF_TIMESTAMPING_RX_HARDWARE
    | SOF_TIMESTAMPING_RAW_HARDWARE;

#[test]
fn the_answer_parses_and_says_what_the_nic_can() {
    let i = TsInfo::from_raw(&raw(HARDWARE, 2, 3, 0x7fff)).unwrap();
    assert_eq!(
        i,
        TsInfo {
            so_timestamping: HARDWARE,
            phc_index: 2,
            tx_types: 3,
            rx_filters: 0x7fff
        }
    );
    assert!(i.rx_hardware() && i.rx_software());
    // Hardware stamps without a clock to read them on are of no use.
    assert!(!TsInfo::from_raw(&raw(HARDWARE, -1, 3, 1))
        .unwrap()
        .rx_hardware());
    // Receive stamps without the raw form (only the deprecated "system" form): no.
    let no_raw = HARDWARE & !SOF_TIMESTAMPING_RAW_HARDWARE;
    assert!(!TsInfo::from_raw(&raw(no_raw, 0, 3, 1))
        .unwrap()
        .rx_hardware());
    assert!(!TsInfo::from_raw(&raw(SOFTWARE_ONLY, -1, 0, 0))
        .unwrap()
        .rx_hardware());
    assert_eq!(TsInfo::from_raw(&raw(HARDWARE, 0, 0, 0)[..30]), None);
}

struct Claims(TsInfo);

impl TsInfoSource for Claims {
    fn ts_info(&self, _iface: &str) -> Result<TsInfo, HostError> {
        Ok(self.0)
    }
}

#[test]
fn an_injected_hardware_nic_needs_a_readable_clock() {
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let dir = tempfile::tempdir().unwrap();
    // The NIC claims hardware stamps on /dev/ptp0, but the fixture's ptp0 is a plain file,
    // not a clock: no hardware T1.
    std::fs::write(dir.path().join("ptp0"), b"").unwrap();
    let nic = Claims(TsInfo {
        so_timestamping: HARDWARE,
        phc_index: 0,
        tx_types: 3,
        rx_filters: 1,
    });
    assert!(nic.ts_info("lo").unwrap().rx_hardware());
    assert!(rx_clock_for(lo, &nic, dir.path()).is_none());
    let e = HwClock::open(dir.path(), 0).unwrap_err();
    assert!(e.to_string().contains("PHC"), "{e}");
    // No such clock at all.
    assert!(HwClock::open(dir.path(), 7).is_err());
    // A wildcard address names no interface.
    assert!(rx_clock_for(IpAddr::V4(Ipv4Addr::UNSPECIFIED), &nic, dir.path()).is_none());
}

#[test]
fn loopback_answers_software_stamps_only() {
    assert_eq!(
        interface_of(IpAddr::V4(Ipv4Addr::LOCALHOST)).as_deref(),
        Some("lo")
    );
    let info = Ethtool
        .ts_info("lo")
        .expect("the kernel answers for loopback");
    assert!(info.rx_software(), "{info:?}");
    assert!(!info.rx_hardware(), "{info:?}");
    assert_eq!(info.phc_index, -1);
    assert!(rx_clock_for(IpAddr::V4(Ipv4Addr::LOCALHOST), &Ethtool, Path::new("/dev")).is_none());
    // An interface that does not exist is an error, not an answer.
    assert!(Ethtool.ts_info("tsnope0").is_err());
    assert!(Ethtool.ts_info("a-name-longer-than-ifnamsiz").is_err());
}
