#!/usr/bin/env bash
# Tales of the Tail §4.3 on this machine: memcached with 2 threads, TCP (connections pinned to
# threads: per-worker queues) versus UDP (one socket, one queue), at the same request rate
# (UTIL of the TCP capacity), each beside the ideal of its own queue structure. memcached on
# CPU 1, the generator on CPU 0. Usage: bench/tales_4_3.sh [UTIL] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
UTIL=${1:-0.5}
DUR=${2:-20s}
cargo build --release -q -p tailscope
TS=target/release/tailscope
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
common=(--spawn --server-threads 2 --server-cpus 1)
cal=$($TS calibrate memcached:// "${common[@]}" --duration 5s --json)
svc=$(echo "$cal" | python3 -c 'import json,sys; print(json.load(sys.stdin)["per_worker_service_us"])')
peak=$(echo "$cal" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rate_rps"])')
rate=$(python3 -c "print(round($UTIL * $peak))")
echo "memcached, 2 threads on CPU 1: peak $peak req/s over TCP -> ${svc} µs per request per thread; both runs at $rate req/s"
for url in memcached:// memcached+udp://; do
  echo
  echo "== $url (queues: $([ "$url" = memcached:// ] && echo per-worker || echo single))"
  $TS run "$url" "${common[@]}" --rate "$rate" --service "${svc}us" --duration "$DUR" --warmup 2s \
    --connections 8 --cpus 0 --lateness-threshold 1ms | grep -vE '^  ' || true
done
