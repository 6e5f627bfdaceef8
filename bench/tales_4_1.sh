#!/usr/bin/env bash
# Tales of the Tail §4.1 on this machine: the built-in server (epoll, 1 worker, 50 µs spin) on
# CPU 1 with a CPU hog (a busy loop) on the same CPU, in four set-ups — default scheduling,
# nice -20, SCHED_FIFO, and the hog moved to the other CPU (CPU 0, which on this 2-CPU machine
# is also the generator's) — each at UTIL of the capacity calibrated without the hog.
# Usage: bench/tales_4_1.sh [UTIL] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
UTIL=${1:-0.7}
DUR=${2:-15s}
cargo build --release -q -p tailscope
TS=target/release/tailscope
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
export TAILSCOPE_DB=$tmp/runs.db

serve() { # sched-args...
  $TS serve --listen 127.0.0.1:0 --arch epoll --workers 1 --work det:50us --cpus 1 "$@" >"$tmp/addr" &
  srv=$!
  for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
  url="nullrpc://$(head -1 "$tmp/addr")"
}
hog() { taskset -c "$1" sh -c 'while :; do :; done' & hogpid=$!; }

serve
cal=$($TS calibrate "$url" --duration 4s --json)
svc=$(echo "$cal" | python3 -c 'import json,sys; print(json.load(sys.stdin)["service_us"])')
rate=$(python3 -c "print(round($UTIL * 1e6 / $svc))")
kill $srv; wait $srv 2>/dev/null || true
echo "calibrated without the hog: ${svc} µs per request; every run at $rate req/s"

for setup in "default:1:" "nice -20:1:other:-20" "SCHED_FIFO:1:fifo:50" "hog on the other CPU:0:"; do
  IFS=: read -r name hogcpu sched <<<"$setup"
  if [ -n "$sched" ]; then serve --sched "$sched"; else serve; fi
  hog "$hogcpu"
  echo
  echo "== $name (hog on CPU $hogcpu)"
  $TS run "$url" --rate "$rate" --service "${svc}us" --duration "$DUR" --warmup 2s --connections 8 --cpus 0 \
    --server-pid "$srv" --server-cpus 1 --lateness-threshold 1ms | grep -vE '^  (stage|client|server|read|work|to write|write|return)' || true
  kill "$hogpid" "$srv"; wait "$hogpid" "$srv" 2>/dev/null || true
done
