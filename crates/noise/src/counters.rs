//! Kernel counters read before and after a probe run: `/proc/interrupts` and
//! `/proc/softirqs` (one column per CPU), the steal column of `/proc/stat`, and the context
//! switch counts in `/proc/PID/task/TID/status` of each probe thread.
//!
//! The parsers take text, so they are tested against fixture copies of this machine's files.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// Per-CPU counts of named sources: `label → (cpu → count)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PerCpu(pub BTreeMap<String, BTreeMap<usize, u64>>);

impl PerCpu {
    /// `after − before` for `cpu`, per label, dropping zero deltas. A label missing from
    /// `before` (an IRQ registered during the run) counts from 0; a counter that went
    /// backwards (cannot happen without a reboot) counts as 0.
    pub fn delta(before: &PerCpu, after: &PerCpu, cpu: usize) -> Vec<(String, u64)> {
        after
            .0
            .iter()
            .filter_map(|(label, cols)| {
                let a = *cols.get(&cpu)?;
                let b = before
                    .0
                    .get(label)
                    .and_then(|c| c.get(&cpu))
                    .copied()
                    .unwrap_or(0);
                let d = a.saturating_sub(b);
                (d > 0).then(|| (label.clone(), d))
            })
            .collect()
    }
}

/// A `/proc/interrupts`-style table, read by the parser the run sampler uses too
/// (`host::procfs`).
fn table(text: &str, what: &str) -> Result<host::procfs::CpuTable, String> {
    host::procfs::parse_cpu_table(text).ok_or_else(|| format!("{what} has no CPUn header line"))
}

/// Parses `/proc/interrupts`. Labels: numbered IRQs as `IRQ 36 virtio1-req.0` (the last
/// word of the description is the device/handler name); the architecture's named
/// interrupts as `Local timer interrupts (LOC)`.
pub(crate) fn parse_interrupts(text: &str) -> Result<PerCpu, String> {
    let t = table(text, "/proc/interrupts")?;
    let mut out = PerCpu::default();
    for ((name, counts), desc) in t.rows.iter().zip(&t.descriptions) {
        let label = if name.chars().all(|c| c.is_ascii_digit()) {
            match desc.split_whitespace().last() {
                Some(dev) => format!("IRQ {name} {dev}"),
                None => format!("IRQ {name}"),
            }
        } else if desc.is_empty() {
            name.to_string()
        } else {
            format!("{desc} ({name})")
        };
        let cols = out.0.entry(label).or_default();
        for (&cpu, c) in t.cpus.iter().zip(counts) {
            *cols.entry(cpu).or_default() += c;
        }
    }
    Ok(out)
}

/// Parses `/proc/softirqs`; labels `softirq TIMER`, `softirq NET_RX`, ….
pub(crate) fn parse_softirqs(text: &str) -> Result<PerCpu, String> {
    let t = table(text, "/proc/softirqs")?;
    let mut out = PerCpu::default();
    for (name, counts) in &t.rows {
        let cols = out.0.entry(format!("softirq {name}")).or_default();
        for (&cpu, &c) in t.cpus.iter().zip(counts) {
            cols.insert(cpu, c);
        }
    }
    Ok(out)
}

/// Steal time per CPU from `/proc/stat` (`cpuN user nice system idle iowait irq softirq
/// steal …`), in clock ticks (`USER_HZ`, see [`clock_ticks_per_s`]).
pub(crate) fn parse_stat_steal(text: &str) -> Result<BTreeMap<usize, u64>, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut toks = line.split_whitespace();
        let Some(cpu) = toks
            .next()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let steal = toks
            .nth(7)
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| format!("/proc/stat line {line:?} has no steal column"))?;
        out.insert(cpu, steal);
    }
    if out.is_empty() {
        return Err("no cpuN lines in /proc/stat".into());
    }
    Ok(out)
}

/// Voluntary and nonvoluntary context switches from a `/proc/…/status` file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CtxSwitches {
    pub voluntary: u64,
    pub nonvoluntary: u64,
}

pub(crate) fn parse_ctxt(text: &str) -> Result<CtxSwitches, String> {
    let field = |key: &str| -> Result<u64, String> {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("no {key} line"))
    };
    Ok(CtxSwitches {
        voluntary: field("voluntary_ctxt_switches:")?,
        nonvoluntary: field("nonvoluntary_ctxt_switches:")?,
    })
}

