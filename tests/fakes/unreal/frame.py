"""Frame conversion of the fake editor, written here independently of ``unreal/ue_frame.py``
so that the tests check it rather than reuse it: Unreal cm and left-handed axes ↔ the
contract's metres and right-handed axes, and an Unreal camera rotator's basis."""

from __future__ import annotations

import math

from tests.fakes.unreal.structs import Rotator, Vector


def _m(v: Vector) -> tuple[float, float, float]:
    """Unreal cm, left-handed → metres, right-handed."""
    return (v.x / 100.0, -v.y / 100.0, v.z / 100.0)


def _ue(p: tuple[float, float, float], k: float = 100.0) -> Vector:
    return Vector(p[0] * k, -p[1] * k, p[2] * k)


def camera_basis(r: Rotator) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Contract-frame (forward, right, up) of an Unreal camera rotator: forward from yaw and
    pitch; right and up turned about it by roll."""
    p, y, ro = math.radians(r.pitch), math.radians(r.yaw), math.radians(r.roll)
    f_ue = (math.cos(p) * math.cos(y), math.cos(p) * math.sin(y), math.sin(p))
    right0 = (-math.sin(y), math.cos(y), 0.0)  # Unreal's right for roll 0
    up0 = (-math.sin(p) * math.cos(y), -math.sin(p) * math.sin(y), math.cos(p))
    right = tuple(math.cos(ro) * a - math.sin(ro) * b for a, b in zip(right0, up0,
                                                                       strict=True))
    up = tuple(math.sin(ro) * a + math.cos(ro) * b for a, b in zip(right0, up0, strict=True))

    def flip(v: tuple[float, ...]) -> tuple[float, ...]:
        return (v[0], -v[1], v[2])

    return flip(f_ue), flip(right), flip(up)
