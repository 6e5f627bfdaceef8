//! The mitigations and their costs, after Tales of the Tail Table 1 (rephrased), plus a row for
//! OS noise after Where Has My Time Gone?.

use crate::SourceKind;

static TABLE: [(SourceKind, &str, &str); 8] = [
    (
        SourceKind::Background,
        "give the server's threads real-time priority (SCHED_FIFO) or CPUs of their own \
         (cpuset/isolcpus) so that no other task runs in front of them",
        "a real-time server can starve the other tasks on its CPU; a reserved CPU sits idle \
         between requests, which lowers the host's utilisation",
    ),
    (
        SourceKind::Scheduling,
        "have the worker threads woken in arrival order: run them in a FIFO scheduling class \
         (the real-time scheduler) instead of the default fair scheduler",
        "the scheduling class also sets priority, so the change reaches further than ordering: \
         other tasks, and the server's own helper threads, lose their share",
    ),
    (
        SourceKind::Concurrency,
        "let every worker take every request (one shared queue: UDP or an event loop on a shared \
         socket, or a thread per connection) instead of tying connections to workers",
        "UDP gives up TCP's reliability and congestion control; a thread per connection can cost \
         throughput",
    ),
    (
        SourceKind::Interrupts,
        "route the NIC's interrupts to a CPU that does not run the server (IRQ affinity, \
         irqbalance off or told to avoid the server's CPUs)",
        "when the interrupt CPU is lightly loaded its capacity is wasted, so throughput per CPU \
         drops",
    ),
    (
        SourceKind::SoftIrq,
        "keep the network stack's softirq work off the server's CPUs: steer the IRQs and RPS/XPS \
         queues to a dedicated CPU",
        "the dedicated CPU may run far below capacity, lowering the host's throughput",
    ),
    (
        SourceKind::Numa,
        "keep each server instance's threads and memory on one NUMA node, e.g. one instance per \
         node with the key space split among them",
        "several instances means several queues, losing part of the single-queue benefit, and \
         the load may be uneven between instances",
    ),
    (
        SourceKind::PowerSaving,
        "keep CPUs out of deep idle states (hold /dev/cpu_dma_latency at 0) and fix their \
         frequency (performance governor, no turbo swings)",
        "the host draws more power, also when it is idle",
    ),
    (
        SourceKind::Noise,
        "move kernel housekeeping off the server's CPUs: nohz_full, rcu_nocbs, timer migration \
         and watchdogs away from them",
        "the remaining CPUs carry the housekeeping and lose capacity; most of these settings \
         need a reboot",
    ),
];

/// Per source kind, the mitigation and its trade-off (Tales of the Tail Table 1 in our words;
/// the `Noise` row follows Where Has My Time Gone?).
pub fn mitigation_table() -> &'static [(SourceKind, &'static str, &'static str)] {
    &TABLE
}

/// The row of one kind.
pub(crate) fn mitigation_of(kind: SourceKind) -> (&'static str, &'static str) {
    TABLE
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map_or(("", ""), |(_, m, t)| (m, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_exactly_one_row() {
        use SourceKind::*;
        for k in [
            Background,
            Scheduling,
            Concurrency,
            Interrupts,
            SoftIrq,
            Numa,
            PowerSaving,
            Noise,
        ] {
            assert_eq!(TABLE.iter().filter(|(r, _, _)| *r == k).count(), 1, "{k:?}");
            let (m, t) = mitigation_of(k);
            assert!(!m.is_empty() && !t.is_empty());
        }
    }
}
