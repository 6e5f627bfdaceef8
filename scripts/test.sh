#!/usr/bin/env bash
# The whole test suite, as README.md documents it and .ci/run calls it.
# Installs what the tests need when it is missing (Debian packages, Rust components), then runs
# formatting, lint and every test of the workspace. In CI (CI=true) a missing dependency is a
# failure, never a skip: the installs below either succeed or stop the script.
set -euo pipefail
cd "$(dirname "$0")/.."

# command:package pairs the tests run for real (servers and peers join as issues add them).
deps=(ip:iproute2 memcached:memcached nginx:nginx redis-server:redis-server)
# Runs with agents: SSH end to end (sshd started by the test itself), time namespaces.
deps+=(sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client unshare:util-linux)
need_apt=()
for d in "${deps[@]}"; do
  cmd=${d%%:*}; pkg=${d##*:}
  # nginx lives in /usr/sbin, which a non-root PATH may lack.
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Packages must not start their services (openssh-server would leave an sshd on port 22):
  # the tests start what they need and stop it.
  no_start=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    no_start=1
  fi
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
  [ -z "$no_start" ] || rm -f /usr/sbin/policy-rc.d
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
