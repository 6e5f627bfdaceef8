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
# prometheus_client) and JSON Schema validator (PyPI's jsonschema) in a throwaway virtual
# environment, made when one is missing; the report, export and schema tests find it through
# TAILSCOPE_TEST_PYTHON.
venv="${CARGO_TARGET_DIR:-target}/test-venv"
if ! "$venv/bin/python" -c 'import hdrh.log, prometheus_client.openmetrics.parser, jsonschema' >/dev/null 2>&1; then
  echo "making $venv with PyPI's hdrhistogram, prometheus_client and jsonschema" >&2
  python3 -m venv --clear "$venv"
  "$venv/bin/pip" install -q hdrhistogram prometheus_client jsonschema
fi
TAILSCOPE_TEST_PYTHON="$(cd "$venv" && pwd)/bin/python"
export TAILSCOPE_TEST_PYTHON

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings" >&2
cargo clippy --workspace --all-targets -- -D warnings
echo "== no import circles (scripts/import_circles.py)" >&2
python3 scripts/import_circles.py
# The `ci` profile (Cargo.toml): release's optimisation on the hot path and the dependencies
# (the simulator tests run millions of requests), opt-level 1 elsewhere, which builds faster.
echo "== cargo test --profile ci" >&2
log="${CARGO_TARGET_DIR:-target}/test-output.log"
started=$(date +%s)
# Each test binary runs through scripts/test-runner, which has libtest print every test's time.
cargo test --workspace --profile ci \
  --config "target.'cfg(all())'.runner = '$PWD/scripts/test-runner'" 2>&1 | tee "$log"
# (A test's time is its wall time, including any wait for its module's lock that keeps the
# tests which load the two CPUs one at a time.)
echo "== the ten slowest tests (of $(($(date +%s) - started)) s of cargo test, building included)" >&2
sed -nE 's/^test (.+) \.\.\. ok <([0-9.]+)s>$/\2 \1/p' "$log" | sort -rn | head -10 \
  | awk '{printf "%8.1f s  %s\n", $1, $2}' >&2
