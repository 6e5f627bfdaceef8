//! The knobs a sweep can turn (an axis is one knob and its values): the spawned server's,
//! the load's and the workload's. Values are parsed by the domain types' own `FromStr`, so a
//! sweep validates every value of every axis before anything starts.

use std::str::FromStr;

use host::placement::{parse_cpu_list, SchedSpec};
use host::topology::SmtPolicy;
use load::{LoadConfig, Popularity, SizeDist};
use serde::{Deserialize, Serialize};

use measurement::error::{invalid, LabError};
use measurement::{SpawnSpec, TargetSpec};

/// One value of one knob.
#[derive(Clone, Debug)]
pub enum Knob {
    ServerThreads(u32),
    ServerCpus(Vec<usize>),
    ServerSched(SchedSpec),
    ServerArch(server::Arch),
    ServerWork(model::ServiceSpec),
    Connections(usize),
    GeneratorThreads(usize),
    KeySize(SizeDist),
    ValueSize(SizeDist),
    Items(u64),
    Popularity(Popularity),
    GetRatio(f64),
    FileSize(targets::FileSizes),
    Files(u32),
    Arrival(model::ArrivalSpec),
    // The isolation and colocation experiments' knobs.
    ServerMemory(u64),
    ServerCpuQuota(f64),
    ServerCpuset(Vec<usize>),
    NetRate(u64),
    LlcWays(u32),
    MemcachedMb(u32),
    OpenFileCache(bool),
    ServerInstances(u32),
    ServerSmt(SmtPolicy),
    ServerNuma(Option<host::numa::NumaPolicy>),
    /// `none` or a stressor beside each run.
    Stress(Option<stress::StressSpec>),
    ServerContainer(Option<measurement::Container>),
    ServerRxCpus(Vec<usize>),
}

/// The knob names a sweep accepts (`--param NAME=V1,V2`), with what each turns.
pub const KNOBS: [(&str, &str); 28] = [
    (
        "server-threads",
        "spawned server's threads / the built-in server's workers",
    ),
    (
        "server-cpus",
        "spawned server's CPUs (a list, e.g. 1 or 2-3; ';' separates values)",
    ),
    (
        "server-sched",
        "spawned server's scheduling policy (other:NICE, fifo:PRIO, rr:PRIO)",
    ),
    (
        "server-arch",
        "built-in server's architecture (thread, epoll, udp, dispatch, staged)",
    ),
    (
        "server-work",
        "built-in server's work per request (det:50us, exp:50us, …)",
    ),
    ("connections", "connections to the target"),
    ("threads", "generator threads"),
    (
        "key-size",
        "memcached/redis key size (N, fixed:N, uniform:LO,HI)",
    ),
    ("value-size", "memcached/redis value size"),
    ("items", "memcached/redis distinct items"),
    ("popularity", "key or file popularity (uniform, zipf:S)"),
    ("get-ratio", "memcached/redis share of gets"),
    (
        "file-size",
        "http: generated file sizes (N, uniform:LO,HI, lognormal:MEDIAN,SIGMA)",
    ),
    ("files", "http: number of files"),
    (
        "arrival",
        "arrival process (poisson, det, lognormal:S, pareto:A)",
    ),
    (
        "server-memory",
        "cgroup memory limit of the spawned server (512M, 2G)",
    ),
    (
        "server-cpu-quota",
        "cgroup CPU bandwidth of the spawned server, a fraction of one CPU (0.5)",
    ),
    (
        "server-cpuset",
        "cgroup cpuset of the spawned server (a CPU list; ';' separates values)",
    ),
    ("net-rate", "HTB rate on --net-dev (100mbit, 1gbit)"),
    ("llc-ways", "L3 cache ways of the spawned server (resctrl)"),
    ("memcached-mb", "memcached -m (redis maxmemory), MiB"),
    ("open-file-cache", "nginx open_file_cache (on, off)"),
    (
        "server-instances",
        "instances of the spawned server (scale-out), connections spread over them",
    ),
    (
        "server-smt",
        "server CPUs by physical core (distinct-cores, siblings)",
    ),
    (
        "server-numa",
        "spawned server's memory policy: none, bind:NODE (its CPUs on that node too), interleave:NODES (0-1) or local (each instance on its CPUs' node)",
    ),
    (
        "stress",
        "a stressor beside each run: none, cpu, memory or cache [:CPUS][@INTENSITY]",
    ),
    (
        "server-container",
        "spawned server in a container: none, namespaces (mount, UTS, IPC) or veth (also its own network over a veth pair)",
    ),
    (
        "server-rx-cpus",
        "a veth container's network receive processing (RPS) on these CPUs (a list; ';' separates values; none: the kernel's choice)",
    ),
];

