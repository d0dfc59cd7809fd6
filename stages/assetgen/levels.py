"""Procedural level recipes for the sample library: six production-worthy levels of different
categories, plus the partial, showcase and oversized layouts real packs also contain (§4.1).

Every level carries: textured ground/terrain, walkable and too-steep slopes, stairs, walls or
corridors, static and dynamic props (extras ``dynamic``/``mass``), a lighting preset (scene extras
and KHR_lights_punctual), player starts and points of interest (extras ``role``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .level_builder import LevelBuilder, prop_mesh, table_mesh
from .primitives import box, ellipsoid, heightfield, lathe, ramp, stairs

# LevelBuilder is imported from here too (tests build their own levels with it)


def _dims(rng: np.random.Generator, lo: float, hi: float) -> tuple[float, float, float]:
    a, b, c = (float(v) for v in rng.uniform(lo, hi, 3))
    return a, b, c


def _ground(b: LevelBuilder, size: float, kind: str) -> None:
    b.part("Ground", box(size, size, 0.5, uv_scale=2.0, center=(0, 0, -0.5)), kind)


def _perimeter(b: LevelBuilder, size: float, height: float, kind: str, thick: float = 0.6,
               gap: float = 0.0) -> None:
    h = size / 2
    for i, (cx, cy, sx, sy) in enumerate([(0, h, size, thick), (0, -h, size, thick),
                                          (h, 0, thick, size), (-h, 0, thick, size)]):
        if gap and i == 1:
            seg = (size - gap) / 2
            for j, x in enumerate((-h + seg / 2, h - seg / 2)):
                b.part(f"Wall_S{j}", box(seg, thick, height, 1.0, (x, cy, 0)), kind)
            continue
        b.part(f"Wall_{i}", box(sx, sy, height, 1.0, (cx, cy, 0)), kind)


def _course(b: LevelBuilder, origin, kind: str, yaw: float = 0.0) -> None:
    """Walkable 20° ramp, a too-steep 55° ramp and a 0.2 m staircase, side by side."""
    ox, oy, oz = origin
    c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))

    def at(dx, dy):
        return (ox + c * dx - s * dy, oy + s * dx + c * dy, oz)

    b.part("Ramp_20deg", ramp(8.0, 3.0, 20.0, 1.0, at(0, 0), yaw), kind)
    b.part("Ramp_55deg_steep", ramp(3.0, 3.0, 55.0, 1.0, at(0, 5), yaw), kind)
    b.part("Stairs_0p2", stairs(10, 0.2, 0.35, 3.0, 1.0, at(0, -5), yaw), kind)
    # a landing on top of the ramp and the stairs
    top = 8.0 * math.tan(math.radians(20))
    b.part("Landing", box(4.0, 13.0, top, 1.0, at(10.0, 0)), kind, yaw_deg=yaw)


def alpine_meadow(seed: int, cells: int, tex: int) -> LevelBuilder:
    rng = np.random.default_rng(seed)
    b = LevelBuilder("AlpineMeadow", "day", tex, seed)
    size = 90.0

    def h(x, y):
        r = np.hypot(x, y)
        hills = 1.2 * np.sin(x / 9.0) * np.cos(y / 11.0) + 0.6 * np.sin((x + y) / 5.0)
        cliff = np.clip((x - 30.0) * 2.2, 0, 12.0)  # a too-steep ridge on the east side
        return hills * np.clip(1 - r / 70, 0.2, 1) + cliff

    b.part("Terrain", heightfield(size, size, cells, h, 2.0), "grass")
    for i in range(18):
        x, y = rng.uniform(-38, 25), rng.uniform(-40, 40)
        if abs(x) < 8 and abs(y) < 8:
            continue
        z = float(h(np.array(x), np.array(y))) - 0.2
        b.tree(f"Tree_{i:02d}", (x, y, z), float(rng.uniform(5.0, 7.5)), rng)
    for i in range(8):
        x, y = rng.uniform(-35, 25), rng.uniform(-35, 35)
        z = float(h(np.array(x), np.array(y))) - 0.3
        b.rock(f"Rock_{i}", _dims(rng, 1.0, 2.5), (x, y, z), float(rng.uniform(0, 90)), "rock",
               seed + i)
    b.part("Lookout_stairs", stairs(12, 0.2, 0.4, 2.0, 1.0, (-20, 18, 0)), "wood")
    b.part("Lookout_deck", box(4, 4, 2.4, 1.0, (-13.2, 18, 0)), "wood")
    for i in range(4):
        b.prop(f"Crate_{i}", (0.8, 0.8, 0.8), "wood", (4 + 1.5 * i, -6, 0.6), 25.0)
    b.marker("player_start", "PlayerStart_0", (0, 0, 2.0), 0)
    b.marker("player_start", "PlayerStart_1", (-15, -15, 2.0), 45)
    b.marker("poi", "POI_Lookout", (-13, 18, 2.5))
    b.marker("poi", "POI_Ridge", (30, 0, 3.0))
    b.marker("poi", "POI_Woods", (-30, -25, 1.0))
    b.lights()
    return b


def downtown(seed: int, cells: int, tex: int) -> LevelBuilder:
    rng = np.random.default_rng(seed)
    b = LevelBuilder("Downtown", "dusk", tex, seed)
    size = 70.0
    _ground(b, size, "asphalt")
    lamps = []
    for i, bx in enumerate((-22, 0, 22)):
        for j, by in enumerate((-22, 22)):
            if (i, j) == (1, 1):
                continue
            w, d = rng.uniform(10, 14), rng.uniform(10, 14)
            b.part(f"Sidewalk_{i}{j}", box(w + 4, d + 4, 0.15, 1.0, (bx, by, 0)), "concrete")
            b.part(f"Building_{i}{j}", box(w, d, float(rng.uniform(8, 22)), 2.0,
                                           (bx, by, 0.15)), "brick")
            lamps.append((bx + w / 2 + 2.5, by, 4.5))
    b.part("Plaza", box(16, 10, 1.2, 1.0, (0, 22, 0)), "tile")
    b.part("Plaza_stairs", stairs(6, 0.2, 0.4, 4.0, 1.0, (-2.0, 14.6, 0), yaw_deg=90), "concrete")
    b.part("Plaza_ramp", ramp(6.0, 2.5, 11.3, 1.0, (6.0, 11.0, 0), yaw_deg=90), "concrete")
    b.part("Loading_dock_steep", ramp(2.0, 3.0, 60.0, 1.0, (-30, 0, 0), 0), "concrete")
    _perimeter(b, size, 4.0, "concrete")
    for i in range(6):
        b.prop(f"Bin_{i}", (0.6, 0.6, 1.0), "metal", (-10 + 4 * i, -6, 0.0), 15.0,
               shape="bin")
    b.marker("player_start", "PlayerStart_0", (0, 0, 1.5), 90)
    b.marker("poi", "POI_Plaza", (0, 22, 1.5))
    b.marker("poi", "POI_Corner", (-28, -28, 1.0))
    b.lights(lamps)
    return b


def apartment(seed: int, cells: int, tex: int) -> LevelBuilder:
    rng = np.random.default_rng(seed)
    b = LevelBuilder("Apartment", "interior", tex, seed)
    size = 42.0
    _ground(b, size, "wood")
    _perimeter(b, size, 4.0, "plaster")
    # interior walls with door gaps: a corridor along y=0
    for x0 in (-21.0, -7.0, 7.0):
        for sign in (-1, 1):
            b.part(f"Wall_c{int(x0)}_{sign}", box(12.0, 0.3, 3.2, 1.0, (x0 + 7, sign * 2.0, 0)),
                   "plaster")
    for x in (-14.0, 0.0, 14.0):
        for sign in (-1, 1):
            b.part(f"Wall_r{int(x)}_{sign}", box(0.3, 17.0, 3.2, 1.0, (x, sign * 10.5, 0)),
                   "plaster")
    b.part("Ceiling", box(size, size, 0.3, 2.0, (0, 0, 4.0)), "plaster")
    b.part("Mezzanine_stairs", stairs(8, 0.2, 0.35, 1.6, 1.0, (8.0, 14.0, 0)), "wood")
    b.part("Mezzanine", box(6, 5, 1.6, 1.0, (13.8, 14.0, 0)), "wood")
    b.part("Ramp_access", ramp(5.0, 1.8, 9.0, 1.0, (-18.0, -15.0, 0)), "tile")
    b.part("Slide_steep", ramp(1.5, 1.5, 58.0, 1.0, (-18.0, 15.0, 0)), "tile")
    for i in range(8):
        x, y = rng.uniform(-18, 18), rng.uniform(-18, 18)
        if abs(y) < 3:
            y += 5
        b.prop(f"Chair_{i}", (0.5, 0.5, 0.9), "fabric", (x, y, 0.0), 6.0,
               yaw_deg=float(rng.uniform(0, 360)), shape="chair")
    b.part("Table", table_mesh(1.8, 0.9, 0.75), "wood", (-5, -8, 0))
    b.marker("player_start", "PlayerStart_0", (-18, 0, 1.0), 0)
    b.marker("poi", "POI_Kitchen", (-7, -10, 1.0))
    b.marker("poi", "POI_Mezzanine", (14, 14, 2.0))
    b.lights([(x, y, 3.6) for x in (-14, 0, 14) for y in (-10, 0, 10)])
    return b


def outpost(seed: int, cells: int, tex: int) -> LevelBuilder:
    rng = np.random.default_rng(seed)
    b = LevelBuilder("Outpost", "night", tex, seed)
    size = 64.0
    _ground(b, size, "scifi")
    for i, (x, y) in enumerate([(-16, -16), (16, -16), (-16, 16), (16, 16)]):
        b.part(f"Platform_{i}", box(12, 12, 2.0, 1.0, (x, y, 0)), "metal")
        b.part(f"Platform_{i}_ramp", ramp(6.0, 3.0, 18.0, 1.0, (x - 12.0, y, 0)), "metal")
        b.part(f"Beacon_{i}", lathe([(0.35, 0.0), (0.3, 0.2), (0.22, 2.6), (0.32, 2.8),
                                      (0.05, 3.0)], 12, 1.0), "scifi", (x, y, 2.0),
               emissive=(0.2, 0.8, 1.0))
    # a corridor through the middle
    for sign in (-1, 1):
        b.part(f"Corridor_wall_{sign}", box(24, 0.4, 3.5, 1.0, (0, sign * 2.2, 0)), "scifi")
    b.part("Corridor_roof", box(24, 4.8, 0.3, 1.0, (0, 0, 3.5)), "metal")
    b.part("Antenna_ramp_steep", ramp(3.0, 4.0, 52.0, 1.0, (20.0, 0.0, 0)), "metal")
    _course(b, (-28, 0, 0), "metal", 0)
    for i in range(5):
        b.prop(f"Cargo_{i}", (1.2, 1.2, 1.2), "metal", (float(rng.uniform(-8, 8)),
                                                         float(rng.uniform(6, 10)), 0.0), 40.0)
    _perimeter(b, size, 5.0, "scifi")
    b.marker("player_start", "PlayerStart_0", (0, -10, 1.5), 90)
    b.marker("poi", "POI_Corridor", (0, 0, 1.0))
    b.marker("poi", "POI_Beacon", (16, 16, 3.0))
    b.lights([(x, y, 5.0) for x, y in [(-16, -16), (16, -16), (-16, 16), (16, 16), (0, 0)]])
    return b


def courtyard(seed: int, cells: int, tex: int) -> LevelBuilder:
    rng = np.random.default_rng(seed)
    b = LevelBuilder("Courtyard", "day", tex, seed)
    size = 56.0
    _ground(b, size, "stone")
    _perimeter(b, size, 6.0, "stone", thick=1.5, gap=6.0)
    for i, (x, y) in enumerate([(-26, -26), (26, -26), (-26, 26), (26, 26)]):
        b.part(f"Tower_{i}", lathe([(3.6, 0.0), (3.3, 9.8), (3.9, 10.0), (3.9, 11.0), (3.5, 11.0)],
                                   20, 1.0), "stone", (x, y, 0))
    b.part("Wall_walk_stairs", stairs(14, 0.2, 0.4, 2.5, 1.0, (-10, 24.0, 0)), "stone")
    b.part("Keep", box(14, 10, 9, 2.0, (8, 14, 0)), "brick")
    b.part("Keep_steps", stairs(5, 0.2, 0.5, 5.0, 1.0, (8.0, 6.5, 0), yaw_deg=90), "stone")
    b.part("Well", lathe([(1.2, 0.0), (1.25, 0.8), (1.1, 0.9)], 20, 1.0), "stone", (0, -6, 0))
    b.part("Rampart_slope", ramp(7.0, 3.0, 22.0, 1.0, (-22.0, -8.0, 0)), "dirt")
    b.part("Scree_steep", ramp(3.0, 3.0, 56.0, 1.0, (18.0, -18.0, 0)), "rock")
    for i in range(6):
        b.prop(f"Barrel_{i}", (0.7, 0.7, 1.0), "wood", (float(rng.uniform(-12, 12)),
                                                         float(rng.uniform(-20, -12)), 0.0), 20.0,
               shape="barrel")
    b.marker("player_start", "PlayerStart_0", (0, -20, 1.0), 90)
    b.marker("player_start", "PlayerStart_1", (-15, 0, 1.0), 0)
    b.marker("poi", "POI_Well", (0, -6, 1.0))
    b.marker("poi", "POI_Keep", (8, 6, 1.0))
    b.marker("poi", "POI_Gate", (0, -27, 1.0))
    b.lights()
    return b


def canyon(seed: int, cells: int, tex: int) -> LevelBuilder:
    rng = np.random.default_rng(seed)
    b = LevelBuilder("Canyon", "dusk", tex, seed)
    size = 100.0

    def h(x, y):
        wall = np.clip((np.abs(y) - 14.0) * 1.8, 0, 16)  # steep canyon walls
        dunes = 0.5 * np.sin(x / 6.0) + 0.3 * np.cos(y / 4.0 + x / 13.0)
        return dunes + wall

    b.part("Terrain", heightfield(size, size, cells, h, 2.0), "sand")
    for i in range(10):
        x, y = rng.uniform(-45, 45), rng.uniform(-11, 11)
        z = float(h(np.array(x), np.array(y))) - 0.4
        b.rock(f"Boulder_{i}", _dims(rng, 1.0, 3.0), (x, y, z), float(rng.uniform(0, 90)),
               "rock", seed + i)
    b.part("Ruin_stairs", stairs(8, 0.2, 0.4, 3.0, 1.0, (10, -6, 0)), "stone")
    b.part("Ruin_platform", box(5, 5, 1.6, 1.0, (15.7, -6, 0)), "stone")
    b.part("Ruin_wall_a", box(8, 0.8, 3.0, 1.0, (-10, 5, 0)), "stone")
    b.part("Ruin_wall_b", box(0.8, 6, 3.0, 1.0, (-14, 2, 0)), "stone")
    b.part("Dune_ramp", ramp(8.0, 4.0, 15.0, 1.0, (-30, -6, 0)), "sand")
    for i in range(3):
        b.prop(f"Jar_{i}", (0.5, 0.5, 0.7), "dirt", (float(2 * i), 6.0, 0.5), 8.0, shape="jar")
    b.marker("player_start", "PlayerStart_0", (0, 0, 2.0), 0)
    b.marker("poi", "POI_Ruins", (15, -6, 2.0))
    b.marker("poi", "POI_EastEnd", (45, 0, 1.0))
    b.marker("poi", "POI_WestEnd", (-45, 0, 1.0))
    b.lights()
    return b


# ---------------------------------------------------------------- heterogeneity


def foliage_sublevel(seed: int, cells: int, tex: int) -> LevelBuilder:
    """Only the trees of AlpineMeadow: partial when opened on its own (no ground)."""
    rng = np.random.default_rng(seed)
    b = LevelBuilder("Valley_Foliage", "day", tex, seed)
    for i in range(12):
        x, y = rng.uniform(-40, 40), rng.uniform(-40, 40)
        b.part(f"Tree_{i:02d}_crown", ellipsoid(1.8, 1.7, 1.6, 6, 10, 1.0, (0, 0, 4.2), 0.25,
                                                seed + i), "leaves", (x, y, 0.0))
    return b


def lighting_sublevel(seed: int, cells: int, tex: int) -> LevelBuilder:
    b = LevelBuilder("Apartment_Lighting", "interior", tex, seed)
    b.lights([(x, 0.0, 3.6) for x in (-14, 0, 14)])
    return b


def showcase(seed: int, cells: int, tex: int) -> LevelBuilder:
    """Props laid out on a grid for preview: an asset showcase, not a level."""
    b = LevelBuilder("Showcase_Props", "day", tex, seed)
    b.part("Display_floor", box(20, 20, 0.2, 1.0, (0, 0, -0.2)), "concrete")
    for i, kind in enumerate(["wood", "metal", "brick", "stone", "fabric", "scifi"]):
        shape = ("crate", "barrel", "crate", "jar", "chair", "bin")[i]
        b.part(f"Sample_{kind}", prop_mesh(shape, (1, 1, 1)), kind,
               ((i % 3) * 3 - 3.0, (i // 3) * 3 - 1.5, 0))
    b.lights()
    return b


def continent(seed: int, cells: int, tex: int) -> LevelBuilder:
    """An oversized open world (2 km): the partitioned case that headless automation avoids."""
    b = LevelBuilder("Continent", "day", tex, seed)

    def h(x, y):
        return 25 * np.sin(x / 180.0) * np.cos(y / 220.0)

    b.part("Terrain", heightfield(2000.0, 2000.0, 32, h, 8.0), "grass")
    b.marker("player_start", "PlayerStart_0", (0, 0, 30.0))
    b.lights()
    return b


# ---- levels that must fail renderability screening (one per detector), as real packs do

def invisible_floor(seed: int, cells: int, tex: int) -> LevelBuilder:
    """A custom-collision slab (Unreal's ``UCX_`` prefix: collides, never drawn) 0.8 m above the
    visible ground: the character walks on air — the hovering detector must trip."""
    b = LevelBuilder("InvisibleFloor", "day", tex, seed)
    _ground(b, 30.0, "concrete")
    b.part("UCX_WalkwaySlab", box(28.0, 28.0, 0.2, 1.0, (0, 0, 0.6)), "metal")
    _perimeter(b, 30.0, 3.0, "brick")
    b.marker("player_start", "PlayerStart_0", (0, 0, 1.6))
    b.marker("poi", "Poi_0", (8, 6, 1.0))
    b.lights()
    return b


def ghost_hedges(seed: int, cells: int, tex: int) -> LevelBuilder:
    """Dense hedges whose collision is switched off (``collision: none``, as foliage often
    ships): the character walks through them — the interpenetration detector must trip."""
    b = LevelBuilder("GhostHedges", "day", tex, seed)
    _ground(b, 30.0, "grass")
    _perimeter(b, 30.0, 3.0, "stone")
    k = 0
    for ix in range(-6, 7):
        for iy in range(-6, 7):
            b.part(f"Hedge_{k:03d}", box(1.4, 1.4, 1.6, 1.0, (ix * 2.0, iy * 2.0, 0)), "grass",
                   extras={"collision": "none"})
            k += 1
    b.marker("player_start", "PlayerStart_0", (1.0, 1.0, 0.5))
    b.lights()
    return b


def spike_field(seed: int, cells: int, tex: int) -> LevelBuilder:
    """Nothing but 65° pyramids: no walkable ground anywhere — spawning must give up."""
    b = LevelBuilder("SpikeField", "dusk", tex, seed)

    def tri(u):
        return 2 * np.abs(u - np.floor(u + 0.5))

    b.part("Spikes", heightfield(16.0, 16.0, 64, lambda x, y: 1.5 * (tri(x / 2) + tri(y / 2)),
                                 2.0), "rock")
    b.marker("player_start", "PlayerStart_0", (0.3, 0.2, 4.0))
    b.lights()
    return b


RECIPES: dict[str, Callable[[int, int, int], LevelBuilder]] = {
    "InvisibleFloor": invisible_floor,
    "GhostHedges": ghost_hedges,
    "SpikeField": spike_field,
    "AlpineMeadow": alpine_meadow,
    "Downtown": downtown,
    "Apartment": apartment,
    "Outpost": outpost,
    "Courtyard": courtyard,
    "Canyon": canyon,
    "Valley_Foliage": foliage_sublevel,
    "Apartment_Lighting": lighting_sublevel,
    "Showcase_Props": showcase,
    "Continent": continent,
}
