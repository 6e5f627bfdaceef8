#!/usr/bin/env bash
# ci-latency.sh: start the server, sweep it with an SLO, publish JUnit, Markdown and HTML.
set -uo pipefail
TS=${TS:-tailscope}
OUT=${OUT:-latency}
mkdir -p "$OUT"
export TAILSCOPE_DB="$OUT/runs.db"

# 1. The server under test (here the built-in null-RPC server on CPU 1).
"$TS" serve --listen 127.0.0.1:0 --arch epoll --work det:50us --cpus 1 >"$OUT/addr" &
server=$!
trap 'kill $server' EXIT
for _ in $(seq 50); do [ -s "$OUT/addr" ] && break; sleep 0.1; done
target="nullrpc://$(head -1 "$OUT/addr")"

# 2. A sweep with an SLO, each point repeated (interleaved) so the verdict reads their spread.
"$TS" sweep "$target" --service 50us --loads 2000,4000 --repeat 3 \
  --duration "${DURATION:-5s}" --cpus 0 --slo 'p99<=20ms' --label ci \
  --junit "$OUT/junit.xml" --markdown "$OUT/summary.md" --json >"$OUT/sweep.json"
code=$?

# 3. The HTML report of the experiment, for the artifacts.
experiment=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["experiment_id"])' "$OUT/sweep.json")
"$TS" report --experiment "$experiment" -o "$OUT/report.html"
exit $code
