//! `runs export --format openmetrics --push URL`: the exposition sent to a Prometheus
//! Pushgateway with one HTTP/1.1 PUT (which replaces the URL's whole grouping key), over plain
//! HTTP. No client library: one request, `Connection: close`, the status line read back.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, Context};

use crate::exit::usage;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A checked push target: `http://HOST[:PORT]/PATH`.
pub struct PushUrl {
    host: String,
    port: u16,
    path: String,
    text: String,
}

impl PushUrl {
    /// Checks `--push URL` (a usage error when it is not `http://HOST[:PORT]/PATH…`).
    pub fn parse(url: &str) -> anyhow::Result<PushUrl> {
        let bad = |why: &str| {
            usage(format!(
                "--push {url}: {why} (e.g. http://127.0.0.1:9091/metrics/job/tailscope)"
            ))
        };
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

    /// PUTs `body` (an exposition); an error unless the Pushgateway answers 2xx.
    pub fn push(&self, body: &[u8]) -> anyhow::Result<()> {
        let ctx = || format!("cannot push to {}", self.text);
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .with_context(ctx)?
            .next()
            .ok_or_else(|| anyhow!("{} has no address", self.host))
            .with_context(ctx)?;
        let mut s = TcpStream::connect_timeout(&addr, TIMEOUT).with_context(ctx)?;
        s.set_read_timeout(Some(TIMEOUT)).with_context(ctx)?;
        s.set_write_timeout(Some(TIMEOUT)).with_context(ctx)?;
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
        s.write_all(head.as_bytes()).with_context(ctx)?;
        s.write_all(body).with_context(ctx)?;
        s.flush().with_context(ctx)?;
        let mut answer = Vec::new();
        s.take(64 * 1024)
            .read_to_end(&mut answer)
            .with_context(ctx)?;
        let answer = String::from_utf8_lossy(&answer);
        let status = answer
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or_else(|| anyhow!("no HTTP status in its answer"))
            .with_context(ctx)?;
        if (200..300).contains(&status) {
            return Ok(());
        }
        let said = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.trim())
            .and_then(|b| b.lines().next())
            .unwrap_or("");
        Err(anyhow!("HTTP {status}: {said}")).with_context(ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_urls() {
        let u = PushUrl::parse("http://127.0.0.1:9091/metrics/job/t/instance/a").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("127.0.0.1", 9091));
        assert_eq!(u.path, "/metrics/job/t/instance/a");
        let u = PushUrl::parse("http://[::1]:9/metrics/job/t").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9));
        assert_eq!(PushUrl::parse("http://gw/metrics/job/t").unwrap().port, 80);
        assert_eq!(
            PushUrl::parse("http://[::1]/metrics/job/t").unwrap().port,
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
            assert!(PushUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
