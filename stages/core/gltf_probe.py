"""Probe of a parsed glTF document: bounds through the node tree, markers, counts, the
skeleton of a skinned file. Standard library only."""

from __future__ import annotations

import math
from pathlib import Path

from .coordinate_systems import to_z_up
from .gltf import GltfError, read_buffers
from .model_record import ModelProbe, ProbeError
from .skin import SkinError, bind_pose, root_motion, skeleton
from .spawns import is_start_node


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


def probe_gltf_doc(doc: dict, bin_len: int | None, cs: str = "y-up") -> ModelProbe:
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


def measure_skeleton(probe: ModelProbe, doc: dict, binary: bytes, base_dir: Path,
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
