//! The process that owns a run while it is `running`: its pid and its start time, so a run
//! whose process died without finishing it (SIGKILL, power loss, OOM killer) can be told from
//! one still in progress, and a pid the kernel has since given to another process is not
//! mistaken for the owner.
//!
//! The start time is field 22 of `/proc/PID/stat` (clock ticks since boot), fixed for the
//! life of a process. A zombie counts as gone: it runs no more code.

use crate::RowStatus;

/// A run's owning process, as recorded when the run began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub pid: i64,
    /// Field 22 of `/proc/PID/stat`.
    pub start: i64,
}

impl Owner {
    /// This process; `None` where `/proc` cannot be read (then its runs have no owner and
    /// are never judged abandoned).
    pub fn current() -> Option<Owner> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let (pid, start, _) = parse_stat(&stat)?;
        Some(Owner { pid, start })
    }

    /// Whether this owner still runs, asking `start_of` for the start time of a live,
    /// non-zombie process with a given pid (`None`: no such process).
    pub fn alive_by(&self, start_of: &dyn Fn(i64) -> Option<i64>) -> bool {
        start_of(self.pid) == Some(self.start)
    }

    /// [`Owner::alive_by`] against this host's `/proc`.
    pub fn alive(&self) -> bool {
        self.alive_by(&live_start_of)
    }
}

/// A row's status as read: `running` whose recorded owner is gone reads `abandoned` (the
/// row itself is marked by the next writer); any other status as stored.
pub(crate) fn status_as_read(status: RowStatus, owner: Option<Owner>) -> RowStatus {
    match status {
        RowStatus::Running if owner.is_some_and(|o| !o.alive()) => RowStatus::Abandoned,
        other => other,
    }
}

/// The start time of process `pid` from `/proc`, `None` when it is gone or a zombie.
pub(crate) fn live_start_of(pid: i64) -> Option<i64> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    match parse_stat(&stat)? {
        (_, _, 'Z' | 'X' | 'x') => None,
        (_, start, _) => Some(start),
    }
}

/// Pid, start time (field 22) and state (field 3) of a `/proc/PID/stat` line. The command
/// name (field 2) is in parentheses and may itself hold spaces and ')', so fields are counted
/// from the last ')'.
fn parse_stat(stat: &str) -> Option<(i64, i64, char)> {
    let pid = stat.split_whitespace().next()?.parse().ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `rest` starts at field 3; field 22 is 19 further on.
    let start = fields.nth(18)?.parse().ok()?;
    Some((pid, start, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_whose_name_holds_spaces_and_parens() {
        let line = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 3 1 0 0 20 0 1 0 987654 \
                    1000 10 18446744073709551615";
        assert_eq!(parse_stat(line), Some((4242, 987654, 'S')));
        assert_eq!(parse_stat("4242 (x) S 1 2"), None, "too short");
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = Owner::current().expect("/proc/self/stat");
        assert_eq!(me.pid, i64::from(std::process::id()));
        assert!(me.alive());
        let reused = Owner {
            start: me.start + 1,
            ..me
        };
        assert!(!reused.alive(), "same pid, another process");
    }

    #[test]
    fn judged_by_a_fake_process_table() {
        let table = |pid: i64| match pid {
            10 => Some(500),
            _ => None,
        };
        assert!(Owner {
            pid: 10,
            start: 500
        }
        .alive_by(&table));
        assert!(!Owner {
            pid: 10,
            start: 499
        }
        .alive_by(&table));
        assert!(!Owner {
            pid: 11,
            start: 500
        }
        .alive_by(&table));
    }
}
