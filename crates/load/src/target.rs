//! Target URLs: which protocol to speak, over which transport, to which address.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;

use crate::error::LoadError;

/// The transport a protocol runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// One TCP connection per engine connection (TCP_NODELAY set).
    Tcp,
    /// One connected UDP socket per engine connection; lost datagrams time out.
    Udp,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        })
    }
}

/// A known URL scheme. New protocols (memcached, http, redis) add one row to [`SCHEMES`].
struct SchemeInfo {
    name: &'static str,
    /// Transport when the URL does not say `+tcp` / `+udp`.
    default: Transport,
    /// Transports the protocol can run over.
    allowed: &'static [Transport],
    /// The codec it speaks (`http` for `https`), and whether over TLS.
    codec: &'static str,
    tls: bool,
}

const SCHEMES: &[SchemeInfo] = &[
    SchemeInfo {
        name: "nullrpc",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp, Transport::Udp],
        codec: "nullrpc",
        tls: false,
    },
    SchemeInfo {
        name: "memcached",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp, Transport::Udp],
        codec: "memcached",
        tls: false,
    },
    SchemeInfo {
        name: "http",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp],
        codec: "http",
        tls: false,
    },
    SchemeInfo {
        // HTTP/2 over cleartext with prior knowledge (RFC 9113 §3.3).
        name: "h2c",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp],
        codec: "h2c",
        tls: false,
    },
    SchemeInfo {
        name: "redis",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp],
        codec: "redis",
        tls: false,
    },
    SchemeInfo {
        // HTTP/1.1 over TLS.
        name: "https",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp],
        codec: "http",
        tls: true,
    },
    SchemeInfo {
        // Redis over TLS (RESP inside the session, as redis-cli --tls speaks it).
        name: "rediss",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp],
        codec: "redis",
        tls: true,
    },
    SchemeInfo {
        // HTTP/2 over TLS, agreed by ALPN (RFC 9113 §3.2).
        name: "h2",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp],
        codec: "h2c",
        tls: true,
    },
    SchemeInfo {
        // gRPC unary calls over HTTP/2 with prior knowledge.
        name: "grpc",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp],
        codec: "grpc",
        tls: false,
    },
    SchemeInfo {
        // gRPC over TLS (HTTP/2 agreed by ALPN).
        name: "grpcs",
        default: Transport::Tcp,
        allowed: &[Transport::Tcp],
        codec: "grpc",
        tls: true,
    },
];

/// A parsed target such as `nullrpc://127.0.0.1:7000` or `nullrpc+udp://[::1]:7000`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The protocol's codec, without the transport suffix (`"nullrpc"`; `"http"` for
    /// `https://`, `"h2c"` for `h2://`).
    pub scheme: String,
    /// The transport (from the `+tcp` / `+udp` suffix, else the protocol's default).
    pub transport: Transport,
    /// The resolved address (the first one the resolver returns).
    pub addr: SocketAddr,
    /// Anything after the authority, starting with `/` (used by HTTP later).
    pub path: Option<String>,
    /// The codec is spoken over TLS (`https://`, `h2://`).
    pub tls: bool,
    /// The host as the URL names it (TLS's server name by default).
    pub host: String,
}

