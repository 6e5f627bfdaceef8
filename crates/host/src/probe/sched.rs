//! Scheduler checks: RT throttling, other runnable work on the server's CPUs, and (with a
//! pid) the server's scheduling policy and run-queue wait (Tales of the Tail §4: background
//! processes and non-FIFO scheduling).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{format_cpu_list, unreadable, Check, Ctx, Status};

const RT_TRADEOFF: &str = "realtime priority may starve other tasks; a dedicated core may sit \
                           idle when no requests are pending (Tales of the Tail, Table 1)";

/// The fields of a `proc/.../stat` line after the command name: index 0 is field 3 (`state`)
/// of proc(5), so field `n` is at index `n - 3`.
fn stat_fields(text: &str) -> Option<(&str, Vec<&str>)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?;
    Some((comm, text.get(close + 1..)?.split_whitespace().collect()))
}

/// Field `n` (1-based, as numbered in proc(5)) of a stat line split by [`stat_fields`].
fn field<T: std::str::FromStr>(f: &[&str], n: usize) -> Option<T> {
    f.get(n.checked_sub(3)?)?.parse().ok()
}

/// `rt_throttling`: a SCHED_FIFO thread that never blocks is stopped for the rest of each period.
pub(super) fn rt_throttling(ctx: &Ctx) -> Check {
    const ID: &str = "rt_throttling";
    let read = |f: &str| -> Result<i64, String> {
        let path = format!("proc/sys/kernel/{f}");
        let s = ctx
            .root
            .read_trim(&path)
            .map_err(|e| format!("cannot read {path}: {e}"))?;
        s.parse().map_err(|_| format!("{path} holds {s:?}"))
    };
    let check = match (read("sched_rt_runtime_us"), read("sched_rt_period_us")) {
        (Ok(-1), _) => Check::new(
            ID,
            Status::Ok,
            "sched_rt_runtime_us = -1: RT throttling off",
        ),
        (Ok(rt), Ok(period)) if rt < period => Check::new(
            ID,
            Status::Warn,
            format!(
                "sched_rt_runtime_us = {rt} of sched_rt_period_us = {period}: a SCHED_FIFO/RR \
                 thread that spins is stopped for {} ms in every {} ms",
                (period - rt) / 1000,
                period / 1000
            ),
        ),
        (Ok(rt), Ok(period)) => Check::new(
            ID,
            Status::Ok,
            format!("sched_rt_runtime_us = {rt} >= sched_rt_period_us = {period}"),
        ),
        (Err(e), _) | (_, Err(e)) => Check::new(ID, Status::Unknown, e),
    };
    check.fix(
        "let realtime server threads block (epoll/recv) instead of spinning, or echo -1 > \
         /proc/sys/kernel/sched_rt_runtime_us",
        "without throttling a runaway realtime thread can lock up its CPU",
        true,
        false,
    )
}

/// `cpu_contention`: other runnable processes on the server's CPUs, and the load average.
pub(super) fn cpu_contention(ctx: &Ctx) -> Check {
    const ID: &str = "cpu_contention";
    let fix = |c: Check| {
        c.fix(
            "move other work off the server CPUs (taskset, cpusets, isolcpus) or give the server \
             realtime priority",
            RT_TRADEOFF,
            true,
            false,
        )
    };
    let me = std::process::id();
    let mut others = Vec::new();
    let mut read = 0;
    for pid in ctx.root.pids() {
        if Some(pid) == ctx.pid || pid == me {
            continue;
        }
        let Ok(text) = ctx.root.read(format!("proc/{pid}/stat")) else {
            continue;
        };
        let Some((comm, f)) = stat_fields(&text) else {
            continue;
        };
        read += 1;
        let cpu: Option<usize> = field(&f, 39);
        if f.first() == Some(&"R") && cpu.is_some_and(|c| ctx.is_server_cpu(c)) {
            others.push(format!("{pid} ({comm}) on cpu{}", cpu.unwrap_or(0)));
        }
    }
    if read == 0 {
        return fix(Check::new(ID, Status::Unknown, "no readable proc/*/stat"));
    }
    let load = ctx
        .root
        .read_trim("proc/loadavg")
        .unwrap_or_else(|e| format!("? ({e})"));
    let load1: Option<f64> = load.split_whitespace().next().and_then(|l| l.parse().ok());
    let overloaded = load1.is_some_and(|l| l > ctx.online.len().max(1) as f64);
    let mut ev = format!(
        "{} other runnable process(es) on server CPUs {}",
        others.len(),
        format_cpu_list(&ctx.server)
    );
    if !others.is_empty() {
        let shown: Vec<&str> = others.iter().take(8).map(String::as_str).collect();
        ev.push_str(&format!(" ({})", shown.join(", ")));
    }
    ev.push_str(&format!("; proc/loadavg: {load}"));
    if overloaded {
        ev.push_str(&format!(" (above the {} online CPUs)", ctx.online.len()));
    }
    let status = if others.is_empty() && !overloaded {
        Status::Ok
    } else {
        Status::Warn
    };
    fix(Check::new(ID, status, ev))
}

