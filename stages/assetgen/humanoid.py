"""Skinned humanoids for the sample library: one mesh (head, neck, torso, arms, hands, legs,
shoes) on a 17-joint skeleton, smooth two-joint weights across every joint, and locomotion clips
built by inverse kinematics so the stance foot stays planted at the clip's speed.

Authoring frame: Z up, metres, facing +X, origin between the feet on the ground (converted to
glTF's Y up on writing). The bind pose stands with straight legs and hanging arms; every joint's
bind rotation is the identity, so a joint's bind matrix is its translation.

Gait (per clip: direction d in the character frame, speed v, period T, stance share b): a foot
in stance moves through the character frame at -v d for b T seconds (so, with the character's
root moving at v d, it stands still in the world), then swings forward over (1 - b) T with a
lift. The stride per foot is v T and the step (left to right contact) v T / 2. The pelvis
height each key frame is the highest that both legs reach; thigh and shin angles come from
two-bone IK with the knee pointing forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .gltf_writer import GlbBuilder, MeshData, encode_png
from .primitives import ellipsoid, rounded_box, surface_maps

# joint: (parent, bind position at s = 1, build = 1); l/r = +y / -y
_SKELETON: dict[str, tuple[str | None, tuple[float, float, float]]] = {
    "hips": (None, (0.0, 0.0, 0.95)),
    "spine": ("hips", (0.0, 0.0, 1.08)),
    "chest": ("spine", (0.0, 0.0, 1.28)),
    "neck": ("chest", (0.0, 0.0, 1.50)),
    "head": ("neck", (0.0, 0.0, 1.58)),
    "upper_arm_l": ("chest", (0.0, 0.20, 1.45)),
    "forearm_l": ("upper_arm_l", (0.0, 0.215, 1.16)),
    "hand_l": ("forearm_l", (0.0, 0.225, 0.90)),
    "upper_arm_r": ("chest", (0.0, -0.20, 1.45)),
    "forearm_r": ("upper_arm_r", (0.0, -0.215, 1.16)),
    "hand_r": ("forearm_r", (0.0, -0.225, 0.90)),
    "thigh_l": ("hips", (0.0, 0.09, 0.90)),
    "shin_l": ("thigh_l", (0.0, 0.09, 0.48)),
    "foot_l": ("shin_l", (0.0, 0.09, 0.08)),
    "thigh_r": ("hips", (0.0, -0.09, 0.90)),
    "shin_r": ("thigh_r", (0.0, -0.09, 0.48)),
    "foot_r": ("shin_r", (0.0, -0.09, 0.08)),
}
JOINTS = list(_SKELETON)
SIDES = (("l", 1.0), ("r", -1.0))


@dataclass(frozen=True)
class Gait:
    """One locomotion clip. ``direction`` (x forward, y left) and ``speed`` (m/s) are the root
    motion the clip is authored for; ``stride`` the foot's travel per cycle in leg lengths
    (sets the period); ``duty`` the stance share of a cycle."""

    direction: tuple[float, float]
    speed_factor: float  # × the character's walk speed
    stride: float
    duty: float
    lift: float  # swing foot lift, leg lengths
    reach: float  # the most a leg stretches, share of its length
    arm_swing: float  # deg
    elbow: float  # deg, rest flex
    lean: float  # deg, forward
    twist: float  # deg, pelvis yaw amplitude
    cross: float = 0.0  # feet offset fore/aft (strafing steps pass each other), leg lengths
    period: float | None = None  # fixed period (idle)


GAITS: dict[str, Gait] = {
    "idle": Gait((0.0, 0.0), 0.0, 0.0, 1.0, 0.0, 0.985, 4.0, 12.0, 1.0, 2.0, period=3.0),
    "walk": Gait((1.0, 0.0), 1.0, 0.95, 0.58, 0.12, 0.99, 24.0, 14.0, 3.0, 6.0),
    "run": Gait((1.0, 0.0), 2.0, 1.05, 0.36, 0.24, 0.975, 45.0, 80.0, 10.0, 9.0),
    "walk_back": Gait((-1.0, 0.0), 1.0, 0.85, 0.6, 0.10, 0.99, 12.0, 14.0, -2.0, 4.0),
    "strafe_left": Gait((0.0, 1.0), 1.0, 0.85, 0.5, 0.14, 0.985, 5.0, 14.0, 2.0, 2.0, 0.08),
    "strafe_right": Gait((0.0, -1.0), 1.0, 0.85, 0.5, 0.14, 0.985, 5.0, 14.0, 2.0, 2.0, 0.08),
    "walk_left": Gait((0.7071068, 0.7071068), 1.0, 0.9, 0.58, 0.12, 0.99, 18.0, 14.0, 3.0, 5.0,
                      0.04),
    "walk_right": Gait((0.7071068, -0.7071068), 1.0, 0.9, 0.58, 0.12, 0.99, 18.0, 14.0, 3.0,
                       5.0, 0.04),
    "walk_back_left": Gait((-0.7071068, 0.7071068), 1.0, 0.85, 0.6, 0.10, 0.99, 10.0, 14.0,
                           -1.0, 3.0, 0.04),
    "walk_back_right": Gait((-0.7071068, -0.7071068), 1.0, 0.85, 0.6, 0.10, 0.99, 10.0, 14.0,
                            -1.0, 3.0, 0.04),
}
KEYS_PER_CYCLE = 40


def _rx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _ry(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


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


class Body:
    """Joint bind positions and limb lengths of one character (height, build)."""

    def __init__(self, height: float, build: float):
        self.s = s = height / 1.8
        self.build = build
        self.bind = {}
        for j, (_parent, (x, y, z)) in _SKELETON.items():
            wide = build if j.startswith(("upper_arm", "forearm", "hand", "thigh", "shin",
                                          "foot")) else 1.0
            self.bind[j] = np.array([x * s, y * s * wide, z * s])
        self.l1 = float(self.bind["thigh_l"][2] - self.bind["shin_l"][2])
        self.l2 = float(self.bind["shin_l"][2] - self.bind["foot_l"][2])
        self.ankle = float(self.bind["foot_l"][2])

    def parent(self, j: str) -> str | None:
        return _SKELETON[j][0]


def _two_bone(h: np.ndarray, a: np.ndarray, l1: float, l2: float) -> tuple[np.ndarray, np.ndarray]:
    """World rotations of thigh and shin (bind: pointing down -Z) putting the ankle at ``a``
    from the hip ``h``, the knee bending toward +X."""
    d = a - h
    dist = float(np.clip(np.linalg.norm(d), 0.2 * (l1 + l2), (l1 + l2) * 0.99999))
    e = d / max(np.linalg.norm(d), 1e-9)
    f = np.array([1.0, 0.0, 0.0]) - e[0] * e
    f /= np.linalg.norm(f)
    cos_a = (l1 * l1 + dist * dist - l2 * l2) / (2 * l1 * dist)
    sin_a = math.sqrt(max(0.0, 1 - cos_a * cos_a))
    knee = h + l1 * (cos_a * e + sin_a * f)
    ankle = h + dist * e

    def frame(down: np.ndarray) -> np.ndarray:
        z = -down / np.linalg.norm(down)
        x = f - (f @ z) * z
        x /= np.linalg.norm(x)
        return np.stack([x, np.cross(z, x), z], axis=1)

    return frame(knee - h), frame(ankle - knee)


def gait_pose(body: Body, g: Gait, walk_speed: float, t: float, period: float) -> tuple[
        np.ndarray, dict[str, np.ndarray]]:
    """(hips position, world rotation per joint) at time ``t`` of a cycle of ``period``."""
    s, leg = body.s, body.l1 + body.l2
    v = walk_speed * g.speed_factor
    d = np.array([g.direction[0], g.direction[1], 0.0])
    stride = v * period * g.duty
    ph = t / period
    feet, fwd = {}, {}
    for side, sy in SIDES:
        phi = (ph + (0.0 if side == "l" else 0.5)) % 1.0
        base = np.array([sy * g.cross * leg, body.bind[f"foot_{side}"][1], body.ankle])
        if phi < g.duty or stride == 0:
            off, lift = stride * (0.5 - phi / g.duty), 0.0
        else:
            u = (phi - g.duty) / (1 - g.duty)
            off = stride * (-0.5 + u * u * (3 - 2 * u))
            lift = g.lift * leg * math.sin(math.pi * u)
        feet[side] = base + off * d + np.array([0.0, 0.0, lift])
        fwd[side] = off / max(stride / 2, 1e-9) * (d[0] if stride else 0.0)
    # pelvis: sway toward the stance foot, yaw with the swinging leg, as high as legs reach
    cyc = 2 * math.pi * ph
    idle = g.speed_factor == 0.0
    sway = (0.012 if idle else 0.02) * s * math.cos(cyc if idle else cyc - math.pi * g.duty)
    yaw = math.radians(g.twist) * (math.sin(cyc) if idle else -math.cos(cyc))
    r_hips = _rz(yaw)
    hip_off = {side: body.bind[f"thigh_{side}"] - body.bind["hips"] for side, _ in SIDES}
    px, py = 0.0, sway
    z_max = body.bind["hips"][2] * (0.995 if idle else min(g.reach, 0.985))
    for side, _ in SIDES:
        hj = np.array([px, py, 0.0]) + r_hips @ hip_off[side]
        dh = math.hypot(feet[side][0] - hj[0], feet[side][1] - hj[1])
        reach = g.reach * leg
        z_max = min(z_max, feet[side][2] + math.sqrt(max(reach * reach - dh * dh, 0.0))
                    - hip_off[side][2])
    if idle:
        z_max -= 0.004 * s * (1 + math.cos(2 * cyc))  # breathing dip
    hips = np.array([px, py, z_max])
    rot: dict[str, np.ndarray] = {"hips": r_hips}
    for side, _ in SIDES:
        hj = hips + r_hips @ hip_off[side]
        rot[f"thigh_{side}"], rot[f"shin_{side}"] = _two_bone(hj, feet[side], body.l1, body.l2)
        rot[f"foot_{side}"] = np.eye(3)
    lean = math.radians(g.lean)
    breathe = math.radians(1.5) * math.sin(cyc) if idle else 0.0
    rot["spine"] = _rz(0.3 * -yaw) @ _ry(lean * 0.5 + breathe * 0.3)
    rot["chest"] = _rz(-0.6 * yaw) @ _ry(lean + breathe)
    rot["neck"] = _rz(-0.3 * yaw) @ _ry(lean * 0.4)
    rot["head"] = np.eye(3)
    for side, sy in SIDES:
        other = "r" if side == "l" else "l"
        swing = math.radians(g.arm_swing) * (fwd[other] if not idle else 0.3 * math.sin(cyc))
        up = rot["chest"] @ _ry(-swing) @ _rx(sy * math.radians(5.0))
        flex = math.radians(g.elbow) + max(swing, 0.0) * 0.6
        rot[f"upper_arm_{side}"] = up
        rot[f"forearm_{side}"] = up @ _ry(-flex)
        rot[f"hand_{side}"] = rot[f"forearm_{side}"]
    return hips, rot


def clip_period(body: Body, g: Gait, walk_speed: float) -> float:
    if g.period is not None:
        return g.period
    return g.stride * (body.l1 + body.l2) / (walk_speed * g.speed_factor * g.duty)


# ---------------------------------------------------------------- mesh


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


# ---------------------------------------------------------------- the glb

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
