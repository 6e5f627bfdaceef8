#!/usr/bin/env bash
# The whole test suite, as README.md documents it and .ci/run calls it.
# Installs what the tests need when it is missing (Debian packages, Rust components), then runs
# formatting, lint and every test of the workspace. In CI (CI=true) a missing dependency is a
# failure, never a skip: the installs below either succeed or stop the script.
set -euo pipefail
cd "$(dirname "$0")/.."

# command:package pairs the tests run for real (servers and peers join as issues add them);
# ip and tc (iproute2): network namespaces, veth pairs and HTB for the isolation tests;
# clang, make and pkg-config build crates/ebpf (its BPF programs, and libbpf from libbpf-sys).
deps=(ip:iproute2 tc:iproute2 memcached:memcached nginx:nginx redis-server:redis-server
      clang:clang make:make pkg-config:pkg-config)
# The report tests open pages in headless Chromium and read HDR logs back with Python.
deps+=(chromium:chromium python3:python3)
# file:package pairs for the headers and libraries that build links against (libbpf needs
# libelf and zlib; the BPF programs include the kernel's UAPI headers).
files=(/usr/include/libelf.h:libelf-dev /usr/include/zlib.h:zlib1g-dev
       /usr/include/linux/bpf.h:linux-libc-dev)
# Runs with agents: SSH end to end (sshd started by the test itself), time namespaces.
deps+=(sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client unshare:util-linux)
need_apt=()
for d in "${deps[@]}"; do
  cmd=${d%%:*}; pkg=${d##*:}
  # nginx lives in /usr/sbin, which a non-root PATH may lack.
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ] \
     && [[ " ${need_apt[*]} " != *" $pkg "* ]]; then
    need_apt+=("$pkg")
  fi
done
# Debian's python3 makes virtual environments only with python3-venv.
python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
for d in "${files[@]}"; do
  [ -e "${d%%:*}" ] || need_apt+=("${d##*:}")
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

# The reference HdrHistogram reader (PyPI's hdrhistogram) in a throwaway virtual environment,
# made when missing; the report tests find it through TAILSCOPE_TEST_PYTHON.
venv="${CARGO_TARGET_DIR:-target}/test-venv"
if ! "$venv/bin/python" -c 'import hdrh.log' >/dev/null 2>&1; then
  echo "making $venv with PyPI's hdrhistogram" >&2
  python3 -m venv --clear "$venv"
  "$venv/bin/pip" install -q hdrhistogram
fi
TAILSCOPE_TEST_PYTHON="$(cd "$venv" && pwd)/bin/python"
export TAILSCOPE_TEST_PYTHON

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings" >&2
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test (release: the simulator tests run millions of requests)" >&2
cargo test --workspace --release