impl Target {
    /// The URL scheme as the user writes it: `https` for HTTP over TLS, `h2` for HTTP/2 over
    /// TLS, else the codec's name.
    pub fn url_scheme(&self) -> &str {
        match (self.scheme.as_str(), self.tls) {
            ("http", true) => "https",
            ("h2c", true) => "h2",
            ("redis", true) => "rediss",
            ("memcached", true) => "memcached+tls",
            ("grpc", true) => "grpcs",
            (s, _) => s,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Over TLS the scheme says TCP already (`https`, `memcached+tls`).
        if self.tls {
            write!(f, "{}://{}", self.url_scheme(), self.addr)?;
        } else {
            write!(
                f,
                "{}+{}://{}",
                self.url_scheme(),
                self.transport,
                self.addr
            )?;
        }
        if let Some(p) = &self.path {
            f.write_str(p)?;
        }
        Ok(())
    }
}

fn known_schemes() -> String {
    SCHEMES
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Target {
    type Err = LoadError;

    fn from_str(url: &str) -> Result<Self, LoadError> {
        let bad = |reason: String| LoadError::BadTarget {
            url: url.to_string(),
            reason,
        };
        let (scheme_part, rest) = url.split_once("://").ok_or_else(|| {
            bad(format!(
                "expected SCHEME://HOST:PORT (schemes: {})",
                known_schemes()
            ))
        })?;
        let scheme_part = scheme_part.to_ascii_lowercase();
        // `memcached+tls` is memcached's text protocol over TLS (memcached -Z).
        let (name, transport, over_tls) = match scheme_part.split_once('+') {
            Some(("memcached", "tls")) => ("memcached", Some(Transport::Tcp), true),
            Some((n, "tls")) => {
                return Err(bad(format!(
                    "'+tls' is for memcached (memcached+tls://); {n} over TLS is {}",
                    match n {
                        "http" => "https://",
                        "h2c" => "h2://",
                        "redis" => "rediss://",
                        _ => "not known",
                    }
                )))
            }
            Some((n, "tcp")) => (n, Some(Transport::Tcp), false),
            Some((n, "udp")) => (n, Some(Transport::Udp), false),
            Some((_, t)) => {
                return Err(bad(format!(
                    "unknown transport '{t}' (use +tcp or +udp, or +tls for memcached)"
                )))
            }
            None => (scheme_part.as_str(), None, false),
        };
        let info = SCHEMES.iter().find(|s| s.name == name).ok_or_else(|| {
            bad(format!(
                "unknown scheme '{name}' (known: {})",
                known_schemes()
            ))
        })?;
        let transport = transport.unwrap_or(info.default);
        if !info.allowed.contains(&transport) {
            return Err(bad(format!("{name} does not run over {transport}")));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(rest[i..].to_string())),
            None => (rest, None),
        };
        let (addr, host) = resolve(authority).map_err(bad)?;
        Ok(Target {
            scheme: info.codec.to_string(),
            transport,
            addr,
            path,
            tls: info.tls || over_tls,
            host,
        })
    }
}

/// Splits `host:port` / `[v6]:port`, checks the port, and resolves the host: its first
/// address, and the host as written.
fn resolve(authority: &str) -> Result<(SocketAddr, String), String> {
    if authority.is_empty() {
        return Err("missing host".into());
    }
    let (host, port) = if let Some(after) = authority.strip_prefix('[') {
        let (h, tail) = after
            .split_once(']')
            .ok_or_else(|| "unclosed '[' in IPv6 address".to_string())?;
        let port = tail
            .strip_prefix(':')
            .ok_or_else(|| "missing port (write [ADDR]:PORT)".to_string())?;
        (h, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("IPv6 addresses must be in brackets: [ADDR]:PORT".into())
            }
            Some((h, p)) => (h, p),
            None => return Err("missing port (write HOST:PORT)".into()),
        }
    };
    if host.is_empty() {
        return Err("missing host".into());
    }
    if port.is_empty() {
        return Err("missing port (write HOST:PORT)".into());
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("bad port '{port}' (expected 1-65535)"))?;
    if port == 0 {
        return Err("port 0 is not a valid target port".into());
    }
    let mut addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host '{host}': {e}"))?;
    let addr = addrs
        .next()
        .ok_or_else(|| format!("host '{host}' resolved to no address"))?;
    Ok((addr, host.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(url: &str) -> String {
        url.parse::<Target>().unwrap_err().to_string()
    }

    #[test]
    fn tls_schemes_speak_their_codec_over_tls_and_keep_the_host() {
        let t: Target = "https://localhost:8443/f0".parse().unwrap();
        assert_eq!(
            (t.scheme.as_str(), t.tls, t.host.as_str()),
            ("http", true, "localhost")
        );
        assert_eq!(t.url_scheme(), "https");
        assert_eq!(t.path.as_deref(), Some("/f0"));
        // What it prints parses back to the same target.
        let back: Target = t.to_string().parse().unwrap();
        assert_eq!(
            (back.scheme, back.tls, back.addr),
            ("http".into(), true, t.addr)
        );
        let h: Target = "h2://[::1]:8443".parse().unwrap();
        assert_eq!(
            (h.scheme.as_str(), h.tls, h.host.as_str()),
            ("h2c", true, "::1")
        );
        assert_eq!(h.url_scheme(), "h2");
        let plain: Target = "h2c://127.0.0.1:80".parse().unwrap();
        assert!(!plain.tls && plain.url_scheme() == "h2c");
        assert!(err("https+udp://127.0.0.1:443").contains("does not run over udp"));
        let m: Target = "memcached+tls://127.0.0.1:11211".parse().unwrap();
        assert_eq!(
            (m.scheme.as_str(), m.tls, m.transport),
            ("memcached", true, Transport::Tcp)
        );
        assert_eq!(m.to_string(), "memcached+tls://127.0.0.1:11211");
        let r: Target = "rediss://127.0.0.1:6380".parse().unwrap();
        assert_eq!((r.scheme.as_str(), r.tls), ("redis", true));
        assert_eq!(r.to_string().parse::<Target>().unwrap(), r);
        assert!(err("http+tls://127.0.0.1:80").contains("https://"));
    }

    #[test]
    fn parses_tcp_and_udp() {
        let t: Target = "nullrpc://127.0.0.1:7000".parse().unwrap();
        assert_eq!(t.scheme, "nullrpc");
        assert_eq!(t.transport, Transport::Tcp);
        assert_eq!(t.addr, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(t.path, None);
        let u: Target = "nullrpc+udp://[::1]:7000".parse().unwrap();
        assert_eq!(u.transport, Transport::Udp);
        assert_eq!(u.addr, "[::1]:7000".parse().unwrap());
        let p: Target = "NullRPC+tcp://127.0.0.1:9/x/y".parse().unwrap();
        assert_eq!(p.path.as_deref(), Some("/x/y"));
        assert_eq!(p.to_string(), "nullrpc+tcp://127.0.0.1:9/x/y");
    }

    #[test]
    fn real_target_schemes() {
        let m: Target = "memcached://127.0.0.1:11211".parse().unwrap();
        assert_eq!(
            (m.scheme.as_str(), m.transport),
            ("memcached", Transport::Tcp)
        );
        let u: Target = "memcached+udp://127.0.0.1:11211".parse().unwrap();
        assert_eq!(u.transport, Transport::Udp);
        let h: Target = "http://127.0.0.1:8080/files/a.html".parse().unwrap();
        assert_eq!(
            (h.scheme.as_str(), h.path.as_deref()),
            ("http", Some("/files/a.html"))
        );
        let r: Target = "redis://[::1]:6379".parse().unwrap();
        assert_eq!((r.scheme.as_str(), r.transport), ("redis", Transport::Tcp));
        assert!(err("http+udp://127.0.0.1:80").contains("does not run over udp"));
        assert!(err("redis+udp://127.0.0.1:80").contains("does not run over udp"));
    }

    #[test]
    fn rejects_bad_urls_with_reasons() {
        assert!(err("ftp://127.0.0.1:1").contains("unknown scheme 'ftp'"));
        assert!(err("ftp://127.0.0.1:1").contains("nullrpc"));
        assert!(err("nullrpc://127.0.0.1").contains("missing port"));
        assert!(err("nullrpc://127.0.0.1:").contains("missing port"));
        assert!(err("nullrpc://127.0.0.1:99999").contains("bad port '99999'"));
        assert!(err("nullrpc://127.0.0.1:0").contains("port 0"));
        assert!(err("nullrpc+sctp://127.0.0.1:1").contains("unknown transport 'sctp'"));
        assert!(err("127.0.0.1:7000").contains("SCHEME://"));
        assert!(err("nullrpc://:7000").contains("missing host"));
        assert!(err("nullrpc://::1:7000").contains("brackets"));
        assert!(err("nullrpc://[::1]7000").contains("missing port"));
        assert!(err("nullrpc://no-such-host.invalid:7000").contains("cannot resolve host"));
        // The URL itself is named in the message.
        assert!(err("nullrpc://127.0.0.1").contains("'nullrpc://127.0.0.1'"));
    }
}
