//! Network bandwidth: the server's outgoing traffic on one interface through an HTB class at
//! a fixed rate (ThunderX §V-A: "qdisc with hierarchical token bucket queueing discipline is
//! used to limit the outgoing network bandwidth"). A root `htb` qdisc with tailscope's handle
//! whose default class carries every packet at `rate` (ceil = rate), on an interface of the
//! host or of a named network namespace (`ip netns`), e.g. the server side of a veth pair.
//!
//! `tc` (iproute2) runs as a subprocess. The alternative, rtnetlink messages built by hand or
//! through the netlink crates, is far more code: those crates are async (tokio) and do not
//! cover HTB's class options, while three `tc` command lines are short, well documented and
//! exactly what a reader re-runs by hand to check what a run did.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::Created;
use crate::probe::HostRoot;
use crate::HostError;

/// tailscope's qdisc handle: its own root qdisc is recognised by it (and never another's).
pub const HANDLE: &str = "7a5c:";
const CLASS: &str = "7a5c:1";
const MIN_RATE_BPS: u64 = 8_000;
const MAX_RATE_BPS: u64 = 400_000_000_000;

/// A bandwidth limit on one interface's egress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetShape {
    /// Bits per second.
    pub rate_bps: u64,
    /// The interface (`eth0`, the server side of a veth pair).
    pub dev: String,
    /// The network namespace it is in (`ip netns` name); None: tailscope's own.
    pub netns: Option<String>,
}

impl NetShape {
    /// `RATE` (see [`parse_rate_bps`]) on `[NETNS/]DEV`.
    pub fn parse(rate: &str, dev: &str) -> Result<NetShape, HostError> {
        let (netns, dev) = parse_dev(dev)?;
        Ok(NetShape {
            rate_bps: parse_rate_bps(rate)?,
            dev,
            netns,
        })
    }
}

fn bad(what: &str, reason: String) -> HostError {
    HostError::BadRequest {
        what: what.into(),
        reason,
    }
}

