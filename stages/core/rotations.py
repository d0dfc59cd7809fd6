"""Rotations in the contract frame: unit quaternions (w, x, y, z), their matrices, camera
orientations that look along a direction (OpenCV axes). Standard library only."""

from __future__ import annotations

import math
from collections.abc import Sequence

Vec3 = tuple[float, float, float]


def unit(v: Sequence[float]) -> Vec3:
    """``v`` scaled to length 1; the zero vector stays zero."""
    n = math.sqrt(sum(c * c for c in v))
    return (v[0] / n, v[1] / n, v[2] / n) if n > 1e-12 else (0.0, 0.0, 0.0)


def cross(a: Sequence[float], b: Sequence[float]) -> Vec3:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def quat_matrix(w: float, x: float, y: float, z: float) -> list[list[float]]:
    """Rotation matrix of a unit quaternion (w, x, y, z), as rows."""
    return [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]


def look_rotation(forward: Sequence[float], hint_up: Sequence[float] = (0, 0, 1),
                  fallback_up: Sequence[float] = (1, 0, 0)) -> tuple[float, float, float, float]:
    """World-from-camera quaternion (w, x, y, z), OpenCV axes: z forward, x right, y down."""
    f = unit(forward)
    r = cross(f, hint_up)
    if math.sqrt(sum(c * c for c in r)) < 1e-6:
        r = cross(f, fallback_up)
    r = unit(r)
    d = cross(f, r)
    return quat_from_columns(r, d, f)


def quat_from_columns(c0: Sequence[float], c1: Sequence[float], c2: Sequence[float]
                      ) -> tuple[float, float, float, float]:
    """Unit quaternion (w, x, y, z), w >= 0, of the rotation matrix with columns c0, c1, c2."""
    r, d, f = c0, c1, c2
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
