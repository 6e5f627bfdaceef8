//! The experiment file (`sweep FILE.toml`, `colocate A.toml B.toml`): a sweep's options as a
//! file one can commit and rerun. [`ExperimentFile::read`] reads it with a bound, parses it
//! with serde into typed fields (an unknown key, a value of the wrong type or a duplicate key
//! is refused naming the key and its line, and so is a value its option's parser refuses:
//! durations, counts, loads, the SLO, percentiles) and checks every axis of its `[param]`
//! table. The CLI lays its typed options under the command line's, option by option, and
//! [`merge_axes`](experiments::merge_axes) its axes under the command line's, axis by axis.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use toml::Spanned;

use crate::options::{OnOff, QueuesArg, UndecidedArg, ViewArg, WorkloadArg};
use experiments::{Axis, Knob};
use measurement::error::{clip, invalid, LabError};
use measurement::input_file::MAX_EXPERIMENT_BYTES;
use measurement::input_file::{line_of, read_bounded, toml_message};

/// A value given as text or as a number (`key-size = 30`, `cpus = "0"`): kept as its text.
#[derive(Clone, Debug, PartialEq)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        d.deserialize_any(TextVisitor { bools: false }).map(Text)
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

struct TextVisitor {
    bools: bool,
}

impl Visitor<'_> for TextVisitor {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.bools {
            f.write_str("a string, a number or a boolean")
        } else {
            f.write_str("a string or a number")
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        if self.bools {
            Ok(v.to_string())
        } else {
            Err(E::invalid_type(de::Unexpected::Bool(v), &self))
        }
    }
}

/// One value or an array of them (`loads = "10,20%"` or `loads = [1000, 2000]`), each text
/// or a number (and, for a knob's values, a boolean).
#[derive(Clone, Debug, PartialEq)]
pub struct List(pub Vec<String>);

impl<'de> Deserialize<'de> for List {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<List, D::Error> {
        d.deserialize_any(ListVisitor { bools: false }).map(List)
    }
}

impl Serialize for List {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.join(","))
    }
}

/// A knob's values in `[param]`: as [`List`], booleans allowed (`open-file-cache`).
#[derive(Clone, Debug, PartialEq)]
pub struct KnobValues(pub Vec<String>);

impl<'de> Deserialize<'de> for KnobValues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KnobValues, D::Error> {
        d.deserialize_any(ListVisitor { bools: true })
            .map(KnobValues)
    }
}

struct ListVisitor {
    bools: bool,
}

