//! Whether two runs may be compared: the host facts that must agree, and the configuration
//! keys that change what is measured (target URLs compare without their address: a server
//! restarted on port 0 is the same target, and the new address is a note).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::summary::HostFacts;

/// The host facts that must agree for two runs to be compared.
pub const HOST_KEYS: [&str; 5] = ["hostname", "kernel", "cpu_model", "arch", "cpus_online"];

/// Configuration keys that do not change what is measured (names, seeds, judgements, the
/// ideal and the probes beside the run); every other key must agree.
pub const IGNORED_CONFIG_KEYS: [&str; 16] = [
    "label",
    "seed",
    "host_noise",
    "ideal",
    "slo",
    "slo_view",
    "slos",
    "view",
    "find_max",
    "max_steps",
    "percentiles",
    "pids",
    "address",
    "role",
    "stages",
    "stages_budget",
];

/// Configuration keys (at any depth) whose values are target URLs: they compare by scheme and
/// path, without the address (host and port), see [`config_differences`].
pub const TARGET_URL_KEYS: [&str; 2] = ["target", "url"];

/// The host facts that differ: "kernel: 6.1.0 ≠ 6.8.0".
pub fn host_differences(candidate: &Value, baseline: &Value) -> Vec<String> {
    let (c, b) = (HostFacts::of(candidate), HostFacts::of(baseline));
    c.named()
        .into_iter()
        .zip(b.named())
        .filter(|((_, c), (_, b))| c != b)
        .map(|((k, c), (_, b))| format!("host {k}: {b} (baseline) vs {c} (candidate)"))
        .collect()
}

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if IGNORED_CONFIG_KEYS.contains(&k.as_str()) {
                    continue;
                }
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

/// A target URL without its address: `scheme://` and the path (with any query), host, port
/// and user left out, an empty path read as `/`: "nullrpc://127.0.0.1:43355" and
/// "NullRPC://[::1]:7/" both give "nullrpc:///". None when `s` is not a URL (no
/// `scheme://`), e.g. "builtin:threads".
fn without_address(s: &str) -> Option<String> {
    let (scheme, rest) = s.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return None;
    }
    let path = &rest[rest.find(['/', '?', '#']).unwrap_or(rest.len())..];
    let slash = if path.starts_with('/') { "" } else { "/" };
    Some(format!("{}://{slash}{path}", scheme.to_ascii_lowercase()))
}

/// True when `key` (a dotted path) names a target URL ([`TARGET_URL_KEYS`]) and `c` and `b`
/// are URLs that differ only in their address.
pub(super) fn same_target(key: &str, c: &Value, b: &Value) -> bool {
    let name = key.rsplit('.').next().unwrap_or(key);
    if !TARGET_URL_KEYS.contains(&name) {
        return false;
    }
    match (
        c.as_str().map(without_address),
        b.as_str().map(without_address),
    ) {
        (Some(Some(c)), Some(Some(b))) => c == b,
        _ => false,
    }
}

/// The flattened keys whose values differ, as (key, candidate value, baseline value).
fn differing(candidate: &Value, baseline: &Value) -> Vec<(String, Value, Value)> {
    let (mut c, mut b) = (BTreeMap::new(), BTreeMap::new());
    flatten("", candidate, &mut c);
    flatten("", baseline, &mut b);
    let keys: std::collections::BTreeSet<&String> = c.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (cv, bv) = (
                c.get(k).unwrap_or(&Value::Null),
                b.get(k).unwrap_or(&Value::Null),
            );
            (cv != bv).then(|| (k.clone(), cv.clone(), bv.clone()))
        })
        .collect()
}

/// The configuration keys (dotted paths) whose values differ, outside
/// [`IGNORED_CONFIG_KEYS`]: "rate_rps: 4000 (baseline) vs 2000 (candidate)". Target URLs
/// ([`TARGET_URL_KEYS`]) that differ only in their address (host and port: a server
/// restarted on port 0) are the same target, not a difference ([`config_notes`] says so).
pub fn config_differences(candidate: &Value, baseline: &Value) -> Vec<String> {
    differing(candidate, baseline)
        .into_iter()
        .filter(|(k, cv, bv)| !same_target(k, cv, bv))
        .map(|(k, cv, bv)| format!("{k}: {bv} (baseline) vs {cv} (candidate)"))
        .collect()
}

