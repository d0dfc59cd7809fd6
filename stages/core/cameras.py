"""Five synchronized camera tracks computed after the motion is fixed (paper §6.3).

External views (back, left, right, top) sit at character-relative offsets scaled by the framing
height — the *visual* height, not the collision capsule (flat characters, §4.1). Per frame a ray
runs from the look-at target toward the desired position; on a hit the camera moves in front of
the obstacle. The distance contracts fast (no frame inside geometry) and expands slowly (no
popping when a thin occluder passes). Occlusion never feeds back into the motion: this runs on a
finished trajectory. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .trajectory import VIEWS

Vec3 = tuple[float, float, float]


@dataclass
class CameraRigConfig:
    # output resolution of every view, px (intrinsics K derive from it and fov)
    width: int = 1280
    height: int = 720
    # horizontal field of view of the external views, deg
    fov_deg: float = 90.0
    # horizontal field of view of the first-person view, deg
    fp_fov_deg: float = 100.0
    # back view: distance behind and height above the feet, in framing heights, plus metres
    back_dist_h: float = 1.6
    back_dist_m: float = 1.2
    back_height_h: float = 0.9
    back_height_m: float = 0.4
    # side views: lateral distance, in framing heights plus metres
    side_dist_h: float = 1.4
    side_dist_m: float = 1.2
    side_height_h: float = 0.6
    # top view: height above the feet and distance behind
    top_height_h: float = 3.0
    top_height_m: float = 3.0
    top_back_m: float = 1.0
    # look-at target height, framing heights above the feet
    target_h: float = 0.6
    # first person: eye height, framing heights; pitch down, deg
    fp_eye_h: float = 0.92
    fp_pitch_deg: float = 8.0
    # distance kept in front of an occluder, m; closest allowed boom, m
    occlusion_margin_m: float = 0.2
    min_boom_m: float = 0.4
    # per-frame smoothing toward a shorter boom (1 = instant) and toward a longer one
    contract_alpha: float = 1.0
    expand_alpha: float = 0.06
    # smallest framing height used for offsets, m (a 6 cm bat is still framed)
    min_framing_m: float = 0.3


def intrinsics(width: int, height: int, fov_deg: float) -> tuple[float, float, float, float]:
    """K from horizontal fov: fx = fy = (W/2)/tan(fov/2), principal point at the centre."""
    fx = (width / 2) / math.tan(math.radians(fov_deg) / 2)
    return fx, fx, width / 2, height / 2


def _norm(v: Sequence[float]) -> Vec3:
    n = math.sqrt(sum(c * c for c in v))
    return (v[0] / n, v[1] / n, v[2] / n) if n > 1e-12 else (0.0, 0.0, 0.0)


def _cross(a: Sequence[float], b: Sequence[float]) -> Vec3:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def look_rotation(forward: Sequence[float], hint_up: Sequence[float] = (0, 0, 1),
                  fallback_up: Sequence[float] = (1, 0, 0)) -> tuple[float, float, float, float]:
    """World-from-camera quaternion (w, x, y, z), OpenCV axes: z forward, x right, y down."""
    f = _norm(forward)
    r = _cross(f, hint_up)
    if math.sqrt(sum(c * c for c in r)) < 1e-6:
        r = _cross(f, fallback_up)
    r = _norm(r)
    d = _cross(f, r)
    # rotation matrix with columns r, d, f
    m00, m01, m02 = r[0], d[0], f[0]
    m10, m11, m12 = r[1], d[1], f[1]
    m20, m21, m22 = r[2], d[2], f[2]
    tr = m00 + m11 + m22
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        q = (0.25 * s, (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s)
    elif m00 > m11 and m00 > m22:
        s = math.sqrt(1.0 + m00 - m11 - m22) * 2
        q = ((m21 - m12) / s, 0.25 * s, (m01 + m10) / s, (m02 + m20) / s)
    elif m11 > m22:
        s = math.sqrt(1.0 + m11 - m00 - m22) * 2
        q = ((m02 - m20) / s, (m01 + m10) / s, 0.25 * s, (m12 + m21) / s)
    else:
        s = math.sqrt(1.0 + m22 - m00 - m11) * 2
        q = ((m10 - m01) / s, (m02 + m20) / s, (m12 + m21) / s, 0.25 * s)
    if q[0] < 0:
        q = (-q[0], -q[1], -q[2], -q[3])
    n = math.sqrt(sum(c * c for c in q))
    return (q[0] / n, q[1] / n, q[2] / n, q[3] / n)


RayFn = Callable[[Vec3, Vec3], float | None]  # fraction of the segment at the first hit


def compute_tracks(positions: Sequence[Vec3], yaws_deg: Sequence[float], visual_height: float,
                   rig: CameraRigConfig, raycast: RayFn | None) -> list[dict]:
    """Rows of cameras.parquet (frame-major, views in VIEWS order)."""
    hgt = max(visual_height, rig.min_framing_m)
    offsets = {  # (forward, left, up) in the character frame
        "back": (-(rig.back_dist_h * hgt + rig.back_dist_m), 0.0,
                 rig.back_height_h * hgt + rig.back_height_m),
        "left": (0.0, rig.side_dist_h * hgt + rig.side_dist_m, rig.side_height_h * hgt),
        "right": (0.0, -(rig.side_dist_h * hgt + rig.side_dist_m), rig.side_height_h * hgt),
        "top": (-rig.top_back_m, 0.0, rig.top_height_h * hgt + rig.top_height_m),
    }
    booms: dict[str, float] = {}
    rows: list[dict] = []
    ext_k = intrinsics(rig.width, rig.height, rig.fov_deg)
    fp_k = intrinsics(rig.width, rig.height, rig.fp_fov_deg)
    for i, (p, yaw) in enumerate(zip(positions, yaws_deg, strict=True)):
        c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
        fwd = (c, s, 0.0)
        target = (p[0], p[1], p[2] + rig.target_h * hgt)
        for view in VIEWS:
            if view == "fp":
                eye = (p[0] + 0.1 * hgt * c, p[1] + 0.1 * hgt * s, p[2] + rig.fp_eye_h * hgt)
                pitch = math.radians(rig.fp_pitch_deg)
                look = (c * math.cos(pitch), s * math.cos(pitch), -math.sin(pitch))
                rows.append(_row(i, view, eye, look_rotation(look), rig, fp_k, rig.fp_fov_deg,
                                 0.0, 0.0, False))
                continue
            ox, oy, oz = offsets[view]
            desired = (p[0] + ox * c - oy * s, p[1] + ox * s + oy * c, p[2] + oz)
            vec = (desired[0] - target[0], desired[1] - target[1], desired[2] - target[2])
            full = math.sqrt(sum(v * v for v in vec))
            allowed = full
            occluded = False
            if raycast is not None:
                f = raycast(target, desired)
                if f is not None:
                    occluded = True
                    allowed = max(min(f * full - rig.occlusion_margin_m, full), rig.min_boom_m)
            prev = booms.get(view, allowed)
            alpha = rig.contract_alpha if allowed < prev else rig.expand_alpha
            boom = prev + (allowed - prev) * alpha
            boom = min(boom, allowed) if allowed < prev else boom
            booms[view] = boom
            u = _norm(vec)
            pos = (target[0] + u[0] * boom, target[1] + u[1] * boom, target[2] + u[2] * boom)
            look = (target[0] - pos[0], target[1] - pos[1], target[2] - pos[2])
            rot = look_rotation(look, fallback_up=fwd)
            rows.append(_row(i, view, pos, rot, rig, ext_k, rig.fov_deg, boom, full, occluded))
    return rows


def _row(frame: int, view: str, pos: Vec3, rot, rig: CameraRigConfig, k, fov: float,
         boom: float, desired: float, occluded: bool) -> dict:
    return {"frame": frame, "view": view, "pos_x": pos[0], "pos_y": pos[1], "pos_z": pos[2],
            "rot_w": rot[0], "rot_x": rot[1], "rot_y": rot[2], "rot_z": rot[3], "fov_deg": fov,
            "width": rig.width, "height": rig.height, "fx": k[0], "fy": k[1], "cx": k[2],
            "cy": k[3], "boom_m": boom, "boom_desired_m": desired, "occluded": occluded}
