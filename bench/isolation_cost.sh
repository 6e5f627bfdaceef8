#!/usr/bin/env bash
# The cost of each isolation mechanism (Xeon vs ThunderX study §V-A, Table IV) on this host:
# spawned memcached (1 thread) on CPU 1, the generator on CPU 0. For the baseline and each
# mechanism this host supports:
#   - throughput: `tailscope calibrate` (the peak search, its confirmed peak);
#   - p99 (user's view) at one fixed load, FRACTION (default 0.3) of the baseline's peak (low
#     enough for one generator thread on a shared 2-CPU host), for DURATION, REPS times: the
#     median, the range, and each run's status (invalid: the generator fell behind);
#   - the time tailscope took to create the mechanism (Table IV's own figure).
# The settings do not bind (a cpuset and a CPU quota of the CPU the server has anyway, a
# memory limit far above its needs, an HTB rate far above its traffic), so the differences
# are the mechanisms' overhead, not their intended effect. The HTB row runs inside a network
# namespace of its own (generator and server on its loopback, which carries the HTB class)
# and is compared with the same set-up without the class; nothing outside it is shaped.
# A mechanism the host lacks is listed with tailscope's reason (e.g. no resctrl).
# Needs root (cgroups, tc, ip netns). Usage: bench/isolation_cost.sh [DURATION] [FRACTION] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-8s}
FRACTION=${2:-0.3}
REPS=${3:-3}
cargo build --release -q -p tailscope
TS=$PWD/target/release/tailscope
tmp=$(mktemp -d)
NS=tsbench$$
trap 'ip netns del "$NS" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db XDG_STATE_HOME=$tmp/state
ip netns add "$NS"
ip -n "$NS" link set lo up

BASE=(memcached:// --spawn --server-threads 1 --server-cpus 1 --cpus 0)

# "peak_rps" of a calibration, or "unavailable: REASON".
peak() {
  local out
  if out=$("$@" 2>"$tmp/err"); then
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["peak_rate_rps"]))' <<<"$out"
  else
    echo "unavailable: $(tail -1 "$tmp/err" | sed 's/^tailscope: //')"
  fi
}

# "p99_us status apply_ms" of a run.
p99() {
  # An invalid run (its generator fell behind) exits 1 but still prints its figures.
  { "$@" 2>/dev/null || true; } | python3 -c '
import json, sys
v = json.load(sys.stdin)
iso = v["server"].get("isolation") or []
apply = sum(m["apply_us"] for m in iso) / 1e3
p99, status = v["measured"]["p99"], v["status"]
print(f"{p99:.1f} {status} {apply:.2f}")'
}

row() {
  local name=$1 where=$2; shift 2
  local pre=()
  [ "$where" = netns ] && pre=(ip netns exec "$NS")
  local pk
  pk=$(peak "${pre[@]}" "$TS" calibrate "${BASE[@]}" --json "$@")
  if [[ $pk == unavailable* ]]; then
    printf '%-26s %s\n' "$name" "$pk"
    return
  fi
  : >"$tmp/runs"
  for i in $(seq "$REPS"); do
    p99 "${pre[@]}" "$TS" run "${BASE[@]}" --rate "$RATE" --service 20us --seed "$i" \
      --duration "$DUR" --warmup 1s --no-attribution --json "$@" >>"$tmp/runs"
  done
  python3 - "$name" "$pk" "$tmp/runs" <<'PY'
import statistics, sys
name, pk, path = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [l.split() for l in open(path) if l.strip()]
p99 = [float(r[0]) for r in rows]
apply = statistics.median(float(r[2]) for r in rows)
status = ",".join(r[1] for r in rows)
print(f"{name:<26} {pk:>10} {statistics.median(p99):>10.1f} {min(p99):>9.1f}-{max(p99):<9.1f} {apply:>8.2f}  {status}")
PY
}

echo "calibrating the baseline for the fixed load..." >&2
BASE_PEAK=$(peak "$TS" calibrate "${BASE[@]}" --json)
RATE=$(python3 -c "print(round($BASE_PEAK * $FRACTION))")
echo "memcached, 1 thread on CPU 1, generator on CPU 0; p99 at $RATE req/s ($FRACTION of the baseline peak $BASE_PEAK), $REPS runs of $DUR each"
printf '%-26s %10s %10s %19s %8s  %s\n' mechanism peak_rps p99_us p99_range_us apply_ms statuses
row "none" root
row "cpuset (CPU 1)" root --server-cpuset 1
row "memory limit (1 GiB)" root --server-memory 1G
row "cpu quota (1 CPU)" root --server-cpu-quota 1
row "llc ways (2)" root --llc-ways 2
row "none, in a netns" netns
row "htb 10gbit on netns lo" netns --net-rate 10gbit --net-dev "$NS/lo"
