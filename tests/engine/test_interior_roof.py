"""Issue 28, point 8: a closed hall whose floor, walls and flat roof are single planes (as game
interiors are built: no thickness) looks, to rays, like the inside of a solid block — so its
floor is "inside a closed solid" and never a spawn, and the roof under the sky is all that is
left (where the roof is not isolated, spawns land on it: the issue's real hall). A level marked
interior spawns on the floor of its rooms, never where the sky is directly above; an unmarked
one whose only walkable surface is a roof fails with a reason that says so — unless a ceiling
lies over most of its columns (enclosed, core.spawns.enclosed_share): then it is screened as an
interior too, and meta.json records that it was detected.

The hall is built here from single quads, the property that matters; the same rule on a real
closed interior (a Quake 3 map from Debian's OpenArena data) is in
test_real_interior_openarena.py.
"""

import math
from pathlib import Path

from stages.assetgen.levels import LevelBuilder
from stages.assetgen.primitives import _quad
from stages.cluster.row_readers import is_interior
from stages.core.cameras import CameraRigConfig
from stages.core.engine_types import CharacterSpec
from stages.core.stage1 import Stage1Controller
from stages.core.stage1_config import ActionConfig, SpawnConfig
from stages.engine.base import make_engine

SPEC = CharacterSpec("test/human", capsule_radius=0.3, capsule_half_height=0.6,
                     visual_height=1.8, walk_speed=1.6, step_height=0.45)
ROOF = 20.0


def hall(path: Path, scree: bool = False) -> Path:
    """The hall; ``scree``: beside it, as wide again, a 60 degree slope nobody can walk."""
    b = LevelBuilder("Hall", "interior", 16, 0)
    x, y, z = 15.0, 10.0, ROOF
    up = (0, 0, 1)
    if scree:
        w, h = 2 * x, 2 * x * math.tan(math.radians(60))
        n = (-math.sin(math.radians(60)), 0, math.cos(math.radians(60)))
        b.part("Scree", _quad((x, -y, 0), (x + w, -y, h), (x + w, y, h), (x, y, 0), n, 1.0),
               "rock")
    b.part("Floor", _quad((-x, -y, 0), (x, -y, 0), (x, y, 0), (-x, y, 0), up, 1.0), "wood")
    b.part("Roof", _quad((-x, -y, z), (-x, y, z), (x, y, z), (x, -y, z), up, 1.0), "metal")
    b.part("WallN", _quad((-x, y, 0), (x, y, 0), (x, y, z), (-x, y, z), (0, -1, 0), 1.0), "brick")
    b.part("WallS", _quad((x, -y, 0), (-x, -y, 0), (-x, -y, z), (x, -y, z), (0, 1, 0), 1.0),
           "brick")
    b.part("WallE", _quad((x, y, 0), (x, -y, 0), (x, -y, z), (x, y, z), (-1, 0, 0), 1.0), "brick")
    b.part("WallW", _quad((-x, -y, 0), (-x, y, 0), (-x, y, z), (-x, -y, z), (1, 0, 0), 1.0),
           "brick")
    b.lights()
    path.write_bytes(b.to_glb())
    return path


def _spawns(level: Path, interior: bool) -> tuple[list[dict], list]:
    eng = make_engine("embedded")
    try:
        ctrl = Stage1Controller(eng, str(level), "test/hall", [SPEC], [0, 1, 2], 2, 30, 0,
                                ActionConfig(), SpawnConfig(), CameraRigConfig(),
                                camera_rays=False, interior=interior)
        results = ctrl.run()
    finally:
        eng.close()
    return [s for r in results for s in r.meta.get("spawns", [])], results


def test_single_plane_hall_marked_interior_spawns_on_its_floor(tmp_path):
    level = hall(tmp_path / "hall.glb")
    after, results = _spawns(level, interior=True)
    assert all(r.failure is None for r in results)
    assert len(after) == 3 and all(abs(s["position"][2]) < 0.05 for s in after)
    assert all("interior" not in r.meta["level"] for r in results)


def test_unmarked_enclosed_hall_is_detected_and_spawns_on_its_floor(tmp_path):
    # unmarked, the floor between single-plane walls reads as the inside of a solid and the
    # roof as a roof; a ceiling lies over all of the hall's columns, so it is screened as an
    # interior, and meta.json says why
    spawns, results = _spawns(hall(tmp_path / "hall.glb"), interior=False)
    assert all(r.failure is None for r in results)
    assert len(spawns) == 3 and all(abs(s["position"][2]) < 0.05 for s in spawns)
    for r in results:
        assert r.meta["level"]["interior"].startswith("detected: "), r.meta["level"]
        assert "a ceiling lies over 100% of the level's columns" in r.meta["level"]["interior"]


def test_unmarked_hall_beside_a_scree_fails_saying_its_only_floor_is_a_roof(tmp_path):
    # half of the level is a slope nobody can walk: not enclosed, so not an interior; the
    # hall's candidates stand only on its roof, and the reason says so
    spawns, results = _spawns(hall(tmp_path / "hall.glb", scree=True), interior=False)
    assert spawns == []
    assert all(r.failure == "no_walkable_region" for r in results)
    assert all("interior" not in r.meta["level"] for r in results)
    roofs = [r.detail for r in results if "only walkable surface found is a roof" in r.detail]
    assert roofs and all("(sky above, a storey below)" in d for d in roofs), roofs


def test_the_inventory_row_marks_the_level_interior():
    assert is_interior({"category": "interior", "lighting": None})
    assert is_interior({"category": "uncategorized", "lighting": "interior"})
    assert not is_interior({"category": "urban", "lighting": "day"})
