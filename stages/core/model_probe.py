"""Read a model or level file's structure without an engine: format check, bounds, counts.

Supported: glTF 2.0 (.glb, .gltf), Wavefront .obj, Panda3D .egg / .egg.pz, .bam (header only),
Unreal .umap/.uasset (existence and package tag only). glTF and GLB files are parsed by
``stages.core.gltf``, whose reason codes become the probe's. Standard library only.

Bounds are returned in the contract's world frame (right-handed, Z up, metres). A file's
coordinate system is read, not guessed, exactly as the engine's loader reads it: glTF is Y-up by
its spec; an egg declares ``<CoordinateSystem> { Y-Up }`` (or Z-Up, Y-Up-Left, Z-Up-Left; Z-Up
when absent); obj and bam carry no declaration (Z-up, as Panda3D loads them). An ``up_axis`` in
a sidecar (pack.json level entry, character.json) overrides the declaration, in the inventory and
in the engine alike (``effective_coordinate_system``).

The parts: model_formats (which format), coordinate_systems (which frame), gltf_probe and
text_model_probe (one format family each), model_record (what a probe reports).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from .asset_guard import AssetInputError, check_gltf
from .coordinate_systems import (
    correction_matrix,
    declared_coordinate_system,
    effective_coordinate_system,
    normalize_coordinate_system,
    to_z_up,
)
from .gltf import GltfError, parse_glb, parse_gltf_json
from .gltf_probe import measure_skeleton, probe_gltf_doc
from .model_formats import (
    LEVEL_SUFFIXES,
    UNREAL_PACKAGE_TAG,
    model_format,
    unreal_package_problem,
)
from .model_record import ModelProbe, ProbeError
from .text_model_probe import probe_egg, probe_obj

# the probe's public surface, wherever each part now lives
__all__ = ["LEVEL_SUFFIXES", "ModelProbe", "ProbeError", "correction_matrix",
           "declared_coordinate_system", "effective_coordinate_system", "model_format",
           "normalize_coordinate_system", "probe_model", "to_z_up", "unreal_package_problem"]


def _read(path: Path, max_bytes: int) -> bytes:
    size = path.stat().st_size
    if size > max_bytes:
        raise ProbeError("too_large", f"{size} bytes exceeds the probe limit of {max_bytes}")
    return path.read_bytes()


def _scale_level(probe: ModelProbe, s: float) -> None:
    """A glTF level's measurements in metres: the sidecar's ``scale`` times the file's units
    (obj and egg apply it while reading; a Quake map converted to glTF is in inches)."""
    def mul(p: Any) -> tuple[float, float, float]:
        return (p[0] * s, p[1] * s, p[2] * s)
    if probe.bounds_min is not None and probe.bounds_max is not None:
        probe.bounds_min, probe.bounds_max = mul(probe.bounds_min), mul(probe.bounds_max)
    probe.player_starts = [mul(p) for p in probe.player_starts]
    probe.pois = [mul(p) for p in probe.pois]
    gp = probe.ground_plane
    if gp is not None:
        probe.ground_plane = {**gp, "size_m": [c * s for c in gp["size_m"]],
                              "rest_min": list(mul(gp["rest_min"])),
                              "rest_max": list(mul(gp["rest_max"]))}


def probe_model(path: Path, max_bytes: int = 256_000_000, up_axis: object = None,
                scale: float = 1.0, root: Path | None = None) -> ModelProbe:
    """Probe one model/level file; raise ProbeError with a reason code when it is unusable.

    ``up_axis`` is the sidecar's override of the file's declared coordinate system (None: as
    declared); a value that is not a coordinate system is a ProbeError ``bad_up_axis``.
    Files it references (glTF buffers and images, egg textures) must lie inside ``root``
    (default: the file's folder); they are never opened (stages.core.asset_guard)."""
    try:
        normalize_coordinate_system(up_axis)
    except ValueError as exc:
        raise ProbeError("bad_up_axis", str(exc)) from None
    guard = (path.parent, root if root is not None else path.parent)
    fmt = model_format(path)
    if fmt is None:
        raise ProbeError("unsupported_format", f"{path.name}: not one of {LEVEL_SUFFIXES}")
    if fmt == "fbx":
        raise ProbeError("unsupported_format", f"{path.name}: FBX is read through Panda3D's "
                         "Assimp loader (stages.engine.fbx_probe), not by this probe")
    try:
        if fmt == "umap":
            size = path.stat().st_size
            probe = ModelProbe(format="umap")
            if size >= 4:
                with path.open("rb") as fh:
                    (tag,) = struct.unpack("<I", fh.read(4))
                probe.extras["package_tag_ok"] = tag == UNREAL_PACKAGE_TAG
            return probe
        data = _read(path, max_bytes)
    except ProbeError:
        raise
    except OSError as exc:
        raise ProbeError("unreadable", f"{exc.strerror or exc}") from None
    if not data:
        raise ProbeError("empty_file", "file is empty")
    cs, source = effective_coordinate_system(path, up_axis)
    if fmt in ("glb", "gltf"):
        bin_len: int | None = None
        try:
            if fmt == "glb":
                doc, binary = parse_glb(data)
                bin_len = 0 if binary is None else len(binary)
            else:
                doc = parse_gltf_json(data)
        except GltfError as exc:
            raise ProbeError(exc.reason, exc.detail) from None
        if not isinstance(doc, dict) or "asset" not in doc:
            raise ProbeError("corrupt_file", "glTF JSON has no 'asset' object")
        try:
            check_gltf(doc, bin_len, *guard)
        except AssetInputError as exc:
            raise ProbeError(exc.reason, exc.detail) from None
        probe = probe_gltf_doc(doc, bin_len, cs)
        probe.coordinate_system_source = source
        if scale != 1.0:
            _scale_level(probe, scale)
        if probe.skinned or probe.animation_only:
            measure_skeleton(probe, doc, b"" if fmt == "gltf" else bytes(binary or b""),
                              path.parent, cs)
        return probe
    if fmt == "obj":
        probe = probe_obj(data, cs, scale)
        probe.coordinate_system_source = source
        return probe
    if fmt in ("egg", "egg.pz"):
        return probe_egg(data, fmt == "egg.pz", path, up_axis, scale, guard)
    if fmt == "bam":
        if not data.startswith(b"pbj\x00\n\r"):
            raise ProbeError("corrupt_file", "bam magic missing")
        return ModelProbe(format="bam")
    raise ProbeError("unsupported_format", fmt)  # pragma: no cover
