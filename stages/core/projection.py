"""Pinhole projection in OpenCV camera axes (x right, y down, z forward): K from a horizontal
field of view, the image share a box covers. Standard library only."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .rotations import Vec3, quat_matrix


def intrinsics(width: int, height: int, fov_deg: float) -> tuple[float, float, float, float]:
    """K from horizontal fov: fx = fy = (W/2)/tan(fov/2), principal point at the centre."""
    fx = (width / 2) / math.tan(math.radians(fov_deg) / 2)
    return fx, fx, width / 2, height / 2


def intrinsics_record(width: int, height: int, fov_deg: float) -> dict:
    """A render's per-view intrinsics as meta.json records them (:func:`intrinsics`)."""
    fx, fy, cx, cy = intrinsics(width, height, fov_deg)
    return {"width": width, "height": height, "fov_deg": fov_deg, "fx": fx, "fy": fy,
            "cx": cx, "cy": cy}


def projected_share(cam: Vec3, rot: Sequence[float], k: Sequence[float], width: int,
                    height: int, feet: Vec3, body_h: float, body_w: float) -> float:
    """Share of the image covered by the character's box (``body_w`` square, ``body_h`` tall,
    feet at ``feet``), projected through the camera (OpenCV axes, world-from-camera ``rot``)
    and clipped to the image; 1.0 when the camera is inside the box or a corner is behind it."""
    m = quat_matrix(*rot)
    us, vs = [], []
    for dx in (-0.5, 0.5):
        for dy in (-0.5, 0.5):
            for dz in (0.0, 1.0):
                p = (feet[0] + dx * body_w - cam[0], feet[1] + dy * body_w - cam[1],
                     feet[2] + dz * body_h - cam[2])
                xc = m[0][0] * p[0] + m[1][0] * p[1] + m[2][0] * p[2]
                yc = m[0][1] * p[0] + m[1][1] * p[1] + m[2][1] * p[2]
                zc = m[0][2] * p[0] + m[1][2] * p[1] + m[2][2] * p[2]
                if zc <= 1e-3:
                    return 1.0
                us.append(k[0] * xc / zc + k[2])
                vs.append(k[1] * yc / zc + k[3])
    u0, u1 = max(min(us), 0.0), min(max(us), float(width))
    v0, v1 = max(min(vs), 0.0), min(max(vs), float(height))
    if u1 <= u0 or v1 <= v0:
        return 0.0
    return (u1 - u0) * (v1 - v0) / (width * height)
