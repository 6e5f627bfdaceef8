//! Parsers of the few /proc files that the run sampler (`attrib`) and the noise probe
//! (`noise`) read: one set for both. Each takes the file's text and returns plain numbers;
//! none allocates per call beyond what the result needs. Hand-written because the crates that
//! parse /proc (procfs) read many more files than we need per 10 ms sample and cannot reuse a
//! buffer; these formats are simple and stable (Documentation/filesystems/proc.rst).

/// Counters of one thread from `/proc/PID/task/TID/schedstat`: time on the CPU, time spent
/// runnable but waiting on a run queue (both ns), and the number of timeslices run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskSchedstat {
    pub runtime_ns: u64,
    pub run_delay_ns: u64,
    pub timeslices: u64,
}

/// `/proc/PID/task/TID/schedstat`: three numbers on one line.
pub fn parse_task_schedstat(s: &str) -> Option<TaskSchedstat> {
    let mut it = s.split_ascii_whitespace().map(|t| t.parse::<u64>().ok());
    Some(TaskSchedstat {
        runtime_ns: it.next()??,
        run_delay_ns: it.next()??,
        timeslices: it.next()??,
    })
}

/// `(voluntary, nonvoluntary)` context switches from a `/proc/PID/task/TID/status` text.
pub fn parse_ctxt_switches(s: &str) -> Option<(u64, u64)> {
    let mut vol = None;
    let mut invol = None;
    for line in s.lines() {
        if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
            vol = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
            invol = v.trim().parse().ok();
        }
    }
    Some((vol?, invol?))
}

/// A per-CPU counter table as in `/proc/interrupts` and `/proc/softirqs`: a header naming the
/// CPU columns (`CPU0 CPU1 …`, possibly with gaps when CPUs are offline), then one row per
/// counter, `NAME: n0 n1 … [description]`. Rows with fewer numbers than columns (`ERR:`, `MIS:`)
/// are system-wide totals and carry no per-CPU information; they are skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTable {
    /// CPU id of each column.
    pub cpus: Vec<usize>,
    /// Row name (without the colon) and one count per column.
    pub rows: Vec<(String, Vec<u64>)>,
    /// Per row, the words after the counts (`IO-APIC 2-edge timer`; empty for softirqs).
    pub descriptions: Vec<String>,
}

impl CpuTable {
    /// Sum of one row over the columns whose CPU is in `cpus` (all columns when empty).
    pub fn row_sum(&self, row: &[u64], cpus: &[usize]) -> u64 {
        self.cpus
            .iter()
            .zip(row)
            .filter(|(c, _)| cpus.is_empty() || cpus.contains(c))
            .map(|(_, v)| *v)
            .sum()
    }

    /// Sum of every row over the chosen CPUs.
    pub fn total(&self, cpus: &[usize]) -> u64 {
        self.rows.iter().map(|(_, r)| self.row_sum(r, cpus)).sum()
    }
}

/// Parse `/proc/interrupts` or `/proc/softirqs`; None when the header is missing.
pub fn parse_cpu_table(s: &str) -> Option<CpuTable> {
    let mut cpus = Vec::new();
    let mut rows = Vec::new();
    let mut descriptions = Vec::new();
    for row in cpu_table_rows(s, &mut cpus)? {
        rows.push((row.name.to_string(), row.counts().collect()));
        descriptions.push(row.description());
    }
    Some(CpuTable {
        cpus,
        rows,
        descriptions,
    })
}

/// The same table as [`parse_cpu_table`], read without allocating: the header's CPU ids go
/// into `cpus` (cleared first; a sampler reuses one Vec), and the rows come from an iterator
/// that borrows `s`. For the attribution sampler, which reads these files every few ms.
/// None when the header is missing.
pub fn cpu_table_rows<'a>(s: &'a str, cpus: &mut Vec<usize>) -> Option<CpuRows<'a>> {
    let mut lines = s.lines();
    let header = lines.next()?;
    cpus.clear();
    for t in header.split_ascii_whitespace() {
        cpus.push(t.strip_prefix("CPU")?.parse().ok()?);
    }
    if cpus.is_empty() {
        return None;
    }
    Some(CpuRows {
        lines,
        ncols: cpus.len(),
    })
}

/// The rows of a per-CPU table that have a count for every column (see [`cpu_table_rows`]).
#[derive(Clone, Debug)]
pub struct CpuRows<'a> {
    lines: std::str::Lines<'a>,
    ncols: usize,
}

/// One full row of a per-CPU table.
#[derive(Clone, Copy, Debug)]
pub struct CpuRow<'a> {
    /// Without the colon and the padding.
    pub name: &'a str,
    rest: &'a str,
    ncols: usize,
}

impl<'a> CpuRow<'a> {
    /// One count per column, in column order.
    pub fn counts(&self) -> impl Iterator<Item = u64> + 'a {
        // Every one of these tokens parsed when the row was accepted.
        let toks = self.rest.split_ascii_whitespace().take(self.ncols);
        toks.map(|t| t.parse().unwrap_or(0))
    }

    /// The words after the counts (`IO-APIC 2-edge timer`; empty for softirqs).
    pub fn description(&self) -> String {
        let words = self.rest.split_ascii_whitespace().skip(self.ncols);
        words.collect::<Vec<_>>().join(" ")
    }
}

impl<'a> Iterator for CpuRows<'a> {
    type Item = CpuRow<'a>;

