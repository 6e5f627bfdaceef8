#!/usr/bin/env bash
# Issue 35's acceptance: does `tailscope ab` decide comparisons of tails on this noisy VM, and
# are its intervals honest?
#   1. Against exact truth (no server): examples/ab_coverage simulates M/M/1 arms with the same
#      Poisson arrivals per pair (true ratio of every percentile known exactly), with and
#      without a host drift shared by both arms; nominal 95 % intervals must contain the truth
#      in 90-98 % of TRIALS (>= 200) comparisons.
#   2. A/A: the built-in server (det:50us, epoll, CPU 1) against itself, AA_TRIES times
#      `ab --until-decided --max-duration 60s` at 40 % load (8000 req/s): how many tries had
#      any `worse` or `better` at p50 or p99 (in either view).
#   3. det:60us vs det:50us (1.2x service), TRIES times `ab --until-decided --max-duration 120s`
#      at 8000 req/s: p50 and p99 `worse` counts in the decided view, pairs and seconds taken;
#      side by side in the same hour, `run --repeat 5 --duration 3s` of each + `check
#      --experiment` on the same pair of servers (the way comparisons were made before).
#   4. det:80us vs det:50us, TRIES times `ab --until-decided --max-duration 60s`: p99 `worse`.
#   5. One `tune --interleave` walk on the built-in server: each step's paired gain.
# Both servers are spawned by each `ab` on CPU 1 (only one is loaded at a time); the generator
# runs on CPU 0. Run it alone on the machine: it takes about an hour at the defaults.
# Usage: bench/ab_power.sh [TRIALS] [AA_TRIES] [TRIES]   (defaults 400 20 10)
#        SECTIONS="2 3 4" bench/ab_power.sh …   runs only those sections (default all five).
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-400}
AA_TRIES=${2:-20}
TRIES=${3:-10}
SECTIONS=" ${SECTIONS:-1 2 3 4 5} "
want() { [[ $SECTIONS == *" $1 "* ]]; }
cargo build --release -q -p tailscope
cargo build --release -q -p experiments --example ab_coverage
TS=target/release/tailscope
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
echo "load at start:$(uptime | sed 's/.*load average//')"

if want 1; then
  echo "== 1. paired intervals against exact truth ($TRIALS simulated comparisons per row)"
  target/release/examples/ab_coverage "$TRIALS" 30
fi

arm() { echo "nullrpc:// --server-work det:$1 --service $1"; }
COMMON=(--spawn --server-cpus 1 --cpus 0 --rate 8000 --until-decided --json)

# Each try its own arrivals (--seed): tries with one seed would repeat one sample of them.
SEED=$((RANDOM * 32768 + RANDOM))
next_seed() { SEED=$((SEED + 1)); }

# ab_try NAME MAX BASE CAND: one comparison; appends one line to $tmp/NAME:
# "p50_verdict p99_verdict decided_view pairs seconds any_false exit"
ab_try() {
  local name=$1 max=$2 base=$3 cand=$4 code=0
  next_seed
  "$TS" ab "$(arm "$base")" "$(arm "$cand")" "${COMMON[@]}" --max-duration "$max" --seed "$SEED" \
    >"$tmp/out.json" 2>"$tmp/err" || code=$?
  python3 - "$tmp/out.json" "$code" <<'EOF' | tee -a "$tmp/$name" | sed "s/^/  $name: /"
import json, sys
d = json.load(open(sys.argv[1]))
view = d["decided_view"]
def verdict(v, p):
    return next((r["verdict"] for r in d["rows"] if r["view"] == v and r["percentile"] == p), "-")
false = any(r["verdict"] in ("worse", "better") for r in d["rows"] if r["percentile"] in ("p50", "p99"))
print(verdict(view, "p50"), verdict(view, "p99"), view, d["pairs"], "%.0f" % d["elapsed_s"],
      "false" if false else "-", sys.argv[2])
EOF
}

if want 2; then
  echo "== 2. A/A: det:50us against itself, $AA_TRIES tries (--max-duration 60s)"
  for _ in $(seq "$AA_TRIES"); do ab_try aa 60s 50us 50us; done
  echo "A/A tries with any worse/better at p50 or p99: $(awk '$6=="false"' "$tmp/aa" | wc -l) of $AA_TRIES"
fi

# repeat_check BASE CAND: run --repeat 5 of each against a spawned server, then check.
repeat_check() {
  local ids=()
  for w in "$1" "$2"; do
    next_seed
    "$TS" run nullrpc:// --spawn --server-work "det:$w" --service "$w" --server-cpus 1 --cpus 0 \
      --rate 8000 --repeat 5 --duration 3s --seed "$SEED" --json >"$tmp/rep.json" 2>/dev/null || true
    ids+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["experiment_id"])' "$tmp/rep.json")")
  done
  "$TS" check "${ids[1]}" --experiment --baseline "${ids[0]}" --force --json >"$tmp/chk.json" 2>/dev/null || true
  python3 - "$tmp/chk.json" <<'EOF' | tee -a "$tmp/repeat" | sed "s/^/  run --repeat 5 + check: /"
import json, sys
d = json.load(open(sys.argv[1]))
def verdict(v, p):
    return next((r["verdict"] for r in d["rows"] if r["view"] == v and r["percentile"] == p), "-")
print(verdict("server", "p50"), verdict("server", "p99"), verdict("user", "p50"), verdict("user", "p99"))
EOF
}

if want 3; then
  echo "== 3. det:60us vs det:50us, $TRIES tries each way (--max-duration 120s)"
  for _ in $(seq "$TRIES"); do
    ab_try slower20 120s 50us 60us
    repeat_check 50us 60us
  done
  echo "ab: p50 worse in $(awk '$1=="worse"' "$tmp/slower20" | wc -l) of $TRIES, p99 worse in $(awk '$2=="worse"' "$tmp/slower20" | wc -l) of $TRIES; median pairs $(awk '{print $4}' "$tmp/slower20" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'), median seconds $(awk '{print $5}' "$tmp/slower20" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
  echo "run --repeat 5 + check (server view): p50 worse in $(awk '$1=="worse"' "$tmp/repeat" | wc -l) of $TRIES, p99 worse in $(awk '$2=="worse"' "$tmp/repeat" | wc -l) of $TRIES"
fi

if want 4; then
  echo "== 4. det:80us vs det:50us, $TRIES tries (--max-duration 60s)"
  for _ in $(seq "$TRIES"); do ab_try slower60 60s 50us 80us; done
  echo "ab: p99 worse in $(awk '$2=="worse"' "$tmp/slower60" | wc -l) of $TRIES"
fi
if want 5; then
  echo "== 5. one tuning walk with every step's gain paired (tune --interleave)"
  "$TS" tune nullrpc:// --spawn --server-arch thread --server-work det:50us --server-cpus 1 \
    --cpus 0 --connections 8 --rate 60% --steps rt,udp,irq,numa --duration 3s --interleave \
    --interleave-for 60s 2>/dev/null | grep -E "^  [a-z]|paired|pairs at" || true
fi

echo "load at end:$(uptime | sed 's/.*load average//')"
