#!/usr/bin/env bash
# Issue 9's memory check: peak RSS of `tailscope run` must not grow with the run's length.
# The built-in server (epoll, no work, CPU 1) takes 20,000 req/s from CPU 0 for SHORT and for
# LONG (default 10 s and 40 s); the peak RSS of each (GNU time's maximum resident set) and
# their ratio (goal: LONG / SHORT <= 1.3) are printed, with the records each run stored.
# Usage: bench/memory.sh [RATE] [SHORT] [LONG]
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-20000}
SHORT=${2:-10s}
LONG=${3:-40s}
cargo build --release -q -p tailscope
TS=$PWD/target/release/tailscope
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
$TS serve --listen 127.0.0.1:0 --arch epoll --workers 1 --cpus 1 >"$tmp/addr" 2>/dev/null &
srv=$!
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
url="nullrpc://$(head -1 "$tmp/addr")"
peak() {
  /usr/bin/time -f '%M' -o "$tmp/rss" "$TS" run "$url" --rate "$RATE" --duration "$1" \
    --warmup 1s --cpus 0 --service 1us --json >"$tmp/out.json" 2>/dev/null || true
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
