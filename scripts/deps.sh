# Sourced by scripts/test.sh and scripts/demo.sh: installs the Debian packages that are missing,
# after one `apt-get update`, so that a fresh machine needs only Rust. In CI (CI=true) a failed
# install stops the script (set -e in the caller), never a silent skip.
#   need_build   what building tailscope needs: clang, make and pkg-config build crates/ebpf
#                (its BPF programs, and libbpf from libbpf-sys); libbpf needs libelf and zlib;
#                the BPF programs include the kernel's UAPI headers; the store links Debian's
#                SQLite and zstd.
#   need_tests   what the tests run for real besides: the servers, ip and tc (iproute2:
#                network namespaces, veth pairs and HTB), Chromium and Python for the report
#                tests, SSH and unshare for the agents' tests, groff for the man page test, the
#                Pushgateway for runs export --push, openssl for the TLS tests' certificates.
#   install_needed  installs everything the calls above found missing.

need_apt=()

# command:package pairs.
need_commands() {
  local d cmd pkg
  for d in "$@"; do
    cmd=${d%%:*}; pkg=${d##*:}
    # nginx and sshd live in /usr/sbin, which a non-root PATH may lack.
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || need_apt+=("$pkg")
  done
}

# file:package pairs.
need_files() {
  local d
  for d in "$@"; do
    [ -e "${d%%:*}" ] || need_apt+=("${d##*:}")
  done
}

need_build() {
  need_commands clang:clang make:make pkg-config:pkg-config
  need_files /usr/include/libelf.h:libelf-dev /usr/include/zlib.h:zlib1g-dev \
    /usr/include/linux/bpf.h:linux-libc-dev /usr/include/sqlite3.h:libsqlite3-dev \
    /usr/include/zstd.h:libzstd-dev
}

need_tests() {
  need_commands ip:iproute2 tc:iproute2 memcached:memcached nginx:nginx \
    redis-server:redis-server chromium:chromium python3:python3 \
    sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client unshare:util-linux \
    groff:groff-base prometheus-pushgateway:prometheus-pushgateway openssl:openssl
  # The system's roots, which TLS targets are verified against by default.
  need_files /etc/ssl/certs/ca-certificates.crt:ca-certificates
  # Debian's python3 makes virtual environments only with python3-venv.
  python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
}

install_needed() {
  if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing Debian packages: ${need_apt[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
  fi
}
