//! Values of the command line that are `lab`'s types, parsed by `FromStr` (clap calls these
//! and names the flag of a bad value, so the messages name only what is wrong): a run's or
//! experiment's label, CPU lists, durations, `check`'s baseline and tolerance.

use std::str::FromStr;
use std::time::Duration;

/// A CPU list (`0`, `0-3`, `1,3`) of CPUs that are online on this machine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<CpuList, String> {
        let v = host::placement::parse_cpu_list(s).map_err(|e| e.to_string())?;
        let online = host::placement::online_cpus();
        if let Some(bad) = v.iter().find(|c| **c >= online) {
            return Err(format!(
                "CPU {bad} does not exist (this machine has {online})"
            ));
        }
        Ok(CpuList(v))
    }
}

/// A duration with its unit (`600ms`, `1.5s`), not negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurationArg(pub Duration);

impl FromStr for DurationArg {
    type Err = String;

    fn from_str(s: &str) -> Result<DurationArg, String> {
        let ns = model::parse_duration_ns(s).map_err(|e| e.to_string())?;
        Ok(DurationArg(Duration::from_nanos(ns.round() as u64)))
    }
}

/// A per-request time of a model (`4us`, `0ns`): not negative and at most
/// [`model::MAX_SERVICE_NS`], as the model's service times are; in ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServiceTime(pub f64);

impl FromStr for ServiceTime {
    type Err = String;

    fn from_str(s: &str) -> Result<ServiceTime, String> {
        let ns = model::parse_duration_ns(s).map_err(|e| e.to_string())?;
        if ns > model::MAX_SERVICE_NS {
            return Err("at most 1e6 s".into());
        }
        Ok(ServiceTime(ns))
    }
}

/// `--churn MIN,MAX`: requests per connection before it is closed and reopened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Churn(pub u32, pub u32);

impl FromStr for Churn {
    type Err = String;

    fn from_str(s: &str) -> Result<Churn, String> {
        let bad = || "must be MIN,MAX requests per connection (e.g. 20,40)".to_string();
        let (a, b) = s.split_once(',').ok_or_else(bad)?;
        let a: u32 = a.trim().parse().map_err(|_| bad())?;
        let b: u32 = b.trim().parse().map_err(|_| bad())?;
        if a == 0 || b < a {
            return Err(bad());
        }
        Ok(Churn(a, b))
    }
}

/// A size in bytes (`512M`, `2G`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl FromStr for Bytes {
    type Err = String;

    fn from_str(s: &str) -> Result<Bytes, String> {
        crate::placement::parse_bytes(s).map(Bytes)
    }
}

/// A share of one CPU (`0.5`: 50 ms per 100 ms); its range is checked where it is applied.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuShare(pub f64);

impl FromStr for CpuShare {
    type Err = String;

    fn from_str(s: &str) -> Result<CpuShare, String> {
        s.trim()
            .parse()
            .map(CpuShare)
            .map_err(|_| "not a fraction of a CPU (e.g. 0.5)".into())
    }
}

/// A network rate (`100mbit`), in bytes per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetRate(pub u64);

impl FromStr for NetRate {
    type Err = String;

    fn from_str(s: &str) -> Result<NetRate, String> {
        host::isolate::parse_rate_bps(s)
            .map(NetRate)
            .map_err(|e| e.to_string())
    }
}

/// A number of requests (`100k`, `1e6`, `5000`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count(pub u64);

impl FromStr for Count {
    type Err = String;

    fn from_str(s: &str) -> Result<Count, String> {
        model::parse_count(s).map(Count).map_err(|e| e.to_string())
    }
}

/// `--label NAME` (and an experiment file's `label`): a name stored with a run or an
/// experiment, which `check --baseline label:NAME` finds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct Label(pub String);

impl FromStr for Label {
    type Err = String;

    fn from_str(s: &str) -> Result<Label, String> {
        if is_label(s) {
            Ok(Label(s.to_string()))
        } else {
            Err("a label is 1 to 64 letters, digits or . _ - + / @".into())
        }
    }
}

