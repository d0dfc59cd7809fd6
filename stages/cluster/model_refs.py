"""The files a model file opens besides itself: a glTF's external buffers and images, an egg's
texture and external-file references, an OBJ's material libraries and their texture maps.
Used to key what a render reads (``stages.cluster.keys.AssetDigests.model``): a level whose
textures lie outside its own folder (``../Textures/``) is another level when they change.

Paths are resolved relative to the referring file (symlinks too) and returned whether or not
they exist; nothing is opened but the model file itself and an OBJ's ``.mtl`` files. A file
that does not parse references nothing here (the asset guard and the loader report it).
References are not checked against a pack root here (``asset_guard.resolve_ref`` does that
before a load). It lives beside the keys, not in ``stages.core``: a change here changes
no code version, so no trajectory or render is made again for it.
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from urllib.parse import unquote

from ..core.asset_guard import _EGG_REF, _SCHEME
from ..core.gltf import GltfError, parse_glb, parse_gltf_json

_MTLLIB = re.compile(r"^\s*mtllib\s+(.+?)\s*$", re.MULTILINE)
# map_Kd, map_Ks, map_Bump, bump, disp, decal, refl, norm ... with options before the name
_MTL_MAP = re.compile(r"^\s*(?:map_\w+|bump|disp|decal|refl|norm)\s+(.+?)\s*$",
                      re.MULTILINE | re.IGNORECASE)


def _local(ref: str, base: Path) -> Path | None:
    """``ref`` resolved against ``base``; None for an absolute path, a URI with a scheme or
    an empty one (never followed)."""
    ref = ref.strip().strip('"')
    if not ref or _SCHEME.match(ref) or ref.startswith(("/", "\\")):
        return None
    return Path(os.path.realpath(base / unquote(ref).replace("\\", "/")))


def _gltf_refs(path: Path, data: bytes) -> list[str]:
    try:
        doc = parse_glb(data)[0] if path.name.lower().endswith(".glb") else parse_gltf_json(data)
    except GltfError:
        return []
    if not isinstance(doc, dict):
        return []
    out = []
    for key in ("buffers", "images"):
        items = doc.get(key)
        for item in items if isinstance(items, list) else []:
            uri = item.get("uri") if isinstance(item, dict) else None
            if isinstance(uri, str) and not uri.startswith("data:"):
                out.append(uri)
    return out


def _obj_refs(path: Path, text: str) -> list[Path]:
    out: list[Path] = []
    for m in _MTLLIB.finditer(text):
        for name in m.group(1).split():
            mtl = _local(name, path.parent)
            if mtl is None:
                continue
            out.append(mtl)
            try:
                mtext = mtl.read_text(errors="replace")
            except OSError:
                continue
            for t in _MTL_MAP.finditer(mtext):
                # the file name is the last word (options such as -bm 0.5 come first)
                tex = _local(t.group(1).split()[-1], mtl.parent)
                if tex is not None:
                    out.append(tex)
    return out


def referenced_files(path: Path) -> list[Path]:
    """The files ``path`` would make a loader open besides itself, sorted, without repeats."""
    name = path.name.lower()
    try:
        data = path.read_bytes()
    except OSError:
        return []
    refs: list[Path] = []
    if name.endswith((".gltf", ".glb")):
        refs = [p for p in (_local(u, path.parent) for u in _gltf_refs(path, data)) if p]
    elif name.endswith((".egg", ".egg.pz")):
        if name.endswith(".pz"):
            try:
                data = zlib.decompress(data[4:] if data[:2] == b"pz" else data)
            except zlib.error:
                return []
        refs = [p for p in (_local(m.group(2).decode("utf-8", "replace"), path.parent)
                            for m in _EGG_REF.finditer(data)) if p]
    elif name.endswith(".obj"):
        refs = _obj_refs(path, data.decode("utf-8", "replace"))
    return sorted(set(refs))
