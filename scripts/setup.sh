#!/usr/bin/env bash
# Installs everything wmforge needs on a fresh Debian machine: the Debian packages for headless
# GL (EGL + Mesa) and Chromium (the viewer's browser tests), a virtual environment in .venv, and
# the Python packages (pyproject.toml).
# Idempotent: re-running skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
DEB_PKGS="libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 libgl1 chromium fonts-dejavu-core"
missing=""
for p in $DEB_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=".venv/.wmforge-installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev,ml,cluster]'
  rm -f .venv/.wmforge-installed-*
  touch "$stamp"
fi
echo "setup: ready (.venv)"