impl<'de> Visitor<'de> for ListVisitor {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.bools {
            f.write_str("a value (string, number or boolean) or an array of them")
        } else {
            f.write_str("a string, a number or an array of them")
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
        Ok(vec![v.to_string()])
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<String>, E> {
        Ok(vec![v.to_string()])
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<String>, E> {
        Ok(vec![v.to_string()])
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<String>, E> {
        Ok(vec![v.to_string()])
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Vec<String>, E> {
        TextVisitor { bools: self.bools }
            .visit_bool(v)
            .map(|s| vec![s])
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(TextSeed { bools: self.bools })? {
            out.push(v);
        }
        Ok(out)
    }
}

struct TextSeed {
    bools: bool,
}

impl<'de> de::DeserializeSeed<'de> for TextSeed {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(TextVisitor { bools: self.bools })
    }
}

/// A key's text checked by `check` when the file is read: its error is serde's, so it names
/// the key and its line.
fn checked<'de, D, T, E>(d: D, check: impl Fn(&T) -> Result<(), E>) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
    E: fmt::Display,
{
    let v = T::deserialize(d)?;
    check(&v).map_err(|e| {
        // The message names the key already (with its line): "--loads: " is left out.
        let m = e.to_string();
        let m = m
            .strip_prefix("--")
            .and_then(|r| r.split_once(": "))
            .map_or(m.as_str(), |(_, rest)| rest);
        de::Error::custom(clip(m))
    })?;
    Ok(Some(v))
}

/// A duration (`duration`, `warmup`, `timeout`, …): a number with its unit.
fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    checked(d, |s: &String| model::parse_duration_ns(s).map(|_| ()))
}

/// `requests`: a count (`100k`, `1e6`, 5000).
fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Text>, D::Error> {
    checked(d, |t: &Text| model::parse_count(&t.0).map(|_| ()))
}

/// `loads`: what `--loads` takes, as one text or an array.
fn loads<'de, D: Deserializer<'de>>(d: D) -> Result<Option<List>, D::Error> {
    checked(d, |l: &List| {
        measurement::parse_loads(&l.0.join(",")).map(|_| ())
    })
}

/// `slo`: what `--slo` takes.
fn slo<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    checked(d, |s: &String| {
        experiments::slo::Slo::parse(s, experiments::slo::ViewChoice::Auto).map(|_| ())
    })
}

/// `percentiles`: what `--percentiles` takes.
fn percentiles<'de, D: Deserializer<'de>>(d: D) -> Result<Option<List>, D::Error> {
    checked(d, |l: &List| {
        measurement::percentile::parse_percentiles(&l.0.join(",")).map(|_| ())
    })
}

/// An experiment file's keys: `sweep`'s options without their leading `--` (all but `db`
/// and `json`, which belong to the command line), `target` for its URL, `[param]` for its
/// axes, and three free-text keys that describe it. Each has the type of its option.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ExperimentSpec {
    // What it is (not options).
    #[serde(skip_serializing)]
    pub description: Option<String>,
    #[serde(skip_serializing)]
    pub figure: Option<String>,
    #[serde(skip_serializing)]
    pub paper: Option<String>,
    #[serde(skip_serializing)]
    pub target: Option<String>,
    /// Knob name → its values.
    #[serde(skip_serializing)]
    pub param: Option<BTreeMap<Spanned<String>, Spanned<KnobValues>>>,
    // The sweep's own options.
    #[serde(default, deserialize_with = "loads")]
    pub loads: Option<List>,
    pub repeat: Option<u32>,
    #[serde(default, deserialize_with = "slo")]
    pub slo: Option<String>,
    pub slo_view: Option<ViewArg>,
    #[serde(default, deserialize_with = "percentiles")]
    pub percentiles: Option<List>,
    pub slo_undecided: Option<UndecidedArg>,
    pub junit: Option<String>,
    pub markdown: Option<String>,
    pub no_noise_probe: Option<bool>,
    pub dry_run: Option<bool>,
    /// One agent's command line (more: an `agents` file), as `sweep --agent`.
    pub agent: Option<String>,
    pub agents: Option<String>,
    pub agent_records: Option<OnOff>,
    pub label: Option<measurement::Label>,
    pub find_max: Option<bool>,
    pub max_steps: Option<u32>,
    // `--interleave`: the knob values compared in paired slices.
    pub interleave: Option<bool>,
    #[serde(default, deserialize_with = "duration")]
    pub slice: Option<String>,
    pub pairs: Option<u32>,
    #[serde(default, deserialize_with = "duration")]
    pub interleave_for: Option<String>,
    pub decide: Option<Text>,
    pub tolerance: Option<Text>,
    // The load (as for `run`).
    pub arrival: Option<String>,
    pub trace_unit: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    pub duration: Option<String>,
    #[serde(default, deserialize_with = "count")]
    pub requests: Option<Text>,
    #[serde(default, deserialize_with = "duration")]
    pub warmup: Option<String>,
    pub connections: Option<usize>,
    pub threads: Option<usize>,
    pub cpus: Option<Text>,
    pub max_outstanding: Option<usize>,
    #[serde(default, deserialize_with = "duration")]
    pub timeout: Option<String>,
    pub request_size: Option<usize>,
    pub no_stamps: Option<bool>,
    pub yield_when_far: Option<bool>,
    pub overdue: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    pub lateness_threshold: Option<String>,
    pub precision: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    pub max_duration: Option<String>,
    pub alpha: Option<f64>,
    pub seed: Option<u64>,
    pub confidence: Option<f64>,
    // The server side.
    #[serde(default, deserialize_with = "duration")]
    pub service: Option<String>,
    pub workers: Option<u32>,
    pub queues: Option<QueuesArg>,
    pub server_pid: Option<Spanned<List>>,
    pub server_cpus: Option<Text>,
    pub no_attribution: Option<bool>,
    // The target's server and workload.
    pub spawn: Option<bool>,
    pub server_threads: Option<u32>,
    pub server_sched: Option<String>,
    pub server_arch: Option<String>,
    pub server_work: Option<String>,
    pub get_ratio: Option<f64>,
    pub key_size: Option<Text>,
    pub value_size: Option<Text>,
    pub items: Option<u64>,
    pub popularity: Option<String>,
    pub no_preload: Option<bool>,
    pub files: Option<u32>,
    pub file_size: Option<Text>,
    pub churn: Option<String>,
    pub insecure: Option<bool>,
    pub ca: Option<String>,
    pub sni: Option<String>,
    pub tls_handshake_per_request: Option<bool>,
    pub method: Option<String>,
    pub proto: Option<String>,
    pub message: Option<String>,
    pub data: Option<String>,
    pub metadata: Option<Vec<String>>,
    pub server_memory_mb: Option<u32>,
    pub open_file_cache: Option<bool>,
    pub server_instances: Option<u32>,
    pub server_smt: Option<String>,
    pub server_numa: Option<String>,
    pub workload: Option<WorkloadArg>,
    pub server_cpuset: Option<Text>,
    pub server_memory: Option<Text>,
    pub server_cpu_quota: Option<Text>,
    pub net_rate: Option<String>,
    pub net_dev: Option<String>,
    pub llc_ways: Option<u32>,
    pub stress: Option<String>,
}

