"""The one glTF 2.0 reader: a GLB's JSON and BIN chunks, a .gltf file's JSON, and the values of
an accessor. Standard library only.

The GLB container is checked before anything is trusted (magic, version 2, the header's length
against the file's, a complete JSON chunk first, a BIN chunk inside the file); a file that fails
is a :class:`GltfError` with a short reason code for an inventory row (``corrupt_file``,
``unsupported_format``) and a detail saying what was expected. What the JSON may reference
(buffer and image URIs, index ranges) is ``stages.core.asset_guard``'s to check.

:func:`read_gltf` also reads a .gltf file's first buffer from the file its ``uri`` names, beside
the .gltf (percent-escaped, as URIs are), or from its base64 data: URI.
:func:`read_buffers` and :func:`read_accessor_values` read every buffer and normalised accessors
(skins: joints, weights, inverse bind matrices).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from pathlib import Path
from typing import Any
from urllib.parse import unquote

GLB_MAGIC = b"glTF"
JSON_CHUNK = b"JSON"
BIN_CHUNK = b"BIN\x00"
GLB_HEADER_BYTES = 20  # 12-byte file header + the JSON chunk's 8-byte header

# accessor type → components; componentType → (struct code, bytes). MAT2 and MAT3 of 1- and
# 2-byte components pad each column to 4 bytes; of the matrices only MAT4 (never padded) is read.
COMPONENTS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}
COMPONENT_FORMATS = {5126: ("f", 4), 5123: ("H", 2), 5125: ("I", 4), 5121: ("B", 1),
                     5120: ("b", 1), 5122: ("h", 2)}
# normalized integer components → [0, 1] (unsigned) or [-1, 1] (signed), by the spec's rule
NORMALIZE = {5121: 255.0, 5123: 65535.0, 5120: 127.0, 5122: 32767.0}


class GltfError(ValueError):
    """A glTF/GLB file that cannot be read; ``reason`` is a short reason code for a row."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _glb_length(head: bytes) -> int:
    """The total length a GLB header declares, after checking its size, magic and version."""
    if len(head) < GLB_HEADER_BYTES:
        raise GltfError("corrupt_file", f"glb is {len(head)} bytes, shorter than its header")
    magic, version, length = struct.unpack_from("<4sII", head, 0)
    if magic != GLB_MAGIC:
        raise GltfError("corrupt_file", f"glb magic is {magic!r}, expected b'glTF'")
    if version != 2:
        raise GltfError("unsupported_format", f"glTF version {version}, expected 2")
    return int(length)