fn parse<T: FromStr>(name: &str, v: &str) -> Result<T, LabError>
where
    T::Err: std::fmt::Display,
{
    v.trim()
        .parse::<T>()
        .map_err(|e| invalid(format!("--param {name}={v}: {e}")))
}

impl Knob {
    /// Parses `value` for the knob `name`.
    pub fn parse(name: &str, value: &str) -> Result<Knob, LabError> {
        let n = name.trim().replace('_', "-");
        Ok(match n.as_str() {
            "server-threads" => Knob::ServerThreads(parse(&n, value)?),
            "server-cpus" => Knob::ServerCpus(
                parse_cpu_list(value).map_err(|e| invalid(format!("--param {n}={value}: {e}")))?,
            ),
            "server-sched" => Knob::ServerSched(parse(&n, value)?),
            "server-arch" => Knob::ServerArch(parse(&n, value)?),
            "server-work" => Knob::ServerWork(parse(&n, value)?),
            "connections" => Knob::Connections(parse(&n, value)?),
            "threads" => Knob::GeneratorThreads(parse(&n, value)?),
            "key-size" => Knob::KeySize(parse(&n, value)?),
            "value-size" => Knob::ValueSize(parse(&n, value)?),
            "items" => Knob::Items(parse(&n, value)?),
            "popularity" => Knob::Popularity(parse(&n, value)?),
            "get-ratio" => Knob::GetRatio(parse(&n, value)?),
            "file-size" => Knob::FileSize(parse(&n, value)?),
            "files" => Knob::Files(parse(&n, value)?),
            "arrival" => Knob::Arrival(parse(&n, value)?),
            "server-memory" => Knob::ServerMemory(
                measurement::parse_bytes(value)
                    .map_err(|e| invalid(format!("--param {n}={value}: {e}")))?,
            ),
            "server-cpu-quota" => Knob::ServerCpuQuota(parse(&n, value)?),
            "server-cpuset" => Knob::ServerCpuset(
                parse_cpu_list(value).map_err(|e| invalid(format!("--param {n}={value}: {e}")))?,
            ),
            "net-rate" => Knob::NetRate(
                host::isolate::parse_rate_bps(value)
                    .map_err(|e| invalid(format!("--param {n}={value}: {e}")))?,
            ),
            "llc-ways" => Knob::LlcWays(parse(&n, value)?),
            "memcached-mb" => Knob::MemcachedMb(parse(&n, value)?),
            "open-file-cache" => Knob::OpenFileCache(match value.trim() {
                "on" | "true" | "yes" => true,
                "off" | "false" | "no" => false,
                _ => return Err(invalid(format!("--param {n}={value}: expected on or off"))),
            }),
            "server-instances" => Knob::ServerInstances(parse(&n, value)?),
            "server-smt" => Knob::ServerSmt(parse(&n, value)?),
            "server-numa" => Knob::ServerNuma(match value.trim() {
                "none" | "default" => None,
                v => Some(parse(&n, v)?),
            }),
            "stress" => Knob::Stress(match value.trim() {
                "none" | "off" => None,
                v => Some(parse(&n, v)?),
            }),
            "server-container" => Knob::ServerContainer(match value.trim() {
                "none" | "bare" => None,
                v => Some(parse(&n, v)?),
            }),
            "server-rx-cpus" => Knob::ServerRxCpus(match value.trim() {
                "none" | "default" => Vec::new(),
                v => parse_cpu_list(v).map_err(|e| invalid(format!("--param {n}={value}: {e}")))?,
            }),
            other => {
                let names: Vec<&str> = KNOBS.iter().map(|k| k.0).collect();
                return Err(invalid(format!(
                    "--param: unknown knob '{other}' (one of {})",
                    names.join(", ")
                )));
            }
        })
    }

