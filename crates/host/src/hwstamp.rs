//! NIC hardware receive timestamps: whether a network interface offers them
//! ([`TsInfo`], `ETHTOOL_GET_TS_INFO`), the clock they are taken on (the NIC's PTP hardware
//! clock, [`HwClock`]) and its mapping onto `CLOCK_MONOTONIC`.
//!
//! A NIC that stamps received packets in hardware does so on its own clock (the PHC,
//! `/dev/ptpN`), not on any of the kernel's: the raw stamp (`SCM_TIMESTAMPING`'s third
//! timespec) is a PHC reading. tailscope maps it to `CLOCK_MONOTONIC` the way it maps the
//! software stamps' `CLOCK_REALTIME`: with the offset between the two clocks sampled in a
//! bracket of monotonic reads (`clock_gettime` on the PHC's dynamic POSIX clock), re-sampled
//! every [`CLOCK_MAP_MAX_AGE_NS`](crate::clock::CLOCK_MAP_MAX_AGE_NS). A PHC read crosses
//! the PCI bus, so the bracket is wider than for the system clocks (a few µs): the offset is
//! good to ± half of it, and the map keeps that width ([`ClockMap::uncertainty_ns`]). The
//! PHC is a free-running counter unless ptp4l/phc2sys steer it; its drift against the host
//! clock (tens of ppm) moves the mapping by under 1 µs between samples.
//!
//! tailscope never turns hardware stamping on in the NIC (`SIOCSHWTSTAMP`): that is
//! NIC-wide state which PTP daemons own, and changing it would disturb them and every other
//! program on the host. It asks its own sockets for hardware stamps
//! (`SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE`) when the NIC reports the
//! capability and a PHC; the NIC delivers them once its receive filter is on (`hwstamp_ctl -i
//! IFACE -r 1`, or ptp4l). Until then the raw stamp is zero and the software stamp is used.

use std::ffi::CString;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::clock::{mono_now_ns, ClockMap, CLOCK_MAP_MAX_AGE_NS};
use crate::HostError;

/// `SOF_TIMESTAMPING_*` bits of linux/net_tstamp.h that [`TsInfo`] reports.
pub const SOF_TIMESTAMPING_TX_HARDWARE: u32 = 1 << 0;
pub const SOF_TIMESTAMPING_TX_SOFTWARE: u32 = 1 << 1;
pub const SOF_TIMESTAMPING_RX_HARDWARE: u32 = 1 << 2;
pub const SOF_TIMESTAMPING_RX_SOFTWARE: u32 = 1 << 3;
pub const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
pub const SOF_TIMESTAMPING_RAW_HARDWARE: u32 = 1 << 6;

/// `ETHTOOL_GET_TS_INFO` (linux/ethtool.h).
const ETHTOOL_GET_TS_INFO: u32 = 0x41;

/// What an interface's driver says about timestamping (`struct ethtool_ts_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TsInfo {
    /// `SOF_TIMESTAMPING_*` capabilities.
    pub so_timestamping: u32,
    /// The NIC's PTP hardware clock, `/dev/ptpN` (−1: none).
    pub phc_index: i32,
    /// `HWTSTAMP_TX_*` and `HWTSTAMP_FILTER_*` bit sets the NIC supports.
    pub tx_types: u32,
    pub rx_filters: u32,
}

impl TsInfo {
    /// The NIC can stamp received packets in hardware and report the raw stamp, on a clock
    /// the host can read: the three things a usable hardware T1 needs.
    pub fn rx_hardware(&self) -> bool {
        let want = SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;
        self.so_timestamping & want == want && self.phc_index >= 0
    }

    /// The kernel stamps received packets in software on this interface.
    pub fn rx_software(&self) -> bool {
        self.so_timestamping & SOF_TIMESTAMPING_RX_SOFTWARE != 0
    }

    /// Parses the ioctl's answer (`struct ethtool_ts_info`: `cmd`, `so_timestamping`,
    /// `phc_index`, `tx_types`, 3 reserved, `rx_filters`, 3 reserved; 32-bit words, native
    /// endian). None when it is short.
    pub fn from_raw(b: &[u8]) -> Option<TsInfo> {
        let word = |i: usize| -> Option<u32> {
            let s = b.get(4 * i..4 * i + 4)?;
            Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
        };
        Some(TsInfo {
            so_timestamping: word(1)?,
            phc_index: word(2)? as i32,
            tx_types: word(3)?,
            rx_filters: word(7)?,
        })
    }
}

/// Where timestamping capabilities come from: the kernel ([`Ethtool`]) or a test's fixture.
pub trait TsInfoSource {
    /// The capabilities of interface `iface`.
    fn ts_info(&self, iface: &str) -> Result<TsInfo, HostError>;
}

/// The running kernel's answer, through `SIOCETHTOOL` on a datagram socket.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ethtool;

/// `struct ifreq` with `ifr_data` pointing at the ethtool request.
#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