/// A rate in bits per second: `N` (bit/s) or `N` with `kbit`, `mbit`, `gbit` (decimal;
/// `k`, `m`, `g` and a trailing `/s` are accepted too), e.g. `100mbit`, `2.5gbit`. tc's own
/// `bps`/`kbps` mean *bytes* per second, so they are refused rather than guessed.
pub fn parse_rate_bps(s: &str) -> Result<u64, HostError> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix("/s").unwrap_or(&t);
    if t.ends_with("bps") {
        return Err(bad(
            "net rate",
            format!("'{s}': tc's bps means bytes per second; write bit, kbit, mbit or gbit"),
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit {
        "" | "bit" => 1.0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        _ => {
            return Err(bad(
                "net rate",
                format!("'{s}': expected N, Nkbit, Nmbit or Ngbit (bits per second)"),
            ))
        }
    };
    let v: f64 = num.parse().map_err(|_| {
        bad(
            "net rate",
            format!("'{s}' is not a number of bits per second"),
        )
    })?;
    let bps = v * mult;
    if !(bps >= MIN_RATE_BPS as f64 && bps <= MAX_RATE_BPS as f64) {
        return Err(bad(
            "net rate",
            format!("{s} is outside {MIN_RATE_BPS} bit/s ..= 400gbit"),
        ));
    }
    Ok(bps.round() as u64)
}

/// Interface and namespace names go on tc's command line: no '/', no blanks, no leading '-'.
fn check_name(what: &str, s: &str, max: usize) -> Result<(), HostError> {
    let ok = !s.is_empty()
        && s.len() <= max
        && !s.starts_with('-')
        && s != "."
        && s != ".."
        && s.chars().all(|c| c.is_ascii_graphic() && c != '/');
    if ok {
        Ok(())
    } else {
        Err(bad(what, format!("'{s}' is not a valid name")))
    }
}

/// `DEV` or `NETNS/DEV` (neither may hold a '/').
pub fn parse_dev(s: &str) -> Result<(Option<String>, String), HostError> {
    let (ns, dev) = match s.trim().split_once('/') {
        Some((n, d)) => (Some(n.to_string()), d.to_string()),
        None => (None, s.trim().to_string()),
    };
    if let Some(n) = &ns {
        check_name("net namespace", n, 255)?;
    }
    // IFNAMSIZ - 1.
    check_name("net interface", &dev, 15)?;
    Ok((ns, dev))
}

/// An iproute2 tool (`tc`, `ip`) on `PATH` or in the system directories root's `PATH` has.
pub(crate) fn tool_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs `tc [-n NETNS] ARGS`; its stdout, or its stderr as the error.
fn tc(netns: Option<&str>, args: &[&str]) -> Result<String, HostError> {
    let bin = tool_path("tc").ok_or_else(|| HostError::Unavailable {
        what: "net rate".into(),
        reason: "tc is not installed (apt-get install iproute2)".into(),
    })?;
    let mut all: Vec<&str> = Vec::new();
    if let Some(n) = netns {
        all.extend(["-n", n]);
    }
    all.extend(args);
    let shown = format!("tc {}", all.join(" "));
    let out = Command::new(&bin)
        .args(&all)
        .output()
        .map_err(|e| HostError::Command {
            command: shown.clone(),
            stderr: e.to_string(),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(HostError::Command {
            command: shown,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The root qdisc of `dev`: (kind, handle). A kernel default shows handle `0:`.
fn root_qdisc(netns: Option<&str>, dev: &str) -> Result<Option<(String, String)>, HostError> {
    let text = tc(netns, &["-j", "qdisc", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
    Ok(v.as_array().and_then(|a| {
        a.iter()
            .find(|q| q["root"].as_bool() == Some(true))
            .map(|q| {
                (
                    q["kind"].as_str().unwrap_or("").to_string(),
                    q["handle"].as_str().unwrap_or("").to_string(),
                )
            })
    }))
}

/// Checks the request against the host: the namespace and interface exist (under `root`;
/// on the real root `/` also through tc, which sees inside namespaces) and the interface
/// has no root qdisc of someone else's that tailscope would have to replace.
pub(crate) fn check(root: &HostRoot, n: &NetShape) -> Result<(), HostError> {
    check_name("net interface", &n.dev, 15)?;
    if let Some(ns) = &n.netns {
        check_name("net namespace", ns, 255)?;
        let named = ["run/netns", "var/run/netns"]
            .iter()
            .any(|d| root.join(Path::new(d).join(ns)).exists());
        if !named {
            return Err(bad(
                "net namespace",
                format!("no network namespace '{ns}' (see ip netns list)"),
            ));
        }
    } else if !root.join("sys/class/net").join(&n.dev).exists() {
        return Err(bad(
            "net interface",
            format!("no interface '{}' (sys/class/net/{0} is absent)", n.dev),
        ));
    }
    if root.as_path() != Path::new("/") {
        return Ok(());
    }
    let ns = n.netns.as_deref();
    let q = root_qdisc(ns, &n.dev).map_err(|e| match e {
        HostError::Command { stderr, .. } => bad(
            "net interface",
            format!(
                "'{}'{}: {stderr}",
                n.dev,
                ns.map(|s| format!(" in namespace {s}")).unwrap_or_default()
            ),
        ),
        other => other,
    })?;
    match q {
        Some((_, h)) if h == HANDLE => Err(HostError::Unavailable {
            what: "net rate".into(),
            reason: format!("another tailscope run shapes '{}' already", n.dev),
        }),
        Some((kind, h)) if h != "0:" && !h.is_empty() => Err(HostError::Unavailable {
            what: "net rate".into(),
            reason: format!(
                "'{}' has a root qdisc already ({kind} {h}); tailscope does not replace it",
                n.dev
            ),
        }),
        _ => Ok(()),
    }
}

/// Adds the qdisc and its class; `record` journals it first.
pub(crate) fn create(
    n: &NetShape,
    record: &mut dyn FnMut(Created) -> Result<(), HostError>,
) -> Result<(), HostError> {
    let ns = n.netns.as_deref();
    record(Created::Qdisc {
        netns: n.netns.clone(),
        dev: n.dev.clone(),
        handle: HANDLE.into(),
    })?;
    let dev = n.dev.as_str();
    tc(
        ns,
        &[
            "qdisc", "add", "dev", dev, "root", "handle", HANDLE, "htb", "default", "1",
        ],
    )?;
    let rate = format!("{}bit", n.rate_bps);
    tc(
        ns,
        &[
            "class", "add", "dev", dev, "parent", HANDLE, "classid", CLASS, "htb", "rate", &rate,
            "ceil", &rate,
        ],
    )?;
    Ok(())
}

/// Deletes the root qdisc of `dev` if it is still `handle` (tailscope's). An interface or
/// namespace that is gone took its qdisc with it.
pub(crate) fn remove(netns: Option<&str>, dev: &str, handle: &str) -> Result<(), HostError> {
    match root_qdisc(netns, dev) {
        Ok(Some((_, h))) if h == handle => {
            tc(netns, &["qdisc", "del", "dev", dev, "root"]).map(|_| ())
        }
        Ok(_) => Ok(()),
        // tc ran but found no such device or namespace: nothing is left to remove.
        Err(HostError::Command { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_bits() {
        assert_eq!(parse_rate_bps("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate_bps("2.5Gbit/s").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate_bps("64k").unwrap(), 64_000);
        assert_eq!(parse_rate_bps("1000000").unwrap(), 1_000_000);
        for b in ["", "10", "1mbps", "fast", "1tbit", "-5mbit", "1e3kbit"] {
            assert!(parse_rate_bps(b).is_err(), "{b}");
        }
        assert!(parse_rate_bps("8kbps")
            .unwrap_err()
            .to_string()
            .contains("bytes"));
    }

    #[test]
    fn devices_and_namespaces() {
        assert_eq!(parse_dev("eth0").unwrap(), (None, "eth0".into()));
        assert_eq!(
            parse_dev("lab/veth1").unwrap(),
            (Some("lab".into()), "veth1".into())
        );
        for b in ["", "a/b/c", "-x", "averyveryverylongname", "a b", "ns/"] {
            assert!(parse_dev(b).is_err(), "{b}");
        }
    }
}