    fn next(&mut self) -> Option<CpuRow<'a>> {
        for line in self.lines.by_ref() {
            let Some((name, rest)) = line.split_once(':') else {
                continue;
            };
            let toks = rest.split_ascii_whitespace().take(self.ncols);
            let numbers = toks.map_while(|t| t.parse::<u64>().ok()).count();
            if numbers == self.ncols {
                return Some(CpuRow {
                    name: name.trim(),
                    rest,
                    ncols: self.ncols,
                });
            }
        }
        None
    }
}

/// Times of one CPU from `/proc/stat`, in clock ticks (USER_HZ).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub cpu: usize,
    /// user + nice + system: time spent running tasks (interrupt time is counted apart).
    pub busy: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

/// The per-CPU lines (`cpuN user nice system idle iowait irq softirq steal …`) of `/proc/stat`.
/// Kernels older than 2.6.11 have no steal column; it reads as 0.
pub fn parse_stat_cpus(s: &str) -> Vec<CpuTicks> {
    stat_cpus(s).collect()
}

/// [`parse_stat_cpus`] without allocating: an iterator over the text.
pub fn stat_cpus(s: &str) -> impl Iterator<Item = CpuTicks> + '_ {
    s.lines().filter_map(stat_cpu_line)
}

fn stat_cpu_line(line: &str) -> Option<CpuTicks> {
    let mut it = line.split_ascii_whitespace();
    let cpu = it.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
    let mut v = [0u64; 8];
    let mut n = 0;
    for x in it.map_while(|t| t.parse().ok()).take(v.len()) {
        v[n] = x;
        n += 1;
    }
    if n < 4 {
        return None;
    }
    Some(CpuTicks {
        cpu,
        busy: v[0] + v[1] + v[2],
        irq: v[5],
        softirq: v[6],
        steal: v[7],
    })
}

/// From `/proc/schedstat` (kernels with CONFIG_SCHEDSTATS, version 15+): per CPU, the time
/// tasks other than idle ran on it, ns (the 7th number of each `cpuN` line). It accrues when a
/// task leaves the CPU, so a task that runs on undisturbed shows up late.
pub fn parse_schedstat_cpus(s: &str) -> Vec<(usize, u64)> {
    schedstat_cpus(s).collect()
}

/// [`parse_schedstat_cpus`] without allocating: an iterator over the text.
pub fn schedstat_cpus(s: &str) -> impl Iterator<Item = (usize, u64)> + '_ {
    s.lines().filter_map(|line| {
        let mut it = line.split_ascii_whitespace();
        let cpu = it.next()?.strip_prefix("cpu")?.parse().ok()?;
        let run_ns = it.nth(6)?.parse().ok()?;
        Some((cpu, run_ns))
    })
}

/// From `/proc/PID/stat`: `(utime + stime in ticks, processor last run on)`. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_pid_stat(s: &str) -> Option<(u64, usize)> {
    let rest = &s[s.rfind(')')? + 1..];
    // After the name: state is field 3; utime 14, stime 15, processor 39.
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| f.get(n - 3).and_then(|t| t.parse::<u64>().ok());
    let cpu = usize::try_from(field(39)?).ok()?;
    Some((field(14)? + field(15)?, cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_with_offline_cpu_and_total_rows() {
        let s = "      CPU0  CPU2\n 1:  5  7  IO-APIC  x\nERR: 3\nLOC: 10 20 Local timer\n";
        let t = parse_cpu_table(s).unwrap();
        assert_eq!(t.cpus, vec![0, 2]);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.total(&[2]), 27);
        assert_eq!(t.total(&[]), 42);
        assert_eq!(t.total(&[1]), 0);
    }

    #[test]
    fn pid_stat_with_odd_name() {
        let mut s = String::from("42 (a) b (c) R");
        // fields 4..=38 then processor (39) = 1; utime (14) = 7, stime (15) = 5
        for n in 4..=38 {
            s.push_str(match n {
                14 => " 7",
                15 => " 5",
                _ => " 0",
            });
        }
        s.push_str(" 1 0 0\n");
        assert_eq!(parse_pid_stat(&s), Some((12, 1)));
        assert_eq!(parse_pid_stat("1 (x) R 1 2"), None);
    }

    #[test]
    fn malformed_inputs() {
        assert_eq!(parse_task_schedstat("1 2"), None);
        assert_eq!(parse_task_schedstat("1 x 3"), None);
        assert_eq!(parse_ctxt_switches("voluntary_ctxt_switches: 3\n"), None);
        assert!(parse_cpu_table("").is_none());
        assert!(parse_cpu_table("no header\n").is_none());
        assert!(parse_stat_cpus("cpu 1 2 3 4\nintr 5\n").is_empty());
        assert_eq!(parse_stat_cpus("cpu0 1 2 3\ncpu1 1 2 3 4\n").len(), 1);
    }

    #[test]
    fn borrowed_rows_match_the_owned_table_and_reuse_the_header_vec() {
        let s = "      CPU0  CPU2\n 1:  5  7  IO-APIC  x\nERR: 3\nLOC: 10 20 Local timer\n";
        let mut cpus = vec![9, 9, 9];
        let rows: Vec<CpuRow> = cpu_table_rows(s, &mut cpus).unwrap().collect();
        assert_eq!(cpus, vec![0, 2]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].name, "LOC");
        assert_eq!(rows[1].counts().collect::<Vec<_>>(), vec![10, 20]);
        assert_eq!(rows[0].description(), "IO-APIC x");
        assert!(cpu_table_rows("CPU0 x\n", &mut cpus).is_none());
        assert!(cpu_table_rows("\n", &mut cpus).is_none());
    }
}
