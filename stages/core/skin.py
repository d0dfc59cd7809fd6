"""A glTF model's bind pose, as the glTF 2.0 spec places it: the vertices of a skinned mesh are
sum(weight x jointWorld x inverseBindMatrix) x POSITION, and the skinned mesh node's own
transform (and its ancestors') is ignored; a mesh without a skin sits at its node's world
transform. Also the skeleton: every joint's name, parent joint and world position, and the
root-joint travel of each clip (root motion). Standard library only.

Blender's and Mixamo's exports put the armature root at +-90 deg about X with a 0.01 scale; the
joint world matrices carry that and the inverse bind matrices undo it, so the skinned vertices
come out in the mesh's own units, standing — reading the mesh node's ancestors instead gives a
character 3.6 mm tall, lying down.

Points and joints are returned in the contract frame (Z up, right-handed) through the
coordinate conversion the caller passes (glTF: Y-up).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from .gltf import read_accessor_values

Mat = list[list[float]]  # 3 rows x 4 columns (affine)
Vec = tuple[float, float, float]
IDENTITY: Mat = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
MAX_VERTICES_PER_PRIMITIVE = 40_000  # more are sampled with a stride (bounds within a few mm)


class SkinError(ValueError):
    """A skin the bind pose cannot be computed from (a missing inverse-bind accessor, joints
    that are not nodes); ``detail`` says which."""


@dataclass
class BindPose:
    points: list[Vec] = field(default_factory=list)  # vertices, contract frame
    skinned_points: int = 0  # how many of them came through a skin
    joints: dict[str, Vec] = field(default_factory=dict)  # joint name → world position
    parents: dict[str, str | None] = field(default_factory=dict)  # joint → parent joint
    notes: list[str] = field(default_factory=list)

    def bounds(self) -> tuple[Vec, Vec] | None:
        if not self.points:
            return None
        xs, ys, zs = zip(*self.points, strict=True)
        return (min(xs), min(ys), min(zs)), (max(xs), max(ys), max(zs))


def node_matrix(node: dict, pose: dict | None = None) -> Mat:
    """A node's local transform as a 3x4 affine matrix (``matrix`` or T x R x S); ``pose``
    replaces its translation / rotation / scale (a clip's values at some time)."""
    if pose:
        node = {k: v for k, v in node.items() if k != "matrix"} | pose
    if "matrix" in node:
        c = node["matrix"]  # column-major 4x4
        return [[c[0], c[4], c[8], c[12]], [c[1], c[5], c[9], c[13]], [c[2], c[6], c[10], c[14]]]
    tx, ty, tz = node.get("translation", [0.0, 0.0, 0.0])
    x, y, z, w = node.get("rotation", [0.0, 0.0, 0.0, 1.0])
    sx, sy, sz = node.get("scale", [1.0, 1.0, 1.0])
    r = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    return [[r[0][0] * sx, r[0][1] * sy, r[0][2] * sz, tx],
            [r[1][0] * sx, r[1][1] * sy, r[1][2] * sz, ty],
            [r[2][0] * sx, r[2][1] * sy, r[2][2] * sz, tz]]


def mat_mul(a: Mat, b: Mat) -> Mat:
    return [[a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j] + (a[i][3] if j == 3
                                                                          else 0.0)
             for j in range(4)] for i in range(3)]


def mat_apply(m: Mat, p) -> Vec:
    return (m[0][0] * p[0] + m[0][1] * p[1] + m[0][2] * p[2] + m[0][3],
            m[1][0] * p[0] + m[1][1] * p[1] + m[1][2] * p[2] + m[1][3],
            m[2][0] * p[0] + m[2][1] * p[1] + m[2][2] * p[2] + m[2][3])


