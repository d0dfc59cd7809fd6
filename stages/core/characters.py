"""Character calibration (paper §4.1): collision capsule from the model's bounding box, and the
visual height kept apart from it for camera framing (the flat-bat case). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

LOCOMOTION_MODES = ("walk", "fly", "swim")


@dataclass(frozen=True)
class Capsule:
    radius: float  # metres
    half_height: float  # half the length of the cylindrical part, metres (Bullet's convention)
    clamped: bool  # True when a minimum raised it above the scaled bounding box

    @property
    def total_height(self) -> float:
        return 2 * (self.half_height + self.radius)


def capsule_from_bounds(extent_xyz: tuple[float, float, float], scale: float, safety: float,
                        min_radius: float, min_height: float) -> Capsule:
    """Capsule from the scaled bounding box × ``safety``, clamped to the minimum sizes.

    The radius follows the body's narrower horizontal extent (its width), as engine capsules
    fit the torso and let arms, wings and tails overhang; the height follows the full box.
    """
    ex, ey, ez = (abs(v) * scale for v in extent_xyz)
    raw_radius = 0.5 * min(ex, ey) * safety
    raw_height = ez * safety
    radius = max(raw_radius, min_radius)
    height = max(raw_height, min_height, 2 * radius)
    clamped = radius > raw_radius + 1e-9 or height > raw_height + 1e-9
    return Capsule(radius=radius, half_height=max(height / 2 - radius, 0.0), clamped=clamped)


def step_height_for(capsule: Capsule, fraction: float = 0.3, max_step: float = 0.45) -> float:
    """Step height scaled with the character (a 1.8 m humanoid steps ~0.45 m at most)."""
    return min(capsule.total_height * fraction, max_step)
