"""Where a character may start (issue 19, point 2): the level's own start nodes, the user's
starts from ``overrides.yaml``, then sampled positions that land where a player would stand.

Start nodes are recognised by name or tag, as glTF, egg and Unreal levels mark them:

- names (case and separators ignored): ``start_point`` (Panda3D's Roaming Ralph world),
  ``PlayerStart`` and ``PlayerStart_N`` (Unreal, Godot/glTF exporters), ``player_spawn``,
  ``spawn_point``, ``info_player_start`` (Quake/Source maps converted to glTF);
- tags / glTF node extras: ``role: player_start`` (also ``start`` or ``spawn``), or a
  ``player_start`` tag of any value (egg: ``<Tag> player_start { 1 }``).

A sampled position is a vertical column through the level, cast down through *every* surface
(not only the first). A surface is a floor when it is walkable (within the slope limit), has head
room for the capsule, does not lie inside a closed solid (a solid building's ground face), and is
not a wall top narrower than a few capsule widths. The topmost surface of a column, with sky
above it, is a roof when the same column holds a floor below it (a ceiling over a room, the roof
of a two-storey house): never a spawn. Solid blocks have no floor inside, so their tops remain
candidates (and the narrow-top test rejects walls).

A level that is not marked interior but whose spawn candidates stood only on roofs is measured
for enclosure (``enclosed_share``): where a ceiling lies over most of its columns (a sealed game
map: Quake 3 arenas converted to glTF keep only the inward faces of their shell, sky brushes
included), the roofs were the outside of that shell and the floors inside it read as the inside
of a closed mesh, so the level is screened as an interior (Stage I records it).

Everything here talks to the engine only through ``raycast(a, b) -> hit | None`` (hit has
``position``, ``normal``), so the embedded engine and Unreal share it. Standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Vec3 = tuple[float, float, float]
Ray = Callable[[Vec3, Vec3], Any]

START_NAME_PREFIXES = ("startpoint", "playerstart", "playerspawn", "spawnpoint",
                       "infoplayerstart")
START_NAMES = frozenset({"start", "spawn"})
START_ROLES = frozenset({"player_start", "playerstart", "start", "spawn", "start_point"})


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def is_start_node(name: str, tags: dict[str, str] | None = None) -> bool:
    """A level node that marks a player start, by its name or its tags (see module doc)."""
    tags = tags or {}
    role = str(tags.get("role", "")).strip().lower()
    if role in START_ROLES or "player_start" in tags:
        return True
    n = _norm(name)
    return n in START_NAMES or n.startswith(START_NAME_PREFIXES)


@dataclass(frozen=True)
class Candidate:
    """One place to try: ``kind`` start | override | sampled; ``z`` is the marker height for
    starts (None for sampled columns); ``hint_z`` prefers the floor nearest that height."""

    kind: str
    x: float
    y: float
    z: float | None
    yaw: float
    hint_z: float | None = None


@dataclass(frozen=True)
class Floor:
    z: float
    clearance: float  # m of free space above (inf: sky)
    roof: bool = False
    narrow: bool = False
    inside: bool = False

    @property
    def ok(self) -> bool:
        return not (self.roof or self.narrow or self.inside)


def cast_through(ray: Ray, a: Vec3, b: Vec3, max_hits: int = 24, eps: float = 1e-3
                 ) -> list[Any]:
    """Every surface a segment crosses, nearest first (repeated closest-hit casts)."""
    d = [b[i] - a[i] for i in range(3)]
    length = math.sqrt(sum(c * c for c in d))
    if length < 1e-9:
        return []
    u = [c / length for c in d]
    hits: list[Any] = []
    start = a
    travelled = 0.0
    while len(hits) < max_hits:
        hit = ray(start, b)
        if hit is None:
            break
        hits.append(hit)
        t = sum((hit.position[i] - a[i]) * u[i] for i in range(3)) + eps
        if t <= travelled or t >= length:
            break
        travelled = t
        start = (a[0] + u[0] * t, a[1] + u[1] * t, a[2] + u[2] * t)
    return hits


def inside_solid(ray: Ray, p: Vec3, reach: float) -> bool:
    """A point inside a closed mesh: an odd number of crossings along at least three of four
    horizontal rays (a room between walls sees each wall twice)."""
    odd = 0
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        hits = cast_through(ray, p, (p[0] + dx * reach, p[1] + dy * reach, p[2]))
        odd += len(hits) % 2
    return odd >= 3


def _drops(ray: Ray, x: float, y: float, z: float, step: float) -> bool:
    """No ground within a step of height ``z`` at (x, y): an edge."""
    hit = ray((x, y, z + step), (x, y, z - 2 * step))
    return hit is None


def isolated(ray: Ray, x: float, y: float, z: float, step: float, max_slope_deg: float,
             height: float, reach: float, ds: float = 0.5) -> bool:
    """No walkable way down from (x, y, z): marching outward in eight directions over the
    surface, every one meets a drop or a rise steeper than a step (an edge, a wall) before it
    has come down a storey or left the level."""
    rise = max(step, ds * math.tan(math.radians(max_slope_deg)))
    d = math.sqrt(0.5)
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1), (d, d), (-d, -d), (d, -d), (-d, d)):
        zz = z
        for k in range(1, int(reach / ds) + 1):
            px, py = x + dx * ds * k, y + dy * ds * k
            hit = ray((px, py, zz + rise + 0.05), (px, py, zz - rise - 0.05))
            if hit is None:
                break  # an edge (or a wall we started inside of)
            zz = float(hit.position[2])
            if zz <= z - height:
                return False  # came down a storey gently: a way down exists
        else:
            return False  # walked out of the level without meeting an edge
    return True


def _roomy(ray: Ray, p: Vec3, min_width: float, reach: float) -> bool:
    """Free space around ``p`` at least ``min_width`` across in both horizontal axes (a room,
    not the inside of a pillar or a wall)."""
    free = []
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        hit = ray(p, (p[0] + dx * reach, p[1] + dy * reach, p[2]))
        free.append(reach if hit is None else math.dist(p, tuple(hit.position)))
    return free[0] + free[1] >= min_width and free[2] + free[3] >= min_width


def column_floors(ray: Ray, x: float, y: float, top: float, bottom: float, height: float,
                  step: float, max_slope_deg: float, min_width: float, reach: float,
                  base_z: float | None = None, interior: bool = False) -> list[Floor]:
    """The surfaces of the column at (x, y), top to bottom, each judged as a floor
    (``base_z``: the level's lowest point; a block top more than two character heights above
    it with no walkable way down is not a floor).

    ``interior`` (a level marked ``interior``: its category or lighting): no spawn where the
    sky is directly above (every such surface is a roof), and a surface under a ceiling with
    room around it is a floor even when rays call it the inside of a closed mesh — a hall whose
    walls, floor and roof are single planes looks, to rays, exactly like a solid block, and
    only the level's marking tells the two apart."""
    hits = cast_through(ray, (x, y, top), (x, y, bottom))
    cos_max = math.cos(math.radians(max_slope_deg))
    out: list[Floor] = []
    above = math.inf
    for i, h in enumerate(hits):
        z = float(h.position[2])
        clearance = math.inf if i == 0 else above - z
        above = z
        if abs(h.normal[2]) < cos_max - 1e-6 or clearance < height + 0.1:
            continue
        probe_at = (x, y, z + min(height / 2, 0.9))
        inside = inside_solid(ray, probe_at, reach)
        if inside and interior and i > 0 and _roomy(ray, probe_at, min_width, reach):
            inside = False  # a room of the interior, under its ceiling
        w = min_width / 2
        drops = [_drops(ray, x + dx * w, y + dy * w, z, step)
                 for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))]
        narrow = (drops[0] and drops[1]) or (drops[2] and drops[3]) or sum(drops) >= 3
        out.append(Floor(z, clearance, narrow=narrow, inside=inside))
    if (out and math.isinf(out[0].clearance) and out[0].ok and base_z is not None
            and out[0].z > base_z + 2 * height
            and isolated(ray, x, y, out[0].z, step, max_slope_deg, height, reach)):
        # a block top high above the level with a drop or a wall on every side (a solid
        # building's roof): no walking path leads there from the ground
        out[0] = Floor(out[0].z, out[0].clearance, roof=True)
    if interior:  # never where the sky is directly above
        out = [Floor(f.z, f.clearance, roof=True, narrow=f.narrow, inside=f.inside)
               if math.isinf(f.clearance) else f for f in out]
    if out and math.isinf(out[0].clearance) and hits and out[0].z == float(hits[0].position[2]):
        # the topmost surface, sky above: a roof when this column, or one beside it (the
        # column may stand on a wall under the roof), holds a floor below it
        z0 = out[0].z
        d = max(min_width, 1.5)
        if any(f.ok for f in out[1:]) or any(
                _floor_below(ray, x + dx * d, y + dy * d, z0, bottom, height, cos_max, reach)
                for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))):
            out[0] = Floor(z0, out[0].clearance, roof=True, narrow=out[0].narrow,
                           inside=out[0].inside)
    return out


