#!/usr/bin/env bash
# tailscope beside the load generators available here, against the same server at the same
# settings (server pinned to CPU 1, clients to CPU 0, 8 connections, 1 KiB values/files):
#   nginx  — wrk (closed loop: each connection waits for its reply before the next request)
#   redis  — redis-benchmark (closed loop)
#   memcached — memtier_benchmark or mutilate, when on PATH (neither is a Debian package here)
# For each: the peer's throughput and percentiles; tailscope's closed-loop peak (`calibrate`)
# and an open-loop run at half of it, with its measured and ideal percentiles. Closed-loop
# tools under-report the tail (coordinated omission); the open-loop numbers are not directly
# comparable, which is the point. Never downloads or builds a peer.
# Usage: bench/peers.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10s}
cargo build --release -q -p tailscope
TS=$PWD/target/release/tailscope
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }
ts_pair() { # url
  local cal rate
  cal=$($TS calibrate "$1" --duration 5s --connections 8 --json)
  rate=$(echo "$cal" | jq_ 'round(d["peak_rate_rps"] / 2)')
  echo "  tailscope calibrate (closed loop, 8 conns): $(echo "$cal" | jq_ 'round(d["peak_rate_rps"])') req/s"
  $TS run "$1" --rate "$rate" --duration "$DUR" --warmup 2s --connections 8 --cpus 0 --lateness-threshold 1ms --json \
    | jq_ '"  tailscope run (open loop, %s req/s): measured p50 %.0f p99 %.0f p99.9 %.0f µs; ideal p99 %.0f µs; status %s" % (round(d["achieved_rate_rps"]), d["measured"]["p50"], d["measured"]["p99"], d["measured"]["p99.9"], (d["ideal"] or {}).get("p99", float("nan")), d["status"])' || true
}

echo "== nginx (1 worker, CPU 1)"
if command -v wrk >/dev/null && [ -x /usr/sbin/nginx ]; then
  port=$(free_port); mkdir -p "$tmp/www"; head -c 1024 /dev/zero >"$tmp/www/f0"
  cat >"$tmp/nginx.conf" <<CONF
daemon off; worker_processes 1; pid $tmp/nginx.pid; error_log $tmp/error.log; $( [ "$(id -u)" = 0 ] && echo "user root;" )
events { worker_connections 1024; }
http { access_log off; keepalive_requests 1000000; server { listen 127.0.0.1:$port; root $tmp/www; } }
CONF
  taskset -c 1 /usr/sbin/nginx -c "$tmp/nginx.conf" -p "$tmp" & pids+=($!)
  wait_port "$port"
  echo "  wrk (closed loop, 1 thread, 8 conns):"
  taskset -c 0 wrk -t1 -c8 -d"$DUR" --latency "http://127.0.0.1:$port/f0" | grep -E "Requests/sec|^ +(50|90|99)%" | sed 's/^/    /'
  (cd "$tmp" && ts_pair "http://127.0.0.1:$port/f0")
  kill "${pids[-1]}"
else
  echo "  wrk or nginx missing (apt-get install wrk nginx)"
fi

echo "== redis (CPU 1)"
if command -v redis-benchmark >/dev/null; then
  port=$(free_port)
  taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null & pids+=($!)
  wait_port "$port"
  echo "  redis-benchmark (closed loop, 8 clients, GET, 1 KiB values, 10k keys):"
  taskset -c 0 redis-benchmark -p "$port" -c 8 -n 300000 -d 1024 -r 10000 -t get 2>/dev/null \
    | grep -E "throughput summary|avg +min" -A1 | grep -vE "^--$" | sed 's/^/    /' || true
  ts_pair "redis://127.0.0.1:$port"
  kill "${pids[-1]}"
else
  echo "  redis-benchmark missing (apt-get install redis-tools)"
fi

echo "== memcached"
for peer in memtier_benchmark mutilate; do
  if command -v "$peer" >/dev/null; then echo "  $peer is on PATH: run it against memcached beside 'tailscope run memcached://…'"; fi
done
command -v memtier_benchmark >/dev/null || command -v mutilate >/dev/null || echo "  neither memtier_benchmark nor mutilate is on PATH (not Debian packages here): tailscope only"