impl TsInfoSource for Ethtool {
    fn ts_info(&self, iface: &str) -> Result<TsInfo, HostError> {
        let bad = |why: &str| {
            HostError::sys(
                "ioctl(SIOCETHTOOL, ETHTOOL_GET_TS_INFO)",
                io::Error::new(io::ErrorKind::InvalidInput, format!("{iface:?}: {why}")),
            )
        };
        let name = CString::new(iface).map_err(|_| bad("interface name with a NUL"))?;
        let bytes = name.as_bytes_with_nul();
        if bytes.len() > libc::IFNAMSIZ {
            return Err(bad("interface name too long"));
        }
        let mut info = [0u32; 12];
        info[0] = ETHTOOL_GET_TS_INFO;
        let mut req = IfreqData {
            name: [0; libc::IFNAMSIZ],
            data: info.as_mut_ptr().cast(),
            _pad: [0; 16],
        };
        for (d, s) in req.name.iter_mut().zip(bytes) {
            *d = *s as libc::c_char;
        }
        let sock = std::net::UdpSocket::bind("0.0.0.0:0")
            .or_else(|_| std::net::UdpSocket::bind("[::]:0"))
            .map_err(|e| HostError::sys("socket for SIOCETHTOOL", e))?;
        // SAFETY: `req` is a valid ifreq whose data points at a 48-byte ethtool_ts_info that
        // lives across the call; the socket is open.
        let rc = unsafe {
            libc::ioctl(
                sock.as_raw_fd(),
                libc::SIOCETHTOOL as _,
                &mut req as *mut IfreqData,
            )
        };
        if rc < 0 {
            return Err(HostError::sys(
                "ioctl(SIOCETHTOOL, ETHTOOL_GET_TS_INFO)",
                io::Error::last_os_error(),
            ));
        }
        let raw: Vec<u8> = info.iter().flat_map(|w| w.to_ne_bytes()).collect();
        TsInfo::from_raw(&raw).ok_or_else(|| bad("short answer"))
    }
}

/// The interface that owns local address `ip` (None for a wildcard address, or one no
/// interface has).
pub fn interface_of(ip: IpAddr) -> Option<String> {
    if ip.is_unspecified() {
        return None;
    }
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    for a in addrs {
        let Some(addr) = a.address else { continue };
        let own = if let Some(v4) = addr.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if own == ip {
            return Some(a.interface_name);
        }
    }
    None
}

/// A NIC's PTP hardware clock, open, with its mapping onto `CLOCK_MONOTONIC`.
#[derive(Debug)]
pub struct HwClock {
    fd: OwnedFd,
    path: PathBuf,
    map: Mutex<Option<ClockMap>>,
}

impl HwClock {
    /// Opens `/dev/ptp{index}` under `dev` (`/dev` on a real host) and reads it once.
    pub fn open(dev: &Path, index: i32) -> Result<HwClock, HostError> {
        let path = dev.join(format!("ptp{index}"));
        let f = std::fs::File::open(&path).map_err(|e| HostError::sys("opening the PHC", e))?;
        let c = HwClock {
            fd: OwnedFd::from(f),
            path,
            map: Mutex::new(None),
        };
        c.now_ns()
            .ok_or_else(|| HostError::sys("reading the PHC", io::Error::last_os_error()))?;
        Ok(c)
    }

    /// The clock's device.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The PHC's time now, ns (its dynamic POSIX clock: `FD_TO_CLOCKID(fd)`).
    pub fn now_ns(&self) -> Option<u64> {
        let clock = ((!(self.fd.as_raw_fd() as libc::clockid_t)) << 3) | 3;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the clock id names our open fd.
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        (rc == 0 && ts.tv_sec >= 0 && ts.tv_nsec >= 0)
            .then(|| (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// The PHC → monotonic mapping, re-sampled when older than `CLOCK_MAP_MAX_AGE_NS`
    /// (None when the PHC cannot be read).
    pub fn map(&self) -> Option<ClockMap> {
        let mut m = self.map.lock().ok()?;
        match *m {
            Some(c) if mono_now_ns().saturating_sub(c.sampled_at_ns()) < CLOCK_MAP_MAX_AGE_NS => {
                Some(c)
            }
            _ => {
                let c = ClockMap::sample_with(|| self.now_ns())?;
                *m = Some(c);
                Some(c)
            }
        }
    }
}

/// The hardware receive stamping a server bound to `ip` can use: the PHC of the interface
/// owning `ip` when its NIC reports hardware receive stamps (`source` answers for it, `dev`
/// holds its `ptpN`); None for a wildcard address (packets may come through any interface),
/// an interface without hardware stamps (loopback, veth), or a PHC that cannot be opened.
pub fn rx_clock_for(ip: IpAddr, source: &dyn TsInfoSource, dev: &Path) -> Option<HwClock> {
    let iface = interface_of(ip)?;
    let info = source.ts_info(&iface).ok()?;
    if !info.rx_hardware() {
        return None;
    }
    HwClock::open(dev, info.phc_index).ok()
}

#[cfg(test)]
#[path = "hwstamp_tests.rs"]
mod tests;