fn policy_name(p: u32) -> &'static str {
    match p {
        0 => "other",
        1 => "fifo",
        2 => "rr",
        3 => "batch",
        5 => "idle",
        6 => "deadline",
        _ => "unknown",
    }
}

/// `server_sched`: the policy of every thread of the server.
pub(super) fn server_sched(ctx: &Ctx, pid: u32) -> Check {
    const ID: &str = "server_sched";
    let mut parts = Vec::new();
    let mut non_rt = 0;
    for tid in ctx.root.list(format!("proc/{pid}/task")) {
        let Ok(text) = ctx.root.read(format!("proc/{pid}/task/{tid}/stat")) else {
            continue;
        };
        let Some((comm, f)) = stat_fields(&text) else {
            continue;
        };
        let (Some(policy), Some(prio), Some(nice)) = (
            field::<u32>(&f, 41),
            field::<u32>(&f, 40),
            field::<i32>(&f, 19),
        ) else {
            continue;
        };
        let what = match policy {
            1 | 2 | 6 => format!("{}:{prio}", policy_name(policy)),
            _ => {
                non_rt += 1;
                format!("{} nice {nice}", policy_name(policy))
            }
        };
        parts.push(format!("{tid} ({comm}) {what}"));
    }
    let check = if parts.is_empty() {
        Check::new(
            ID,
            Status::Unknown,
            format!("no readable proc/{pid}/task/*/stat"),
        )
    } else {
        let status = if non_rt == 0 {
            Status::Ok
        } else {
            Status::Warn
        };
        Check::new(
            ID,
            status,
            format!("threads of {pid}: {}", parts.join("; ")),
        )
    };
    check.fix(
        "run the server threads under SCHED_FIFO (tailscope serve --sched fifo:50, or chrt -f -p 50 TID)",
        "changing the scheduler also changes priorities: realtime threads may starve others, \
         and RT throttling applies (Tales of the Tail, Table 1)",
        true,
        false,
    )
}

/// One thread's `schedstat`: time on the CPU, time waiting on a run queue, timeslices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedStat {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub slices: u64,
}

fn read_schedstats(ctx: &Ctx, pid: u32) -> BTreeMap<u32, SchedStat> {
    let mut out = BTreeMap::new();
    for tid in ctx.root.list(format!("proc/{pid}/task")) {
        let Ok(tid_n) = tid.parse::<u32>() else {
            continue;
        };
        let Ok(text) = ctx.root.read(format!("proc/{pid}/task/{tid}/schedstat")) else {
            continue;
        };
        let v: Vec<u64> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if let [run_ns, wait_ns, slices, ..] = v[..] {
            out.insert(
                tid_n,
                SchedStat {
                    run_ns,
                    wait_ns,
                    slices,
                },
            );
        }
    }
    out
}

/// `server_runqueue_wait`: samples the threads' schedstat twice, `interval` apart.
pub(super) fn server_runqueue_wait(ctx: &Ctx, pid: u32, interval: Duration) -> Check {
    let before = read_schedstats(ctx, pid);
    if before.is_empty() {
        return unreadable(
            "server_runqueue_wait",
            &format!("proc/{pid}/task/*/schedstat"),
            &std::io::Error::other("missing (kernel without CONFIG_SCHED_INFO?)"),
        );
    }
    let t0 = Instant::now();
    std::thread::sleep(interval);
    let after = read_schedstats(ctx, pid);
    runqueue_wait_check(&before, &after, t0.elapsed())
}

