"""Humanoid locomotion clips: a pose per clip time by inverse kinematics, the stance foot planted
at the clip's speed.

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

from .humanoid_skeleton import SIDES, Body


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


def _rx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _ry(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


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
