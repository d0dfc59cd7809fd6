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
"""

from __future__ import annotations

import math
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .asset_guard import AssetInputError, check_egg, check_gltf
from .gltf import GltfError, parse_glb, parse_gltf_json, read_buffers
from .skin import SkinError, bind_pose, root_motion, skeleton
from .spawns import is_start_node

LEVEL_SUFFIXES = (".glb", ".gltf", ".egg", ".egg.pz", ".bam", ".obj", ".umap", ".fbx")
# FBX is measured through Panda3D's Assimp loader in a child process (stages.engine.fbx_probe),
# never here: probe_model refuses it, the inventory routes it there
ENGINE_LOADED_SUFFIXES = (".fbx",)
UNREAL_PACKAGE_TAG = 0x9E2A83C1


UNREAL_PACKAGE_SUFFIXES = (".umap", ".uasset")


def unreal_package_problem(path: Path) -> tuple[str, str] | None:
    """An Unreal package (.umap, .uasset) starts with the package tag 0x9E2A83C1 (bytes
    C1 83 2A 9E); a file without it is not one (truncated, a placeholder, another format).
    Returns (reason, detail) for a ``broken`` row, or None."""
    if path.suffix.lower() not in UNREAL_PACKAGE_SUFFIXES:
        return None
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        return "unreadable", f"{path.name}: {exc.strerror or exc}"
    if len(head) < 4 or int.from_bytes(head, "little") != UNREAL_PACKAGE_TAG:
        return ("not_unreal_package", f"{path.name}: starts with {head.hex() or 'nothing'}, "
                f"expected the Unreal package tag {UNREAL_PACKAGE_TAG:#010x} (c1832a9e)")
    return None



class ProbeError(Exception):
    """A file that cannot be used; ``reason`` is a short reason code for the inventory row."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class ModelProbe:
    format: str
    triangles: int = 0
    meshes: int = 0
    nodes: int = 0
    bounds_min: tuple[float, float, float] | None = None
    bounds_max: tuple[float, float, float] | None = None
    # marker nodes found by name/extras (world positions, Z up)
    player_starts: list[tuple[float, float, float]] = field(default_factory=list)
    pois: list[tuple[float, float, float]] = field(default_factory=list)
    lights: int = 0
    cameras: int = 0
    animations: list[str] = field(default_factory=list)
    dynamic_props: int = 0
    extras: dict = field(default_factory=dict)
    # the coordinate system the bounds were converted from, and where it came from
    coordinate_system: str = "z-up"
    coordinate_system_source: str = "default"
    # skinned (egg joints / glTF skins): a character candidate; an egg holding only animation
    # tables (<Bundle> without vertices) is an animation clip file
    skinned: bool = False
    animation_only: bool = False
    # glTF skeleton (joint → world position, contract frame, model units; joint → parent),
    # bind-pose vertices (sampled, for pictures), each clip's root travel, and what else the
    # file animates without a skin ("morph targets", "node transforms")
    joints: dict = field(default_factory=dict)
    joint_parents: dict = field(default_factory=dict)
    bind_points: list = field(default_factory=list)
    root_motion: dict = field(default_factory=dict)
    unskinned_animation: str | None = None
    # images the file declares: (uri or "<embedded>", mime or extension); notes on them
    images: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    # a flat ground plane that dwarfs the rest, measured apart (levels)
    ground_plane: dict | None = None

    @property
    def extent(self) -> tuple[float, float, float]:
        if self.bounds_min is None or self.bounds_max is None:
            return (0.0, 0.0, 0.0)
        return tuple(b - a for a, b in zip(self.bounds_min, self.bounds_max, strict=True))  # type: ignore[return-value]


def model_format(path: Path) -> str | None:
    name = path.name.lower()
    for suf in LEVEL_SUFFIXES:
        if name.endswith(suf):
            return suf.lstrip(".")
    return None


def _read(path: Path, max_bytes: int) -> bytes:
    size = path.stat().st_size
    if size > max_bytes:
        raise ProbeError("too_large", f"{size} bytes exceeds the probe limit of {max_bytes}")
    return path.read_bytes()


# ---------------------------------------------------------------- glTF