/// `USER_HZ`: the unit of `/proc/stat` times.
pub(crate) fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// The system-wide counters, read once before and once after the run. Each part is
/// optional: a file that cannot be read or parsed leaves a warning instead.
#[derive(Clone, Debug, Default)]
pub(crate) struct SystemCounters {
    pub interrupts: Option<PerCpu>,
    pub softirqs: Option<PerCpu>,
    pub steal: Option<BTreeMap<usize, u64>>,
}

impl SystemCounters {
    pub fn read(proc_dir: &Path, warnings: &mut Vec<String>) -> SystemCounters {
        fn one<T>(
            path: &Path,
            parse: fn(&str) -> Result<T, String>,
            warnings: &mut Vec<String>,
        ) -> Option<T> {
            let r = fs::read_to_string(path)
                .map_err(|e| e.to_string())
                .and_then(|t| parse(&t));
            match r {
                Ok(v) => Some(v),
                Err(e) => {
                    let w = format!("{}: {e} (not attributed)", path.display());
                    if !warnings.contains(&w) {
                        warnings.push(w);
                    }
                    None
                }
            }
        }
        SystemCounters {
            interrupts: one(&proc_dir.join("interrupts"), parse_interrupts, warnings),
            softirqs: one(&proc_dir.join("softirqs"), parse_softirqs, warnings),
            steal: one(&proc_dir.join("stat"), parse_stat_steal, warnings),
        }
    }
}

/// Reads the calling thread's context switches under `proc_dir` (`PID/task/TID/status`).
pub(crate) fn read_thread_ctxt(proc_dir: &Path) -> Result<CtxSwitches, String> {
    let pid = std::process::id();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let path = proc_dir.join(format!("{pid}/task/{tid}/status"));
    fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e}", path.display()))
        .and_then(|t| parse_ctxt(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = include_str!("../tests/fixtures/interrupts.txt");
    const SOFTIRQS: &str = include_str!("../tests/fixtures/softirqs.txt");
    const STAT: &str = include_str!("../tests/fixtures/stat.txt");
    const STATUS: &str = include_str!("../tests/fixtures/status.txt");

    #[test]
    fn interrupts_fixture() {
        let t = parse_interrupts(INTERRUPTS).unwrap();
        let loc = &t.0["Local timer interrupts (LOC)"];
        assert_eq!((loc[&0], loc[&1]), (749_888, 677_137));
        assert_eq!(t.0["IRQ 36 virtio1-req.0"][&1], 216_169);
        assert_eq!(t.0["IRQ 39 virtio2-output.0"][&0], 3_943);
        assert_eq!(t.0["IRQ 26 ttyS0"][&1], 13);
        // single-total rows are not per-CPU and are skipped
        assert!(!t.0.keys().any(|k| k.contains("ERR") || k.contains("MIS")));
        assert_eq!(t.0.len(), 13);
    }

    #[test]
    fn softirqs_fixture() {
        let t = parse_softirqs(SOFTIRQS).unwrap();
        assert_eq!(t.0.len(), 10);
        assert_eq!(t.0["softirq TIMER"][&0], 104_825);
        assert_eq!(t.0["softirq NET_RX"][&1], 8_605_917);
        assert_eq!(t.0["softirq RCU"][&1], 204_637);
    }

    #[test]
    fn stat_and_status_fixtures() {
        let s = parse_stat_steal(STAT).unwrap();
        assert_eq!(s.len(), 2); // the aggregate "cpu" line is not a CPU
        assert_eq!((s[&0], s[&1]), (100, 159));
        let c = parse_ctxt(STATUS).unwrap();
        assert_eq!(c, CtxSwitches::default());
        let c = parse_ctxt("voluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t42\n");
        assert_eq!(
            c.unwrap(),
            CtxSwitches {
                voluntary: 7,
                nonvoluntary: 42
            }
        );
    }

    #[test]
    fn deltas_per_cpu_and_bad_input() {
        let before = parse_softirqs(SOFTIRQS).unwrap();
        let after_text = SOFTIRQS
            .replace("104825", "105825")
            .replace("8605917", "8605920");
        let after = parse_softirqs(&after_text).unwrap();
        assert_eq!(
            PerCpu::delta(&before, &after, 0),
            vec![("softirq TIMER".to_string(), 1000)]
        );
        assert_eq!(
            PerCpu::delta(&before, &after, 1),
            vec![("softirq NET_RX".to_string(), 3)]
        );
        assert!(PerCpu::delta(&before, &after, 7).is_empty());
        assert!(parse_interrupts("").is_err());
        assert!(parse_softirqs("garbage\n").is_err());
        assert!(parse_stat_steal("cpu0 1 2\n").is_err());
        assert!(parse_ctxt("Name: x\n").is_err());
    }
}
