"""Measure an FBX file through Panda3D's Assimp loader (``load-file-type p3assimp``,
``libp3assimp.so`` in the panda3d wheel), in a child process: a file that trips an assertion
or crashes the loader costs a row with the loader's message, never the inventory.

``python -m stages.engine.fbx_probe FILE`` prints one JSON object: ``ok``, and either the
loader's ``error`` or what it loaded — tight bounds (Panda3D's frame: Z up; skinned geometry in
its rest pose), geometry and triangle counts, characters, joints (name → rest position, parent)
and animation bundles (name, frames, fps).

Measured here, panda3d 1.10.16: mesh-only FBX files load; the skinned, animated FBX files of
assimp's test models stop on "mismatched number of frames" in AnimChannelMatrixXfmTable (the
Assimp loader's key tables), so those come back as ``ok: false`` with that message. When an
FBX2glTF binary is at hand (``$WMFORGE_FBX2GLTF`` or on PATH; the npm package ``fbx2gltf``
ships one), such a file is measured through its GLB conversion instead — skins, clips and the
bind pose as for any glTF — and its character row says the engine cannot load it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TIMEOUT_S = 60.0
CONVERTER_ENV = "WMFORGE_FBX2GLTF"  # path of an FBX2glTF binary (npm package fbx2gltf)


def find_fbx2gltf() -> str | None:
    """An FBX2glTF executable: ``$WMFORGE_FBX2GLTF``, else ``FBX2glTF`` on PATH, else the one
    `make setup` installs beside this Python (scripts/fetch_fbx2gltf.py, from the npm package
    ``fbx2gltf``); None without, or when ``$WMFORGE_FBX2GLTF`` is ``none`` (or empty)."""
    env = os.environ.get(CONVERTER_ENV)
    if env is not None and env.strip().lower() in ("", "none", "off"):
        return None  # switched off: Panda3D's loader alone
    beside = Path(sys.executable).parent / "FBX2glTF"  # where `make setup` puts it
    exe = env or shutil.which("FBX2glTF") or (str(beside) if beside.is_file() else None)
    return exe if exe and os.access(exe, os.X_OK) else None


def convert_fbx(path: Path, out_dir: Path, timeout_s: float = TIMEOUT_S) -> Path:
    """``path`` converted to a GLB in ``out_dir`` by FBX2glTF; OSError with its message when
    there is no converter or it fails."""
    exe = find_fbx2gltf()
    if exe is None:
        raise OSError(f"no FBX2glTF (set ${CONVERTER_ENV} or put FBX2glTF on PATH)")
    out = out_dir / path.stem
    try:
        res = subprocess.run([exe, "--binary", "--input", str(path), "--output", str(out)],
                             capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise OSError(f"FBX2glTF took over {timeout_s:.0f} s") from None
    glb = out.with_suffix(".glb")
    if res.returncode != 0 or not glb.is_file():
        tail = " | ".join((res.stderr or res.stdout or "").strip().splitlines()[-2:])
        raise OSError(f"FBX2glTF failed (exit {res.returncode}): {tail[:300]}")
    return glb


def _measure(path: str) -> dict[str, Any]:
    from panda3d.core import Filename, Loader, LoaderOptions, NodePath, loadPrcFileData

    loadPrcFileData("wmforge-fbx", "load-file-type p3assimp\nwindow-type none\n"
                    "audio-library-name null\nmodel-cache-dir\nnotify-level-gobj fatal\n"
                    "notify-level-assimp error\n")
    try:
        node = Loader.getGlobalPtr().loadSync(Filename.fromOsSpecific(path),
                                              LoaderOptions(LoaderOptions.LF_no_cache |
                                                            LoaderOptions.LF_report_errors))
    except AssertionError as exc:  # Panda3D turns its C++ assertions into this
        return {"ok": False, "error": f"Panda3D's Assimp loader: {exc}"}
    if node is None:
        return {"ok": False, "error": "Panda3D's Assimp loader could not load this file"}
    np_ = NodePath(node)
    tri = 0
    geoms = np_.findAllMatches("**/+GeomNode")
    for g in geoms:
        gn = g.node()
        for i in range(gn.getNumGeoms()):
            geom = gn.getGeom(i)
            for k in range(geom.getNumPrimitives()):
                tri += geom.getPrimitive(k).getNumFaces()
    bounds = np_.getTightBounds()
    joints: dict[str, list[float]] = {}
    parents: dict[str, str | None] = {}
    chars = np_.findAllMatches("**/+Character")
    for c in chars:
        ch = c.node()
        for b in range(ch.getNumBundles()):
            bundle = ch.getBundle(b)

            def walk(part: Any, parent: str | None, mat: Any) -> None:
                for j in range(part.getNumChildren()):
                    child = part.getChild(j)
                    m = mat
                    if hasattr(child, "getDefaultValue"):
                        m = child.getDefaultValue() * mat
                        t = m.getRow3(3)
                        joints[child.getName()] = [t[0], t[1], t[2]]
                        parents[child.getName()] = parent
                        walk(child, child.getName(), m)
                    else:
                        walk(child, parent, mat)

            # joints are relative to their Character node: start from its place in the model
            # (an armature node above it may carry the exporter's rotation and 0.01 scale)
            walk(bundle, None, c.getMat(np_))
    anims = []
    for a in np_.findAllMatches("**/+AnimBundleNode"):
        ab = a.node().getBundle()
        anims.append({"name": ab.getName(), "frames": ab.getNumFrames(),
                      "fps": ab.getBaseFrameRate()})
    return {"ok": True, "geoms": geoms.getNumPaths(), "triangles": tri,
            "bounds": None if bounds is None else [list(bounds[0]), list(bounds[1])],
            "characters": chars.getNumPaths(), "joints": joints, "parents": parents,
            "animations": anims}


def probe_fbx(path: Path, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """What Panda3D's Assimp loader makes of ``path``, measured in a child process."""
    try:
        res = subprocess.run([sys.executable, "-m", "stages.engine.fbx_probe", str(path)],
                             capture_output=True, text=True, timeout=timeout_s,
                             cwd=str(Path(__file__).resolve().parents[2]))
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"Panda3D's Assimp loader took over {timeout_s:.0f} s"}
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        tail = " | ".join((res.stderr or "").strip().splitlines()[-3:])
        how = f"signal {-res.returncode}" if res.returncode < 0 else f"exit {res.returncode}"
        return {"ok": False, "error": f"Panda3D's Assimp loader stopped ({how}): {tail[:300]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


if __name__ == "__main__":
    try:
        result = _measure(sys.argv[1])
    except Exception as exc:  # noqa: BLE001 - any loader failure is a row, never a crash
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result))


