//! Readiness checks: one request in each server's own protocol.
//!
//! These few lines of protocol are written by hand on purpose: the readiness check must not
//! depend on the load generator's codecs (crate `wire`), which are what the runs test.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use crate::Kind;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// The 8-byte memcached UDP frame header: request id, sequence 0, 1 datagram, reserved.
pub(crate) const MEMCACHED_UDP_HEADER: [u8; 8] = [0x12, 0x34, 0, 0, 0, 1, 0, 0];

fn connect(addr: SocketAddr) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| s.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| format!("socket options: {e}"))?;
    Ok(s)
}

/// Reads until `buf` holds `\r\n` (or EOF), at most 4 KiB.
fn read_line(s: &mut TcpStream) -> Result<String, String> {
    let mut buf = Vec::new();
    let mut b = [0u8; 512];
    while !buf.windows(2).any(|w| w == b"\r\n") && buf.len() < 4096 {
        let n = s.read(&mut b).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&b[..n]);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn request_line(addr: SocketAddr, req: &[u8], want_prefix: &str) -> Result<(), String> {
    let mut s = connect(addr)?;
    s.write_all(req).map_err(|e| format!("write: {e}"))?;
    let line = read_line(&mut s)?;
    if line.starts_with(want_prefix) {
        Ok(())
    } else {
        Err(format!("expected {want_prefix:?}, got {line:?}"))
    }
}

/// memcached `version` over UDP, with the frame header.
fn memcached_udp(addr: SocketAddr) -> Result<(), String> {
    let s = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("udp bind: {e}"))?;
    s.connect(addr)
        .and_then(|()| s.set_read_timeout(Some(Duration::from_millis(300))))
        .map_err(|e| format!("udp {addr}: {e}"))?;
    let mut req = MEMCACHED_UDP_HEADER.to_vec();
    req.extend_from_slice(b"version\r\n");
    s.send(&req).map_err(|e| format!("udp send: {e}"))?;
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).map_err(|e| format!("udp recv: {e}"))?;
    if n > 8 && buf[..2] == MEMCACHED_UDP_HEADER[..2] && buf[8..n].starts_with(b"VERSION ") {
        Ok(())
    } else {
        Err(format!("udp: unexpected reply {:?}", &buf[..n]))
    }
}

/// `GET path` with `Connection: close`; the answer must be 200 with `len` body bytes.
pub(crate) fn http_get_len(addr: SocketAddr, path: &str) -> Result<u64, String> {
    let mut s = connect(addr)?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).map_err(|e| format!("read: {e}"))?;
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no HTTP header end in {} bytes", all.len()))?;
    let head = String::from_utf8_lossy(&all[..end]);
    let status = head.lines().next().unwrap_or("");
    if !status.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {status:?}"));
    }
    let body = (all.len() - end - 4) as u64;
    let declared = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<u64>().ok())?
    });
    match declared {
        Some(d) if d == body => Ok(body),
        other => Err(format!(
            "GET {path}: Content-Length {other:?}, body {body} bytes"
        )),
    }
}

/// One readiness check. `Err` says what was missing (kept for the timeout error).
pub(crate) fn ping(
    kind: Kind,
    addr: SocketAddr,
    udp: Option<SocketAddr>,
    first_file_len: u64,
) -> Result<(), String> {
    match kind {
        Kind::Memcached => {
            request_line(addr, b"version\r\n", "VERSION ")?;
            match udp {
                Some(u) => memcached_udp(u),
                None => Ok(()),
            }
        }
        Kind::Redis => request_line(addr, b"*1\r\n$4\r\nPING\r\n", "+PONG"),
        Kind::Nginx => {
            let n = http_get_len(addr, "/f0")?;
            if n == first_file_len {
                Ok(())
            } else {
                Err(format!("/f0 has {n} bytes, expected {first_file_len}"))
            }
        }
    }
}
