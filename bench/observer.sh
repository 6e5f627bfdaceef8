#!/usr/bin/env bash
# Issue 9's observer-effect benchmark: the same run with the attribution sampler on and off,
# alternating, REPS times each (medians), on two targets:
#   - the built-in server (epoll, 1 worker, det:50us, CPU 1, SCHED_FIFO so that other tasks on
#     its CPU do not swamp the comparison), 8,000 req/s from CPU 0;
#   - spawned memcached (2 threads on CPU 1), 5,000 req/s from CPU 0 (the issue's set-up).
# Prints per target: generator lateness p99 and measured p99, medians of the on and off runs,
# their ratios (goal: lateness on/off <= 1.2, measured p99 on/off <= 1.1), and the sampler's
# placement and cost per sample. Usage: bench/observer.sh [REPS] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
DUR=${2:-8s}
cargo build --release -q -p tailscope
TS=$PWD/target/release/tailscope
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db

$TS serve --listen 127.0.0.1:0 --arch epoll --workers 1 --work det:50us --cpus 1 --sched fifo:50 >"$tmp/addr" 2>/dev/null &
srv=$!
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
builtin="nullrpc://$(head -1 "$tmp/addr")"

# One run's figures as "lateness_p99_us measured_p99_us status mode cost_us".
one() {
  local target=$1; shift
  "$TS" run "$target" --cpus 0 --duration "$DUR" --warmup 1s --json "$@" 2>/dev/null |
    python3 -c '
import json, sys
v = json.load(sys.stdin)
s = [i for i in v.get("instruments", []) if i["name"] == "attribution sampler"][0]
print(v["lateness"]["p99"], v["measured"]["p99"], v["status"], s["mode"].replace(" ", "_"),
      s["cost_per_sample_ns"] / 1e3, s["samples"], s["skipped"])'
}

bench() {
  local name=$1 target=$2; shift 2
  : >"$tmp/on"; : >"$tmp/off"
  for i in $(seq "$REPS"); do
    one "$target" --seed "$i" "$@" >>"$tmp/on"
    one "$target" --seed "$i" --no-attribution "$@" >>"$tmp/off"
  done
  python3 - "$name" "$tmp/on" "$tmp/off" <<'PY'
import statistics, sys
name, on, off = sys.argv[1], sys.argv[2], sys.argv[3]
def rows(p):
    return [l.split() for l in open(p) if l.strip()]
a, b = rows(on), rows(off)
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
la, lb, ma, mb = med(a, 0), med(b, 0), med(a, 1), med(b, 1)
print(f"{name}: {len(a)} runs each; statuses on {[r[2] for r in a]}, off {[r[2] for r in b]}")
print(f"  sampler: {a[0][3]}, {med(a, 4):.1f} us per sample, samples {med(a, 5):.0f}, skipped {med(a, 6):.0f} (medians)")
print(f"  generator lateness p99: on {la:.1f} us, off {lb:.1f} us, on/off {la / lb:.2f} (goal <= 1.2)")
print(f"  measured p99:           on {ma:.1f} us, off {mb:.1f} us, on/off {ma / mb:.2f} (goal <= 1.1)")
print(f"  each run (lateness p99, measured p99): on {[(r[0][:5], r[1][:6]) for r in a]}")
print(f"                                         off {[(r[0][:5], r[1][:6]) for r in b]}")
PY
}

bench "built-in server, 8,000 req/s" "$builtin" --rate 8000 --service 50us --server-cpus 1 --server-pid "$srv"
bench "spawned memcached (2 threads), 5,000 req/s" "memcached://" --spawn --server-threads 2 \
  --server-cpus 1 --rate 5000 --service 16us
