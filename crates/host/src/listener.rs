//! Which process of this host listens on an address (issue 37: the why knows the server the
//! user started, so its threads count as the server's, not as "other tasks"). The sockets
//! come from `net/tcp{,6}` or `net/udp{,6}` under a proc root, their owners from the `fd`
//! links of each process (`socket:[inode]`); a root path lets tests use fixture trees.

use std::collections::BTreeSet;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// TCP's LISTEN state in `/proc/net/tcp`.
const TCP_LISTEN: &str = "0A";
/// An unconnected UDP socket (`TCP_CLOSE`, 07) in `/proc/net/udp`.
const UDP_UNCONNECTED: &str = "07";

/// The processes (pids, ascending) holding a socket bound to `addr`'s port that accepts on
/// its address: bound to that very address, or — for a loopback target — to the wildcard
/// or any loopback address. TCP listeners, or unconnected UDP sockets when `udp`.
pub fn listening_pids(proc_root: &Path, addr: SocketAddr, udp: bool) -> Vec<u32> {
    let (files, state) = if udp {
        (["net/udp", "net/udp6"], UDP_UNCONNECTED)
    } else {
        (["net/tcp", "net/tcp6"], TCP_LISTEN)
    };
    let inodes: BTreeSet<u64> = files
        .iter()
        .filter_map(|f| fs::read_to_string(proc_root.join(f)).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|l| socket_of(l, state))
                .filter(|(local, _)| accepts(*local, addr))
                .map(|(_, inode)| inode)
                .collect::<Vec<_>>()
        })
        .filter(|&i| i != 0)
        .collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    let Ok(procs) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| holds_any(&proc_root.join(pid.to_string()).join("fd"), &inodes))
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether a directory of fd links holds a socket among `inodes`.
fn holds_any(fd_dir: &Path, inodes: &BTreeSet<u64>) -> bool {
    let Ok(fds) = fs::read_dir(fd_dir) else {
        return false;
    };
    fds.flatten().any(|fd| {
        fs::read_link(fd.path()).ok().is_some_and(|target| {
            target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
                .is_some_and(|i: u64| inodes.contains(&i))
        })
    })
}

/// One row of `net/tcp`-style text: the local address and the inode, when in `state`.
fn socket_of(line: &str, state: &str) -> Option<(SocketAddr, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    if f.len() < 10 || f[3] != state {
        return None;
    }
    Some((parse_addr(f[1])?, f[9].parse().ok()?))
}

/// `0100007F:2BCB` (IPv4) or 32 hex digits `:port` (IPv6): each 32-bit word of the address in
/// the host's order (little-endian here), the port in big-endian hex.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |w: &str| u32::from_str_radix(w, 16).ok().map(u32::from_be);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?.to_be_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for k in 0..4 {
                let w = word(&ip[8 * k..8 * k + 8])?;
                bytes[4 * k..4 * k + 4].copy_from_slice(&w.to_be_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether a socket bound to `local` takes connections made to `target`. A wildcard socket
/// counts for a loopback target only: for another address this host may not be the one
/// that address reaches.
fn accepts(local: SocketAddr, target: SocketAddr) -> bool {
    if local.port() != target.port() {
        return false;
    }
    let l = canonical(local.ip());
    let t = canonical(target.ip());
    l == t || (t.is_loopback() && (l.is_unspecified() || l.is_loopback()))
}

/// An IPv4-mapped IPv6 address as the IPv4 one.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn addresses_read_as_the_kernel_writes_them() {
        assert_eq!(
            parse_addr("0100007F:2BCB"),
            Some("127.0.0.1:11211".parse().unwrap())
        );
        assert_eq!(
            parse_addr("00000000:0050"),
            Some("0.0.0.0:80".parse().unwrap())
        );
        assert_eq!(
            parse_addr("00000000000000000000000001000000:1F90"),
            Some("[::1]:8080".parse().unwrap())
        );
        assert_eq!(
            parse_addr("0000000000000000FFFF00000100007F:0050"),
            Some("[::ffff:127.0.0.1]:80".parse().unwrap())
        );
        assert_eq!(parse_addr("zz:1"), None);
        let t: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(accepts("0.0.0.0:80".parse().unwrap(), t));
        assert!(accepts("[::]:80".parse().unwrap(), t));
        assert!(accepts("127.0.0.2:80".parse().unwrap(), t));
        assert!(accepts("[::ffff:127.0.0.1]:80".parse().unwrap(), t));
        assert!(!accepts("127.0.0.1:81".parse().unwrap(), t));
        assert!(!accepts("10.0.0.1:80".parse().unwrap(), t));
        let remote: SocketAddr = "10.0.0.1:80".parse().unwrap();
        assert!(accepts(remote, remote));
        assert!(!accepts("0.0.0.0:80".parse().unwrap(), remote));
    }

    #[test]
    fn a_fixture_tree_names_the_process_holding_the_listener() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("net")).unwrap();
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        fs::write(
            root.join("net/tcp"),
            format!(
                "{header}   0: 0100007F:2BCB 00000000:0000 0A 00000000:00000000 00:00000000 00000000   100        0 4242 1 0 100 0 0 10 0\n   1: 0100007F:2BCB 0100007F:9C40 01 00000000:00000000 00:00000000 00000000   100        0 5151 1 0 100 0 0 10 0\n"
            ),
        )
        .unwrap();
        for (pid, inode) in [(77, 4242), (78, 5151), (79, 9999)] {
            let fd = root.join(format!("{pid}/fd"));
            fs::create_dir_all(&fd).unwrap();
            std::os::unix::fs::symlink(format!("socket:[{inode}]"), fd.join("3")).unwrap();
        }
        let at: SocketAddr = "127.0.0.1:11211".parse().unwrap();
        // Only the listener's owner (78 holds an established connection to the port).
        assert_eq!(listening_pids(root, at, false), vec![77]);
        assert!(listening_pids(root, "127.0.0.1:11212".parse().unwrap(), false).is_empty());
        assert!(listening_pids(root, at, true).is_empty(), "no UDP table");
    }

    #[test]
    fn this_process_is_found_behind_its_own_listener() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let me = std::process::id();
        assert!(
            listening_pids(Path::new("/proc"), at, false).contains(&me),
            "pid {me} listens on {at}"
        );
    }
}
