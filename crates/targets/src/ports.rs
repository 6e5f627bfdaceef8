//! Free loopback ports.
//!
//! A port is found by binding port 0, reading the number the kernel chose and closing the
//! socket, because the servers take a port number, not a bound socket. Between the close and
//! the server's own bind another process may take the port; the caller then sees the
//! server fail with "Address already in use" and retries with a new port. Ports handed to
//! live servers of this process are remembered, so two servers started at once never get
//! the same number from here.

use std::collections::BTreeSet;
use std::net::{TcpListener, UdpSocket};
use std::sync::Mutex;

use crate::TargetError;

static LEASED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

fn leased() -> std::sync::MutexGuard<'static, BTreeSet<u16>> {
    // The set stays consistent even if a holder panicked (insert/remove are atomic).
    LEASED.lock().unwrap_or_else(|p| p.into_inner())
}

/// A port number reserved for one server of this process until dropped.
#[derive(Debug)]
pub(crate) struct PortLease(pub(crate) u16);

impl PortLease {
    /// Reserves `port` if no live server of this process holds it.
    pub(crate) fn take(port: u16) -> Option<PortLease> {
        // Not `then_some(PortLease(..))`: a rejected lease would be built and dropped (and
        // so un-lease the port) while the lock is held.
        let fresh = leased().insert(port);
        if fresh {
            Some(PortLease(port))
        } else {
            None
        }
    }
}

impl Drop for PortLease {
    fn drop(&mut self) {
        leased().remove(&self.0);
    }
}

/// A loopback port that is free now for TCP (and UDP with `udp`).
pub(crate) fn free_port(udp: bool) -> Result<PortLease, TargetError> {
    let mut last = None;
    for _ in 0..64 {
        let l = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| TargetError::io("binding a free loopback port", e))?;
        let port = l
            .local_addr()
            .map_err(|e| TargetError::io("reading the bound port", e))?
            .port();
        if udp {
            if let Err(e) = UdpSocket::bind(("127.0.0.1", port)) {
                last = Some(e);
                continue;
            }
        }
        if let Some(lease) = PortLease::take(port) {
            return Ok(lease);
        }
    }
    Err(TargetError::io(
        "finding a free loopback port",
        last.unwrap_or_else(|| std::io::Error::other("every port found was in use")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_exclusive_until_dropped() {
        let a = free_port(true).unwrap();
        let b = free_port(false).unwrap();
        assert_ne!(a.0, b.0);
        assert!(PortLease::take(a.0).is_none());
        let p = a.0;
        drop(a);
        let again = PortLease::take(p);
        assert!(again.is_some());
        // A free port really is bindable for both protocols.
        drop(again);
        let c = free_port(true).unwrap();
        let _t = TcpListener::bind(("127.0.0.1", c.0)).unwrap();
        let _u = UdpSocket::bind(("127.0.0.1", c.0)).unwrap();
    }
}