    /// Whether a change of this knob needs the server restarted (and recalibrated).
    pub fn is_server(&self) -> bool {
        matches!(
            self,
            Knob::ServerThreads(_)
                | Knob::ServerCpus(_)
                | Knob::ServerSched(_)
                | Knob::ServerArch(_)
                | Knob::ServerWork(_)
                | Knob::FileSize(_)
                | Knob::Files(_)
                | Knob::ServerMemory(_)
                | Knob::ServerCpuQuota(_)
                | Knob::ServerCpuset(_)
                | Knob::NetRate(_)
                | Knob::LlcWays(_)
                | Knob::MemcachedMb(_)
                | Knob::OpenFileCache(_)
                | Knob::ServerInstances(_)
                | Knob::ServerSmt(_)
                | Knob::ServerNuma(_)
                | Knob::ServerContainer(_)
                | Knob::ServerRxCpus(_)
        )
    }

    /// Sets this knob in a run's target and load.
    pub fn apply(&self, t: &mut TargetSpec, l: &mut LoadConfig) -> Result<(), LabError> {
        fn spawn(t: &mut TargetSpec) -> Result<&mut SpawnSpec, LabError> {
            t.spawn
                .as_mut()
                .ok_or_else(|| invalid("server knobs need --spawn (a server tailscope starts)"))
        }
        match self {
            Knob::ServerThreads(n) => spawn(t)?.threads = Some(*n),
            Knob::ServerCpus(c) => spawn(t)?.cpus = c.clone(),
            Knob::ServerSched(s) => spawn(t)?.sched = Some(s.clone()),
            Knob::ServerArch(a) => spawn(t)?.arch = Some(*a),
            Knob::ServerWork(w) => spawn(t)?.work = Some(w.clone()),
            Knob::Connections(n) => {
                l.connections = *n;
                l.threads = l.threads.min(*n).max(1);
            }
            Knob::GeneratorThreads(n) => l.threads = *n,
            Knob::KeySize(s) => t.workload.key_size = *s,
            Knob::ValueSize(s) => t.workload.value_size = *s,
            Knob::Items(n) => t.workload.items = *n,
            Knob::Popularity(p) => t.workload.popularity = *p,
            Knob::GetRatio(r) => t.workload.get_ratio = *r,
            Knob::FileSize(b) => t.workload.file_size = *b,
            Knob::Files(n) => t.workload.files = Some(*n),
            Knob::Arrival(a) => l.arrival = a.clone(),
            Knob::ServerMemory(b) => spawn(t)?.memory_limit_bytes = Some(*b),
            Knob::ServerCpuQuota(q) => spawn(t)?.cpu_quota = Some(*q),
            Knob::ServerCpuset(c) => spawn(t)?.cpuset = c.clone(),
            Knob::NetRate(r) => spawn(t)?.net_rate_bps = Some(*r),
            Knob::LlcWays(w) => spawn(t)?.llc_ways = Some(*w),
            Knob::MemcachedMb(m) => spawn(t)?.memory_mb = Some(*m),
            Knob::OpenFileCache(on) => spawn(t)?.open_file_cache = *on,
            Knob::ServerInstances(n) => spawn(t)?.instances = Some(*n),
            Knob::ServerSmt(p) => spawn(t)?.smt = Some(*p),
            Knob::ServerNuma(p) => spawn(t)?.numa = p.clone(),
            Knob::Stress(s) => t.stress = s.clone(),
            Knob::ServerContainer(c) => spawn(t)?.container = *c,
            Knob::ServerRxCpus(c) => spawn(t)?.rx_cpus = c.clone(),
        }
        Ok(())
    }
}

/// An axis: a knob's name and its values (as given, for rows and labels). Serde reads it
/// back from its name and values (the knobs are parsed again).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "AxisText")]
pub struct Axis {
    pub name: String,
    pub values: Vec<String>,
    #[serde(skip)]
    pub knobs: Vec<Knob>,
}

/// Axes are equal when their names and values are (the knobs are parsed from them).
impl PartialEq for Axis {
    fn eq(&self, other: &Axis) -> bool {
        self.name == other.name && self.values == other.values
    }
}

/// What a stored [`Axis`] is read back from.
#[derive(Deserialize)]
struct AxisText {
    name: String,
    values: Vec<String>,
}

impl TryFrom<AxisText> for Axis {
    type Error = LabError;

