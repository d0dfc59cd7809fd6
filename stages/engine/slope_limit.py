"""The walkable-slope limit for a sweep-based character controller (issue 19, point 3): a rise
that a walkable slope cannot explain must be a step, and the ground around it must not be a
face steeper than the limit. A rough or terraced face steeper than the limit is made of small
walkable ledges, each a legal step on its own: it must not be climbed ledge by ledge, neither
head-on nor along a diagonal (a diagonal path up a steep face is shallow; the face is not).

Engine-agnostic: it talks to the world through ``raycast(a, b) -> hit | None`` only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

Vec3 = tuple[float, float, float]


def climbs_steep(raycast: Callable[[Vec3, Vec3], Any], start: Vec3, end: Vec3, radius: float,
                 step: float, max_slope_deg: float, centre_offset: float) -> bool:
    """True when moving the capsule centre from ``start`` to ``end`` climbs ground steeper than
    ``max_slope_deg``. The ground is sampled over a baseline long enough that one riser of the
    step height reads as walkable: behind ``end`` (came up faster than the limit allows), ahead
    of it and around it along the fall line (ground rising steeply next to it; rises taller
    than a step over the baseline are walls, which the sweep handles)."""
    rise = end[2] - start[2]
    dx, dy = end[0] - start[0], end[1] - start[1]
    run = math.hypot(dx, dy)
    if run < 1e-6 or rise <= 1e-3:
        return False
    tan_max = math.tan(math.radians(max_slope_deg))
    ux, uy = dx / run, dy / run
    base = max(2 * radius, step / max(tan_max, 0.05))
    allowed = base * tan_max + 1e-3
    lift = allowed + step
    above = raycast(end, (end[0], end[1], end[2] + lift))
    top = end[2] + lift if above is None else above.position[2] - 0.02  # under a ceiling
    depth = top - (end[2] - centre_offset - lift)

    def ground(x: float, y: float) -> float | None:
        hit = raycast((x, y, top), (x, y, top - depth))
        return None if hit is None else hit.position[2]

    here = ground(end[0], end[1])
    if here is None:
        return False
    behind = ground(end[0] - ux * base, end[1] - uy * base)
    if behind is not None and here - behind > allowed:
        return True
    d = math.sqrt(0.5)
    for cx, cy in ((ux, uy), (1, 0), (-1, 0), (0, 1), (0, -1), (d, d), (-d, -d), (d, -d),
                   (-d, d)):
        z = ground(end[0] + cx * base, end[1] + cy * base)
        if z is not None and allowed < z - here <= lift:
            return True
    return False