/// What differs in the configurations without refusing the baseline: each pair of target
/// URLs that differ only in their address, once, "the baseline's address differs:
/// nullrpc://127.0.0.1:38153 (baseline) vs nullrpc://127.0.0.1:43355 (candidate); compared
/// as the same target".
pub fn config_notes(candidate: &Value, baseline: &Value) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    for (k, cv, bv) in differing(candidate, baseline) {
        if !same_target(&k, &cv, &bv) {
            continue;
        }
        let (Some(c), Some(b)) = (cv.as_str(), bv.as_str()) else {
            continue;
        };
        let note = format!(
            "the baseline's address differs: {b} (baseline) vs {c} (candidate); compared as the same target"
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_list_host_and_configuration_keys_but_not_names_or_seeds() {
        let a = json!({"target": "nullrpc://h:1", "rate_rps": 4000.0, "seed": 1, "label": "a",
                       "run": {"connections": 4, "seed": 3}});
        let b = json!({"target": "nullrpc://h:1", "rate_rps": 2000.0, "seed": 2, "label": "b",
                       "run": {"connections": 8, "seed": 4}});
        let d = config_differences(&a, &b);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("rate_rps: 2000.0 (baseline) vs 4000.0 (candidate)"));
        assert!(d[1].starts_with("run.connections"));
        assert!(config_differences(&a, &a).is_empty());
        let h1 = json!({"hostname": "x", "kernel": "6.1", "cpu_model": "m"});
        let h2 = json!({"hostname": "y", "kernel": "6.1", "cpu_model": "m"});
        assert_eq!(host_differences(&h1, &h2).len(), 1);
        assert!(host_differences(&h1, &h1).is_empty());
    }

    #[test]
    fn a_target_whose_address_alone_differs_is_the_same_target_with_a_note() {
        let cfg = |target: &str, url: &str| {
            json!({"target": target, "url": url, "rate_rps": 4000.0,
                   "run": {"server": {"url": url}, "connections": 4}})
        };
        // a server restarted on port 0: only the port differs, at the top and deeper down
        let b = cfg("memcached", "memcached://127.0.0.1:38153");
        let c = cfg("memcached", "memcached://127.0.0.1:43355");
        assert!(config_differences(&c, &b).is_empty());
        assert_eq!(
            config_notes(&c, &b),
            vec![
                "the baseline's address differs: memcached://127.0.0.1:38153 (baseline) vs \
                 memcached://127.0.0.1:43355 (candidate); compared as the same target"
                    .to_string()
            ]
        );
        // another host too, and an empty path against "/"
        let c = cfg("http://10.0.0.5:8080/", "http://10.0.0.5:8080");
        let b = cfg("http://localhost:80", "http://localhost:80/");
        assert!(config_differences(&c, &b).is_empty());
        // one note per pair of addresses: target, url and run.server.url make two
        assert_eq!(config_notes(&c, &b).len(), 2, "{:?}", config_notes(&c, &b));
        assert!(config_notes(&c, &c).is_empty());
        // another scheme or another path is another target: refused, no note
        for (bt, ct) in [
            ("nullrpc://127.0.0.1:1", "memcached://127.0.0.1:2"),
            ("http://h:1/a", "http://h:2/b"),
            ("http://h:1/a?x=1", "http://h:1/a?x=2"),
            ("builtin:threads", "builtin:epoll"),
        ] {
            let (b, c) = (json!({"target": bt}), json!({"target": ct}));
            let d = config_differences(&c, &b);
            assert_eq!(d.len(), 1, "{bt} vs {ct}: {d:?}");
            assert!(d[0].starts_with("target: "), "{d:?}");
            assert!(config_notes(&c, &b).is_empty(), "{bt} vs {ct}");
        }
        // only keys named target or url compare so
        let d = config_differences(&json!({"server": "a://h:1"}), &json!({"server": "a://h:2"}));
        assert_eq!(d.len(), 1, "{d:?}");
    }
}
