#!/usr/bin/env bash
# `tailscope noise` beside `oslat` (Debian package rt-tests) on the same CPU, one after the
# other, REPS times: minimum loop iteration, gaps per second above 1 µs, and the longest gap.
# oslat's resolution is 1 µs, so its minimum reads 1 µs whatever the loop costs.
# Usage: bench/noise_vs_oslat.sh [CPU] [DURATION_S] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
CPU=${1:-0}; DUR=${2:-5}; REPS=${3:-3}
command -v oslat >/dev/null || { echo "oslat is not installed (apt-get install rt-tests)" >&2; exit 2; }
cargo build --release -q -p tailscope
TS=$PWD/target/release/tailscope
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
tmin=(); tgps=(); tmax=(); omax=(); ogps=()
for _ in $(seq "$REPS"); do
  j=$($TS noise --cpus "$CPU" --duration "${DUR}s" --json)
  tmin+=("$(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpus"][0]["min_loop_ns"])')")
  tgps+=("$(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpus"][0]["gaps_per_s"])')")
  tmax+=("$(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpus"][0]["max_gap_us"] or 0)')")
  o=$(oslat --cpu-list "$CPU" --duration "$DUR" 2>&1)
  omax+=("$(echo "$o" | sed -n 's/.*Maximum:[[:space:]]*\([0-9]*\).*/\1/p')")
  # Gaps of 2 µs and more (oslat's buckets are whole µs), per second.
  ogps+=("$(echo "$o" | awk -v d="$DUR" '/^ *[0-9]+ \(us\):/ {b=$1+0; if (b>=2) n+=$3} END {print n/d}')")
done
echo "CPU $CPU, ${DUR} s, medians of $REPS runs, one tool at a time"
printf 'tailscope noise: min loop %s ns, %s gaps/s above 1 µs, longest gap %s µs\n' \
  "$(printf '%s\n' "${tmin[@]}" | median)" "$(printf '%s\n' "${tgps[@]}" | median)" "$(printf '%s\n' "${tmax[@]}" | median)"
printf 'oslat:           min loop 1 µs (its resolution), %s gaps/s of 2 µs or more, longest %s µs\n' \
  "$(printf '%s\n' "${ogps[@]}" | median)" "$(printf '%s\n' "${omax[@]}" | median)"
