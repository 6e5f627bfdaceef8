#!/usr/bin/env bash
# Issue 9's memory check: peak RSS of `tailscope run` must not grow with the run's length.
# The built-in server (epoll, no work, CPU 1) takes 20,000 req/s from CPU 0 for SHORT and for
# LONG (default 10 s and 40 s); the peak RSS of each (GNU time's maximum resident set) and
# their ratio (goal: LONG / SHORT <= 1.3) are printed, with the records each run stored.
# Then issue 16's: memory stays bounded however far past capacity the offered load is (held
# requests are a bounded window, not a growing queue). A second server with 200 µs of work a
# request (~4,500 req/s of capacity) takes half its capacity and three times it, each for
# SATURATED (default 20 s); goal: peak RSS at 3x <= 1.5 x at 0.5x, statuses ok and saturated.
# (Until issue 36 this was a 52 s integration test; speed and memory belong to benchmarks.)
# Usage: bench/memory.sh [RATE] [SHORT] [LONG] [SATURATED]
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-20000}
SHORT=${2:-10s}
LONG=${3:-40s}
SATURATED=${4:-20s}
cargo build --release -q -p tailscope
TS=$PWD/target/release/tailscope
tmp=$(mktemp -d)
servers=()
trap 'for p in "${servers[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
# Starts the built-in server (epoll, 1 worker, CPU 1) with ARGS and points $url at it.
serve() {
  : >"$tmp/addr"
  $TS serve --listen 127.0.0.1:0 --arch epoll --workers 1 --cpus 1 "$@" >"$tmp/addr" 2>/dev/null &
  servers+=($!)
  for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
  url="nullrpc://$(head -1 "$tmp/addr")"
}
serve
peak() {
  /usr/bin/time -f '%M' -o "$tmp/rss" "$TS" run "$url" --rate "$RATE" --duration "$1" \
    --warmup 1s --cpus 0 --service "${SERVICE:-1us}" --json "${@:2}" >"$tmp/out.json" 2>/dev/null || true
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(v["records"], v["status"])' "$tmp/out.json" >"$tmp/n"
  echo "$(cat "$tmp/rss") $(cat "$tmp/n")"
}
read -r s_kb s_n s_st < <(peak "$SHORT")
read -r l_kb l_n l_st < <(peak "$LONG")
python3 - "$s_kb" "$s_n" "$s_st" "$l_kb" "$l_n" "$l_st" "$SHORT" "$LONG" "$RATE" <<'PY'
import sys
s_kb, s_n, s_st, l_kb, l_n, l_st, short, long, rate = sys.argv[1:]
s_kb, l_kb = int(s_kb), int(l_kb)
print(f"{rate} req/s: {short}: peak RSS {s_kb / 1024:.1f} MiB, {s_n} records ({s_st}); "
      f"{long}: peak RSS {l_kb / 1024:.1f} MiB, {l_n} records ({l_st})")
print(f"peak RSS {long} / {short}: {l_kb / s_kb:.2f} (goal <= 1.3)")
PY

# Past saturation: the 200 µs server, 0.5x and 3x its capacity.
serve --work det:200us
read -r h_kb h_n h_st < <(RATE=2250 SERVICE=200us peak "$SATURATED" --lateness-threshold 1s --no-attribution)
read -r o_kb o_n o_st < <(RATE=13500 SERVICE=200us peak "$SATURATED" --lateness-threshold 1s --no-attribution)
python3 - "$h_kb" "$h_n" "$h_st" "$o_kb" "$o_n" "$o_st" "$SATURATED" <<'PY'
import sys
h_kb, h_n, h_st, o_kb, o_n, o_st, length = sys.argv[1:]
h_kb, o_kb = int(h_kb), int(o_kb)
print(f"det:200us server, {length} each: 2,250 req/s (0.5x): peak RSS {h_kb / 1024:.1f} MiB, "
      f"{h_n} records ({h_st}); 13,500 req/s (3x): peak RSS {o_kb / 1024:.1f} MiB, "
      f"{o_n} records ({o_st})")
ok = o_kb <= 1.5 * h_kb and (h_st, o_st) == ("ok", "saturated")
print(f"peak RSS 3x / 0.5x: {o_kb / h_kb:.2f} (goal <= 1.5, statuses ok and saturated): "
      + ("met" if ok else "NOT met"))
PY
