"""Checks a level or model file before anything parses it for real (issue 19, point 5): the
structure a glTF reader relies on (types, required keys, index ranges, an acyclic node graph,
buffer sizes) and every file it would open besides itself (buffer and image URIs, egg texture
and external-file references) — which must stay inside ``root`` (the pack, or the library).

A problem is an :class:`AssetInputError` with a reason code (listed in ``REASONS``) and a detail
naming the key and what was expected; nothing outside ``root`` is ever opened to find out
(paths are resolved, and at most ``stat``-ed, never read). A missing external buffer is not an
error here: the inventory reads only the JSON, and the engine reports the missing file.

Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .gltf import GltfError, parse_glb, parse_gltf_json

BAD_STRUCTURE = "bad_structure"  # wrong type, missing key, index out of range
CYCLIC_NODES = "cyclic_nodes"  # a node is its own ancestor, or has two parents
URI_OUTSIDE_ROOT = "uri_outside_root"  # a referenced file outside the pack/library (not read)
TRUNCATED_BUFFER = "truncated_buffer"  # a buffer shorter than what is declared or viewed
BAD_DATA_URI = "bad_data_uri"  # a data: URI that does not decode
REASONS = (BAD_STRUCTURE, CYCLIC_NODES, URI_OUTSIDE_ROOT, TRUNCATED_BUFFER, BAD_DATA_URI)

ARRAYS = ("accessors", "animations", "buffers", "bufferViews", "cameras", "images",
          "materials", "meshes", "nodes", "samplers", "scenes", "skins", "textures")
COMPONENT_BYTES = {5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}
TYPE_COUNT = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class AssetInputError(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def _fail(detail: str, reason: str = BAD_STRUCTURE) -> AssetInputError:
    return AssetInputError(reason, detail)


def _int(v: Any, where: str, n: int | None = None) -> int:
    """A non-negative integer (an index below ``n`` when given)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _fail(f"{where}: expected a non-negative integer, got {v!r}")
    if n is not None and v >= n:
        raise _fail(f"{where}: index {v} out of range (there are {n})")
    return v


def _nums(v: Any, where: str, k: int) -> None:
    if (not isinstance(v, list) or len(v) != k
            or not all(isinstance(c, int | float) and not isinstance(c, bool) for c in v)):
        raise _fail(f"{where}: expected {k} numbers, got {str(v)[:60]}")


def resolve_ref(uri: str, base_dir: Path, root: Path, where: str) -> Path:
    """The file a relative reference names, refused (never opened) when it is absolute, has a
    scheme (file:, http:) or resolves outside ``root``."""
    if _SCHEME.match(uri) or uri.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", uri):
        raise _fail(f"{where}: '{uri[:120]}' is absolute or has a scheme; only paths relative "
                    f"to the file inside its pack are followed", URI_OUTSIDE_ROOT)
    target = Path(os.path.realpath(base_dir / unquote(uri)))
    real_root = Path(os.path.realpath(root))
    if target != real_root and real_root not in target.parents:
        raise _fail(f"{where}: '{uri[:120]}' resolves outside {root}; not followed",
                    URI_OUTSIDE_ROOT)
    return target


def _data_uri(uri: str, where: str) -> bytes:
    head, sep, payload = uri.partition(",")
    if not sep:
        raise _fail(f"{where}: data: URI without a ',' separator", BAD_DATA_URI)
    try:
        if head.endswith(";base64"):
            return base64.b64decode(payload, validate=True)
        return unquote(payload).encode("latin-1")
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise _fail(f"{where}: data: URI does not decode: {exc}", BAD_DATA_URI) from None


