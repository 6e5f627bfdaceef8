//! `runs export --format openmetrics --push URL`: the exposition sent to a Prometheus
//! Pushgateway with one HTTP/1.1 PUT (which replaces the URL's whole grouping key), over plain
//! HTTP. No client library: one request, `Connection: close`, the status line read back.
//! A [`PushUrl`] parses with `FromStr` (the CLI's `--push` value); errors are one line.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::str::FromStr;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A checked push target: `http://HOST[:PORT]/PATH`.
#[derive(Clone, Debug)]
pub struct PushUrl {
    host: String,
    port: u16,
    path: String,
    text: String,
}

impl FromStr for PushUrl {
    type Err = String;

    /// Checks a push URL: `http://HOST[:PORT]/metrics/job/JOB…`.
    fn from_str(url: &str) -> Result<PushUrl, String> {
        let bad = |why: &str| format!("{why} (e.g. http://127.0.0.1:9091/metrics/job/tailscope)");
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if !path.starts_with("/metrics/job/") || path.len() <= "/metrics/job/".len() {
            return Err(bad("the path must be /metrics/job/JOB[/LABEL/VALUE…]"));
        }
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the path has spaces or control characters"));
        }
        let port_of = |p: &str| {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad("bad port"))
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            match after.strip_prefix(':') {
                Some(p) => (h, port_of(p)?),
                None if after.is_empty() => (h, 80),
                None => return Err(bad("bad port")),
            }
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, port_of(p)?),
                None => (authority, 80),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(PushUrl {
            host: host.to_string(),
            port,
            path: path.to_string(),
            text: url.to_string(),
        })
    }
}

impl PushUrl {
    /// PUTs `body` (an exposition); an error unless the Pushgateway answers 2xx.
    pub fn push(&self, body: &[u8]) -> Result<(), String> {
        self.put(body)
            .map_err(|e| format!("cannot push to {}: {e}", self.text))
    }

    fn put(&self, body: &[u8]) -> Result<(), String> {
        let io = |e: std::io::Error| e.to_string();
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| format!("{} has no address", self.host))?;
        let mut s = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(io)?;
        s.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
        s.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
        let host = if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        };
        let head = format!(
            "PUT {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: tailscope/{}\r\n\
             Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.path,
            env!("CARGO_PKG_VERSION"),
            body.len()
        );
        s.write_all(head.as_bytes()).map_err(io)?;
        s.write_all(body).map_err(io)?;
        s.flush().map_err(io)?;
        let mut answer = Vec::new();
        s.take(64 * 1024).read_to_end(&mut answer).map_err(io)?;
        let answer = String::from_utf8_lossy(&answer);
        let status = answer
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or("no HTTP status in its answer")?;
        if (200..300).contains(&status) {
            return Ok(());
        }
        let said = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.trim())
            .and_then(|b| b.lines().next())
            .unwrap_or("");
        Err(format!("HTTP {status}: {said}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_urls() {
        let u = PushUrl::from_str("http://127.0.0.1:9091/metrics/job/t/instance/a").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("127.0.0.1", 9091));
        assert_eq!(u.path, "/metrics/job/t/instance/a");
        let u = PushUrl::from_str("http://[::1]:9/metrics/job/t").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9));
        assert_eq!(
            PushUrl::from_str("http://gw/metrics/job/t").unwrap().port,
            80
        );
        assert_eq!(
            PushUrl::from_str("http://[::1]/metrics/job/t")
                .unwrap()
                .port,
            80
        );
        for bad in [
            "https://gw/metrics/job/t",
            "http://gw:x/metrics/job/t",
            "http://gw:9091/",
            "http://gw:9091/metrics/job/",
            "http://:9091/metrics/job/t",
            "http://gw/metrics/job/a b",
        ] {
            assert!(PushUrl::from_str(bad).is_err(), "{bad}");
        }
    }
}
