#!/usr/bin/env bash
# The whole test suite, as README.md documents it and .ci/run calls it.
# Installs what the tests need when it is missing (Debian packages, Rust components), then runs
# formatting, lint and every test of the workspace. In CI (CI=true) a missing dependency is a
# failure, never a skip: the installs below either succeed or stop the script.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Debian packages that building and the tests need, installed when missing.
# shellcheck source=deps.sh
. scripts/deps.sh
need_build
need_tests
install_needed
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed | grep -q '^clippy' || rustup component add clippy
fi

# The reference HdrHistogram reader (PyPI's hdrhistogram), OpenMetrics parser (PyPI's
# prometheus_client), JSON Schema validator (PyPI's jsonschema) and a real gRPC server (PyPI's
# grpcio) in a throwaway virtual environment, made when one is missing; the report, export,
# schema and gRPC tests find it through TAILSCOPE_TEST_PYTHON.
# It is made in the background while the tests build (~20 s of downloading and unpacking that
# the build's two busy CPUs hardly notice), and waited for before they run.
venv="${CARGO_TARGET_DIR:-target}/test-venv"
case $venv in /*) ;; *) venv=$PWD/$venv ;; esac
venv_pid=
if ! "$venv/bin/python" -c 'import hdrh.log, prometheus_client.openmetrics.parser, jsonschema, grpc' >/dev/null 2>&1; then
  echo "making $venv with PyPI's hdrhistogram, prometheus_client, jsonschema and grpcio" >&2
  mkdir -p "$(dirname "$venv")"
  venv_log="$(dirname "$venv")/test-venv.log"
  (python3 -m venv --clear "$venv" &&
    "$venv/bin/pip" install -q hdrhistogram prometheus_client jsonschema grpcio) >"$venv_log" 2>&1 &
  venv_pid=$!
fi
TAILSCOPE_TEST_PYTHON="$venv/bin/python"
export TAILSCOPE_TEST_PYTHON

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== no import circles (scripts/import_circles.py)" >&2
python3 scripts/import_circles.py
# Clippy's lints (`cargo clippy --workspace --all-targets -- -D warnings`) run while the tests are
# built, not in a check of their own: clippy-driver compiles like rustc and lints the crates it
# is given, which is all `cargo clippy` does, only there it stops after the check. Cargo runs it
# for the workspace's crates (RUSTC_WORKSPACE_WRAPPER) with the arguments in CLIPPY_ARGS, as
# cargo-clippy sets them. A separate check compiled every dependency and the workspace a second
# time: measured from a clean target directory, 100 s of clippy and 169 s of test build before,
# 222 s for both together (issue 36: CI time). The build and the run below share these
# variables, or the run would build again. That the lints bite is checked first on a file that
# breaks one.
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
export RUSTC_WORKSPACE_WRAPPER=$clippy_driver
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
canary=$(mktemp -d)
printf 'fn main() {\n    let x = 1u32;\n    let y = x.clone();\n    println!("{y}");\n}\n' >"$canary/canary.rs"
if "$clippy_driver" rustc --edition 2021 --crate-type bin \
  --emit metadata -o "$canary/canary.rmeta" "$canary/canary.rs" >"$canary/out" 2>&1 ||
  ! grep -q clone_on_copy "$canary/out"; then
  rm -rf "$canary"
  echo "clippy-driver with CLIPPY_ARGS does not deny clippy's lints: the lint step would pass anything" >&2
  exit 1
fi
rm -rf "$canary"
echo "== cargo test --profile ci --all-targets --no-run, linted by clippy (-D warnings)" >&2
cargo test --workspace --profile ci --all-targets --no-run
# The `ci` profile (Cargo.toml): release's optimisation on the hot path and the dependencies
# (the simulator tests run millions of requests), opt-level 0 elsewhere, which builds faster.
if [ -n "$venv_pid" ] && ! wait "$venv_pid"; then
  cat "$venv_log" >&2
  echo "making the tests' Python virtual environment $venv failed" >&2
  exit 1
fi
echo "== cargo test --profile ci" >&2
log="${CARGO_TARGET_DIR:-target}/test-output.log"
# The integration tests that start processes note how long they waited for their turn here
# (crates/tailscope/tests/it/common: shared, alone, one_at_a_time), so that their own time can be
# listed.
TAILSCOPE_TEST_WAITS=${CARGO_TARGET_DIR:-target}/test-waits.tsv
case $TAILSCOPE_TEST_WAITS in /*) ;; *) TAILSCOPE_TEST_WAITS=$PWD/$TAILSCOPE_TEST_WAITS ;; esac
export TAILSCOPE_TEST_WAITS
: >"$TAILSCOPE_TEST_WAITS"
started=$(date +%s)
# Each test binary runs through scripts/test-runner, which has libtest print every test's time.
cargo test --workspace --profile ci \
  --config "target.'cfg(all())'.runner = '$PWD/scripts/test-runner'" 2>&1 | tee "$log"
# A test's own time: its wall time less its wait for the lock.
echo "== the ten slowest tests, by their own time (of $(($(date +%s) - started)) s of cargo test, building included)" >&2
python3 - "$log" "$TAILSCOPE_TEST_WAITS" <<'PY' >&2
import re, sys
waits = {}
for line in open(sys.argv[2]):
    name, _, w = line.rstrip("\n").partition("\t")
    waits[name] = waits.get(name, 0.0) + float(w)
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"^test (\S+) \.\.\. ok <([0-9.]+)s>$", line.strip())
    if m:
        wall = float(m.group(2))
        w = waits.get(m.group(1), 0.0)
        rows.append((wall - w, wall, m.group(1)))
for own, wall, name in sorted(rows, reverse=True)[:10]:
    print(f"{own:8.1f} s  {name}" + (f"  (waited {wall - own:.1f} s for its lock)" if wall - own >= 0.1 else ""))
PY