def _quat_rotate(q: tuple[float, float, float, float], v: tuple[float, float, float]):
    x, y, z, w = q  # glTF order
    vx, vy, vz = v
    # t = 2 * cross(q.xyz, v); v' = v + w t + cross(q.xyz, t)
    tx = 2 * (y * vz - z * vy)
    ty = 2 * (z * vx - x * vz)
    tz = 2 * (x * vy - y * vx)
    return (
        vx + w * tx + (y * tz - z * ty),
        vy + w * ty + (z * tx - x * tz),
        vz + w * tz + (x * ty - y * tx),
    )


class _Affine:
    """3x4 affine transform as rows."""

    def __init__(self, m: list[list[float]] | None = None):
        self.m = m or [[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]]

    @classmethod
    def from_node(cls, node: dict) -> _Affine:
        if "matrix" in node:
            c = node["matrix"]  # column-major 4x4
            return cls([[c[0], c[4], c[8], c[12]], [c[1], c[5], c[9], c[13]],
                        [c[2], c[6], c[10], c[14]]])
        t = node.get("translation", [0, 0, 0])
        r = node.get("rotation", [0, 0, 0, 1])
        s = node.get("scale", [1, 1, 1])
        cols = [_quat_rotate(tuple(r), (s[0], 0, 0)), _quat_rotate(tuple(r), (0, s[1], 0)),
                _quat_rotate(tuple(r), (0, 0, s[2]))]
        return cls([[cols[0][i], cols[1][i], cols[2][i], t[i]] for i in range(3)])

    def __matmul__(self, o: _Affine) -> _Affine:
        a, b = self.m, o.m
        out = []
        for i in range(3):
            row = [sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)]
            row.append(sum(a[i][k] * b[k][3] for k in range(3)) + a[i][3])
            out.append(row)
        return _Affine(out)

    def apply(self, p) -> tuple[float, float, float]:
        m = self.m
        return tuple(m[i][0] * p[0] + m[i][1] * p[1] + m[i][2] * p[2] + m[i][3] for i in range(3))


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
                head = _read(path, 64 << 20)
            except (OSError, ProbeError):
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


