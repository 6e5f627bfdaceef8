#!/usr/bin/env bash
# ci-ab.sh: start the base build's server and the merge request's, compare them paired.
set -uo pipefail
TS=${TS:-tailscope}
OUT=${OUT:-latency-ab}
mkdir -p "$OUT"
export TAILSCOPE_DB="$OUT/runs.db"

# 1. Both builds' servers, each on a free loopback port, both on CPU 1 (only one is loaded at
#    a time). Here two built-in servers stand in: set BASE_CMD and NEW_CMD to your two builds
#    (each must print its address, or give fixed ports and skip the address files).
BASE_CMD=${BASE_CMD:-"$TS serve --listen 127.0.0.1:0 --arch epoll --work det:50us --cpus 1"}
NEW_CMD=${NEW_CMD:-"$TS serve --listen 127.0.0.1:0 --arch epoll --work det:50us --cpus 1"}
$BASE_CMD >"$OUT/base.addr" &
base=$!
$NEW_CMD >"$OUT/new.addr" &
new=$!
trap 'kill $base $new' EXIT
for f in base new; do
  for _ in $(seq 50); do [ -s "$OUT/$f.addr" ] && break; sleep 0.1; done
done

# 2. The comparison: short slices of each, alternated with the same arrivals per pair, until
#    p50 and p99 are decided (exit 3 when the new build is worse beyond the tolerance).
"$TS" ab "nullrpc://$(head -1 "$OUT/base.addr")" "nullrpc://$(head -1 "$OUT/new.addr")" \
  --rate "${RATE:-4000}" --cpus 0 --until-decided --max-duration "${MAX:-120s}" \
  --tolerance 10% --junit "$OUT/junit.xml" --markdown "$OUT/summary.md" --json >"$OUT/ab.json"
code=$?

# 3. The HTML report of the comparison, for the artifacts.
experiment=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["experiment"])' "$OUT/ab.json")
"$TS" report --experiment "$experiment" -o "$OUT/report.html"
exit $code