def _through_converter(path: Path, max_bytes: int, loader_error: str) -> Any:
    """A ModelProbe of an FBX that Panda3D's loader refuses, measured through FBX2glTF's GLB
    (skins, clips, the bind pose: the glTF path), marked ``engine_loadable: False`` with the
    loader's message; None without a converter or when it fails too."""
    from ..core.model_probe import ProbeError, probe_model

    if find_fbx2gltf() is None:
        return None
    with tempfile.TemporaryDirectory(prefix="wmforge-fbx-") as tmp:
        try:
            glb = convert_fbx(path, Path(tmp))
            probe = probe_model(glb, max_bytes)
        except (OSError, ProbeError):
            return None
    probe.format = "fbx"
    probe.extras = {"engine_loadable": False, "loader_error": loader_error}
    probe.notes.append("measured through FBX2glTF's conversion (Panda3D's Assimp loader "
                       f"refuses the file: {loader_error})")
    return probe


def _inside(joints: dict[str, tuple], lo: tuple, hi: tuple) -> bool:
    """Most joints within the mesh's bounds grown by a fifth of its size."""
    pad = [0.2 * (b - a) + 1e-6 for a, b in zip(lo, hi, strict=True)]
    n = sum(1 for p in joints.values()
            if all(lo[k] - pad[k] <= p[k] <= hi[k] + pad[k] for k in range(3)))
    return n >= 0.8 * len(joints)


def fbx_model_probe(path: Path, max_bytes: int) -> Any:
    """A ``core.model_probe.ModelProbe`` of an FBX file from :func:`probe_fbx` (format "fbx",
    Z-up as Panda3D loads it); ProbeError ``unreadable`` with the loader's message when it
    cannot be loaded, ``too_large`` / ``empty_file`` before trying."""
    from ..core.model_probe import ModelProbe, ProbeError, effective_coordinate_system, to_z_up

    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ProbeError("unreadable", f"{exc.strerror or exc}") from None
    if size == 0:
        raise ProbeError("empty_file", "file is empty")
    if size > max_bytes:
        raise ProbeError("too_large", f"{size} bytes exceeds the probe limit of {max_bytes}")
    r = probe_fbx(path)
    if not r.get("ok"):
        converted = _through_converter(path, max_bytes, str(r.get("error")))
        if converted is not None:
            return converted
        raise ProbeError("unreadable", str(r.get("error")))
    probe = ModelProbe(format="fbx", coordinate_system="z-up",
                       coordinate_system_source="format")
    probe.triangles = int(r.get("triangles", 0))
    probe.meshes = int(r.get("geoms", 0))
    if r.get("bounds"):
        probe.bounds_min = tuple(r["bounds"][0])
        probe.bounds_max = tuple(r["bounds"][1])
    probe.joints = {k: tuple(v) for k, v in (r.get("joints") or {}).items()}
    cs, source = effective_coordinate_system(path)
    if cs != "z-up":
        # Panda3D's Assimp loader keeps the file's axes; the engine turns the model by the
        # FBX's declared UpAxis (core.model_probe.effective_coordinate_system), and so do we
        conv = to_z_up(cs)
        if probe.bounds_min and probe.bounds_max:
            lo, hi = probe.bounds_min, probe.bounds_max
            corners = [conv((x, y, z)) for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                       for z in (lo[2], hi[2])]
            probe.bounds_min = tuple(min(c[k] for c in corners) for k in range(3))
            probe.bounds_max = tuple(max(c[k] for c in corners) for k in range(3))
        probe.joints = {k: conv(v) for k, v in probe.joints.items()}
    probe.coordinate_system, probe.coordinate_system_source = cs, source
    if probe.joints and probe.bounds_min and probe.bounds_max and not _inside(
            probe.joints, probe.bounds_min, probe.bounds_max):
        probe.notes.append("joint positions from Panda3D's Assimp loader do not lie in the "
                           "mesh (it drops the armature's transform): kind and facing from "
                           "the shape")
        probe.joints = {}
        probe.joint_parents = {}
    probe.joint_parents = dict(r.get("parents") or {})
    probe.animations = [str(a["name"]) for a in r.get("animations", [])]
    probe.skinned = bool(r.get("characters")) and probe.meshes > 0
    probe.animation_only = bool(probe.animations or probe.joints) and probe.meshes == 0
    if probe.animation_only and not probe.animations:
        probe.notes.append("a skeleton without a mesh")
    if not probe.triangles and not probe.joints:
        raise ProbeError("no_geometry", "Panda3D's Assimp loader found no mesh and no joints")
    return probe