    fn try_from(t: AxisText) -> Result<Axis, LabError> {
        let knobs = t
            .values
            .iter()
            .map(|v| Knob::parse(&t.name, v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Axis {
            name: t.name,
            values: t.values,
            knobs,
        })
    }
}

impl Axis {
    /// `NAME=V1,V2,…` (`;` separates values that hold commas themselves, such as CPU lists
    /// `1;2-3` or sizes `uniform:10,100;fixed:64`).
    pub fn parse(text: &str) -> Result<Axis, LabError> {
        let (name, vals) = text
            .split_once('=')
            .ok_or_else(|| invalid(format!("--param must be NAME=V1,V2,…, got '{text}'")))?;
        let sep = if vals.contains(';') { ';' } else { ',' };
        let values: Vec<String> = vals
            .split(sep)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            return Err(invalid(format!("--param {name}: no values")));
        }
        let knobs = values
            .iter()
            .map(|v| Knob::parse(name, v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Axis {
            name: name.trim().replace('_', "-"),
            values,
            knobs,
        })
    }
}

/// A sweep's axes from an experiment file and from the command line: the command line's
/// axis of a knob replaces the file's (the file's others stay, first); a knob given twice on
/// the command line is refused (its first values would be lost).
pub fn merge_axes(file: Vec<Axis>, cli: Vec<Axis>) -> Result<Vec<Axis>, LabError> {
    for (i, a) in cli.iter().enumerate() {
        if cli[..i].iter().any(|b| b.name == a.name) {
            return Err(invalid(format!(
                "--param {} is given twice: give its values once, --param {}=V1,V2,…",
                measurement::clip(&a.name),
                measurement::clip(&a.name)
            )));
        }
    }
    let mut out: Vec<Axis> = file
        .into_iter()
        .filter(|f| !cli.iter().any(|c| c.name == f.name))
        .collect();
    out.extend(cli);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_replaces_a_file_axis_of_the_same_knob() {
        let p = |t: &str| Axis::parse(t).unwrap();
        let file = vec![p("connections=1,2"), p("server-cpus=0;0,1")];
        let m = merge_axes(file.clone(), vec![p("connections=4")]).unwrap();
        let names: Vec<_> = m
            .iter()
            .map(|a| (a.name.as_str(), a.values.len()))
            .collect();
        assert_eq!(names, [("server-cpus", 2), ("connections", 1)]);
        assert_eq!(merge_axes(file.clone(), Vec::new()).unwrap(), file);
        let e = merge_axes(file, vec![p("connections=4"), p("connections=8")]).unwrap_err();
        assert!(e.is_invalid() && e.to_string().contains("twice"), "{e}");
    }

    #[test]
    fn axes_parse_their_values_and_refuse_bad_ones() {
        let a = Axis::parse("server-threads=1,2,4").unwrap();
        assert_eq!(a.values, ["1", "2", "4"]);
        assert!(a.knobs.iter().all(Knob::is_server));
        let c = Axis::parse("server-cpus=1;0-1").unwrap();
        assert!(matches!(&c.knobs[1], Knob::ServerCpus(v) if v == &[0, 1]));
        let s = Axis::parse("value-size=uniform:10,100;64").unwrap();
        assert_eq!(s.values.len(), 2);
        assert!(!s.knobs[0].is_server());
        let st = Axis::parse("stress=none;cpu:0@0.5;cache").unwrap();
        assert!(matches!(&st.knobs[0], Knob::Stress(None)));
        assert!(matches!(&st.knobs[1], Knob::Stress(Some(s)) if s.intensity == 0.5));
        assert!(!st.knobs[2].is_server());
        let m = Axis::parse("server-memory=64M,1G").unwrap();
        assert!(matches!(m.knobs[1], Knob::ServerMemory(b) if b == 1 << 30));
        assert!(m.knobs[0].is_server());
        let f = Axis::parse("file-size=4096;lognormal:4096,1").unwrap();
        assert_eq!(f.values.len(), 2);
        for good in [
            "net-rate=10mbit,1gbit",
            "llc-ways=1,2",
            "memcached-mb=64,1024",
            "open-file-cache=on,off",
            "server-instances=1,2",
            "server-smt=distinct-cores,siblings",
            "server-cpu-quota=0.5,1",
            "server-cpuset=0;0-1",
        ] {
            assert!(Axis::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "nope=1",
            "connections=x",
            "server-arch=forking",
            "items",
            "items=",
            "stress=disk",
            "net-rate=5mbps",
            "open-file-cache=maybe",
            "server-smt=ht",
            "server-memory=lots",
        ] {
            assert!(Axis::parse(bad).unwrap_err().is_invalid(), "{bad}");
        }
    }
}