ENCLOSED_SHARE = 0.6  # a ceiling over most (this share) of a level's columns: enclosed


def enclosed_share(ray: Ray, lo: Vec3, hi: Vec3, height: float, max_slope_deg: float,
                   n: int = 8) -> float:
    """The share of a level's columns (an ``n`` x ``n`` grid over its bounds; columns that
    meet nothing left out) whose topmost surface is a ceiling over a walkable surface with
    head room for the character: about 1 for a sealed interior (a Quake map, a hall of single
    planes), low for open ground. Same geometry, same share (no randomness)."""
    cos_max = math.cos(math.radians(max_slope_deg))
    seen = covered = 0
    for i in range(n):
        for j in range(n):
            x = lo[0] + (i + 0.5) * (hi[0] - lo[0]) / n
            y = lo[1] + (j + 0.5) * (hi[1] - lo[1]) / n
            hits = cast_through(ray, (x, y, hi[2] + 5.0), (x, y, lo[2] - 5.0))
            if not hits:
                continue
            seen += 1
            zs = [float(h.position[2]) for h in hits]
            covered += any(abs(h.normal[2]) >= cos_max - 1e-6
                           and zs[k - 1] - zs[k] >= height + 0.1
                           for k, h in enumerate(hits) if k > 0)
    return covered / seen if seen else 0.0


