#!/usr/bin/env bash
# Issue 21's reproducibility benchmark: do a run's 95 % intervals hold across identical runs on
# this host? The built-in server (epoll, 1 worker, det:50us, CPU 1) is calibrated once, then
#   - SINGLE identical single runs `run --rate 40% --duration 5s` (default 10), and
#   - REPEATED identical `run --rate 40% --repeat 3 --duration 3s` (default 5; skipped when the
#     binary has no --repeat),
# back to back from CPU 0. For p50 and p99 in both views (user: intended → received; server:
# sent → kernel receive) it prints how often one result's interval contains another result's
# estimate, over all ordered pairs (goal for the repeated runs: >= 70 %), and for the single
# runs whether every run whose interval the others contradict carries a flag saying why (its
# tail was not steady, or the host was noisy): an unflagged contradicted interval is a failure.
# Usage: bench/reproducibility.sh [SINGLE] [REPEATED]; TS=path/to/tailscope to use another
# binary (e.g. one built from an older commit, for a before/after table).
set -euo pipefail
cd "$(dirname "$0")/.."
SINGLE=${1:-10}
REPEATED=${2:-5}
if [ -z "${TS:-}" ]; then
  cargo build --release -q -p tailscope
  TS=$PWD/target/release/tailscope
fi
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
export TAILSCOPE_DB=$tmp/runs.db

"$TS" serve --listen 127.0.0.1:0 --arch epoll --workers 1 --work det:50us --cpus 1 >"$tmp/addr" 2>/dev/null &
srv=$!
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
target="nullrpc://$(head -1 "$tmp/addr")"
"$TS" calibrate "$target" --cpus 0 --json >"$tmp/calibration.json" 2>/dev/null
echo "calibrated: $(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(round(v.get("peak_rate_rps", 0)), "req/s")' "$tmp/calibration.json")"

for i in $(seq "$SINGLE"); do
  "$TS" run "$target" --rate 40% --duration 5s --cpus 0 --json >"$tmp/single-$i.json" 2>/dev/null || true
done
if "$TS" run --help 2>/dev/null | grep -q -- '--repeat'; then
  for i in $(seq "$REPEATED"); do
    "$TS" run "$target" --rate 40% --repeat 3 --duration 3s --cpus 0 --json >"$tmp/repeated-$i.json" 2>/dev/null || true
  done
fi

python3 - "$tmp" <<'PY'
import glob, json, os, sys

tmp = sys.argv[1]

def load(pattern):
    out = []
    for p in sorted(glob.glob(os.path.join(tmp, pattern)), key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0])):
        try:
            out.append(json.load(open(p)))
        except (ValueError, OSError):
            pass
    return out

def single_ci(v, view, key):
    ci = v.get("measured_ci") if view == "user" else (v.get("server_view") or {}).get("measured_ci")
    return (ci or {}).get(key)

def repeated_ci(v, view, key):
    c = (v.get("combined") or {}).get(view) or {}
    return c.get(key)

def flags(v):
    """What a single run says about itself: why its interval may not bound a repeat."""
    r = v.get("reproducibility")
    if r is not None:
        return [f.split(":")[0] for f in r.get("flags", [])]
    out = []  # a binary from before the flags: only its status says anything
    if v.get("status") not in ("ok", None):
        out.append("status " + str(v.get("status")))
    return out

def table(name, runs, ci_of, flag=False):
    print(f"\n{name}: {len(runs)} results")
    print(f"  {'view, pct':<12} {'estimates (us)':<60} {'pairs contained':>16}")
    unflagged = 0
    for view in ("user", "server"):
        for key in ("p50", "p99"):
            cis = [ci_of(v, view, key) for v in runs]
            vals = [c["value"] if c else None for c in cis]
            n = ok = 0
            contradicted = set()
            for i, ci in enumerate(cis):
                for j, x in enumerate(vals):
                    if i == j or ci is None or x is None:
                        continue
                    n += 1
                    if ci["lo"] <= x <= ci["hi"]:
                        ok += 1
                    else:
                        contradicted.add(i)
            est = ", ".join("-" if x is None else f"{x:.0f}" for x in vals)
            pct = f"{ok}/{n} = {100 * ok / n:.0f} %" if n else "-"
            print(f"  {view + ' ' + key:<12} {est[:60]:<60} {pct:>16}")
            if flag:
                for i in sorted(contradicted):
                    if not flags(runs[i]):
                        unflagged += 1
    if flag:
        print("  flags per run: " + "; ".join(f"{i + 1}: {','.join(flags(v)) or 'none'}" for i, v in enumerate(runs)))
        print(f"  contradicted intervals without a flag (view x percentile x run): {unflagged}")

singles = load("single-*.json")
table("single runs (5 s)", singles, single_ci, flag=True)
print("  statuses: " + ", ".join(str(v.get("status")) for v in singles))
reps = load("repeated-*.json")
if reps:
    table("repeated runs (--repeat 3, 3 s each; median of the repeats, interval from their spread)", reps, repeated_ci)
    print("  statuses: " + ", ".join(str(v.get("status")) for v in reps))
PY
