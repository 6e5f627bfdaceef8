#!/usr/bin/env bash
# Issue 14's cost benchmark: what the eBPF stage collector costs the server it watches.
# Spawned memcached (2 threads on CPU 1), the generator on CPU 0, the attribution sampler off
# (only the collector differs), each measurement three ways, alternating, REPS times each:
#   - `--stages ebpf`: the default budget (1 % of the server's CPUs: the programs attached in
#     windows; issue 24),
#   - `--stages ebpf --stages-budget all`: attached throughout, every request joined,
#   - `--stages stamps` (memcached returns no stamps: no collector),
# at two loads:
#   - p99 at a fixed load (RATE req/s, default 20,000): measured p99 and generator lateness p99;
#   - throughput: an overload (OVER req/s, default 400,000) for 2 s; the completion rate is
#     what the server managed. (150,000 was the default until memcached's two threads on
#     one CPU completed all of it on a quiet host: no overload, a ratio that says nothing.
#     A line says so when a run without the collector was not saturated.)
# Prints medians, the ratios with/without, and the collector's own figures from the runs:
# kernel program runs per request and ns per run (BPF run-time statistics), the user-space
# join's time per request, events and drops, and for the sampled runs the windows, the
# fraction of the run attached, what was spent against the budget and the share of the
# answered requests the stages rest on. Needs root (the collector) and memcached.
# Usage: bench/ebpf_overhead.sh [REPS] [DURATION] [RATE] [OVER]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
DUR=${2:-5s}
RATE=${3:-20000}
OVER=${4:-400000}
cargo build --release -q -p tailscope
TS=$PWD/target/release/tailscope
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db

# One run's figures: "p99_us lateness_p99_us completed_rps status kernel_runs kernel_ns
# user_ns answered events dropped matched windows attached_fraction spent_fraction" (collector
# figures 0 without it; the last three 0 when not sampled).
one() {
  # An invalid or saturated run still prints its object (exit 1 for invalid): keep it.
  { "$TS" run memcached:// --spawn --server-threads 2 --server-cpus 1 --cpus 0 \
    --service 16us --no-attribution --json "$@" 2>/dev/null || true; } |
    python3 -c '
import json, sys
v = json.load(sys.stdin)
c = [i for i in v.get("instruments", []) if i["name"] == "eBPF stage collector"]
d = (c[0].get("detail") or {}) if c else {}
k = d.get("kernel_cost") or {}
s = d.get("sampling") or {}
print(v["measured"]["p99"], v["lateness"]["p99"], (v.get("throughput") or {}).get("completed_rps", 0),
      v["status"], k.get("runs", 0), k.get("run_time_ns", 0), d.get("user_cpu_ns", 0),
      d.get("answered", 0), d.get("kernel_events", 0), d.get("kernel_dropped", 0),
      d.get("matched", 0), s.get("windows", 0), s.get("attached_fraction", 0),
      s.get("spent_fraction") or 0)'
}

for kind in fixed over; do for f in on all off; do : >"$tmp/$kind.$f"; done; done
for i in $(seq "$REPS"); do
  for f in on all off; do
    case $f in
      on) args=(--stages ebpf) ;;
      all) args=(--stages ebpf --stages-budget all) ;;
      off) args=(--stages stamps) ;;
    esac
    one "${args[@]}" --seed "$i" --rate "$RATE" --duration "$DUR" --warmup 1s >>"$tmp/fixed.$f"
    one "${args[@]}" --seed "$i" --rate "$OVER" --duration 2s --warmup 500ms \
      --lateness-threshold 1s >>"$tmp/over.$f"
  done
done

python3 - "$tmp" "$REPS" "$RATE" "$OVER" <<'PY'
import statistics, sys
tmp, reps, rate, over = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def rows(name):
    return [l.split() for l in open(f"{tmp}/{name}") if l.strip()]
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
names = {"on": "sampled (default budget)", "all": "attached throughout (--stages-budget all)"}
fixed = {f: rows(f"fixed.{f}") for f in ("on", "all", "off")}
over_ = {f: rows(f"over.{f}") for f in ("on", "all", "off")}
print(f"spawned memcached, 2 threads on CPU 1, generator on CPU 0; {reps} runs each, medians")
fb, ob = fixed["off"], over_["off"]
pb, lb, tb = med(fb, 0), med(fb, 1), med(ob, 2)
print(f"without the collector: at {rate} req/s measured p99 {pb:.1f} us, lateness p99 {lb:.1f} us "
      f"(statuses {[r[3] for r in fb]}); at {over} req/s completed {tb:.0f} req/s "
      f"(each run {[int(float(r[2])) for r in ob]}, statuses {[r[3] for r in ob]})")
if any(r[3] != "saturated" for r in ob):
    print(f"  NOT AN OVERLOAD: a run without the collector kept up with {over} req/s; the throughput "
          "ratio says nothing about the server's peak (raise OVER)")
for f in ("on", "all"):
    fa, oa = fixed[f], over_[f]
    pa, la, ta = med(fa, 0), med(fa, 1), med(oa, 2)
    print(f"{names[f]}:")
    print(f"  at {rate} req/s: measured p99 {pa:.1f} us (with/without {pa / pb:.2f}), "
          f"generator lateness p99 {la:.1f} us (with/without {la / lb:.3f}); statuses {[r[3] for r in fa]}")
    print(f"    each run's p99: {[r[0][:6] for r in fa]}")
    print(f"  overload at {over} req/s: completed {ta:.0f} req/s, with/without {ta / tb:.3f}; "
          f"each run {[int(float(r[2])) for r in oa]}, statuses {[r[3] for r in oa]}")
    for name, rs in ((f"{rate} req/s", fa), ("overload", oa)):
        runs, ns, user, ans = med(rs, 4), med(rs, 5), med(rs, 6), max(med(rs, 7), 1)
        matched = med(rs, 10)
        line = (f"  collector at {name}: {runs / ans:.1f} program runs per answered request, "
                f"{ns / max(runs, 1):.0f} ns each, {ns / ans:.0f} ns in the kernel per answered request; "
                f"join {user / ans:.0f} ns per request; {med(rs, 8) / ans:.2f} events per request, "
                f"{med(rs, 9):.0f} dropped; stages for {matched:.0f} of {ans:.0f} answered ({100 * matched / ans:.1f} %)")
        if f == "on":
            line += (f"; {med(rs, 11):.0f} windows, attached {100 * med(rs, 12):.1f} % of the run, "
                     f"spent {100 * med(rs, 13):.2f} % of the server's CPU")
        print(line)
PY
