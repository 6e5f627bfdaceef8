#!/usr/bin/env bash
# Issue 24 item 2: how fast the generator sends the backlog a stall of its loop leaves.
# The built-in server (no work, one epoll worker) on CPU 1 is the fast sink; one generator
# thread on CPU 0 sends Poisson null-RPC requests (128 B) over CONNS connections and is paused
# for S ms every 100 ms (TAILSCOPE_TESTING_PAUSE: a sleep inside its loop, which its clock
# takes for a stall like one the host causes). For each pause the engine records the time
# from the pause's end until every request due was written to the kernel; the figure is that
# time ÷ the pause (goal <= 0.10), the median over a run's pauses, then the median of REPS
# runs. "before" writes every request with its own system call (TAILSCOPE_TESTING_WRITES=
# per-request, the engine as it was), "after" one write per connection and pass; the two
# alternate within each repetition. Usage: bench/catchup.sh [REPS] (SECS, CONNS in the env).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
SECS=${SECS:-1.5}
CONNS=${CONNS:-4}
cargo build --release -q -p tailscope
cargo build --release -q -p load --example catchup
TS=target/release/tailscope
EX=target/release/examples/catchup
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

$TS serve --listen 127.0.0.1:0 --arch epoll --workers 1 --cpus 1 >"$tmp/addr" 2>/dev/null &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
url="nullrpc://$(head -1 "$tmp/addr")"
echo "host: $(nproc) CPUs; load at start:$(uptime | sed 's/.*load average//')"
echo "sink: tailscope serve (epoll, 1 worker, no work) on CPU 1; generator: 1 thread on CPU 0, $CONNS connections"
echo "catch-up ÷ pause, median over each run's pauses, median of $REPS runs (goal <= 0.10)"
printf '%-6s %-9s | %-38s | %-38s\n' "S ms" "R req/s" "before: per-request writes" "after: one write per conn+pass"
printf '%-6s %-9s | %-8s %-11s %-6s %-10s | %-8s %-11s %-6s %-10s\n' "" "" "ratio" "catch-up µs" "due" "writes/req" "ratio" "catch-up µs" "due" "writes/req"
for S in 1 5 10; do
  for R in 20000 50000 100000; do
    declare -A ratio=() cu=() wr=() due=() kept=()
    for rep in $(seq "$REPS"); do
      for mode in per-request coalesced; do
        line=$(TAILSCOPE_TESTING_PAUSE="100000:$((S * 1000))" TAILSCOPE_TESTING_WRITES=$mode \
               "$EX" "$url" "$R" "$SECS" "$CONNS" 0)
        ratio[$mode]+="$(echo "$line" | field ratio_median) "
        cu[$mode]+="$(echo "$line" | field catch_up_us) "
        w=$(echo "$line" | field writes); s=$(echo "$line" | field sends)
        wr[$mode]+="$(echo "$w / $s" | bc -l) "
        due[$mode]+="$(echo "$line" | field due) "
        kept[$mode]+="$(echo "$(echo "$line" | field ok) / $(echo "$line" | field requests)" | bc -l) "
        echo "  S=$S R=$R rep $rep $mode: $line" >&2
      done
    done
    row=()
    for mode in per-request coalesced; do
      k=$(printf '%s\n' ${kept[$mode]} | median)
      mark=" "; [ "$(echo "$k < 0.99" | bc -l)" = 1 ] && mark="*" && starred=1
      row+=("$(printf '%s\n' ${ratio[$mode]} | median)$mark" "$(printf '%s\n' ${cu[$mode]} | median)" "$(printf '%s\n' ${due[$mode]} | median)" "$(printf '%s\n' ${wr[$mode]} | median)")
    done
    printf '%-6s %-9s | %-8s %-11.1f %-6.0f %-10.3f | %-8s %-11.1f %-6.0f %-10.3f\n' "$S" "$R" "${row[@]}"
    unset ratio cu wr due kept
  done
done
if [ "${starred:-0}" = 1 ]; then
  echo "* the generator did not keep the offered rate (< 99 % of the requests answered): its pauses' backlogs mean nothing"
else
  echo "every run kept the offered rate (>= 99 % of the requests answered)"
fi
echo "load at end:$(uptime | sed 's/.*load average//')"
