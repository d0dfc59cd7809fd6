"""The files a model file opens besides itself: a glTF's external buffers and images, an egg's
texture (and alpha-file) and external-file references, an OBJ's material libraries and their
texture maps. Used to key what a render reads (``stages.cluster.keys.AssetDigests.model``): a
level whose textures lie outside its own folder (``../Textures/``) is another level when they
change. Other formats (``.bam``, ``.fbx``) and the references of referenced files (an egg's
``<File>`` eggs) are not followed.

:func:`raw_references` reads a glTF or egg file's references as written (cacheable under the
file's stamp); :func:`referenced_files` resolves them relative to the referring file (symlinks
too, at each call) and keeps only those inside ``root`` (the pack): nothing outside it is ever
read or hashed (the asset guard refuses such a level before it loads). Only the model file and
an OBJ's ``.mtl`` files are read (a GLB up to its JSON chunk, by ``core.gltf``). A file larger than
``MAX_READ`` gives None: its references are unknown (the caller keys the whole pack). A file
that does not parse references nothing here (the asset guard and the loader report it).

It lives beside the keys, not in ``stages.core``: a change here changes no code version, so
no trajectory or render is made again for it.
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from urllib.parse import unquote

from ..core.asset_guard import _SCHEME, egg_references
from ..core.gltf import GltfError, read_gltf_doc

MAX_READ = 256 << 20  # a model or material file larger than this: references unknown
SUFFIXES = (".gltf", ".glb", ".egg", ".egg.pz", ".obj")

_MTLLIB = re.compile(r"^[ \t]*mtllib[ \t]+(.+?)[ \t\r]*$", re.MULTILINE)
_MTL_MAP = re.compile(r"^[ \t]*(?:map_\w+|bump|disp|decal|refl|norm)[ \t]+(.+?)[ \t\r]*$",
                      re.MULTILINE | re.IGNORECASE)
# MTL texture options and how many values each takes (-o, -s, -t: one to three numbers)
_MTL_OPTS = {"-blendu": 1, "-blendv": 1, "-boost": 1, "-mm": 2, "-o": 3, "-s": 3, "-t": 3,
             "-texres": 1, "-clamp": 1, "-bm": 1, "-imfchan": 1, "-type": 1, "-cc": 1}
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class TooLarge(Exception):
    """A file over MAX_READ: its references are unknown."""


def _inside(ref: str, base: Path, root: Path) -> Path | None:
    """``ref`` (already unquoted) resolved against ``base``, if it stays inside ``root``;
    None for an absolute path, a URI with a scheme, an empty one or one leaving ``root``."""
    ref = ref.strip()
    if len(ref) >= 2 and ref[0] == ref[-1] == '"':
        ref = ref[1:-1]
    ref = ref.replace("\\", "/")
    if not ref or _SCHEME.match(ref) or ref.startswith("/"):
        return None
    target = Path(os.path.realpath(base / ref))
    return target if root in target.parents else None


def _read(path: Path) -> bytes | None:
    """The file's bytes (None: unreadable); TooLarge over MAX_READ."""
    try:
        if path.stat().st_size > MAX_READ:
            raise TooLarge(str(path))
        return path.read_bytes()
    except OSError:
        return None


def _gltf_names(path: Path) -> list[str]:
    try:
        if not path.name.lower().endswith(".glb") and path.stat().st_size > MAX_READ:
            raise TooLarge(str(path))
        doc = read_gltf_doc(path)  # the project's one glTF reader (a GLB: its JSON chunk)
    except (GltfError, OSError):
        return []
    out = []
    for key in ("buffers", "images"):
        items = doc.get(key) if isinstance(doc, dict) else None
        for item in items if isinstance(items, list) else []:
            uri = item.get("uri") if isinstance(item, dict) else None
            if isinstance(uri, str) and not uri.startswith("data:"):
                out.append(unquote(uri))  # glTF URIs are percent-encoded; eggs' names are not
    return out


def _egg_names(path: Path) -> list[str]:
    data = _read(path)
    if data is None:
        return []
    if path.name.lower().endswith(".pz"):
        try:
            data = zlib.decompress(data[4:] if data[:2] == b"pz" else data)
        except zlib.error:
            return []
    return [ref for _, ref in egg_references(data)]


def raw_references(path: Path) -> list[str] | None:
    """A glTF's or egg's references as written (relative to its folder; glTF URIs
    unquoted), in file order; [] for other formats; None when the file is over MAX_READ."""
    name = path.name.lower()
    try:
        if name.endswith((".gltf", ".glb")):
            return _gltf_names(path)
        if name.endswith((".egg", ".egg.pz")):
            return _egg_names(path)
    except TooLarge:
        return None
    return []


def _mtl_map_name(arg: str) -> str:
    """The file name of an MTL map statement's arguments: options skipped, the rest of the
    line (a name may hold spaces)."""
    words = arg.split()
    i = 0
    while i < len(words) and words[i].lower() in _MTL_OPTS:
        n, i = _MTL_OPTS[words[i].lower()], i + 1
        taken = 0
        while taken < n and i < len(words) - 1 and (
                _NUMBER.match(words[i]) or words[i].lower() in ("on", "off")
                or (n == 1 and taken == 0)):
            i, taken = i + 1, taken + 1
    return " ".join(words[i:])


def _obj_refs(path: Path, root: Path) -> list[Path]:
    data = _read(path)
    if data is None:
        return []
    out: list[Path] = []
    for m in _MTLLIB.finditer(data.decode("utf-8", "replace")):
        whole = m.group(1)
        # one name with spaces (as Assimp reads it) if there is such a file, else several
        # names (the OBJ spec)
        one = _inside(whole, path.parent, root)
        mtls = ([one] if one is not None and one.is_file() else
                [_inside(n, path.parent, root) for n in whole.split()])
        for mtl in mtls:
            if mtl is None:
                continue
            out.append(mtl)
            text = _read(mtl)
            for t in _MTL_MAP.finditer(text.decode("utf-8", "replace") if text else ""):
                tex = _inside(_mtl_map_name(t.group(1)), mtl.parent, root)
                if tex is not None:
                    out.append(tex)
    return out


def referenced_files(path: Path, root: Path | None = None,
                     raw: list[str] | None = None) -> list[Path] | None:
    """The files inside ``root`` (default: the file's folder) that ``path`` would make a
    loader open besides itself, sorted, without repeats (existing or not); None when they
    are unknown (a file over MAX_READ). ``raw``: :func:`raw_references` of ``path`` when
    the caller has them (a cache)."""
    real_root = Path(os.path.realpath(root if root is not None else path.parent))
    if path.name.lower().endswith(".obj"):
        try:
            return sorted(set(_obj_refs(path, real_root)))
        except TooLarge:
            return None
    names = raw_references(path) if raw is None else raw
    if names is None:
        return None
    refs = (_inside(n, path.parent, real_root) for n in names)
    return sorted({p for p in refs if p is not None})
