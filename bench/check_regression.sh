#!/usr/bin/env bash
# Issue 23's acceptance for `tailscope check`, measured on this host:
#   1. a real regression: the built-in server (epoll, 1 worker, CPU 1) at det:50us is the
#      baseline, the same port then served at det:80us is the candidate; both measured as
#      `run --rate 4000 --repeat $REPEAT --duration $DURATION` from CPU 0 (default 5 and 3s).
#      `check CANDIDATE --experiment --baseline ID` must read `worse` at p50 and p99 (exit 3).
#   2. no false alarm: TRIES times, two such experiments of one det:50us server, the second
#      checked against the first: `same` or `undecided`, never `worse` (goal: >= 9 of 10 tries
#      without a `worse` row at p50 or p99).
# Prints one line per check: the verdicts at p50 and p99 per view, with the ratios and their
# intervals (or why a row has none).
# Usage: [REPEAT=5] [DURATION=3s] bench/check_regression.sh [TRIES]; TS=path/to/tailscope to
# use another binary.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIES=${1:-10}
REPEAT=${REPEAT:-5}
DURATION=${DURATION:-3s}
if [ -z "${TS:-}" ]; then
  cargo build --release -q -p tailscope
  TS=$PWD/target/release/tailscope
fi
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db

serve() { # serve LISTEN WORK: starts the built-in server, sets $srv and $addr
  "$TS" serve --listen "$1" --arch epoll --workers 1 --work "$2" --cpus 1 >"$tmp/addr" 2>/dev/null &
  srv=$!
  for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
  addr=$(head -1 "$tmp/addr")
}
stop() { kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; srv=; : >"$tmp/addr"; }
measure() { # measure LABEL: prints the experiment id
  "$TS" run "nullrpc://$addr" --rate 4000 --repeat "$REPEAT" --duration "$DURATION" --cpus 0 \
    --label "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["experiment_id"])'
}
verdicts() { # verdicts CANDIDATE BASELINE: one line, and the count of worse rows at p50/p99
  "$TS" check "$1" --experiment --baseline "$2" --json 2>/dev/null >"$tmp/check.json" || true
  python3 - "$tmp/check.json" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
out, worse = [], 0
for r in v.get("rows", []):
    if r.get("percentile") not in ("p50", "p99"):
        continue
    ratio = r.get("ratio") or {}
    x = ratio.get("value")
    shown = f" x{x:.2f} [{ratio['lo']:.2f}, {ratio['hi']:.2f}]" if x else f" ({r.get('why', '')})"
    out.append(f'{r["view"]} {r["percentile"]} {r["verdict"]}' + shown)
    worse += r["verdict"] == "worse"
print("; ".join(out) or v.get("error", "no rows"), f"| exit {v.get('exit_code', '?')}", f"| worse {worse}")
EOF
}

serve 127.0.0.1:0 det:50us
base=$(measure base)
stop
serve "$addr" det:80us
cand=$(measure slower)
stop
echo "regression (det:80us vs det:50us): $(verdicts "$cand" "$base")"

false_alarms=0
serve 127.0.0.1:0 det:50us
for i in $(seq "$TRIES"); do
  b=$(measure "same-base-$i")
  c=$(measure "same-cand-$i")
  line=$(verdicts "$c" "$b")
  echo "same server, try $i: $line"
  case "$line" in *"| worse 0") ;; *) false_alarms=$((false_alarms + 1)) ;; esac
done
stop
echo "tries without a worse row at p50/p99: $((TRIES - false_alarms)) of $TRIES (goal >= 9 of 10)"