def check_gltf(doc: Any, bin_len: int | None, base_dir: Path, root: Path) -> None:
    """Raise AssetInputError for anything a glTF reader would trip over (see module doc)."""
    if not isinstance(doc, dict):
        raise _fail(f"top level: expected a JSON object, got {type(doc).__name__}")
    if not isinstance(doc.get("asset"), dict):
        raise _fail("'asset': missing or not an object")
    for key in ARRAYS:
        if key in doc and (not isinstance(doc[key], list)
                           or not all(isinstance(x, dict) for x in doc[key])):
            raise _fail(f"'{key}': expected a list of objects, got {str(doc[key])[:60]}")
    if "extensions" in doc and not isinstance(doc["extensions"], dict):
        raise _fail("'extensions': expected an object")
    n = {k: len(doc.get(k, [])) for k in ARRAYS}
    sizes = _check_buffers(doc, bin_len, base_dir, root)
    for i, v in enumerate(doc.get("bufferViews", [])):
        b = _int(v.get("buffer"), f"bufferViews[{i}].buffer", n["buffers"])
        end = _int(v.get("byteOffset", 0), f"bufferViews[{i}].byteOffset") + _int(
            v.get("byteLength"), f"bufferViews[{i}].byteLength")
        if sizes[b] is not None and end > sizes[b]:  # type: ignore[operator]
            raise _fail(f"bufferViews[{i}] ends at byte {end}, buffer {b} has {sizes[b]}",
                        TRUNCATED_BUFFER)
    for i, a in enumerate(doc.get("accessors", [])):
        count = _int(a.get("count"), f"accessors[{i}].count")
        comp = a.get("componentType")
        if comp not in COMPONENT_BYTES or a.get("type") not in TYPE_COUNT:
            raise _fail(f"accessors[{i}]: componentType {comp!r} / type {a.get('type')!r} "
                        f"not one of {sorted(COMPONENT_BYTES)} / {sorted(TYPE_COUNT)}")
        for mm in ("min", "max"):
            if mm in a:
                _nums(a[mm], f"accessors[{i}].{mm}", TYPE_COUNT[a["type"]])
        if "bufferView" in a:
            vi = _int(a["bufferView"], f"accessors[{i}].bufferView", n["bufferViews"])
            view = doc["bufferViews"][vi]
            need = _int(a.get("byteOffset", 0), f"accessors[{i}].byteOffset") + count * (
                COMPONENT_BYTES[comp] * TYPE_COUNT[a["type"]])
            if count and need > view["byteLength"]:
                raise _fail(f"accessors[{i}] needs {need} bytes, bufferView {vi} has "
                            f"{view['byteLength']}", TRUNCATED_BUFFER)
    for i, m in enumerate(doc.get("meshes", [])):
        prims = m.get("primitives", [])
        if not isinstance(prims, list) or not all(isinstance(p, dict) for p in prims):
            raise _fail(f"meshes[{i}].primitives: expected a list of objects")
        for j, p in enumerate(prims):
            attrs = p.get("attributes", {})
            if not isinstance(attrs, dict):
                raise _fail(f"meshes[{i}].primitives[{j}].attributes: expected an object")
            for name, ai in attrs.items():
                _int(ai, f"meshes[{i}].primitives[{j}].attributes.{name}", n["accessors"])
            if "indices" in p:
                _int(p["indices"], f"meshes[{i}].primitives[{j}].indices", n["accessors"])
    _check_nodes(doc, n)
    for i, img in enumerate(doc.get("images", [])):
        uri = img.get("uri")
        if uri is not None and not isinstance(uri, str):
            raise _fail(f"images[{i}].uri: expected a string")
        if isinstance(uri, str) and not uri.startswith("data:"):
            resolve_ref(uri, base_dir, root, f"images[{i}].uri")
        if "bufferView" in img:
            _int(img["bufferView"], f"images[{i}].bufferView", n["bufferViews"])


def _check_buffers(doc: dict, bin_len: int | None, base_dir: Path, root: Path
                   ) -> list[int | None]:
    """Each buffer's available bytes (None: an external file that is missing)."""
    out: list[int | None] = []
    for i, b in enumerate(doc.get("buffers", [])):
        declared = _int(b.get("byteLength"), f"buffers[{i}].byteLength")
        uri = b.get("uri")
        if uri is None:
            have: int | None = bin_len if (i == 0 and bin_len is not None) else None
            if have is None:
                raise _fail(f"buffers[{i}]: no uri and no GLB BIN chunk")
        elif not isinstance(uri, str):
            raise _fail(f"buffers[{i}].uri: expected a string, got {uri!r}")
        elif uri.startswith("data:"):
            have = len(_data_uri(uri, f"buffers[{i}].uri"))
        else:
            target = resolve_ref(uri, base_dir, root, f"buffers[{i}].uri")
            have = target.stat().st_size if target.is_file() else None
        if have is not None and have < declared:
            raise _fail(f"buffers[{i}]: {have} bytes, byteLength says {declared}",
                        TRUNCATED_BUFFER)
        out.append(declared if have is not None else None)
    return out


def _check_nodes(doc: dict, n: dict[str, int]) -> None:
    nodes = doc.get("nodes", [])
    parent: dict[int, int] = {}
    for i, node in enumerate(nodes):
        kids = node.get("children", [])
        if not isinstance(kids, list):
            raise _fail(f"nodes[{i}].children: expected a list of node indices")
        for c in kids:
            c = _int(c, f"nodes[{i}].children", n["nodes"])
            if c in parent or c == i:
                raise _fail(f"nodes[{c}] has two parents or is its own child",
                            CYCLIC_NODES)
            parent[c] = i
        if "mesh" in node:
            _int(node["mesh"], f"nodes[{i}].mesh", n["meshes"])
        if "matrix" in node:
            _nums(node["matrix"], f"nodes[{i}].matrix", 16)
        for key, k in (("translation", 3), ("rotation", 4), ("scale", 3)):
            if key in node:
                _nums(node[key], f"nodes[{i}].{key}", k)
        if "name" in node and not isinstance(node["name"], str):
            raise _fail(f"nodes[{i}].name: expected a string")
    for i in range(len(nodes)):  # walk up: a chain longer than the node count is a cycle
        seen, j = 0, i
        while j in parent:
            j, seen = parent[j], seen + 1
            if seen > len(nodes):
                raise _fail(f"nodes[{i}]: the node graph has a cycle", CYCLIC_NODES)
    scenes = doc.get("scenes", [])
    if "scene" in doc:
        _int(doc["scene"], "'scene'", max(n["scenes"], 0) or None)
        if not scenes:
            raise _fail("'scene' set but there are no scenes")
    for s, sc in enumerate(scenes):
        roots = sc.get("nodes", [])
        if not isinstance(roots, list):
            raise _fail(f"scenes[{s}].nodes: expected a list of node indices")
        for r in roots:
            _int(r, f"scenes[{s}].nodes", n["nodes"])


