#!/usr/bin/env bash
# Issue 3's acceptance measurement: the built-in server pinned to CPU 1 with SCHED_FIFO and a
# 50 µs deterministic spin per request, the generator on CPU 0, Poisson load at 50 % and 70 %
# of the calibrated capacity; measured vs ideal printed for each. Runs go to a throwaway store
# unless TAILSCOPE_DB is set. Usage: bench/acceptance.sh [DURATION] [ARCH]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-20s}
ARCH=${2:-epoll}
cargo build --release -q -p tailscope
TS=target/release/tailscope
tmp=$(mktemp -d)
trap 'kill "$srv" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=${TAILSCOPE_DB:-$tmp/runs.db}
$TS serve --listen 127.0.0.1:0 --arch "$ARCH" --workers 1 --work det:50us --cpus 1 --sched fifo:50 >"$tmp/addr" &
srv=$!
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
url="nullrpc://$(head -1 "$tmp/addr")"
$TS calibrate "$url" --duration 5s --warmup 1s
for pct in 50 70; do
  echo
  $TS run "$url" --rate "$pct%" --duration "$DUR" --warmup 2s --connections 8 --cpus 0 --workers 1 --plot "$tmp/ccdf-$pct.svg"
done
