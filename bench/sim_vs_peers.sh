#!/usr/bin/env bash
# Simulator throughput beside Ciw and SimPy (issue 2's benchmark) and beside its own limit
# (issue 24). Runs the same workloads — M/D/1 at ρ=0.7 and M/M/4 at ρ=0.8, single FIFO queue —
# in tailscope and in both Python peers, each pinned to CPU 0, REPS times, and prints the median
# simulated requests/s and the ratios. Then the limit: the simulator against a bare
# Lindley / Kiefer–Wolfowitz loop with the same generator, distributions and recording,
# measured in the same process (crates/model/examples/sim_limit.rs; thread CPU time, median
# of REPS): that ratio holds on a busy host, where absolute rates do not.
# The peers are installed from PyPI into a throwaway virtualenv (deleted on exit).
#
# Usage: bench/sim_vs_peers.sh [REPS]
#   (env: TS_REQUESTS, CIW_REQUESTS, SIMPY_REQUESTS, LIMIT_REQUESTS)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
TS_N=${TS_REQUESTS:-100000000}
CIW_N=${CIW_REQUESTS:-100000}
SIMPY_N=${SIMPY_REQUESTS:-300000}
LIMIT_N=${LIMIT_REQUESTS:-20000000}
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""

venv=$(mktemp -d /tmp/tailscope-bench-venv.XXXXXX)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv" >&2
"$venv/bin/pip" install -q ciw simpy >&2

cargo build --release -q -p tailscope
cargo build --release -q -p model --example sim_limit
TS=target/release/tailscope

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

bench_one() { # name service workers load
  local name=$1 svc=$2 c=$3 rho=$4 ts=() ciw=() simpy=()
  for _ in $(seq "$REPS"); do
    local t0 t1
    t0=$(date +%s.%N)
    $PIN "$TS" model --arrival poisson --service "$svc:50us" --workers "$c" --load "$rho" \
      --requests "$TS_N" --exact-limit 0 --warmup 0 --json >/dev/null
    t1=$(date +%s.%N)
    ts+=("$(echo "$TS_N / ($t1 - $t0)" | bc -l)")
    ciw+=("$($PIN "$venv/bin/python" bench/sim_peers.py --peer ciw --service "$svc" --workers "$c" --load "$rho" --requests "$CIW_N" | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["requests_per_s"])')")
    simpy+=("$($PIN "$venv/bin/python" bench/sim_peers.py --peer simpy --service "$svc" --workers "$c" --load "$rho" --requests "$SIMPY_N" | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["requests_per_s"])')")
  done
  local m_ts m_ciw m_simpy
  m_ts=$(printf '%s\n' "${ts[@]}" | median)
  m_ciw=$(printf '%s\n' "${ciw[@]}" | median)
  m_simpy=$(printf '%s\n' "${simpy[@]}" | median)
  printf '%-10s tailscope %12.0f req/s | Ciw %10.0f req/s (x%.0f) | SimPy %10.0f req/s (x%.0f)\n' \
    "$name" "$m_ts" "$m_ciw" "$(echo "$m_ts / $m_ciw" | bc -l)" "$m_simpy" "$(echo "$m_ts / $m_simpy" | bc -l)"
}

echo "simulated requests per second, median of $REPS runs, each pinned to CPU 0"
echo "(tailscope: $TS_N requests, whole process wall time incl. start-up; Ciw: $CIW_N; SimPy: $SIMPY_N)"
bench_one "M/D/1 0.7" det 1 0.7
bench_one "M/M/4 0.8" exp 4 0.8
echo
$PIN target/release/examples/sim_limit "$LIMIT_N" "$REPS"