def world_matrices(doc: dict, pose: dict[int, dict] | None = None
                   ) -> tuple[dict[int, Mat], dict[int, int]]:
    """(node → world matrix, node → parent node) for every node reachable from the scene's
    roots (every parentless node when there is no scene), each node's local transform
    replaced by ``pose[node]`` where given. Raises SkinError on a cycle."""
    pose = pose or {}
    nodes = doc.get("nodes", [])
    parent: dict[int, int] = {}
    for i, n in enumerate(nodes):
        for c in n.get("children", []) if isinstance(n, dict) else []:
            if isinstance(c, int):
                parent[c] = i
    scenes = doc.get("scenes") or []
    si = doc.get("scene", 0)
    roots = scenes[si].get("nodes", []) if scenes and si < len(scenes) else [
        i for i in range(len(nodes)) if i not in parent]
    world: dict[int, Mat] = {}
    stack = [(r, IDENTITY, 0) for r in roots]
    while stack:
        i, pm, depth = stack.pop()
        if depth > 256 or i in world:
            raise SkinError(f"node {i} is reached twice: the node tree is cyclic")
        world[i] = mat_mul(pm, node_matrix(nodes[i], pose.get(i)))
        stack.extend((c, world[i], depth + 1) for c in nodes[i].get("children", []))
    # joints a skin names outside the scene still have a world matrix (their own chain)
    for i in range(len(nodes)):
        if i not in world:
            chain: list[int] = []
            k: int | None = i
            while k is not None and k not in world and len(chain) <= 256:
                chain.append(k)
                k = parent.get(k)
            m = world[k] if k is not None and k in world else IDENTITY
            for j in reversed(chain):
                m = mat_mul(m, node_matrix(nodes[j], pose.get(j)))
                world[j] = m
    return world, parent


def _ibm(doc: dict, buffers: list[bytes], skin: dict, si: int, n: int) -> list[Mat]:
    if "inverseBindMatrices" not in skin:
        return [IDENTITY] * n  # the spec: identity matrices when absent
    a = skin["inverseBindMatrices"]
    try:
        vals = read_accessor_values(doc, buffers, a)
    except (KeyError, IndexError, TypeError, struct.error) as exc:
        raise SkinError(f"skin {si}: inverseBindMatrices accessor {a} cannot be read "
                        f"({type(exc).__name__}: {exc})") from None
    if len(vals) < n or len(vals[0]) != 16:
        raise SkinError(f"skin {si}: inverseBindMatrices accessor {a} holds {len(vals)} "
                        f"matrices for {n} joints")
    return [[[c[0], c[4], c[8], c[12]], [c[1], c[5], c[9], c[13]], [c[2], c[6], c[10], c[14]]]
            for c in vals]


def _joint_name(nodes: list, j: int) -> str:
    n = nodes[j] if 0 <= j < len(nodes) else {}
    return str(n.get("name") or f"node{j}")


def skeleton(doc: dict, conv: Callable[[Vec], Vec]) -> tuple[dict[str, Vec],
                                                             dict[str, str | None]]:
    """(joint name → world position, joint → parent joint) of every skin's joints; without a
    skin but with animations, of every node without a mesh (a clip-only file's skeleton)."""
    nodes = doc.get("nodes", [])
    world, parent = world_matrices(doc)
    ids: set[int] = set()
    for s in doc.get("skins", []):
        ids.update(j for j in s.get("joints", []) if isinstance(j, int) and j < len(nodes))
    if not ids and doc.get("animations"):
        # a clip-only file: its skeleton is every node that holds no mesh or camera
        ids = {i for i, n in enumerate(nodes) if isinstance(n, dict) and "mesh" not in n
               and "camera" not in n}
    joints: dict[str, Vec] = {}
    parents: dict[str, str | None] = {}
    for j in sorted(ids):
        name = _joint_name(nodes, j)
        joints[name] = conv(mat_apply(world.get(j, IDENTITY), (0.0, 0.0, 0.0)))
        k = parent.get(j)
        while k is not None and k not in ids:
            k = parent.get(k)
        parents[name] = None if k is None else _joint_name(nodes, k)
    return joints, parents