def _floor_below(ray: Ray, x: float, y: float, z: float, bottom: float, height: float,
                 cos_max: float, reach: float) -> bool:
    """A walkable surface with head room, outside any solid, below height ``z`` at (x, y)
    and under something (a storey under a roof)."""
    hits = cast_through(ray, (x, y, z + 0.05), (x, y, bottom))
    if not hits or float(hits[0].position[2]) < z - 0.5:
        return False  # nothing overhead there: open ground beside a building, not under it
    for above, h in zip(hits, hits[1:], strict=False):
        zz = float(h.position[2])
        if (abs(h.normal[2]) >= cos_max - 1e-6 and float(above.position[2]) - zz >= height + 0.1
                and not inside_solid(ray, (x, y, zz + min(height / 2, 0.9)), reach)):
            return True
    return False


def pick_floor(floors: Sequence[Floor], hint_z: float | None, pick: Callable[[int], int]
               ) -> Floor | None:
    """A floor of the column: the one nearest ``hint_z`` when given, else ``pick(n)``'s."""
    ok = [f for f in floors if f.ok]
    if not ok:
        return None
    if hint_z is not None:
        return min(ok, key=lambda f: (abs(f.z - hint_z), -f.z))
    return ok[pick(len(ok))]


def start_ground(ray: Ray, x: float, y: float, z: float, lift: float = 2.0,
                 depth: float = 50.0) -> Any:
    """The surface a start marker at height ``z`` stands on: cast down from a little above it,
    never from above a ceiling over it."""
    up = ray((x, y, z), (x, y, z + lift))
    top = z + lift if up is None else float(up.position[2]) - 0.02
    return ray((x, y, max(top, z)), (x, y, z - depth))


def parse_starts(value: Any, where: str) -> list[tuple[Vec3, float]]:
    """Starts from ``overrides.yaml``: a list of ``[x, y, z]``, ``[x, y, z, yaw_deg]`` or
    ``{position: [x, y, z], yaw_deg: …}`` in the contract frame (Z up, metres, degrees).
    Raises ValueError naming ``where`` and the bad entry."""
    if not isinstance(value, list):
        raise ValueError(f"{where}: 'starts' must be a list of [x, y, z] (or [x, y, z, yaw_deg],"
                         f" or {{position: [x, y, z], yaw_deg: …}}), got {value!r}")
    out = []
    for i, s in enumerate(value):
        pos: Any = s
        yaw: Any = 0.0
        if isinstance(s, dict):
            extra = set(s) - {"position", "yaw_deg"}
            if extra or "position" not in s:
                raise ValueError(f"{where}: starts[{i}]: expected keys position, yaw_deg; got "
                                 f"{sorted(s)}")
            pos, yaw = s["position"], s.get("yaw_deg", 0.0)
        elif isinstance(s, list) and len(s) == 4:
            pos, yaw = s[:3], s[3]
        nums = pos if isinstance(pos, list) else None
        if (nums is None or len(nums) != 3
                or not all(isinstance(c, int | float) and not isinstance(c, bool)
                           and math.isfinite(c) for c in [*nums, yaw])
                or isinstance(yaw, bool)):
            raise ValueError(f"{where}: starts[{i}]: expected [x, y, z] or [x, y, z, yaw_deg] "
                             f"of finite numbers (metres, degrees), got {s!r}")
        out.append(((float(nums[0]), float(nums[1]), float(nums[2])), float(yaw)))
    return out
