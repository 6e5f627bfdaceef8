#!/usr/bin/env bash
# The generator's own ceiling (issue 24, item 3; issue 3's comparison kept): the highest
# open-loop Poisson rate one generator thread (CPU 0) sustains against a sink faster than it
# — the built-in server, no work, one epoll worker, CPU 1 — with
#   * achieved = offered (>= 99 % of the offered rate sent and >= 99.9 % answered), and
#   * the catch-up bound: after the host's stalls of its loop, the backlog was sent in
#     <= 10 % of the stall time (the run's own catch-up figures: catch-up ÷ stalled),
# beside memcached's one-thread peak measured in the same script (`tailscope calibrate
# memcached:// --spawn`, 1 thread on CPU 1, load on CPU 0) — goal >= 2× — and sockperf's
# one-way message rate and minimum round trip over the same loopback (Debian package
# `sockperf`, optional). mutilate and memtier_benchmark are not packaged in Debian and are
# never downloaded or built here: not measured. Medians of REPS repetitions.
# Usage: bench/generator.sh [REPS]   (DUR, CONNS in the environment)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
DUR=${DUR:-3s}
CONNS=${CONNS:-8}
cargo build --release -q -p tailscope
TS=target/release/tailscope
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
# One run's verdict: "sustained|not <offered> <achieved> <catch-up÷stalled> <ceiling/core>".
verdict() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
rate = float(sys.argv[1])
g = next((i.get("detail") or {} for i in d.get("instruments", []) if i.get("name") == "load generator"), {})
ach = d.get("achieved_rate_rps") or 0.0
ok = d["outcomes"]["ok"] >= 0.999 * d["requests"]
stalled = g.get("stalled_ns") or 0
ratio = (g.get("catch_up_ns") or 0) / stalled if stalled else 0.0
good = ok and ach >= 0.99 * rate and ratio <= 0.10
print("sustained" if good else "not", rate, round(ach), "%.4f" % ratio, round(g.get("ceiling_per_core_rps") or 0))
' "$1"
}

$TS serve --listen 127.0.0.1:0 --arch epoll --workers 1 --cpus 1 >"$tmp/addr" 2>/dev/null &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
url="nullrpc://$(head -1 "$tmp/addr")"
if command -v sockperf >/dev/null; then
  taskset -c 1 sockperf sr --tcp -i 127.0.0.1 -p 17777 >/dev/null 2>&1 &
  pids+=($!)
  taskset -c 1 sockperf sr --tcp -i 127.0.0.1 -p 17778 >/dev/null 2>&1 &
  pids+=($!)
  sleep 1
fi
echo "load at start:$(uptime | sed 's/.*load average//')"

best_rates=(); ratios=(); ceilings=(); mc_peaks=(); sp_tps=(); sp_rtts=(); ts_rtts=()
for rep in $(seq "$REPS"); do
  mc=$($TS calibrate memcached:// --spawn --server-threads 1 --server-cpus 1 --cpus 0 --json 2>/dev/null \
       | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["peak_rate_rps"]))' || echo 0)
  mc_peaks+=("$mc")
  echo "rep $rep: memcached 1-thread peak $mc req/s" >&2
  best=0; best_ratio=NaN; best_ceiling=0
  for rate in 50000 100000 150000 200000 250000 300000 350000 400000 500000 600000; do
    out=$($TS run "$url" --rate "$rate" --duration "$DUR" --warmup 500ms --connections "$CONNS" --cpus 0 \
          --no-stamps --service 1us --seed "$rep" --json 2>/dev/null || true)
    [ -n "$out" ] || break
    v=$(echo "$out" | verdict "$rate")
    echo "rep $rep: $v (verdict, offered, achieved, catch-up÷stalled, work ceiling/core)" >&2
    set -- $v
    if [ "$1" = sustained ]; then best=$rate; best_ratio=$4; best_ceiling=$5; else break; fi
  done
  best_rates+=("$best"); ratios+=("$best_ratio"); ceilings+=("$best_ceiling")
  if command -v sockperf >/dev/null; then
    sp_tps+=("$(taskset -c 0 sockperf tp --tcp -i 127.0.0.1 -p 17778 -m 128 -t 3 2>&1 | sed -n 's/.*Summary: Message Rate is \([0-9]*\).*/\1/p')")
    sp_rtts+=("$(taskset -c 0 sockperf pp --tcp --full-rtt -i 127.0.0.1 -p 17777 -m 128 -t 3 2>&1 | sed -n 's/.*<MIN> observation = *\([0-9.]*\).*/\1/p')")
    out=$($TS run "$url" --rate 2000 --duration 3s --warmup 500ms --connections 1 --cpus 0 --no-stamps --service 1us --json 2>/dev/null || true)
    ts_rtts+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["min_us"])' 2>/dev/null || echo NaN)")
  fi
done
r=$(printf '%s\n' "${best_rates[@]}" | median)
m=$(printf '%s\n' "${mc_peaks[@]}" | median)
echo "medians of $REPS repetitions (sink: built-in server, no work, 1 worker, CPU 1; generator: 1 thread, CPU 0, $CONNS connections, 128 B requests)"
echo "highest sustained open-loop rate (achieved = offered, catch-up <= 10 % of stalls): tailscope $r req/s (catch-up ÷ stalled there $(printf '%s\n' "${ratios[@]}" | median), work ceiling per core $(printf '%s\n' "${ceilings[@]}" | median) req/s)"
printf 'memcached 1 thread (tailscope calibrate --spawn): peak %s req/s; generator ceiling ÷ that peak: %.2f (goal >= 2)\n' "$m" "$(echo "$r / ($m + 0.000001)" | bc -l)"
echo "mutilate, memtier_benchmark: not packaged in Debian (not downloaded or built): not measured"
if [ ${#sp_tps[@]} -gt 0 ]; then
  echo "sockperf (closed loop, one-way) message rate $(printf '%s\n' "${sp_tps[@]}" | median) msg/s"
  echo "minimum round trip: tailscope $(printf '%s\n' "${ts_rtts[@]}" | median) µs; sockperf ping-pong --full-rtt $(printf '%s\n' "${sp_rtts[@]}" | median) µs"
fi
echo "load at end:$(uptime | sed 's/.*load average//')"
