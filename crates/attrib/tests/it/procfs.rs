//! Parsing of each /proc format, on files copied from this machine (trimmed).

use attrib::procfs::*;

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn interrupts() {
    let t = parse_cpu_table(&fixture("interrupts")).unwrap();
    assert_eq!(t.cpus, vec![0, 1]);
    // ERR and MIS carry one system-wide number: not per CPU, skipped.
    let names: Vec<&str> = t.rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["24", "36", "39", "42", "NMI", "LOC", "RES"]);
    assert_eq!(t.rows[5].1, vec![772183, 699082]);
    assert_eq!(t.total(&[0]), 1 + 3946 + 772183 + 228007);
    assert_eq!(t.total(&[1]), 218120 + 9085 + 699082 + 144754);
    assert_eq!(t.total(&[]), t.total(&[0]) + t.total(&[1]));
}

#[test]
fn softirqs() {
    let t = parse_cpu_table(&fixture("softirqs")).unwrap();
    assert_eq!(t.cpus, vec![0, 1]);
    assert_eq!(t.rows.len(), 10);
    let net_rx = t.rows.iter().find(|(n, _)| n == "NET_RX").unwrap();
    assert_eq!(net_rx.1, vec![8364481, 8661697]);
    assert_eq!(
        t.total(&[0]),
        107888 + 4 + 8364481 + 358 + 98461 + 1445 + 199794
    );
}

#[test]
fn stat_cpus() {
    let c = parse_stat_cpus(&fixture("stat"));
    assert_eq!(
        c,
        vec![
            CpuTicks {
                cpu: 0,
                busy: 154370 + 34454,
                irq: 0,
                softirq: 3551,
                steal: 103
            },
            CpuTicks {
                cpu: 1,
                busy: 138541 + 26537,
                irq: 0,
                softirq: 3238,
                steal: 163
            },
        ]
    );
}

#[test]
fn task_files() {
    assert_eq!(
        parse_task_schedstat(&fixture("task_schedstat")),
        Some(TaskSchedstat {
            runtime_ns: 42060653,
            run_delay_ns: 44859186,
            timeslices: 111
        })
    );
    assert_eq!(parse_ctxt_switches(&fixture("task_status")), Some((88, 23)));
    // utime 2 + stime 1 ticks, last run on CPU 0.
    assert_eq!(parse_pid_stat(&fixture("pid_stat")), Some((3, 0)));
}

/// Written by hand after the kernel's format (this VM has no CONFIG_SCHEDSTATS).
#[test]
fn schedstat_cpus() {
    assert_eq!(
        parse_schedstat_cpus(&fixture("schedstat")),
        vec![(0, 98765432100), (1, 87654321000)]
    );
    assert!(parse_schedstat_cpus("version 15\ncpu0 1 2\n").is_empty());
}