impl<'de> serde::Deserialize<'de> for Label {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Label, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether `l` is a label: 1 to 64 letters, digits or `. _ - + / @` (a name scripts can pass
/// around, and that `check --baseline label:NAME` finds).
pub fn is_label(l: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || "._-+/@".contains(c);
    !l.is_empty() && l.len() <= 64 && l.chars().all(ok)
}

/// What a check is asked to compare.
#[derive(Clone, Debug, PartialEq)]
pub enum BaselineRef {
    Id(i64),
    Label(String),
    /// The latest earlier run (experiment) of the same target and configuration.
    Latest,
}

/// `check --baseline`: an id, `label:NAME` or `latest`.
impl FromStr for BaselineRef {
    type Err = String;

    fn from_str(s: &str) -> Result<BaselineRef, String> {
        if s == "latest" {
            return Ok(BaselineRef::Latest);
        }
        if let Some(name) = s.strip_prefix("label:") {
            if !is_label(name) {
                return Err(
                    "label:NAME needs a label name (1 to 64 letters, digits or . _ - + / @)".into(),
                );
            }
            return Ok(BaselineRef::Label(name.to_string()));
        }
        s.parse::<i64>()
            .map(BaselineRef::Id)
            .map_err(|_| "not a run or experiment id, label:NAME or latest".into())
    }
}

/// `check --tolerance`: how far a ratio may lie from 1 and still be the same, as a fraction
/// in [0, 1], given as a percentage (`10%`) or a fraction (`0.1`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance(pub f64);

impl FromStr for Tolerance {
    type Err = String;

    fn from_str(s: &str) -> Result<Tolerance, String> {
        let t = s.trim();
        let v = match t.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
            None => t.parse::<f64>(),
        };
        match v {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(Tolerance(x)),
            _ => Err("not a percentage (10%) or a fraction (0.1) between 0 and 100 %".into()),
        }
    }
}

/// `model bursty --by`: the share of a stage's time an optimisation removes, in (0, 1],
/// given as a percentage (`50%`) or a fraction (`0.5`); 100 % removes the stage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cut(pub f64);

impl FromStr for Cut {
    type Err = String;

    fn from_str(s: &str) -> Result<Cut, String> {
        let t = s.trim();
        let v = match t.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
            None => t.parse::<f64>(),
        };
        match v {
            Ok(x) if x > 0.0 && x <= 1.0 => Ok(Cut(x)),
            _ => Err("not a percentage (50%) or a fraction (0.5) above 0 and at most 100 %".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baselines_tolerances_and_labels_parse_or_are_refused() {
        assert_eq!("latest".parse(), Ok(BaselineRef::Latest));
        assert_eq!("12".parse(), Ok(BaselineRef::Id(12)));
        assert_eq!("label:v1.2".parse(), Ok(BaselineRef::Label("v1.2".into())));
        for bad in ["label:", "x", "label:a b", ""] {
            assert!(bad.parse::<BaselineRef>().is_err(), "{bad}");
        }
        assert_eq!(
            "10%".parse::<Tolerance>().map(|t| (t.0 * 1e6).round()),
            Ok(1e5)
        );
        assert_eq!("0.05".parse(), Ok(Tolerance(0.05)));
        for bad in ["-1%", "x", "200%", "NaN", "1.5"] {
            assert!(bad.parse::<Tolerance>().is_err(), "{bad}");
        }
        assert_eq!("50%".parse(), Ok(Cut(0.5)));
        assert_eq!("1".parse(), Ok(Cut(1.0)));
        for bad in ["0%", "0", "-10%", "101%", "1.5", "NaN", "half"] {
            assert!(bad.parse::<Cut>().is_err(), "{bad}");
        }
        assert_eq!("0".parse(), Ok(CpuList(vec![0])));
        assert!("99999".parse::<CpuList>().unwrap_err().contains("99999"));
        assert!("x".parse::<CpuList>().is_err());
        assert_eq!("600ms".parse(), Ok(DurationArg(Duration::from_millis(600))));
        assert_eq!("4us".parse(), Ok(ServiceTime(4_000.0)));
        assert_eq!("20,40".parse(), Ok(Churn(20, 40)));
        for bad in ["0,4", "5,4", "5", "a,b"] {
            assert!(bad.parse::<Churn>().is_err(), "{bad}");
        }
        assert_eq!("2K".parse::<Bytes>().map(|b| b.0 > 0), Ok(true));
        assert!("lots".parse::<Bytes>().is_err());
        assert_eq!("0.5".parse(), Ok(CpuShare(0.5)));
        assert!("x".parse::<CpuShare>().is_err());
        assert!("10mbps".parse::<NetRate>().is_err());
        assert!("10mbit".parse::<NetRate>().is_ok_and(|r| r.0 > 0));
        for bad in ["2e6s", "1e99s", "-1us", "4"] {
            assert!(bad.parse::<ServiceTime>().is_err(), "{bad}");
        }
        for bad in ["-1s", "5", "x"] {
            assert!(bad.parse::<DurationArg>().is_err(), "{bad}");
        }
        assert!(is_label("v1.2-rc+3/x@y_z"));
        assert_eq!("v1".parse(), Ok(Label("v1".into())));
        assert!("a b".parse::<Label>().is_err());
        for bad in ["", "a b", "é", &"x".repeat(65)] {
            assert!(!is_label(bad), "{bad}");
        }
    }
}