def bind_pose(doc: dict, buffers: list[bytes], conv: Callable[[Vec], Vec],
              pose: dict[int, dict] | None = None) -> BindPose:
    """Every mesh vertex of the scene in the bind pose (skinned meshes through their skin,
    the others through their node's world transform), and the skeleton; with ``pose`` (node →
    translation/rotation/scale, :func:`clip_pose`), in that pose instead. SkinError for a skin
    that cannot be evaluated."""
    nodes = doc.get("nodes", [])
    meshes = doc.get("meshes", [])
    skins = doc.get("skins", [])
    world, _ = world_matrices(doc, pose)
    out = BindPose()
    out.joints, out.parents = skeleton(doc, conv)
    for ni, node in enumerate(nodes):
        if "mesh" not in node or ni not in world:
            continue
        mesh = meshes[node["mesh"]]
        skin_mats: list[Mat] | None = None
        if "skin" in node:
            si = node["skin"]
            if not isinstance(si, int) or not 0 <= si < len(skins):
                raise SkinError(f"node {ni} names skin {si}, the file has {len(skins)}")
            skin = skins[si]
            joints = skin.get("joints", [])
            if not joints or not all(isinstance(j, int) and 0 <= j < len(nodes) for j in joints):
                raise SkinError(f"skin {si}: joints {joints[:8]} are not all nodes")
            ibm = _ibm(doc, buffers, skin, si, len(joints))
            skin_mats = [mat_mul(world[j], ibm[k]) for k, j in enumerate(joints)]
        for prim in mesh.get("primitives", []):
            attrs = prim.get("attributes", {})
            if "POSITION" not in attrs:
                continue
            try:
                pos = read_accessor_values(doc, buffers, attrs["POSITION"])
                step = max(1, len(pos) // MAX_VERTICES_PER_PRIMITIVE)
                pos = pos[::step]
                if skin_mats is not None and "JOINTS_0" in attrs and "WEIGHTS_0" in attrs:
                    js = read_accessor_values(doc, buffers, attrs["JOINTS_0"])[::step]
                    ws = read_accessor_values(doc, buffers, attrs["WEIGHTS_0"])[::step]
                    if "JOINTS_1" in attrs and "WEIGHTS_1" in attrs:
                        js1 = read_accessor_values(doc, buffers, attrs["JOINTS_1"])[::step]
                        ws1 = read_accessor_values(doc, buffers, attrs["WEIGHTS_1"])[::step]
                        js = [a + b for a, b in zip(js, js1, strict=True)]
                        ws = [a + b for a, b in zip(ws, ws1, strict=True)]
                    out.points.extend(conv(_skin_vertex(p, j, w, skin_mats))
                                      for p, j, w in zip(pos, js, ws, strict=True))
                    out.skinned_points += len(pos)
                else:
                    m = world[ni]
                    if skin_mats is not None:
                        out.notes.append(f"mesh {node['mesh']}: skinned node without "
                                         "JOINTS_0/WEIGHTS_0; placed by its node")
                    out.points.extend(conv(mat_apply(m, p)) for p in pos)
            except (KeyError, IndexError, TypeError, ValueError, struct.error) as exc:
                raise SkinError(f"mesh {node['mesh']}: vertex data cannot be read "
                                f"({type(exc).__name__}: {exc})") from None
    return out


def _skin_vertex(p, joints, weights, mats: list[Mat]) -> Vec:
    x = y = z = 0.0
    total = 0.0
    for j, w in zip(joints, weights, strict=True):
        if w <= 0.0:
            continue
        m = mats[int(j)]
        x += w * (m[0][0] * p[0] + m[0][1] * p[1] + m[0][2] * p[2] + m[0][3])
        y += w * (m[1][0] * p[0] + m[1][1] * p[1] + m[1][2] * p[2] + m[1][3])
        z += w * (m[2][0] * p[0] + m[2][1] * p[1] + m[2][2] * p[2] + m[2][3])
        total += w
    if total <= 1e-9:
        return mat_apply(mats[int(joints[0])], p)
    return (x / total, y / total, z / total)


def root_motion(doc: dict, buffers: list[bytes], conv: Callable[[Vec], Vec],
                joint_names: set[str]) -> dict[str, Vec]:
    """Per clip: the horizontal and vertical travel (contract frame, model units, before the
    model's scale) of the topmost animated joint between the clip's first and last key, in
    world space. A clip that walks in place travels ~0."""
    nodes = doc.get("nodes", [])
    world, parent = world_matrices(doc)
    out: dict[str, Vec] = {}
    for k, anim in enumerate(doc.get("animations", [])):
        name = str(anim.get("name") or f"anim{k}")
        best: tuple[int, list] | None = None
        for ch in anim.get("channels", []):
            tgt = ch.get("target", {})
            node = tgt.get("node")
            if tgt.get("path") != "translation" or not isinstance(node, int) or \
                    node >= len(nodes) or _joint_name(nodes, node) not in joint_names:
                continue
            depth, q = 0, parent.get(node)
            while q is not None and depth < 256:
                depth, q = depth + 1, parent.get(q)
            try:
                vals = read_accessor_values(doc, buffers, anim["samplers"][ch["sampler"]]
                                            ["output"])
            except (KeyError, IndexError, TypeError, struct.error):
                continue
            if len(vals) >= 2 and (best is None or depth < best[0]):
                best = (depth, [node, vals[0], vals[-1]])
        if best is None:
            continue
        node, a, b = best[1]
        pm = world[parent[node]] if node in parent else IDENTITY
        pa = conv(mat_apply(pm, a))
        pb = conv(mat_apply(pm, b))
        out[name] = (pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2])
    return out


