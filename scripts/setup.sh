#!/bin/sh
# Installs what tasp-sim needs on Debian (as root, or with sudo) and builds
# it into build/.  Safe to run again.
set -e
cd "$(dirname "$0")/.."
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
pkgs="cmake gcc g++ make pkg-config python3 libglib2.0-dev libjson-c-dev libcunit1-dev libsimgrid-dev
      clang libclang-rt-dev python3-matplotlib parallel"
missing=
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
# The README's commands as written: python3 scripts/plot.py draws with the
# python3 on PATH, or, where that one lacks matplotlib (a pyenv, a venv),
# with /usr/bin/python3, which python3-matplotlib above installs for.
python3 scripts/plot.py --check