def parse_glb(data: bytes) -> tuple[Any, memoryview | None]:
    """(the JSON chunk's document, the BIN chunk or None when there is none) of a GLB file's
    bytes; GltfError when the container is not a complete GLB 2.0 file."""
    length = _glb_length(data)
    if length != len(data):
        raise GltfError("corrupt_file", f"glb header says {length} bytes, file has {len(data)}")
    clen, ctype = struct.unpack_from("<I4s", data, 12)
    if ctype != JSON_CHUNK or GLB_HEADER_BYTES + clen > len(data):
        raise GltfError("corrupt_file", "first glb chunk is not a complete JSON chunk")
    try:
        doc = json.loads(data[GLB_HEADER_BYTES:GLB_HEADER_BYTES + clen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GltfError("corrupt_file", f"glb JSON chunk does not parse: {exc}") from None
    binary = None
    off = GLB_HEADER_BYTES + clen
    if off + 8 <= len(data):
        blen, btype = struct.unpack_from("<I4s", data, off)
        if btype == BIN_CHUNK:
            if off + 8 + blen > len(data):
                raise GltfError("corrupt_file", "glb BIN chunk runs past the end of the file")
            binary = memoryview(data)[off + 8:off + 8 + blen]
    return doc, binary


def parse_gltf_json(data: bytes) -> Any:
    """The document of a .gltf file's bytes (UTF-8 JSON); GltfError when it does not parse."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GltfError("corrupt_file", f"glTF JSON does not parse: {exc}") from None


def read_gltf_doc(path: Path) -> Any:
    """The JSON document alone of a .glb (its first chunk: the binary is never read, so a
    huge level costs its JSON only) or a .gltf file; GltfError when it does not parse, OSError
    when it cannot be read."""
    if path.suffix.lower() != ".glb":
        return parse_gltf_json(path.read_bytes())
    with open(path, "rb") as f:
        head = f.read(GLB_HEADER_BYTES)
        _glb_length(head)
        clen, ctype = struct.unpack_from("<I4s", head, 12)
        if ctype != JSON_CHUNK:
            raise GltfError("corrupt_file", "first glb chunk is not a JSON chunk")
        chunk = f.read(clen)
    if len(chunk) < clen:
        raise GltfError("corrupt_file", "first glb chunk is not a complete JSON chunk")
    return parse_gltf_json(chunk)


def read_gltf(path: Path) -> tuple[dict, bytes]:
    """(document, binary) of a .glb (its BIN chunk; empty when none) or a .gltf file (the file
    its first buffer's ``uri`` names, beside it; empty when there is no uri). GltfError for a
    file that does not parse, OSError for one that cannot be read."""
    data = path.read_bytes()
    if path.suffix.lower() == ".glb":
        doc, binary = parse_glb(data)
        return doc, b"" if binary is None else bytes(binary)
    doc = parse_gltf_json(data)
    buf = doc.get("buffers", [{}])[0].get("uri")
    if buf and buf.startswith("data:"):
        return doc, decode_data_uri(buf)
    return doc, (path.parent / unquote(buf)).read_bytes() if buf else b""


def decode_data_uri(uri: str) -> bytes:
    """The bytes of a ``data:...;base64,`` URI; GltfError ``bad_data_uri`` when it does not
    decode."""
    head, _, payload = uri.partition(",")
    if not head.endswith(";base64"):
        raise GltfError("bad_data_uri", f"data URI '{uri[:40]}' is not base64")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise GltfError("bad_data_uri", f"data URI does not decode: {exc}") from None


def read_buffers(doc: dict, binary: bytes, base_dir: Path) -> list[bytes]:
    """Every buffer's bytes: the GLB BIN chunk (``binary``) for a buffer without a uri, a
    decoded data: URI, or the file its percent-escaped relative uri names beside the model
    (checked to stay inside the pack by ``asset_guard`` before this is called). OSError for a
    file that cannot be read, GltfError for a bad data: URI."""
    out = []
    for b in doc.get("buffers", []):
        uri = b.get("uri") if isinstance(b, dict) else None
        if not uri:
            out.append(binary)
        elif uri.startswith("data:"):
            out.append(decode_data_uri(uri))
        else:
            out.append((base_dir / unquote(uri)).read_bytes())
    return out


def read_accessor_values(doc: dict, buffers: list[bytes], i: int) -> list[tuple[float, ...]]:
    """Accessor ``i``'s elements from the buffer its view names, normalised integers scaled to
    floats as the spec says (weights stored as bytes or shorts); an accessor without a
    bufferView is zeros. KeyError / IndexError / struct.error for a broken reference."""
    acc = doc["accessors"][i]
    n = COMPONENTS[acc["type"]]
    if "bufferView" not in acc:
        return [(0.0,) * n] * int(acc["count"])
    view = doc["bufferViews"][acc["bufferView"]]
    ctype = acc["componentType"]
    fmt, size = COMPONENT_FORMATS[ctype]
    data = buffers[view.get("buffer", 0)]
    stride = view.get("byteStride") or size * n
    base = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
    unpack = struct.Struct("<" + fmt * n).unpack_from
    vals = [unpack(data, base + k * stride) for k in range(int(acc["count"]))]
    if acc.get("normalized") and ctype in NORMALIZE:
        d = NORMALIZE[ctype]
        vals = [tuple(max(c / d, -1.0) for c in v) for v in vals]
    return vals


def read_accessor(doc: dict, binary: bytes, i: int) -> list[tuple[float, ...]]:
    """Accessor ``i``'s elements (one tuple of components each, as stored: no normalisation),
    read from ``binary`` through its buffer view's offset and stride. A missing key or index
    raises KeyError / IndexError, a view past the end of ``binary`` struct.error."""
    acc = doc["accessors"][i]
    view = doc["bufferViews"][acc["bufferView"]]
    fmt, size = COMPONENT_FORMATS[acc["componentType"]]
    n = COMPONENTS[acc["type"]]
    stride = view.get("byteStride") or size * n
    base = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
    return [struct.unpack_from("<" + fmt * n, binary, base + k * stride)
            for k in range(acc["count"])]


def webp_fallbacks(doc: dict) -> list[str]:
    """Make a document's textures loadable by a reader without WebP (Panda3D's image readers
    have none): a texture with ``EXT_texture_webp`` keeps its ``source`` when that is another
    format (the fallback the extension's spec provides); a texture whose only image is WebP
    loses its ``source`` (drawn untextured). Edits ``doc`` in place; returns one note per
    texture changed or falling back."""
    images = doc.get("images") or []
    notes = []

    def is_webp(i: object) -> bool:
        if not isinstance(i, int) or not 0 <= i < len(images) or not isinstance(images[i], dict):
            return False
        img = images[i]
        return img.get("mimeType") == "image/webp" or str(img.get("uri", "")).lower().split(
            "?")[0].endswith(".webp")

    for k, tex in enumerate(doc.get("textures") or []):
        if not isinstance(tex, dict):
            continue
        ext = (tex.get("extensions") or {}).get("EXT_texture_webp")
        src = tex.get("source")
        if src is not None and not is_webp(src):
            if ext is not None:
                notes.append(f"texture {k}: WebP image skipped, its fallback image {src} used")
            continue
        if src is not None or ext is not None:
            tex.pop("source", None)
            notes.append(f"texture {k}: only a WebP image, which this reader cannot decode; "
                         "drawn untextured")
    return notes
