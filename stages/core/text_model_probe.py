"""Probes of the text model formats (Wavefront .obj, Panda3D .egg / .egg.pz): bounds, counts,
an egg's skeleton. Standard library only."""

from __future__ import annotations

import math
import re
import zlib
from pathlib import Path

from .asset_guard import AssetInputError, check_egg
from .coordinate_systems import effective_coordinate_system, to_z_up
from .model_record import ModelProbe, ProbeError

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


def probe_obj(data: bytes, cs: str, scale: float) -> ModelProbe:
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


def probe_egg(data: bytes, compressed: bool, path: Path, up_axis: object,
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