def clip_pose(doc: dict, buffers: list[bytes], anim: int, u: float,
              target: dict | None = None) -> dict[int, dict]:
    """The local translation / rotation / scale of every node clip ``anim`` moves, at the share
    ``u`` (0..1) of its duration (linear keys, normalised linear blend of rotations: enough for
    a picture). With ``target`` (another file's document), nodes are matched by name into it:
    a clip-only file posing a character."""
    a = doc["animations"][anim]
    nodes = doc.get("nodes", [])
    by_name = {str(n.get("name")): i for i, n in enumerate((target or doc).get("nodes", []))}
    samples: list[tuple[int, str, list, list]] = []
    t_end = 0.0
    for ch in a.get("channels", []):
        tgt = ch.get("target", {})
        path, node = tgt.get("path"), tgt.get("node")
        if path not in ("translation", "rotation", "scale") or not isinstance(node, int):
            continue
        smp = a["samplers"][ch["sampler"]]
        times = [t[0] for t in read_accessor_values(doc, buffers, smp["input"])]
        vals = read_accessor_values(doc, buffers, smp["output"])
        if not times or len(vals) < len(times):
            continue
        if smp.get("interpolation") == "CUBICSPLINE":
            vals = vals[1::3]
        t_end = max(t_end, times[-1])
        samples.append((node, path, times, vals))
    out: dict[int, dict] = {}
    t = u * t_end
    for node, path, times, vals in samples:
        k = 0
        while k + 1 < len(times) and times[k + 1] <= t:
            k += 1
        if k + 1 < len(times) and times[k + 1] > times[k]:
            w = (t - times[k]) / (times[k + 1] - times[k])
            v = [x + (y - x) * w for x, y in zip(vals[k], vals[k + 1], strict=True)]
        else:
            v = list(vals[k])
        if path == "rotation":
            n = math.sqrt(sum(c * c for c in v)) or 1.0
            v = [c / n for c in v]
        idx = node
        if target is not None:
            name = str(nodes[node].get("name")) if node < len(nodes) else ""
            if name not in by_name:
                continue
            idx = by_name[name]
        out.setdefault(idx, {})[path] = v
    return out


def horizontal(v) -> float:
    return math.hypot(v[0], v[1])