def _probe_gltf_doc(doc: dict, bin_len: int | None, cs: str = "y-up") -> ModelProbe:
    if not isinstance(doc, dict) or "asset" not in doc:
        raise ProbeError("corrupt_file", "glTF JSON has no 'asset' object")
    buffers = doc.get("buffers", [])
    views = doc.get("bufferViews", [])
    accessors = doc.get("accessors", [])
    for i, v in enumerate(views):
        buf = buffers[v.get("buffer", 0)] if v.get("buffer", 0) < len(buffers) else None
        if buf is None:
            raise ProbeError("corrupt_file", f"bufferView {i} names a missing buffer")
        end = v.get("byteOffset", 0) + v.get("byteLength", 0)
        limit = bin_len if (bin_len is not None and "uri" not in buf) else buf.get("byteLength", 0)
        if end > limit:
            raise ProbeError("corrupt_file", f"bufferView {i} ends at {end}, buffer has {limit}")
    probe = ModelProbe(format="gltf", coordinate_system=cs)
    conv = to_z_up(cs)
    probe.skinned = bool(doc.get("skins"))
    meshes = doc.get("meshes", [])
    nodes = doc.get("nodes", [])
    probe.meshes = len(meshes)
    probe.nodes = len(nodes)
    probe.lights = len(doc.get("extensions", {}).get("KHR_lights_punctual", {}).get("lights", []))
    probe.cameras = len(doc.get("cameras", []))
    probe.animations = [a.get("name", f"anim{i}") for i, a in enumerate(doc.get("animations", []))]
    probe.extras = doc.get("scenes", [{}])[doc.get("scene", 0)].get("extras", {}) if doc.get(
        "scenes") else {}
    if not isinstance(probe.extras, dict):
        probe.extras = {}  # extras may be any JSON value; only an object carries ours
    lo = [math.inf] * 3
    hi = [-math.inf] * 3
    parts: list[tuple[list[float], list[float], int]] = []  # per mesh node: bounds, triangles

    def visit(idx: int, parent: _Affine, depth: int) -> None:
        if depth > 64 or idx >= len(nodes):
            raise ProbeError("corrupt_file", f"node {idx} is missing or the node tree is cyclic")
        node = nodes[idx]
        world = parent @ _Affine.from_node(node)
        name = str(node.get("name", ""))
        extras = node.get("extras", {}) or {}
        extras = extras if isinstance(extras, dict) else {}
        pos = conv(world.apply((0, 0, 0)))
        role = extras.get("role", "")
        if is_start_node(name, {k: str(v) for k, v in extras.items()}
                         if isinstance(extras, dict) else {}):
            probe.player_starts.append(pos)
        if role == "poi" or name.startswith("POI"):
            probe.pois.append(pos)
        if extras.get("dynamic"):
            probe.dynamic_props += 1
        if "mesh" in node:
            mesh = meshes[node["mesh"]] if node["mesh"] < len(meshes) else None
            if mesh is None:
                raise ProbeError("corrupt_file", f"node {idx} names missing mesh {node['mesh']}")
            for prim in mesh.get("primitives", []):
                pa = prim.get("attributes", {}).get("POSITION")
                if pa is None or pa >= len(accessors):
                    raise ProbeError("corrupt_file", f"mesh {node['mesh']} lacks POSITION")
                acc = accessors[pa]
                if prim.get("indices") is not None and prim["indices"] < len(accessors):
                    probe.triangles += accessors[prim["indices"]].get("count", 0) // 3
                else:
                    probe.triangles += acc.get("count", 0) // 3
                if "min" in acc and "max" in acc:
                    a, b = acc["min"], acc["max"]
                    plo, phi = [math.inf] * 3, [-math.inf] * 3
                    for cx in (a[0], b[0]):
                        for cy in (a[1], b[1]):
                            for cz in (a[2], b[2]):
                                p = conv(world.apply((cx, cy, cz)))
                                for k in range(3):
                                    lo[k] = min(lo[k], p[k])
                                    hi[k] = max(hi[k], p[k])
                                    plo[k] = min(plo[k], p[k])
                                    phi[k] = max(phi[k], p[k])
                    parts.append((plo, phi, idx))
        for child in node.get("children", []):
            visit(child, world, depth + 1)

    scenes = doc.get("scenes", [])
    roots = scenes[doc.get("scene", 0)].get("nodes", []) if scenes else list(range(len(nodes)))
    for r in roots:
        visit(r, _Affine(), 0)
    if lo[0] <= hi[0]:
        probe.bounds_min = (lo[0], lo[1], lo[2])
        probe.bounds_max = (hi[0], hi[1], hi[2])
        probe.ground_plane = _ground_plane(parts, nodes)
    for img in doc.get("images", []):
        if isinstance(img, dict):
            uri = img.get("uri")
            probe.images.append((uri if isinstance(uri, str) and not uri.startswith("data:")
                                 else "<embedded>", img.get("mimeType") or (
                Path(uri).suffix.lower().lstrip(".") if isinstance(uri, str)
                and not uri.startswith("data:") else "")))
    if "EXT_texture_webp" in (doc.get("extensionsUsed") or []):
        probe.notes.append("textures in EXT_texture_webp (WebP), with "
                           + ("a fallback image" if any(
                               "source" in t for t in doc.get("textures", []) if
                               isinstance(t, dict)) else "no fallback image"))
    if not probe.skinned and doc.get("animations"):
        paths = {ch.get("target", {}).get("path") for a in doc["animations"]
                 for ch in a.get("channels", []) if isinstance(ch, dict)}
        probe.unskinned_animation = ("morph targets" if "weights" in paths else
                                     "node transforms")
    probe.animation_only = bool(doc.get("animations")) and not meshes
    return probe


def _ground_plane(parts: list[tuple[list[float], list[float], int]], nodes: list
                  ) -> dict | None:
    """A flat mesh node (height under 1 % of its width) at least 4x wider than everything
    else together, measured apart: the bounds of the rest, and the plane's size."""
    if len(parts) < 2:
        return None
    best = max(parts, key=lambda p: max(p[1][0] - p[0][0], p[1][1] - p[0][1]))
    width = max(best[1][0] - best[0][0], best[1][1] - best[0][1])
    if best[1][2] - best[0][2] > 0.01 * width:
        return None
    rest = [p for p in parts if p is not best]
    rlo = [min(p[0][k] for p in rest) for k in range(3)]
    rhi = [max(p[1][k] for p in rest) for k in range(3)]
    rwidth = max(rhi[0] - rlo[0], rhi[1] - rlo[1])
    if width < 4 * max(rwidth, 1e-9):
        return None
    # the rest, standing on the plane: keep the plane's height in the bounds
    rlo[2] = min(rlo[2], best[0][2])
    rhi[2] = max(rhi[2], best[1][2])
    name = nodes[best[2]].get("name", f"node{best[2]}") if best[2] < len(nodes) else "?"
    return {"node": str(name), "size_m": [best[1][0] - best[0][0], best[1][1] - best[0][1]],
            "rest_min": rlo, "rest_max": rhi}


