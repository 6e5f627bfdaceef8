#!/usr/bin/env bash
# The load engine's cost per request for each HTTP protocol (issue 38: "a benchmark of the
# engine's cost per request for each new protocol, beside HTTP/1.1"): nginx spawned on CPU 1
# (HTTP/1.1 keep-alive for http://, HTTP/2 with prior knowledge for h2c://, both over TLS
# for https:// and h2:// with the spawned server's own CA; handshakes before the load), one generator
# thread on CPU 0, Poisson at RATE over CONNS connections for DUR. The figure is the
# generator's busy time per request sent (the run's `generator` instrument: the loop's work,
# spinning excluded: encoding, writes, reads, decoding, matching), and what one core could
# send at that cost; beside it the user view's p50 and p99. Medians of REPS runs, the
# protocols interleaved run by run so that the host's drift falls on both alike.
# gRPC (grpc://) is measured against PyPI's grpcio (tests/it/grpc/echo_server.py, the test
# virtual environment's Python: scripts/test.sh makes it) on CPU 1, at GRPC_RATE (default
# 1500/s: one Python server peaks near 3,200 calls/s here), calling Say with a 15-byte message.
# Usage: bench/protocol_cost.sh [REPS]   (RATE, CONNS, DUR, GRPC_RATE in the environment)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
RATE=${RATE:-5000}
CONNS=${CONNS:-8}
DUR=${DUR:-3s}
GRPC_RATE=${GRPC_RATE:-1500}
PY=${TAILSCOPE_TEST_PYTHON:-target/test-venv/bin/python}
cargo build --release -q -p tailscope
TS=target/release/tailscope
tmp=$(mktemp -d)
grpc_pid=
trap 'rm -rf "$tmp"; [ -z "$grpc_pid" ] || kill "$grpc_pid"' EXIT
export TAILSCOPE_DB=$tmp/runs.db
"$PY" -c 'import grpc' || { echo "needs $PY with grpcio (./scripts/test.sh makes it)" >&2; exit 1; }
GRPC_VERBOSITY=ERROR taskset -c 1 "$PY" crates/tailscope/tests/it/grpc/echo_server.py >"$tmp/grpc.port" &
grpc_pid=$!
for _ in $(seq 50); do [ -s "$tmp/grpc.port" ] && break; sleep 0.1; done
printf '{"text": "hello", "n": 7}' >"$tmp/ping.json"
for rep in $(seq "$REPS"); do
  for scheme in http h2c https h2; do
    "$TS" run "$scheme:///" --spawn --server-cpus 1 --cpus 0 --rate "$RATE" \
      --connections "$CONNS" --service 40us --duration "$DUR" --warmup 500ms \
      --no-attribution --stages off --json 2>/dev/null >"$tmp/$scheme.$rep.json" || true
  done
  "$TS" run "grpc://127.0.0.1:$(cat "$tmp/grpc.port")" --method tailscope.test.Echo/Say \
    --proto crates/tailscope/tests/it/grpc/echo.proto --message "$tmp/ping.json" --cpus 0 \
    --rate "$GRPC_RATE" --connections "$CONNS" --service 300us --duration "$DUR" --warmup 500ms \
    --no-attribution --stages off --json 2>/dev/null >"$tmp/grpc.$rep.json" || true
done
python3 - "$tmp" "$REPS" <<'PY'
import json, statistics, sys
tmp, reps = sys.argv[1], int(sys.argv[2])
print(f"{'protocol':10} {'busy/request':>13} {'core ceiling':>13} {'p50':>9} {'p99':>9}  runs")
for scheme in ["http", "h2c", "https", "h2", "grpc"]:
    cost, p50, p99 = [], [], []
    for r in range(1, reps + 1):
        try:
            v = json.load(open(f"{tmp}/{scheme}.{r}.json"))
        except (OSError, ValueError):
            continue
        g = next((i for i in v.get("instruments", []) if "busy_per_request_ns" in (i.get("detail") or {})), None)
        if g is None or v.get("status") not in ("ok", "saturated"):
            continue
        cost.append(g["detail"]["busy_per_request_ns"])
        p50.append(v["measured"]["p50"])
        p99.append(v["measured"]["p99"])
    if not cost:
        print(f"{scheme:10} no run measured")
        continue
    c = statistics.median(cost)
    print(f"{scheme + '://':10} {c / 1e3:10.2f} µs {1e9 / c:9.0f} /s {statistics.median(p50):7.1f}µs "
          f"{statistics.median(p99):7.1f}µs  {len(cost)} of {reps}")
PY
