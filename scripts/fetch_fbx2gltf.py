"""Installs FBX2glTF (Facebook's FBX -> glTF converter, BSD; built with Autodesk's FBX SDK) into
the virtual environment's bin/, from the npm registry's ``fbx2gltf`` package, which ships the
Linux binary. The tarball is checked against the registry's published sha512 integrity and the
binary against its sha256 before anything is written. Needs no node or npm.

The inventory reads skinned, animated Blender FBX files through it (Panda3D's Assimp loader
refuses them: "mismatched number of frames"); without it those files stay rows that say so.

Usage: python scripts/fetch_fbx2gltf.py BIN_DIR   (idempotent: exits 0 when already there)
"""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

VERSION = "0.9.7"
URL = f"https://registry.npmjs.org/fbx2gltf/-/fbx2gltf-{VERSION}.tgz"
# dist.integrity of fbx2gltf@0.9.7 on registry.npmjs.org (npm view fbx2gltf@0.9.7 dist.integrity)
TARBALL_SHA512 = ("gKWlCZq0xA+wcqj+0R0KeD5yxtq0EqO9cmYNuJTEVeP1aKPRP3ZXoNGh4JPLmI50jkIqE0aC/7GjAmS1"
                  "ZPeDmw==")
MEMBER = "package/bin/Linux/FBX2glTF"
BINARY_SHA256 = "b38210352fdd29d50ba53a6514c3ff05ccbb5d1e0a6442db7a49834bf34a3145"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    dest = Path(argv[0]) / "FBX2glTF"
    if dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == BINARY_SHA256:
        return 0
    try:
        with urllib.request.urlopen(URL, timeout=120) as resp:
            blob = resp.read()
    except OSError as exc:
        print(f"setup: could not fetch {URL}: {exc}; skinned animated FBX files will stay "
              "'fbx_engine_cannot_load' rows without measurements", file=sys.stderr)
        return 1
    got = base64.b64encode(hashlib.sha512(blob).digest()).decode()
    if got != TARBALL_SHA512:
        print(f"setup: {URL}: sha512 {got} is not the registry's {TARBALL_SHA512}; not installed",
              file=sys.stderr)
        return 1
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        f = tar.extractfile(MEMBER)
        if f is None:
            print(f"setup: {URL} has no {MEMBER}", file=sys.stderr)
            return 1
        exe = f.read()
    if hashlib.sha256(exe).hexdigest() != BINARY_SHA256:
        print(f"setup: {MEMBER} in {URL} does not match its sha256; not installed", file=sys.stderr)
        return 1
    tmp = dest.with_suffix(".part")
    tmp.write_bytes(exe)
    tmp.chmod(0o755)
    tmp.replace(dest)
    print(f"setup: FBX2glTF {VERSION} installed in {dest.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
