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
    // Read the head, then only count the body (a generated file may be large).
    let mut all = Vec::new();
    let mut buf = [0u8; 16384];
    let end = loop {
        if let Some(p) = all.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        let n = s.read(&mut buf).map_err(|e| format!("read: {e}"))?;
        if n == 0 || all.len() > 65536 {
            return Err(format!("no HTTP header end in {} bytes", all.len()));
        }
        all.extend_from_slice(&buf[..n]);
    };
    let mut body = (all.len() - end - 4) as u64;
    loop {
        let n = s.read(&mut buf).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        body += n as u64;
    }
    let head = String::from_utf8_lossy(&all[..end]);
    let status = head.lines().next().unwrap_or("");
    if !status.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {status:?}"));
    }
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

/// The HTTP/2 client preface with empty SETTINGS: a server that speaks HTTP/2 with prior
/// knowledge answers with a SETTINGS frame of its own first (RFC 9113 §3.4), an HTTP/1.1-only
/// one with an error page or nothing.
fn h2_settings(addr: SocketAddr) -> Result<(), String> {
    let mut s = connect(addr)?;
    let mut req = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // A frame header: length 0, type SETTINGS (4), no flags, stream 0.
    req.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    s.write_all(&req).map_err(|e| format!("write: {e}"))?;
    let mut head = [0u8; 9];
    s.read_exact(&mut head)
        .map_err(|e| format!("HTTP/2 preface: {e}"))?;
    if head[3] == 4 && head[4] & 1 == 0 {
        Ok(())
    } else {
        Err(format!(
            "HTTP/2 preface answered by {:?}, not a SETTINGS frame",
            String::from_utf8_lossy(&head)
        ))
    }
}

/// One readiness check. `Err` says what was missing (kept for the timeout error). `http2`:
/// nginx speaks HTTP/2 with prior knowledge.
pub(crate) fn ping(
    kind: Kind,
    addr: SocketAddr,
    udp: Option<SocketAddr>,
    first_file_len: u64,
    http2: bool,
    tls: bool,
) -> Result<(), String> {
    match kind {
        // Over TLS the port taking connections is the check (a handshake needs a client this
        // crate does not have; the run's first connection makes one and says what failed).
        _ if tls => connect(addr).map(|_| ()),
        Kind::Memcached => {
            request_line(addr, b"version\r\n", "VERSION ")?;
            match udp {
                Some(u) => memcached_udp(u),
                None => Ok(()),
            }
        }
        Kind::Redis => request_line(addr, b"*1\r\n$4\r\nPING\r\n", "+PONG"),
        Kind::Nginx if http2 => h2_settings(addr),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-connection server on port 0 that reads the request head and answers `reply`.
    fn canned(reply: Vec<u8>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut b = [0u8; 256];
            while !req.windows(2).any(|w| w == b"\r\n") {
                let n = c.read(&mut b).unwrap();
                req.extend_from_slice(&b[..n]);
            }
            c.write_all(&reply).unwrap();
        });
        addr
    }

    fn http(status: &str, len_header: Option<usize>, body: usize) -> Vec<u8> {
        let mut r = format!("HTTP/1.1 {status}\r\nServer: x\r\n");
        if let Some(l) = len_header {
            r += &format!("content-length: {l}\r\n");
        }
        r += "\r\n";
        let mut r = r.into_bytes();
        r.resize(r.len() + body, b'x');
        r
    }

    #[test]
    fn the_http2_check_wants_the_servers_settings_first() {
        // A SETTINGS frame with one parameter (MAX_CONCURRENT_STREAMS 128).
        let settings = vec![0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 128];
        assert_eq!(h2_settings(canned(settings)), Ok(()));
        // An HTTP/1.1-only server answers the preface with an error page.
        let e = h2_settings(canned(http("400 Bad Request", Some(0), 0))).unwrap_err();
        assert!(e.contains("not a SETTINGS frame"), "{e}");
        // A SETTINGS acknowledgement is not the server's own SETTINGS.
        let ack = vec![0, 0, 0, 4, 1, 0, 0, 0, 0];
        assert!(h2_settings(canned(ack)).is_err());
    }

    #[test]
    fn http_check_wants_200_and_a_matching_length() {
        assert_eq!(
            http_get_len(canned(http("200 OK", Some(100_000), 100_000)), "/f0"),
            Ok(100_000)
        );
        let e = http_get_len(canned(http("200 OK", Some(10), 9)), "/f0").unwrap_err();
        assert!(e.contains("body 9 bytes"), "{e}");
        let e = http_get_len(canned(http("200 OK", None, 9)), "/f0").unwrap_err();
        assert!(e.contains("Content-Length None"), "{e}");
        let e = http_get_len(canned(http("404 Not Found", Some(0), 0)), "/f0").unwrap_err();
        assert!(e.contains("404"), "{e}");
        let e = http_get_len(canned(b"garbage".to_vec()), "/f0").unwrap_err();
        assert!(e.contains("no HTTP header end"), "{e}");
    }

    #[test]
    fn line_checks_want_the_protocols_answer() {
        let ok = canned(b"+PONG\r\n".to_vec());
        assert_eq!(ping(Kind::Redis, ok, None, 0, false, false), Ok(()));
        let err = canned(b"-LOADING Redis is loading\r\n".to_vec());
        assert!(ping(Kind::Redis, err, None, 0, false, false).is_err());
        let ok = canned(b"VERSION 1.6.18\r\n".to_vec());
        assert_eq!(ping(Kind::Memcached, ok, None, 0, false, false), Ok(()));
        let bad = canned(b"ERROR\r\n".to_vec());
        assert!(ping(Kind::Memcached, bad, None, 0, false, false).is_err());
        // Nothing listens on a port whose listener was dropped.
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        assert!(ping(Kind::Redis, closed, None, 0, false, false)
            .unwrap_err()
            .contains("connect"));
    }
}
