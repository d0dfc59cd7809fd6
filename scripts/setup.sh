#!/usr/bin/env bash
# Installs everything wmforge needs on a fresh Debian machine: the Debian packages for headless
# GL (EGL + Mesa) and Chromium (the viewer's browser tests), a virtual environment in .venv, and
# the Python packages (pyproject.toml).
# Idempotent: re-running skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
DEB_PKGS="libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 libgl1 chromium fonts-dejavu-core strace"
# Vulkan loader + Mesa's lavapipe + vulkaninfo: the Unreal launcher's GPU-by-UUID lookup is tested on them
DEB_PKGS="$DEB_PKGS libvulkan1 mesa-vulkan-drivers vulkan-tools"
missing=""
for p in $DEB_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi
# Mesa 25 from Debian's bookworm-backports: the embedded renderer's PBR shaders with shadow maps
# crashed Debian 12's Mesa 22 llvmpipe and ran on Mesa 25, about 2x faster (measured on this
# project's Debian 12 machines, 2026-12)
. /etc/os-release
mesa_ver=$(dpkg-query -W -f='${Version}' libgl1-mesa-dri 2>/dev/null || echo 0)
if [ "${VERSION_CODENAME:-}" = "bookworm" ] && dpkg --compare-versions "$mesa_ver" lt 25; then
  echo "setup: installing Mesa 25 from bookworm-backports (was $mesa_ver)"
  src=/etc/apt/sources.list.d/wmforge-backports.sources
  [ -f "$src" ] || printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' \
    'Suites: bookworm-backports' 'Components: main' \
    'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | $SUDO tee "$src" >/dev/null
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    -t bookworm-backports libgl1-mesa-dri libegl-mesa0 libglx-mesa0
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# constraints.txt pins every package to the release the project was tested with
# (scripts/pin_env.py writes it; tests/test_environment.py checks it against the venv)
stamp=".venv/.wmforge-installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c constraints.txt -e '.[dev,ml,cluster]'
  rm -f .venv/.wmforge-installed-*
  touch "$stamp"
fi
# FBX2glTF from the npm registry's fbx2gltf package (checksums checked): skinned, animated FBX
# files are measured through its conversion (scripts/fetch_fbx2gltf.py says why)
.venv/bin/python scripts/fetch_fbx2gltf.py .venv/bin || echo "setup: FBX2glTF not installed (see above)"
echo "setup: ready (.venv)"
