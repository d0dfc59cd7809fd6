"""The humanoid's skinned mesh in the bind pose: head, neck, torso, arms, hands, legs, shoes, with
smooth two-joint weights across every joint.
"""

from __future__ import annotations

import math

import numpy as np

from .gltf_writer import MeshData
from .humanoid_skeleton import JOINTS, SIDES, Body
from .primitives import ellipsoid, rounded_box


def _loft(centres: np.ndarray, radii: np.ndarray, segments: int = 14,
          spacing: float = 0.025) -> MeshData:
    """A closed tube through ``centres`` (K, 3) with elliptic sections ``radii`` (K, 2)
    (half depth along x, half width along y) in horizontal planes, resampled to a ring at
    least every ``spacing`` metres (so joints bend smoothly); ends capped by fans."""
    dense_c, dense_r = [centres[:1]], [radii[:1]]
    for q in range(len(centres) - 1):
        steps = max(1, math.ceil(float(np.linalg.norm(centres[q + 1] - centres[q])) / spacing))
        u = (np.arange(1, steps + 1) / steps)[:, None]
        dense_c.append(centres[q] + u * (centres[q + 1] - centres[q]))
        dense_r.append(radii[q] + u * (radii[q + 1] - radii[q]))
    centres, radii = np.concatenate(dense_c), np.concatenate(dense_r)
    k = len(centres)
    a = np.linspace(0, 2 * math.pi, segments + 1)
    ring = np.stack([np.cos(a), np.sin(a), np.zeros_like(a)], -1)
    pos = centres[:, None, :] + ring[None] * np.concatenate([radii, np.ones((k, 1))], 1)[:, None]
    dz = np.gradient(pos, axis=0)
    da = np.gradient(pos, axis=1)
    da[:, 0] = da[:, -1] = (pos[:, 1] - pos[:, -2]) / 2
    n = np.cross(dz, da)
    n /= np.maximum(np.linalg.norm(n, axis=-1, keepdims=True), 1e-12)
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(centres, axis=0), axis=1))])
    uv = np.stack([np.repeat(a[None] / (2 * math.pi), k, 0), np.repeat(arc[:, None], len(a),
                                                                      1) * 2], -1)
    cols = segments + 1
    i, j = np.meshgrid(np.arange(k - 1), np.arange(segments), indexing="ij")
    v0 = (i * cols + j).ravel()
    # rings run top to bottom: (i, j) → (i + 1, j) goes down, j goes counter-clockwise
    idx = np.stack([v0, v0 + cols, v0 + cols + 1, v0, v0 + cols + 1, v0 + 1], -1).ravel()
    parts = [MeshData(pos.reshape(-1, 3).astype(np.float32), n.reshape(-1, 3).astype(np.float32),
                      uv.reshape(-1, 2).astype(np.float32), idx.astype(np.uint32))]
    for r, up in ((0, 1.0), (k - 1, -1.0)):
        c = centres[r]
        cp = np.concatenate([c[None], pos[r, :-1]])
        fan = np.stack([np.zeros(segments, int), 1 + np.arange(segments),
                        1 + (np.arange(segments) + 1) % segments], -1)
        if up < 0:
            fan = fan[:, ::-1]
        parts.append(MeshData(cp.astype(np.float32), np.tile(np.array([0, 0, up], np.float32),
                                                             (len(cp), 1)),
                              np.zeros((len(cp), 2), np.float32), fan.ravel().astype(np.uint32)))
    return MeshData.merge(parts)


