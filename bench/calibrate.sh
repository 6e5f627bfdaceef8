#!/usr/bin/env bash
# Issue 24 item 7: a faster calibration with the same peak. `tailscope calibrate` as it was
# (each step 200 ms warm-up + 600 ms measured, a 2 s confirmation, each step draining its
# overload's backlog) beside the defaults now (100 ms + 200 ms, 600 ms, each step ended with
# its window), alternating, REPS times each, on
#   * the built-in server (epoll, 1 worker, det:50us spin, CPU 1), started once beforehand:
#     the wall time is the calibration's alone;
#   * memcached (1 thread, CPU 1) spawned by each calibration (--spawn): the wall time also
#     holds starting memcached and storing its items.
# The load runs on CPU 0. Prints medians: wall time, peak, the peaks' difference, steps.
# OLD_TS=path: a tailscope whose calibration is as it was before 5bba71c but which takes the
# hidden --confirm (5bba71c's cli.rs over 3856d0b) for "old"; without it "old" is this binary
# with the old lengths (its steps then also end with their window).
# Usage: [OLD_TS=path] bench/calibrate.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
cargo build --release -q -p tailscope
TS=target/release/tailscope
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
OLD=(--duration 600ms --warmup 200ms --confirm 2s)

$TS serve --listen 127.0.0.1:0 --arch epoll --workers 1 --work det:50us --cpus 1 >"$tmp/addr" 2>/dev/null &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
builtin="nullrpc://$(head -1 "$tmp/addr")"
echo "load at start:$(uptime | sed 's/.*load average//')"

# calibrate NAME MODE ARGS...: one calibration; appends "seconds peak steps" to $tmp/NAME.MODE
calibrate() {
  local name=$1 mode=$2; shift 2
  local extra=() ts=$TS
  if [ "$mode" = old ]; then extra=("${OLD[@]}"); ts=${OLD_TS:-$TS}; fi
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$ts" calibrate "$@" --cpus 0 "${extra[@]}" --json 2>/dev/null)
  t1=$(date +%s.%N)
  echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
# "old" is the calibration as it was: its peak was the best step of its search (600 ms
# steps); "new" reports the confirmation as the peak. The best step is the 4th column.
peak = d["best"]["rate_rps"] if sys.argv[2] == "old" else d["peak_rate_rps"]
print("%.2f %.0f %d %.0f" % (float(sys.argv[1]), peak, len(d["search"]), d["best"]["rate_rps"]))' "$(echo "$t1 - $t0" | bc -l)" "$mode" \
    | tee -a "$tmp/$name.$mode" | sed "s/^/  $name $mode: /" >&2
}

for rep in $(seq "$REPS"); do
  for mode in old new; do
    calibrate builtin "$mode" "$builtin"
    calibrate memcached "$mode" memcached:// --spawn --server-threads 1 --server-cpus 1
  done
done
col() { awk -v c="$1" '{print $c}' "$2" | median; }
echo "medians of $REPS (old: 200+600 ms steps, 2 s confirmation${OLD_TS:+, $OLD_TS}; new: 100+200 ms, 600 ms)"
echo "old peak: the best 600 ms step (as calibrate reported it before the confirmation became the peak); new peak: the confirmation; new best: the best 200 ms step"
printf '%-28s | %-8s %-10s %-6s | %-8s %-10s %-6s %-10s | %s\n' target "old s" "old peak" steps "new s" "new peak" steps "new best" "peak new/old"
for name in builtin memcached; do
  os=$(col 1 "$tmp/$name.old"); op=$(col 2 "$tmp/$name.old"); on=$(col 3 "$tmp/$name.old")
  ns=$(col 1 "$tmp/$name.new"); np=$(col 2 "$tmp/$name.new"); nn=$(col 3 "$tmp/$name.new"); nb=$(col 4 "$tmp/$name.new")
  label=$name; [ "$name" = builtin ] && label="built-in det:50us (no spawn)"
  [ "$name" = memcached ] && label="memcached 1 thread (--spawn)"
  printf '%-28s | %-8s %-10s %-6s | %-8s %-10s %-6s %-10s | %.3f\n' "$label" "$os" "$op" "$on" "$ns" "$np" "$nn" "$nb" "$(echo "$np / $op" | bc -l)"
done
echo "load at end:$(uptime | sed 's/.*load average//')"
