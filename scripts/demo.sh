#!/usr/bin/env bash
# tailscope's main job on a fresh machine, as README.md documents it: installs what building
# needs when it is missing (scripts/deps.sh), then runs `tailscope demo` (built-in server on
# CPU 1, generator on CPU 0, three loads against the ideal; writes tailscope-demo.svg in the
# current directory). Extra arguments go to `tailscope demo`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=deps.sh
. "$here/deps.sh"
need_build
install_needed
exec cargo run --release --manifest-path "$here/../Cargo.toml" -p tailscope -- demo "$@"
