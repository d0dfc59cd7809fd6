"""A skinned humanoid of the sample library as a GLB: the mesh (``humanoid_mesh``) on the
17-joint skeleton (``humanoid_skeleton``), with locomotion clips (``humanoid_gait``).

Authoring frame: Z up, metres, facing +X, origin between the feet on the ground (converted to
glTF's Y up on writing).
"""

from __future__ import annotations

import math

import numpy as np

from .gltf_writer import GlbBuilder, MeshData, encode_png
from .humanoid_gait import GAITS, clip_period, gait_pose
from .humanoid_mesh import body_parts
from .humanoid_skeleton import JOINTS, Body
from .primitives import surface_maps

KEYS_PER_CYCLE = 40  # key frames per clip cycle

_C = np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])  # Z up → Y up


def _quat_y_up(r: np.ndarray) -> list[float]:
    """glTF (x, y, z, w) of a Z-up rotation matrix, expressed in Y up."""
    m = _C @ r @ _C.T
    w = math.sqrt(max(0.0, 1 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
    x = math.copysign(math.sqrt(max(0.0, 1 + m[0, 0] - m[1, 1] - m[2, 2])) / 2, m[2, 1] - m[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1 - m[0, 0] + m[1, 1] - m[2, 2])) / 2, m[0, 2] - m[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1 - m[0, 0] - m[1, 1] + m[2, 2])) / 2, m[1, 0] - m[0, 1])
    q = np.array([x, y, z, w])
    return [float(v) for v in q / np.linalg.norm(q)]


LOOKS = {"skin": "skin", "trousers": "denim", "hair": "hair", "shoes": "leather"}
# per character: albedo multipliers of (skin, hair), so the cast is not one person three times
TONES: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "Alex": ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0)),
    "Bea": ((1.22, 1.25, 1.25), (3.2, 2.9, 2.4)),
    "Cole": ((0.62, 0.6, 0.6), (0.6, 0.6, 0.6)),
}


def skinned_humanoid(name: str, height: float, build: float, shirt: str, seed: int, tex: int,
                     clips: list[str], walk_speed: float) -> bytes:
    """A skinned humanoid ~``height`` tall, origin at the feet, facing +X, with ``clips``
    (names from GAITS) authored for ``walk_speed``."""
    body = Body(height, build)
    g = GlbBuilder(generator=f"wmforge assetgen: {name}")
    looks = {"shirt": shirt, **LOOKS}
    mats = {}
    for i, (part, kind) in enumerate(looks.items()):
        albedo, mr, _nrm = surface_maps(kind, tex, seed + i)
        if part in ("skin", "hair") and name in TONES:
            tint = np.array(TONES[name][0 if part == "skin" else 1])
            albedo = np.clip(albedo * tint, 0, 255).astype(np.uint8)
        mats[part] = g.material(part, texture=g.texture(encode_png(albedo), f"{part}_albedo"),
                                roughness=1.0, metallic=0.0,
                                metallic_roughness=g.texture(encode_png(mr),
                                                             f"{part}_metal_rough"))
    root = g.node(name, extras={"role": "character_root"})
    nodes: dict[str, int] = {}
    for j in JOINTS:
        parent = body.parent(j)
        rel = body.bind[j] - (body.bind[parent] if parent else 0.0)
        nodes[j] = g.node(j, translation=tuple(float(v) for v in rel),
                          parent=nodes[parent] if parent else root)
    prims = []
    for part, pieces in body_parts(body).items():
        mesh = MeshData.merge([p[0] for p in pieces])
        joints = np.concatenate([p[1] for p in pieces])
        weights = np.concatenate([p[2] for p in pieces])
        prims.append(g.primitive(mesh, mats[part], joints=joints, weights=weights))
    body_node = g.node(f"{name}_body", mesh=g.mesh_of(f"{name}_body", prims), parent=root)
    ibm = np.stack([np.eye(4) for _ in JOINTS])
    for k, j in enumerate(JOINTS):
        ibm[k, :3, 3] = -(_C @ body.bind[j])
    g.doc["nodes"][body_node]["skin"] = g.skin([nodes[j] for j in JOINTS], ibm, nodes["hips"])
    for clip in clips:
        gait = GAITS[clip]
        period = clip_period(body, gait, walk_speed)
        times = np.linspace(0.0, period, KEYS_PER_CYCLE + 1)
        poses = [gait_pose(body, gait, walk_speed, float(t), period) for t in times]
        chans: list[tuple] = [(nodes["hips"], times,
                               np.array([_C @ p[0] for p in poses], np.float32), "translation")]
        for j in JOINTS:
            parent = body.parent(j)
            quats = []
            for _hips, rot in poses:
                local = rot[j] if parent is None else rot[parent].T @ rot[j]
                quats.append(_quat_y_up(local))
            q = np.array(quats)
            for k in range(1, len(q)):  # one hemisphere: slerp takes the short way anyway
                if q[k] @ q[k - 1] < 0:
                    q[k] = -q[k]
            if np.abs(q - q[0]).max() > 1e-7:
                chans.append((nodes[j], times, q.astype(np.float32)))
        v = walk_speed * gait.speed_factor
        g.animation(clip, chans, extras={"wmforge": {
            "root_velocity_mps": [round(gait.direction[0] * v, 6),
                                  round(gait.direction[1] * v, 6)],
            "period_s": round(period, 6), "stance_share": gait.duty}})
    return g.to_glb()
