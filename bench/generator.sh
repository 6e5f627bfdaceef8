#!/usr/bin/env bash
# Issue 3's generator benchmark, side by side with sockperf (Debian package `sockperf`; never
# downloaded or built here):
#  1. the highest open-loop Poisson rate one generator thread sustains against the built-in
#     server (no synthetic work) with a lateness p99 <= 10 µs, beside sockperf's one-way
#     throughput message rate over the same loopback;
#  2. the minimum loopback round trip tailscope measures, beside `sockperf ping-pong --full-rtt`.
# Server on CPU 1, client on CPU 0. Medians of REPS runs. Usage: bench/generator.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
# The lateness bound (µs) for "sustains": 10 per the issue. On a VM whose CPUs stall ~400
# times a second for 20-40 µs (see `oslat`), no thread keeps a p99 under that: set
# LATENESS_US=50 to find the rate where the generator itself becomes the limit.
LATENESS_US=${LATENESS_US:-10}
command -v sockperf >/dev/null || { echo "sockperf is not installed (apt-get install sockperf)" >&2; exit 2; }
cargo build --release -q -p tailscope
TS=target/release/tailscope
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

$TS serve --listen 127.0.0.1:0 --arch epoll --workers 1 --cpus 1 >"$tmp/addr" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
url="nullrpc://$(head -1 "$tmp/addr")"
taskset -c 1 sockperf sr --tcp -i 127.0.0.1 -p 17777 >/dev/null 2>&1 &
pids+=($!)
taskset -c 1 sockperf sr --tcp -i 127.0.0.1 -p 17778 >/dev/null 2>&1 &
pids+=($!)
sleep 1

best_rates=(); ts_rtts=(); sp_rtts=(); sp_tps=()
for rep in $(seq "$REPS"); do
  best=0
  for rate in 5000 10000 20000 30000 40000 60000 80000 100000 120000 150000 200000 250000 300000; do
    out=$($TS run "$url" --rate "$rate" --duration 4s --warmup 1s --connections 4 --cpus 0 --no-stamps \
          --service 1us --lateness-threshold "${LATENESS_US}us" --seed "$rep" --json 2>/dev/null || true)
    [ -n "$out" ] || break
    p99=$(echo "$out" | jq_ 'd["lateness"]["p99"]')
    ok=$(echo "$out" | jq_ 'int(d["outcomes"]["ok"] > 0.999 * d["requests"])')
    echo "rep $rep: rate $rate req/s: lateness p99 $p99 µs" >&2
    if [ "$ok" = 1 ] && python3 -c "import sys; sys.exit(0 if $p99 <= $LATENESS_US else 1)"; then best=$rate; else break; fi
  done
  best_rates+=("$best")
  out=$($TS run "$url" --rate 2000 --duration 4s --warmup 1s --connections 1 --cpus 0 --no-stamps --service 1us --json 2>/dev/null || true)
  ts_rtts+=("$(echo "$out" | jq_ 'd["min_us"]')")
  sp_rtts+=("$(taskset -c 0 sockperf pp --tcp --full-rtt -i 127.0.0.1 -p 17777 -m 128 -t 4 2>&1 | sed -n 's/.*<MIN> observation = *\([0-9.]*\).*/\1/p')")
  sp_tps+=("$(taskset -c 0 sockperf tp --tcp -i 127.0.0.1 -p 17778 -m 128 -t 4 2>&1 | sed -n 's/.*Summary: Message Rate is \([0-9]*\).*/\1/p')")
done
r=$(printf '%s\n' "${best_rates[@]}" | median)
t=$(printf '%s\n' "${ts_rtts[@]}" | median)
s=$(printf '%s\n' "${sp_rtts[@]}" | median)
p=$(printf '%s\n' "${sp_tps[@]}" | median)
echo "medians of $REPS runs (server CPU 1, client CPU 0, 128-byte messages, TCP loopback)"
if command -v oslat >/dev/null; then
  echo "noise floor on CPU 0 (oslat, 5 s): $(oslat --cpu-list 0 --duration 5 2>&1 | sed -n 's/.*Maximum:[[:space:]]*\(.*\)/max \1/p')"
fi
printf "max open-loop rate with lateness p99 <= ${LATENESS_US} µs: tailscope %s req/s; sockperf throughput %s msg/s (one-way, closed loop): ratio %.3f\n" "$r" "$p" "$(echo "$r / $p" | bc -l)"
printf 'minimum round trip: tailscope %s µs; sockperf ping-pong --full-rtt %s µs: ratio %.3f\n' "$t" "$s" "$(echo "$t / $s" | bc -l)"
