//! A server's own counters: memcached's `stats`, redis's `INFO`. Read before and after a run,
//! they show what the server did that the latencies cannot, e.g. evictions: 6.4 M items
//! overflow memcached's default 64 MB of item memory and it evicts without a word.
//! Hand-written like the readiness checks, for the same reason: independent of `wire`.
//! A server started with TLS (`memcached+tls://`, `rediss://`) has no plaintext port: its
//! counters are read inside a TLS session (rustls), verified against its own throwaway CA.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::{Kind, TargetError};

const TIMEOUT: Duration = Duration::from_secs(2);
/// A stats answer is a few KiB; anything past this is not one.
const MAX_BYTES: usize = 1 << 20;

/// Name → value, as the server printed them.
pub type Stats = BTreeMap<String, String>;

fn io(what: &str) -> impl Fn(std::io::Error) -> TargetError + '_ {
    move |e| TargetError::io(what.to_string(), e)
}

/// Sends `req` and reads until the answer's end marker (`ends`), bounded in size and time;
/// inside TLS, verified against the CA of `ca`'s file, when given.
fn exchange(
    addr: SocketAddr,
    ca: Option<&Path>,
    req: &[u8],
    done: &dyn Fn(&[u8]) -> bool,
) -> Result<Vec<u8>, TargetError> {
    let s = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(io("connecting for stats"))?;
    s.set_read_timeout(Some(TIMEOUT))
        .and_then(|()| s.set_write_timeout(Some(TIMEOUT)))
        .map_err(io("stats socket"))?;
    match ca {
        None => talk(s, req, done),
        Some(ca) => {
            let session = rustls::ClientConnection::new(
                tls_config(ca)?,
                rustls::pki_types::ServerName::IpAddress(addr.ip().into()),
            )
            .map_err(|e| TargetError::io("stats over TLS", std::io::Error::other(e)))?;
            talk(rustls::StreamOwned::new(session, s), req, done)
        }
    }
}

fn talk(
    mut s: impl Read + Write,
    req: &[u8],
    done: &dyn Fn(&[u8]) -> bool,
) -> Result<Vec<u8>, TargetError> {
    s.write_all(req)
        .and_then(|()| s.flush())
        .map_err(io("sending stats request"))?;
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    while !done(&buf) {
        let n = s.read(&mut b).map_err(io("reading stats"))?;
        if n == 0 || buf.len() + n > MAX_BYTES {
            return Err(TargetError::io(
                "reading stats",
                std::io::Error::new(std::io::ErrorKind::InvalidData, "incomplete answer"),
            ));
        }
        buf.extend_from_slice(&b[..n]);
    }
    Ok(buf)
}

/// A client configuration trusting only the CA of the PEM file `ca` (the server's own). ring
/// is the provider, as for the load (`load::tls` says why).
#[allow(deprecated)]
fn tls_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, TargetError> {
    use rustls::pki_types::pem::PemObject;
    let bad = |e: String| TargetError::io("stats over TLS", std::io::Error::other(e));
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).map_err(|e| bad(e.to_string()))? {
        roots
            .add(c.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// memcached `stats`: `STAT name value` lines, then `END`.
pub(crate) fn parse_memcached(text: &str) -> Stats {
    text.lines()
        .filter_map(|l| {
            let mut it = l.trim_end().splitn(3, ' ');
            (it.next()? == "STAT").then_some(())?;
            Some((it.next()?.to_string(), it.next().unwrap_or("").to_string()))
        })
        .collect()
}

/// redis `INFO`: a bulk string of `name:value` lines and `# Section` headers.
pub(crate) fn parse_redis(text: &str) -> Stats {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('$'))
        .filter_map(|l| {
            let (k, v) = l.trim_end().split_once(':')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// The counters of the server of `kind` at `addr` (inside TLS verified against `ca`'s CA,
/// when given).
pub(crate) fn read(kind: Kind, addr: SocketAddr, ca: Option<&Path>) -> Result<Stats, TargetError> {
    match kind {
        Kind::Memcached => {
            let b = exchange(addr, ca, b"stats\r\n", &|b| b.ends_with(b"END\r\n"))?;
            Ok(parse_memcached(&String::from_utf8_lossy(&b)))
        }
        Kind::Redis => {
            // `$LEN\r\n` then LEN bytes and `\r\n`.
            let complete = |b: &[u8]| {
                let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
                    return false;
                };
                let len = std::str::from_utf8(&b[1..eol])
                    .ok()
                    .and_then(|t| t.parse::<usize>().ok());
                len.is_none_or(|l| b.len() >= eol + 2 + l + 2)
            };
            let b = exchange(addr, ca, b"*1\r\n$4\r\nINFO\r\n", &complete)?;
            Ok(parse_redis(&String::from_utf8_lossy(&b)))
        }
        Kind::Nginx => Err(TargetError::BadConfig {
            kind,
            reason: "nginx keeps no counters tailscope reads (no stub_status)".into(),
        }),
    }
}

/// The server's eviction counter's name in its stats.
pub(crate) fn eviction_key(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Memcached => Some("evictions"),
        Kind::Redis => Some("evicted_keys"),
        Kind::Nginx => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_parse() {
        let m =
            parse_memcached("STAT pid 7\r\nSTAT evictions 42\r\nSTAT version 1.6.18\r\nEND\r\n");
        assert_eq!(m["evictions"], "42");
        assert_eq!(m["version"], "1.6.18");
        assert_eq!(m.len(), 3);
        let r = parse_redis("$60\r\n# Stats\r\nevicted_keys:3\r\nkeyspace_hits:10\r\n\r\n");
        assert_eq!(r["evicted_keys"], "3");
        assert_eq!(r.len(), 2);
    }
}