# An egg's file references, read as Panda3D's egg lexer (panda/src/egg/lexer.lxx, a flex
# scanner: longest match, the earlier rule on a tie) reads them. Its white space is only
# space, tab, CR and LF; a quoted string runs to the next '"'; an unquoted token is a run of
# anything else but braces and '"' (so '/' and '//' inside a token are part of it). At a
# token's start '//' begins a comment to the end of the line, and '/*' a comment to '*/'
# only where the run is '/*' alone (a longer run is a token). _EGG_LEX keeps strings (group
# 1, followed by one space) and turns comments at a token's start into a space; then
# EGG_REF and EGG_ALPHA match whole tokens: <Texture> name { file } and <File> name { file }
# (keywords in any case; the name quoted, unquoted or left out) and the alpha-file scalar
# inside a texture. Group 1 is the keyword, group 2 the file as written. Each pattern is
# linear in the file's size, on any input.
_EGG_WS = rb"[ \t\r\n]"
_EGG_DELIM = rb'(?=[ \t\r\n{}"]|\Z)'
_EGG_LEX = re.compile(rb'("[^"]*"?)|(?<![^ \t\r\n{}"])(?://[^\n]*|/\*' + _EGG_DELIM
                      + rb'(?:[^*]|\*(?!/))*(?:\*/)?)')
_EGG_TOKEN = rb'(?:"[^"]*"?|[^ \t\r\n{}"]+)'
EGG_REF = re.compile(rb'(?<![^ \t\r\n{}"])<(Texture|File)>' + _EGG_DELIM + _EGG_WS + rb"*(?:"
                     + _EGG_TOKEN + _EGG_WS + rb"*)?\{" + _EGG_WS + rb"*(" + _EGG_TOKEN + rb")",
                     re.IGNORECASE)
EGG_ALPHA = re.compile(rb'(?<![^ \t\r\n{}"])<(Scalar)>' + _EGG_WS + rb"*alpha-file"
                       + _EGG_DELIM + _EGG_WS + rb"*\{" + _EGG_WS + rb"*(" + _EGG_TOKEN + rb")",
                       re.IGNORECASE)


def egg_references(data: bytes) -> list[tuple[str, str]]:
    """(keyword, file as written) of every file reference in an egg's text, in file order,
    read as the egg lexer reads it (comments left out, tokens whole)."""
    text = _EGG_LEX.sub(rb"\1 ", data)  # a comment becomes one space
    found = [(m.start(), m.group(1), m.group(2)) for pattern in (EGG_REF, EGG_ALPHA)
             for m in pattern.finditer(text)]
    return [(kw.decode("ascii", "replace"), ref.strip(b'"').decode("utf-8", "replace"))
            for _, kw, ref in sorted(found)]


def check_egg(data: bytes, base_dir: Path, root: Path) -> None:
    """Texture, alpha-file and external-file references of an egg must stay inside ``root``."""
    for keyword, ref in egg_references(data):
        resolve_ref(ref, base_dir, root, f"<{keyword}> reference")


def check_model_file(path: Path, root: Path | None = None, max_bytes: int = 512_000_000
                     ) -> None:
    """The same checks on a file an engine is about to load (``root``: the folder its
    references must stay in; default its own folder), once its GLB container or JSON has been
    read by ``stages.core.gltf``. Formats other than glTF/GLB/egg pass."""
    root = root if root is not None else path.parent
    name = path.name.lower()
    if not name.endswith((".gltf", ".glb", ".egg", ".egg.pz")):
        return
    size = path.stat().st_size
    if size == 0:
        raise AssetInputError("empty_file", f"{path.name}: file is empty")
    if size > max_bytes:
        return  # the engine's own loader decides
    data = path.read_bytes()
    if name.endswith(".egg.pz"):
        try:
            data = zlib.decompress(data[4:] if data[:2] == b"pz" else data)
        except zlib.error:
            return  # not compressed the way we know: the loader decides
    if name.endswith((".egg", ".egg.pz")):
        check_egg(data, path.parent, root)
        return
    bin_len = None
    try:
        if name.endswith(".glb"):
            doc, binary = parse_glb(data)
            bin_len = None if binary is None else len(binary)
        else:
            doc = parse_gltf_json(data)
    except GltfError as exc:
        raise AssetInputError(exc.reason, f"{path.name}: {exc.detail}") from None
    check_gltf(doc, bin_len, path.parent, root)