/// A checked experiment file: its target, its typed options and its axes.
#[derive(Clone, Debug)]
pub struct ExperimentFile {
    /// Every key as its option's type (`None`: not set by the file).
    pub spec: ExperimentSpec,
    /// The target URL.
    pub target: String,
    /// `[param]`: each knob and its values (every value checked), in the file's order of
    /// names.
    pub axes: Vec<Axis>,
}

/// What an experiment file's keys are, for an unknown one.
const KEYS_HINT: &str = "an experiment file's keys are target, description, figure, paper, [param] and sweep's options without the -- (see tailscope sweep --help)";

impl ExperimentFile {
    /// Reads (at most [`MAX_EXPERIMENT_BYTES`], a regular file) and checks an experiment file.
    pub fn read(path: &Path) -> Result<ExperimentFile, LabError> {
        let text = read_bounded(path, MAX_EXPERIMENT_BYTES, "experiment file")?;
        let name = path.display().to_string();
        ExperimentFile::parse(&clip(&name), &text)
    }

    /// Parses and checks the text of an experiment file; `name` names it in errors.
    pub fn parse(name: &str, text: &str) -> Result<ExperimentFile, LabError> {
        let spec: ExperimentSpec = toml::from_str(text)
            .map_err(|e| invalid(toml_message(name, text, &e, Some(KEYS_HINT))))?;
        let target = match spec.target.as_deref().map(str::trim) {
            None => {
                return Err(invalid(format!(
                    "{name}: no 'target' (e.g. target = \"memcached://\")"
                )))
            }
            Some(t) if t.is_empty() || t.starts_with('-') || t.ends_with(".toml") => {
                return Err(invalid(format!(
                    "{name}: target must be a URL (e.g. memcached://), got '{}'",
                    clip(t)
                )))
            }
            Some(t) => t.to_string(),
        };
        if spec.duration.is_some() && spec.requests.is_some() {
            return Err(invalid(format!(
                "{name}: duration and requests exclude each other (a run stops after one)"
            )));
        }
        if let Some(pids) = &spec.server_pid {
            if let Some(bad) = pids
                .get_ref()
                .0
                .iter()
                .find(|p| p.trim().parse::<u32>().is_err())
            {
                return Err(invalid(format!(
                    "{name} line {}: server-pid: '{}' is not a process id",
                    line_of(text, pids.span().start),
                    clip(bad)
                )));
            }
        }
        if spec.workload.is_some() {
            let set = [
                ("arrival", spec.arrival.is_some()),
                ("key-size", spec.key_size.is_some()),
                ("value-size", spec.value_size.is_some()),
                ("get-ratio", spec.get_ratio.is_some()),
            ];
            if let Some((k, _)) = set.iter().find(|(_, on)| *on) {
                return Err(invalid(format!(
                    "{name}: workload sets {k} itself: give one of them, not both"
                )));
            }
        }
        let mut axes = Vec::new();
        for (k, vals) in spec.param.iter().flatten() {
            let line = line_of(text, k.span().start);
            let knob = k.get_ref();
            let values = vals.get_ref().0.clone();
            if values.is_empty() {
                return Err(invalid(format!(
                    "{name} line {line}: param {}: no values",
                    clip(knob)
                )));
            }
            let knobs = values
                .iter()
                .map(|v| Knob::parse(knob, v))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| invalid(format!("{name} line {line}: {e}")))?;
            axes.push(Axis {
                name: knob.trim().replace('_', "-"),
                values,
                knobs,
            });
        }
        Ok(ExperimentFile { spec, target, axes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use measurement::clip_to;

    fn err(text: &str) -> String {
        ExperimentFile::parse("e.toml", text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn every_shipped_experiment_parses() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "toml") {
                let f = ExperimentFile::read(&p).unwrap_or_else(|e| panic!("{e}"));
                assert!(f.target.contains("://"), "{}", p.display());
                assert!(f.spec.description.is_some(), "{}", p.display());
                assert!(f.spec.duration.is_some(), "{}", p.display());
                n += 1;
            }
        }
        assert!(n >= 10, "{n} experiment files");
    }

    #[test]
    fn options_and_axes_keep_what_the_file_says() {
        let f = ExperimentFile::parse(
            "e.toml",
            "target = \"nullrpc://\"\nspawn = true\nno-preload = false\nkey-size = 30\n\
             loads = [1000, \"20%\"]\nslo-view = \"server\"\nget-ratio = 0.5\n\
             duration = \"2s\"\nagent-records = \"off\"\n[param]\nserver-cpus = [\"0\", \"0-1\"]\n\
             open_file_cache = [true, false]\n",
        )
        .unwrap();
        let s = &f.spec;
        assert_eq!(f.target, "nullrpc://");
        assert_eq!(s.spawn, Some(true));
        assert_eq!(s.no_preload, Some(false));
        assert_eq!(s.key_size, Some(Text("30".into())));
        assert_eq!(s.loads, Some(List(vec!["1000".into(), "20%".into()])));
        assert_eq!(s.slo_view, Some(ViewArg::Server));
        assert_eq!(s.get_ratio, Some(0.5));
        assert_eq!(s.duration.as_deref(), Some("2s"));
        assert_eq!(s.agent_records, Some(OnOff::Off));
        assert_eq!(s.warmup, None);
        let axes: Vec<(&str, usize)> = f
            .axes
            .iter()
            .map(|a| (a.name.as_str(), a.knobs.len()))
            .collect();
        assert_eq!(axes, [("open-file-cache", 2), ("server-cpus", 2)]);
        assert_eq!(f.axes[0].values, ["true", "false"]);
    }

    #[test]
    fn values_are_checked_by_their_option_s_parser_naming_the_line() {
        for (text, key) in [
            ("duration = \"-1s\"", "duration"),
            ("warmup = \"1\"", "warmup"),
            ("timeout = \"soon\"", "timeout"),
            ("requests = \"many\"", "requests"),
            ("loads = [\"10\", \"x\"]", "loads"),
            ("loads = \"10,...\"", "loads"),
            ("slo = \"p99<=1ms,\"", "slo"),
            ("percentiles = [\"101\"]", "percentiles"),
            ("service = \"50\"", "service"),
            ("workload = \"tao\"", "workload"),
            ("agent-records = \"maybe\"", "agent-records"),
        ] {
            let e = err(&format!("target = \"nullrpc://\"\n\n{text}\n"));
            assert!(e.contains(&format!("line 3: {key}")), "{text}: {e}");
            assert!(!e.contains("--"), "the key is named once: {e}");
            assert!(!e.contains('\n') && e.len() < 600, "{text}: {e}");
        }
        let e = err("target = \"memcached://\"\nworkload = \"etc\"\nkey-size = 10\n");
        assert!(e.contains("workload") && e.contains("key-size"), "{e}");
    }

    #[test]
    fn bad_files_name_the_key_and_the_line() {
        let e = err("target = \"nullrpc://\"\nbogus-key = 1\n");
        assert!(e.contains("line 2") && e.contains("'bogus-key'"), "{e}");
        assert!(!e.contains('\n') && e.len() < 400, "{e}");
        let e = err("target = \"nullrpc://\"\nserver_threads = 1\n");
        assert!(e.contains("server-threads"), "{e}");
        let e = err("target = \"nullrpc://\"\n\nduration = true\n");
        assert!(e.contains("line 3") && e.contains("duration"), "{e}");
        assert!(e.contains("boolean"), "{e}");
        let e = err("target = \"nullrpc://\"\nduration = \"1s\"\nduration = \"2s\"\n");
        assert!(e.contains("line 3") && e.contains("duplicate"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = err("target = \"nullrpc://\"\nconnections = -1\n");
        assert!(e.contains("line 2") && e.contains("connections"), "{e}");
        let e = err("target = \"nullrpc://\"\nslo-view = \"both\"\n");
        assert!(e.contains("line 2") && e.contains("slo-view"), "{e}");
        let e = err("target = \"nullrpc://\"\n[param]\nconnections = [\"x\"]\n");
        assert!(e.contains("line 3") && e.contains("connections"), "{e}");
        let e = err("target = \"nullrpc://\"\n[param]\nnope = [1]\n");
        assert!(e.contains("line 3") && e.contains("nope"), "{e}");
        let e = err("spawn = true\n");
        assert!(e.contains("target"), "{e}");
        let e = err("target = \"x.toml\"\n");
        assert!(e.contains("URL"), "{e}");
        let e = err("target = \"nullrpc://\"\nduration = \"1s\"\nrequests = 100\n");
        assert!(e.contains("requests"), "{e}");
        let e = err("target = \"nullrpc://\"\nserver-pid = [1, \"x\"]\n");
        assert!(e.contains("line 2") && e.contains("server-pid"), "{e}");
        let e = err("target = [");
        assert!(e.contains("line 1") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn long_values_are_quoted_clipped() {
        let long = "x".repeat(100_000);
        let e = err(&format!("target = \"{long}.toml\"\n"));
        assert!(e.len() < 600, "{} characters", e.len());
        assert!(e.contains('…'));
        assert_eq!(clip("abc"), "abc");
        assert_eq!(clip_to("héllo", 2), "hé…");
    }
}
