#!/usr/bin/env bash
# The reference servers of the end-to-end benchmark (`python -m bench endtoend`): Debian's
# nats-server (NATS core and JetStream) and redis-server.  Installs whichever is missing with
# apt when this machine can (apt-get, and root or password-less sudo).  Never fails: what
# stays missing is named here, and the benchmark reports those systems as "not run: <reason>"
# while the others still run.  Used by `make bench` and .ci/run.
#
# On a machine with systemd, Debian also starts the packages' own services (ports 4222 and
# 6379); the benchmark does not use them, it starts its own servers on free ports
# (`systemctl disable --now nats-server redis-server` stops them).
set -u
packages=()
for binary in nats-server redis-server; do
    command -v "$binary" >/dev/null 2>&1 || [ -x "/usr/sbin/$binary" ] || packages+=("$binary")
done
[ ${#packages[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "note: ${packages[*]} missing and no apt-get here; the end-to-end benchmark will not run them" >&2
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    SUDO="sudo -n"
else
    echo "note: ${packages[*]} missing; installing needs root (sudo apt-get install ${packages[*]}); the end-to-end benchmark will not run them" >&2
    exit 0
fi
echo "installing ${packages[*]} with apt-get" >&2
if ! { $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${packages[@]}"; } >/dev/null 2>&1; then
    echo "note: apt-get install ${packages[*]} failed; the end-to-end benchmark will report what is missing" >&2
fi
for binary in "${packages[@]}"; do
    command -v "$binary" >/dev/null 2>&1 || [ -x "/usr/sbin/$binary" ] || echo "note: $binary is still missing" >&2
done
exit 0
