#!/usr/bin/env bash
# The cost of one attribution sample on this host's real /proc (issue 24, item 5): median, p99
# and maximum µs per sample of the in-loop schedule (what the load generator's loop pays, per
# slot of the cycle too), of a sampler thread's schedule, of samples with no slow read, of the
# in-loop schedule with every one of its reads in every sample ("in-loop all"), and of samples
# that read everything, /proc/interrupts included ("complete": the baseline and closing
# samples); each kind again right after it with the hard interrupts from the eBPF per-CPU
# counter ("KIND ebpf", when this process may load BPF) and what its programs cost; then each
# read on its own and the host's load. REPS runs of SAMPLES each, and at
# the end the median over the runs of each kind's median and p99, side by side.
#
# Usage: bench/attrib_sample.sh [REPS] [SAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
SAMPLES=${2:-5000}
cargo build --release -q -p attrib --example sample_cost
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$REPS"); do
  target/release/examples/sample_cost "$SAMPLES" | tee -a "$out"
done
# The middle value of a column of numbers.
mid() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "medians of $REPS runs (µs):"
for kind in in-loop "in-loop ebpf" thread "thread ebpf" light "light ebpf" "in-loop all" "in-loop all ebpf" complete "complete ebpf"; do
  lines=$(grep -E "^$kind +median" "$out" || true)
  [ -n "$lines" ] || continue
  m=$(sed -E 's/.* median +([0-9.]+).*/\1/' <<<"$lines" | mid)
  p=$(sed -E 's/.* p99 +([0-9.]+).*/\1/' <<<"$lines" | mid)
  printf "  %-17s median %6.1f  p99 %6.1f\n" "$kind" "$m" "$p"
done
