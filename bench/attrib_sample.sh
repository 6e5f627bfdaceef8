#!/usr/bin/env bash
# The cost of one attribution sample on this host's real /proc (issue 24, item 5): median, p99
# and maximum µs per sample of the in-loop schedule (what the load generator's loop pays, per
# slot of the cycle too), of a sampler thread's schedule, of samples with no slow read, and of
# samples that read everything (the baseline and closing samples). REPS runs of SAMPLES each.
#
# Usage: bench/attrib_sample.sh [REPS] [SAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
SAMPLES=${2:-5000}
cargo build --release -q -p attrib --example sample_cost
for _ in $(seq "$REPS"); do
  target/release/examples/sample_cost "$SAMPLES"
done
