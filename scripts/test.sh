#!/usr/bin/env bash
# The whole test suite, as README.md documents it and .ci/run calls it.
# Installs what the tests need when it is missing (Debian packages, Rust components), then runs
# formatting, lint and every test of the workspace. In CI (CI=true) a missing dependency is a
# failure, never a skip: the installs below either succeed or stop the script.
set -euo pipefail
cd "$(dirname "$0")/.."

# command:package pairs the tests run for real (servers and peers join as issues add them).
# ip and tc (iproute2): network namespaces, veth pairs and HTB for the isolation tests.
deps=(ip:iproute2 tc:iproute2 memcached:memcached nginx:nginx redis-server:redis-server)
need_apt=()
for d in "${deps[@]}"; do
  cmd=${d%%:*}; pkg=${d##*:}
  # nginx lives in /usr/sbin, which a non-root PATH may lack.
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ] \
     && [[ " ${need_apt[*]} " != *" $pkg "* ]]; then
    need_apt+=("$pkg")
  fi
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed | grep -q '^clippy' || rustup component add clippy
fi

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings" >&2
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test (release: the simulator tests run millions of requests)" >&2
cargo test --workspace --release