def _weights_along_z(z: np.ndarray, chain: list[tuple[float, str, str]], blend: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Two-joint weights by height: ``chain`` [(z boundary, joint above, joint below)] from
    top to bottom; within ``blend`` of a boundary the weight moves smoothly (smoothstep) from
    the joint above to the one below."""
    n = len(z)
    j = np.zeros((n, 4), np.uint16)
    w = np.zeros((n, 4), np.float32)
    above = np.full(n, JOINTS.index(chain[0][1]))
    j[:, 0] = above
    w[:, 0] = 1.0
    for zb, ja, jb in chain:
        below = z < zb - blend
        j[below, 0], w[below, 0] = JOINTS.index(jb), 1.0
        near = np.abs(z - zb) <= blend
        u = (zb + blend - z[near]) / (2 * blend)
        u = u * u * (3 - 2 * u)
        j[near, 0], j[near, 1] = JOINTS.index(ja), JOINTS.index(jb)
        w[near, 0], w[near, 1] = 1 - u, u
    return j, w


def _const(n: int, joint: str) -> tuple[np.ndarray, np.ndarray]:
    j = np.zeros((n, 4), np.uint16)
    j[:, 0] = JOINTS.index(joint)
    w = np.zeros((n, 4), np.float32)
    w[:, 0] = 1.0
    return j, w


def body_parts(b: Body) -> dict[str, list[tuple[MeshData, np.ndarray, np.ndarray]]]:
    """Skinned pieces per material (shirt, trousers, skin, hair, shoes): (mesh, joints,
    weights), in the bind pose."""
    s, wb = b.s, b.build
    out: dict[str, list[tuple[MeshData, np.ndarray, np.ndarray]]] = {
        k: [] for k in ("shirt", "trousers", "skin", "hair", "shoes")}

    def tube(kind: str, prof: list[tuple[float, float, float, float, float]], chain, blend,
             seg: int = 14) -> None:
        p = np.array(prof, float)
        m = _loft(p[:, :3] * [s, s, s], p[:, 3:] * [s, s * wb], seg)
        scaled = [(zb * s, ja, jb) for zb, ja, jb in chain]
        out[kind].append((m, *_weights_along_z(m.positions[:, 2].astype(float), scaled,
                                               blend * s)))

    # torso (x, y, z, half depth, half width), top to bottom
    tube("shirt", [(0, 0, 1.53, 0.04, 0.06), (0, 0, 1.50, 0.085, 0.15), (0, 0, 1.45, 0.105, 0.19),
                   (0.005, 0, 1.36, 0.115, 0.175), (0.01, 0, 1.26, 0.11, 0.16),
                   (0, 0, 1.14, 0.095, 0.14), (0, 0, 1.02, 0.10, 0.15), (0, 0, 0.96, 0.105, 0.155)],
         [(1.48, "neck", "chest"), (1.20, "chest", "spine"), (1.04, "spine", "hips")], 0.06, 18)
    tube("trousers", [(0, 0, 1.00, 0.105, 0.158), (0, 0, 0.92, 0.11, 0.165),
                      (0, 0, 0.84, 0.09, 0.12)], [(1.04, "spine", "hips")], 0.06, 18)
    tube("skin", [(0.005, 0, 1.62, 0.045, 0.045), (0.0, 0, 1.55, 0.05, 0.05),
                  (0, 0, 1.46, 0.055, 0.06)], [(1.58, "head", "neck"), (1.50, "neck", "chest")],
         0.03, 10)
    for side, sy in SIDES:
        y = sy * 0.09 * wb
        thigh, shin, foot = f"thigh_{side}", f"shin_{side}", f"foot_{side}"
        leg = [(0, y / wb, 0.97, 0.085, 0.085), (0, y / wb, 0.86, 0.088, 0.085),
               (0.005, y / wb, 0.70, 0.075, 0.07), (0.01, y / wb, 0.52, 0.058, 0.055),
               (0.0, y / wb, 0.45, 0.056, 0.052), (-0.01, y / wb, 0.34, 0.062, 0.052),
               (0, y / wb, 0.18, 0.045, 0.042), (0, y / wb, 0.10, 0.045, 0.042)]
        p = np.array(leg, float)
        m = _loft(p[:, :3] * [s, s * wb, s], p[:, 3:] * [s, s * wb], 14)
        z = m.positions[:, 2].astype(float)
        jw = _weights_along_z(z, [(0.90 * s, "hips", thigh), (0.48 * s, thigh, shin),
                                  (0.09 * s, shin, foot)], 0.06 * s)
        out["trousers"].append((m, *jw))
        shoe = rounded_box(0.25 * s, 0.10 * s * wb, 0.095 * s, 0.03 * s, 0.3,
                           (0.055 * s, y * s, 0.0))
        out["shoes"].append((shoe, *_weights_along_z(shoe.positions[:, 2].astype(float),
                                                     [(0.09 * s, shin, foot)], 0.01 * s)))
        ya, yb, yc = (b.bind[f"{j}_{side}"][1] for j in ("upper_arm", "forearm", "hand"))
        sleeve = [(0, ya / s, 1.50, 0.05, 0.055), (0, ya / s, 1.44, 0.055, 0.055),
                  (0, (ya + yb) / 2 / s, 1.30, 0.048, 0.046), (0, yb / s, 1.17, 0.044, 0.042)]
        p = np.array(sleeve, float)
        m = _loft(p[:, :3] * s, p[:, 3:] * s, 12)
        out["shirt"].append((m, *_weights_along_z(
            m.positions[:, 2].astype(float), [(1.43 * s, "chest", f"upper_arm_{side}"),
                                              (1.16 * s, f"upper_arm_{side}",
                                               f"forearm_{side}")], 0.05 * s)))
        fore = [(0, yb / s, 1.20, 0.040, 0.038), (0, yb / s, 1.10, 0.038, 0.036),
                (0, (yb + yc) / 2 / s, 0.98, 0.030, 0.028), (0, yc / s, 0.91, 0.026, 0.024)]
        p = np.array(fore, float)
        m = _loft(p[:, :3] * s, p[:, 3:] * s, 10)
        out["skin"].append((m, *_weights_along_z(
            m.positions[:, 2].astype(float), [(1.16 * s, f"upper_arm_{side}",
                                               f"forearm_{side}"),
                                              (0.905 * s, f"forearm_{side}", f"hand_{side}")],
            0.04 * s)))
        hand = ellipsoid(0.045 * s, 0.022 * s, 0.075 * s, 6, 10, 0.3, (0.005 * s, yc, 0.85 * s))
        out["skin"].append((hand, *_const(len(hand.positions), f"hand_{side}")))
        eye = ellipsoid(0.012 * s, 0.014 * s, 0.012 * s, 4, 8, 0.3,
                        (0.097 * s, sy * 0.036 * s, 1.695 * s))
        out["hair"].append((eye, *_const(len(eye.positions), "head")))
    head = ellipsoid(0.10 * s, 0.084 * s, 0.118 * s, 12, 20, 0.3, (0.012 * s, 0, 1.682 * s))
    nose = ellipsoid(0.03 * s, 0.016 * s, 0.025 * s, 4, 8, 0.3, (0.104 * s, 0, 1.66 * s))
    for m in (head, nose):
        out["skin"].append((m, *_const(len(m.positions), "head")))
    hair = ellipsoid(0.104 * s, 0.09 * s, 0.108 * s, 10, 18, 0.3, (-0.006 * s, 0, 1.71 * s),
                     flat_bottom=0.25)
    out["hair"].append((hair, *_const(len(hair.positions), "head")))
    return out
