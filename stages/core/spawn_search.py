"""Where a Stage I trajectory tries to spawn: its candidates in the order tried, the floor under
each (the tests themselves live in ``spawns``).

Standard library only.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from .engine_types import CharacterSpec, LevelInfo
from .spawns import Candidate, Ray, column_floors, pick_floor, start_ground
from .stage1_config import SpawnConfig


def spawn_candidates(level: LevelInfo, extra_starts: list[tuple[tuple[float, float, float], float]],
                     rng: random.Random, cfg: SpawnConfig) -> list[Candidate]:
    """Starts first (the level's own, then overrides.yaml's), then sampled columns: around
    points of interest (preferring the floor nearest the POI's height) and big static parts,
    then anywhere inside the level's bounds."""
    starts = [Candidate("start", *p, yaw) for p, yaw in level.player_starts]
    rng.shuffle(starts)
    starts += [Candidate("override", *p, yaw) for p, yaw in extra_starts]
    near = []
    for c, hint in [(c, c[2]) for c in level.pois] + [(c, None) for c in level.large_objects]:
        for _ in range(2):
            a = rng.uniform(0, 2 * math.pi)
            r = rng.uniform(2.0, 6.0)
            near.append(Candidate("sampled", c[0] + r * math.cos(a), c[1] + r * math.sin(a),
                                  None, rng.uniform(0, 360), hint))
    rng.shuffle(near)
    lo, hi = level.bounds_min, level.bounds_max
    rand = [Candidate("sampled", rng.uniform(lo[0], hi[0]), rng.uniform(lo[1], hi[1]), None,
                      rng.uniform(0, 360)) for _ in range(cfg.max_attempts)]
    if starts and rng.random() >= cfg.start_share:
        return near + rand + starts
    return starts + near + rand


def candidate_floor(ray: Ray, level: LevelInfo, ch: CharacterSpec, c: Candidate,
                    cfg: SpawnConfig, interior: bool, pick: Callable[[int], int]
                    ) -> tuple[float | None, bool]:
    """(height of the floor the candidate spawns on or None when it has none, whether the
    column's only walkable surfaces were roofs)."""
    lo, hi = level.bounds_min, level.bounds_max
    cos_max = math.cos(math.radians(ch.max_slope_deg))
    if c.z is not None:
        hit = start_ground(ray, c.x, c.y, c.z, depth=c.z - lo[2] + 5.0)
        if hit is None or hit.normal[2] < cos_max:
            return None, False
        return float(hit.position[2]), False
    reach = 10.0 + math.dist(lo, hi)
    floors = column_floors(ray, c.x, c.y, hi[2] + 5.0, lo[2] - 5.0, ch.total_height,
                           ch.step_height, ch.max_slope_deg,
                           cfg.min_floor_width_caps * 2 * ch.capsule_radius, reach,
                           base_z=lo[2], interior=interior)
    f = pick_floor(floors, c.hint_z, pick)
    roof_only = (f is None and bool(floors)
                 and all(x.roof for x in floors if not (x.narrow or x.inside))
                 and any(x.roof for x in floors))
    return (None if f is None else f.z), roof_only