/// Builds the `server_runqueue_wait` check from two samples of the threads' schedstat taken
/// `elapsed` apart: the largest per-thread wait rate over the interval (run-queue time per
/// second of wall time) and the largest mean wait per timeslice since the thread started.
/// Warn above 1% or 50 µs per slice, Bad above 10% or 1 ms per slice.
pub fn runqueue_wait_check(
    before: &BTreeMap<u32, SchedStat>,
    after: &BTreeMap<u32, SchedStat>,
    elapsed: Duration,
) -> Check {
    const ID: &str = "server_runqueue_wait";
    let secs = elapsed.as_secs_f64();
    let mut max_rate = 0.0f64;
    let mut max_mean_us = 0.0f64;
    let mut parts = Vec::new();
    for (tid, a) in after {
        let mean_us = if a.slices > 0 {
            a.wait_ns as f64 / a.slices as f64 / 1e3
        } else {
            0.0
        };
        max_mean_us = max_mean_us.max(mean_us);
        let rate = match before.get(tid) {
            Some(b) if secs > 0.0 => a.wait_ns.saturating_sub(b.wait_ns) as f64 / 1e9 / secs,
            _ => 0.0,
        };
        max_rate = max_rate.max(rate);
        parts.push(format!(
            "{tid}: {:.2}% waiting over {:.0} ms, {mean_us:.1} us mean wait per slice",
            100.0 * rate,
            secs * 1e3
        ));
    }
    let status = if after.is_empty() {
        Status::Unknown
    } else if max_rate > 0.10 || max_mean_us > 1000.0 {
        Status::Bad
    } else if max_rate > 0.01 || max_mean_us > 50.0 {
        Status::Warn
    } else {
        Status::Ok
    };
    Check::new(
        ID,
        status,
        format!("task/*/schedstat: {}", parts.join("; ")),
    )
    .fix(
        "give the server CPUs of its own (move other runnable work away) or realtime priority",
        RT_TRADEOFF,
        true,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ss(run_ns: u64, wait_ns: u64, slices: u64) -> SchedStat {
        SchedStat {
            run_ns,
            wait_ns,
            slices,
        }
    }

    #[test]
    fn stat_fields_survive_odd_command_names() {
        let line = "77 (a) b (c)) R 1 77 77 0 -1 0 0 0 0 0 1 1 0 0 20 -5 1 0 10 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 3 50 1 0";
        let (comm, f) = stat_fields(line).unwrap();
        assert_eq!(comm, "a) b (c)");
        assert_eq!(f[0], "R");
        assert_eq!(field::<i32>(&f, 19), Some(-5));
        assert_eq!(field::<usize>(&f, 39), Some(3));
        assert_eq!(field::<u32>(&f, 40), Some(50));
        assert_eq!(field::<u32>(&f, 41), Some(1));
    }

    #[test]
    fn runqueue_wait_thresholds() {
        let t = Duration::from_millis(100);
        let b = BTreeMap::from([(1, ss(0, 0, 1000))]);
        // 0.5 ms waited in 100 ms = 0.5%, mean 0.5 us per slice: ok.
        let a = BTreeMap::from([(1, ss(0, 500_000, 1000))]);
        assert_eq!(runqueue_wait_check(&b, &a, t).status, Status::Ok);
        // 2 ms in 100 ms = 2%: warn.
        let a = BTreeMap::from([(1, ss(0, 2_000_000, 1000))]);
        assert_eq!(runqueue_wait_check(&b, &a, t).status, Status::Warn);
        // 20 ms in 100 ms = 20%: bad.
        let a = BTreeMap::from([(1, ss(0, 20_000_000, 1000))]);
        assert_eq!(runqueue_wait_check(&b, &a, t).status, Status::Bad);
        // No change over the interval but 60 us per slice since start: warn.
        let b = BTreeMap::from([(1, ss(0, 60_000_000, 1000))]);
        assert_eq!(runqueue_wait_check(&b, &b, t).status, Status::Warn);
        assert_eq!(
            runqueue_wait_check(&b, &BTreeMap::new(), t).status,
            Status::Unknown
        );
    }
}
