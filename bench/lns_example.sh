#!/usr/bin/env bash
# The LNS paper's method end to end on the built-in staged server (issue 6's documented
# example): run the four basic tests of Table 3 (prioritised stack) under bursty traffic, fit
# T0, R0, mR and M from their measured p99 of delay-sensitive requests, predict a held-back
# configuration with formulas 1-12, measure it, and report formula 15's error.
# The staged server spends exactly known synthetic costs: T = T0 (zero copy, mT = 0) in its
# network-stack stage and R = R0 + k·mR in each of k workers; delay-sensitive requests (class
# 0) go first at every stage. Its workers sleep out R (as the paper's workers wait on a
# database), so that k of them overlap on the server's one CPU. Server on CPU 1, generator
# on CPU 0.
# Usage: bench/lns_example.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10s}
T0=20us; R0=150us; MR=5us          # the server's true costs (the fit does not see them)
N=100; U=10us; PERIOD=50ms; L=512  # bursts of N requests U apart, one per PERIOD; payload L
cargo build --release -q -p tailscope
TS=$PWD/target/release/tailscope
tmp=$(mktemp -d)
srv=
trap 'kill $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
rate=$(python3 -c "print($N / ${PERIOD%ms} * 1000)")

measure() { # alpha workers -> p99 of delay-sensitive requests, µs
  local alpha=$1 k=$2
  $TS serve --listen 127.0.0.1:0 --arch staged --workers "$k" --t0 $T0 --r0 $R0 --mr $MR --priority --worker-sleep --cpus 1 >"$tmp/addr" &
  srv=$!
  for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
  $TS run "nullrpc://$(head -1 "$tmp/addr")" --arrival "bursty:$N,$PERIOD,$U" --rate "$rate" --alpha "$alpha" \
    --request-size $((L + 32)) --duration "$DUR" --warmup 1s --connections 16 --cpus 0 --no-stamps \
    --lateness-threshold 1ms --json >"$tmp/run.json" || true
  kill $srv; wait $srv 2>/dev/null || true; srv=
  python3 -c "import json; d=json.load(open('$tmp/run.json')); c=[c for c in d['classes'] if c['class']==0] or [d]; print(c[0]['measured']['p99'])"
}

echo "basic tests (Table 3, prioritised stack): N=$N per burst, U=$U, L=$L B"
rows=()
for t in "0.05 8" "1 8" "1 1" "1 2"; do
  set -- $t
  p99=$(measure "$1" "$2")
  echo "  alpha=$1 k=$2: measured p99 of delay-sensitive requests $p99 µs"
  rows+=("{\"n\": $N, \"alpha\": $1, \"payload\": $L, \"workers\": $2, \"spacing_us\": ${U%us}, \"stack\": \"priority\", \"measured_p99_us\": $p99}")
done
(IFS=,; echo "[${rows[*]}]") >"$tmp/tests.json"
fit=$($TS model bursty --fit "$tmp/tests.json" --stack priority --json)
echo "fitted: $(echo "$fit" | python3 -c 'import json,sys; p=json.load(sys.stdin)["params"]; print("T0 %.1f µs, R0 %.1f µs, mR %.2f µs, M %.1f µs" % (p["t0_ns"]/1e3, p["r0_ns"]/1e3, p["mr_ns"]/1e3, p["m_ns"]/1e3))') (true: T0 $T0, R0 $R0, mR $MR; M is the rest of the path)"
args=$(echo "$fit" | python3 -c 'import json,sys; p=json.load(sys.stdin)["params"]; print("--t0 %fns --mt %fns --r0 %fns --mr %fns --m %fns" % (p["t0_ns"], p["mt_ns_per_byte"], p["r0_ns"], p["mr_ns"], p["m_ns"]))')
for held in "0.5 4" "0.05 2"; do
  set -- $held
  # shellcheck disable=SC2086
  pred=$($TS model bursty $args --n $N --alpha "$1" --payload $L --workers "$2" --spacing $U --stack priority --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["predicted_us"])')
  meas=$(measure "$1" "$2")
  python3 -c "print('held back alpha=$1 k=$2: predicted %.1f µs, measured %.1f µs, error %.1f%% (formula 15)' % ($pred, $meas, abs($meas-$pred)/$meas*100))"
done
