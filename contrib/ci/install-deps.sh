#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Installs what fabcoll needs to build and test on Debian 12 (run as root,
# or with sudo available). Usage: contrib/ci/install-deps.sh [--full]
#   default: build + unit/functional tests (libfabric, hwloc, Criterion, PMIx)
#   --full:  also Slurm + munge and Open MPI (launcher tests, MPI comparison)
set -eu
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
pkgs="build-essential autoconf automake libtool pkg-config libfabric-dev libfabric-bin \
libhwloc-dev hwloc libcriterion-dev libpmix-dev libpmi2-0-dev iproute2 procps valgrind"
if [ "${1:-}" = "--full" ]; then
    pkgs="$pkgs slurm-wlm munge openmpi-bin libopenmpi-dev python3-matplotlib"
fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "install-deps: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q --no-install-recommends $missing
else
    echo "install-deps: everything is installed"
fi