def _measure_skeleton(probe: ModelProbe, doc: dict, binary: bytes, base_dir: Path,
                      cs: str) -> None:
    """Bounds through the skin (the glTF spec's bind pose), the skeleton and each clip's root
    travel. A skin that cannot be evaluated is a ProbeError ``bad_skin``."""
    conv = to_z_up(cs)
    try:
        buffers = read_buffers(doc, binary, base_dir)
    except (OSError, GltfError) as exc:
        raise ProbeError("unreadable_buffer", f"cannot read the buffers the skin needs: "
                         f"{exc}") from None
    try:
        if probe.animation_only:
            probe.joints, probe.joint_parents = skeleton(doc, conv)
        else:
            pose = bind_pose(doc, buffers, conv)
            probe.joints, probe.joint_parents = pose.joints, pose.parents
            probe.notes.extend(pose.notes)
            b = pose.bounds()
            if b is not None:
                probe.bounds_min, probe.bounds_max = b
            step = max(1, len(pose.points) // 6000)
            probe.bind_points = pose.points[::step]
        probe.root_motion = root_motion(doc, buffers, conv, set(probe.joints))
    except (SkinError, KeyError, IndexError, TypeError) as exc:
        raise ProbeError("bad_skin", str(exc)) from None


# ---------------------------------------------------------------- text formats

_EGG_VERTEX = re.compile(rb"<Vertex>\s*\S*\s*\{\s*([-+0-9.eE]+)\s+([-+0-9.eE]+)\s+([-+0-9.eE]+)")


def _bounds_update(lo: list[float], hi: list[float], p) -> None:
    for k in range(3):
        if p[k] < lo[k]:
            lo[k] = p[k]
        if p[k] > hi[k]:
            hi[k] = p[k]


def _probe_points(fmt: str, points, triangles: int, cs: str, scale: float) -> ModelProbe:
    lo = [math.inf] * 3
    hi = [-math.inf] * 3
    conv = to_z_up(cs)
    for p in points:
        _bounds_update(lo, hi, conv(p))
    probe = ModelProbe(format=fmt, triangles=triangles, meshes=1, coordinate_system=cs)
    if lo[0] <= hi[0]:
        probe.bounds_min = (lo[0] * scale, lo[1] * scale, lo[2] * scale)
        probe.bounds_max = (hi[0] * scale, hi[1] * scale, hi[2] * scale)
    return probe


def _probe_obj(data: bytes, cs: str, scale: float) -> ModelProbe:
    points = []
    triangles = 0
    for line in data.splitlines():
        if line.startswith(b"v "):
            parts = line.split()
            try:
                points.append((float(parts[1]), float(parts[2]), float(parts[3])))
            except (IndexError, ValueError):
                raise ProbeError("corrupt_file", f"bad obj vertex line {line[:60]!r}") from None
        elif line.startswith(b"f "):
            triangles += max(len(line.split()) - 3, 0)
    if not points:
        raise ProbeError("corrupt_file", "obj has no vertices")
    return _probe_points("obj", points, triangles, cs, scale)


_EGG_TOKENS = re.compile(
    rb"<Joint>\s*([^\s{]+)\s*\{|<Matrix4>\s*\{([^}]*)\}|<(Transform|DefaultPose)>\s*\{"
    rb"|\{|\}")


def egg_skeleton(data: bytes) -> tuple[dict[str, tuple[float, float, float]],
                                         dict[str, str | None]]:
    """(joint → bind-pose position, joint → parent joint) of an egg's ``<Joint>`` tree, from
    each joint's ``<Transform> { <Matrix4> }`` (row vectors: translation in the last row,
    world = local x parent). Names as written; an unreadable matrix counts as identity."""
    ident = [[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]]
    local: dict[str, list[list[float]]] = {}
    parents: dict[str, str | None] = {}
    stack: list[tuple[str, str]] = []  # (kind, joint name or "")
    for m in _EGG_TOKENS.finditer(data):
        if m.group(1) is not None:
            name = m.group(1).decode("utf-8", "replace").strip('"')
            joint_parents = [n for k, n in stack if k == "joint"]
            parents[name] = joint_parents[-1] if joint_parents else None
            local.setdefault(name, ident)
            stack.append(("joint", name))
        elif m.group(2) is not None:
            if len(stack) >= 2 and stack[-1] == ("transform", "") and stack[-2][0] == "joint":
                try:
                    v = [float(x) for x in m.group(2).split()]
                except ValueError:
                    continue
                if len(v) == 16:
                    local[stack[-2][1]] = [v[0:4], v[4:8], v[8:12], v[12:16]]
        elif m.group(3) is not None:
            stack.append(("transform" if m.group(3) == b"Transform" else "pose", ""))
        elif m.group(0) == b"{":
            stack.append(("other", ""))
        elif stack:
            stack.pop()
    world: dict[str, list[list[float]]] = {}

    def solve(n: str, depth: int = 0) -> list[list[float]]:
        if n not in world:
            par = parents.get(n)
            pw = solve(par, depth + 1) if par is not None and depth < 256 else ident
            a = local[n]
            world[n] = [[sum(a[i][k] * pw[k][j] for k in range(4)) for j in range(4)]
                        for i in range(4)]
        return world[n]

    pos = {n: (solve(n)[3][0], solve(n)[3][1], solve(n)[3][2]) for n in local}
    return pos, parents


def _probe_egg(data: bytes, compressed: bool, path: Path, up_axis: object,
               scale: float, guard: tuple[Path, Path] | None = None) -> ModelProbe:
    if compressed:
        try:
            data = zlib.decompress(data[4:] if data[:2] == b"pz" else data)
        except zlib.error:
            try:
                data = zlib.decompress(data, 31)
            except zlib.error as exc:
                raise ProbeError("corrupt_file", f".pz does not decompress: {exc}") from None
    if b"<" not in data[:4096]:
        raise ProbeError("corrupt_file", "not an egg file (no <Tag> in the first 4 KiB)")
    if guard is not None:
        try:
            check_egg(data, *guard)
        except AssetInputError as exc:
            raise ProbeError(exc.reason, exc.detail) from None
    cs, source = effective_coordinate_system(path, up_axis, head=data)
    points = [tuple(float(c) for c in m.groups()) for m in _EGG_VERTEX.finditer(data)]
    polygons = data.count(b"<Polygon>")
    has_bundle = b"<Bundle>" in data
    if not points and not has_bundle:
        raise ProbeError("corrupt_file", "egg has no vertices and no animation bundle")
    probe = _probe_points("egg", points, polygons, cs, scale)
    probe.coordinate_system_source = source
    conv = to_z_up(cs)
    step = max(1, len(points) // 6000)
    probe.bind_points = [tuple(c * scale for c in conv(q))  # an egg's vertices: bind pose
                         for q in points[::step]]
    probe.animations = ["anim"] if has_bundle else []
    probe.skinned = b"<Joint>" in data
    if probe.skinned:
        joints, parents = egg_skeleton(data)
        probe.joints = {n: tuple(c * scale for c in conv(p)) for n, p in joints.items()}
        probe.joint_parents = parents
    probe.animation_only = has_bundle and not points
    probe.meshes = max(1, data.count(b"<Group>"))
    return probe


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
        probe = _probe_gltf_doc(doc, bin_len, cs)
        probe.coordinate_system_source = source
        if probe.skinned or probe.animation_only:
            _measure_skeleton(probe, doc, b"" if fmt == "gltf" else bytes(binary or b""),
                              path.parent, cs)
        return probe
    if fmt == "obj":
        probe = _probe_obj(data, cs, scale)
        probe.coordinate_system_source = source
        return probe
    if fmt in ("egg", "egg.pz"):
        return _probe_egg(data, fmt == "egg.pz", path, up_axis, scale, guard)
    if fmt == "bam":
        if not data.startswith(b"pbj\x00\n\r"):
            raise ProbeError("corrupt_file", "bam magic missing")
        return ModelProbe(format="bam")
    raise ProbeError("unsupported_format", fmt)  # pragma: no cover
