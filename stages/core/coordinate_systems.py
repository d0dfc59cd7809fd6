"""Model coordinate systems: which one a file's points are in (as the engine's loader reads
it, or as a sidecar overrides it), with the conversion to the contract frame (right-handed,
Z up). Standard library only."""

from __future__ import annotations

import math
import re
import struct
import zlib
from pathlib import Path

from .model_formats import model_format

# raw file coordinates → contract frame (right-handed, Z up), as Panda3D's loader converts them
# (measured on panda3d 1.10.16 with one egg per declaration)
_TO_Z_UP = {
    "z-up": lambda p: (p[0], p[1], p[2]),
    "y-up": lambda p: (p[0], -p[2], p[1]),
    "z-up-left": lambda p: (p[0], -p[1], p[2]),
    "y-up-left": lambda p: (p[0], p[2], p[1]),
}
COORDINATE_SYSTEMS = tuple(_TO_Z_UP)
_EGG_CS = re.compile(rb"<CoordinateSystem>\s*\{\s*([A-Za-z-]+)\s*\}")


def normalize_coordinate_system(value: object, where: str = "up_axis") -> str | None:
    """"Y", "y", "Y-Up", "Y-up-right", "yup" → "y-up" (etc.); None/"" → None (no override).
    Raises ValueError naming ``where`` for anything else."""
    if value is None or (isinstance(value, str) and not value.strip()) or (
            isinstance(value, float) and math.isnan(value)):
        return None
    v = str(value).strip().lower().replace("_", "-")
    if v in ("y", "z"):
        v += "-up"
    v = {"yup": "y-up", "zup": "z-up", "yup-left": "y-up-left", "zup-left": "z-up-left",
         "yup-right": "y-up", "zup-right": "z-up"}.get(v, v).removesuffix("-right")
    if v not in _TO_Z_UP:
        raise ValueError(f"{where}: {value!r} is not a coordinate system; expected Y or Z "
                         f"(or one of {', '.join(COORDINATE_SYSTEMS)})")
    return v


def declared_coordinate_system(path: Path, head: bytes | None = None) -> tuple[str, str]:
    """(coordinate system, source) that the engine's loader applies to ``path`` on its own:
    source "format" (glTF: Y-up by spec; bam: stored converted), "declared" (an egg's
    ``<CoordinateSystem>``) or "default" (egg without one, obj: Z-up)."""
    fmt = model_format(path)
    if fmt in ("glb", "gltf"):
        return "y-up", "format"
    if fmt in ("bam", "umap"):
        return "z-up", "format"
    if fmt in ("egg", "egg.pz"):
        if head is None:
            try:
                if path.stat().st_size > 64 << 20:  # too large to look at: as the engine does
                    return "z-up", "default"
                head = path.read_bytes()
            except OSError:
                return "z-up", "default"
            if fmt == "egg.pz":
                try:
                    head = zlib.decompressobj().decompress(head[4:] if head[:2] == b"pz"
                                                           else head, 1 << 16)
                except zlib.error:
                    return "z-up", "default"
        m = _EGG_CS.search(head[:1 << 16])
        if m:
            try:
                cs = normalize_coordinate_system(m.group(1).decode("ascii", "replace"))
            except ValueError:
                cs = None
            if cs:
                return cs, "declared"
    return "z-up", "default"


_FBX_UP_BINARY = re.compile(rb"UpAxisS\x03\x00\x00\x00intS\x07\x00\x00\x00Integer"
                            rb"S\x00\x00\x00\x00I(.{4})", re.S)
_FBX_UP_ASCII = re.compile(rb'"UpAxis"\s*,\s*"int"\s*,\s*"Integer"\s*,\s*""\s*,\s*(-?\d+)')


def fbx_up_axis(path: Path) -> str | None:
    """The up axis an FBX file declares in its GlobalSettings (``UpAxis`` 1: Y, 2: Z), binary
    or ASCII; None when it declares none or cannot be read. Panda3D's Assimp loader does not
    apply it: the engine does, through the effective coordinate system."""
    try:
        with path.open("rb") as fh:
            data = fh.read(8 << 20)
    except OSError:
        return None
    m = _FBX_UP_BINARY.search(data)
    axis = struct.unpack("<i", m.group(1))[0] if m else None
    if axis is None:
        a = _FBX_UP_ASCII.search(data)
        axis = int(a.group(1)) if a else None
    return {1: "y-up", 2: "z-up"}.get(axis) if axis is not None else None


def effective_coordinate_system(path: Path, override: object = None,
                                head: bytes | None = None) -> tuple[str, str]:
    """The coordinate system both the inventory and the engine use: the sidecar's ``up_axis``
    override when given (source "override"), else what the file declares (an FBX's
    GlobalSettings ``UpAxis``, which its loader leaves to us)."""
    cs = normalize_coordinate_system(override)
    if cs is not None:
        return cs, "override"
    if model_format(path) == "fbx":
        up = fbx_up_axis(path)
        if up is not None:
            return up, "declared"
    return declared_coordinate_system(path, head)


def to_z_up(cs: str):
    """The point conversion from ``cs`` file coordinates to the contract frame."""
    return _TO_Z_UP[cs]


def correction_matrix(declared: str, effective: str) -> list[list[float]]:
    """Row-major 3×3 matrix that turns a model the loader converted from ``declared`` into one
    converted from ``effective`` (identity when they agree): M_eff · M_decl⁻¹."""
    basis = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    dec = [_TO_Z_UP[declared](b) for b in basis]  # columns of M_decl
    eff = [_TO_Z_UP[effective](b) for b in basis]  # columns of M_eff
    # M_decl is a signed permutation: its inverse is its transpose
    return [[sum(eff[k][r] * dec[k][c] for k in range(3)) for c in range(3)] for r in range(3)]
