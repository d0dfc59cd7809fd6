"""Spawns land where a player would stand (issue 19, point 2), on the real engine: the generated
Apartment and a two-storey house with a roof never spawn on the roof (nor on a 7.6 m wall top);
a level's named start (``start_point``, no tag) is where every trajectory begins; starts from
overrides.yaml come next."""

from pathlib import Path

import pytest

from stages.assetgen.levels import LevelBuilder, apartment
from stages.assetgen.primitives import box, stairs
from stages.core.cameras import CameraRigConfig
from stages.core.engine_types import CharacterSpec
from stages.core.spawns import is_start_node, parse_starts
from stages.core.stage1 import Stage1Controller
from stages.core.stage1_config import ActionConfig, SpawnConfig
from stages.engine.base import make_engine

SPEC = CharacterSpec("test/human", capsule_radius=0.3, capsule_half_height=0.6,
                     visual_height=1.8, walk_speed=1.6, step_height=0.45)
ROOF_Z = 6.0  # the house's roof slab spans 6.0 .. 6.3
WALL_TOP = 7.6


def two_storey(path: Path, start: bool = False) -> Path:
    b = LevelBuilder("House", "day", 16, 0)
    b.part("Ground", box(60, 60, 0.5, 2.0, (0, 0, -0.5)), "grass")
    for name, sx, sy, c in (("N", 12, 0.3, (0, 5.85, 0)), ("S_a", 5, 0.3, (-3.5, -5.85, 0)),
                            ("S_b", 5, 0.3, (3.5, -5.85, 0)), ("E", 0.3, 12, (5.85, 0, 0)),
                            ("W", 0.3, 12, (-5.85, 0, 0))):
        b.part(f"Wall_{name}", box(sx, sy, 6.0, 1.0, c), "brick")
    b.part("Floor1_a", box(12, 8, 0.3, 1.0, (0, 2.0, 2.7)), "wood")  # first floor, 3.0 m
    b.part("Floor1_b", box(6, 4, 0.3, 1.0, (3.0, -4.0, 2.7)), "wood")
    b.part("Stairs", stairs(14, 0.2, 0.3, 1.5, 1.0, (-5.5, -4.0, 0)), "wood")
    b.part("Roof", box(12, 12, 0.3, 1.0, (0, 0, ROOF_Z)), "metal")
    b.part("TallWall", box(10, 0.8, WALL_TOP, 1.0, (20, 0, 0)), "stone")
    b.part("SolidBlock", box(14, 14, 12.0, 1.0, (-18, -18, 0)), "concrete")  # no way up
    if start:
        b.g.node("start_point", translation=(15.0, -12.0, 0.0))  # a bare name, no tag
    b.lights()
    path.write_bytes(b.to_glb())
    return path


def spawns(level: Path, n: int, start_share: float = 1.0, extra=None) -> list[dict]:
    eng = make_engine("embedded")
    try:
        ctrl = Stage1Controller(
            eng, str(level), "test/level", [SPEC], list(range(n)), 2, 30, 0, ActionConfig(),
            SpawnConfig(start_share=start_share), CameraRigConfig(), camera_rays=False,
            extra_starts=extra)
        results = ctrl.run()
    finally:
        eng.close()
    assert all(r.failure is None for r in results), [r.detail for r in results if r.failure]
    return [s for r in results for s in r.meta["spawns"]]


def test_apartment_never_spawns_on_its_roof(tmp_path):
    level = tmp_path / "apartment.glb"
    level.write_bytes(apartment(7, 48, 16).to_glb())
    got = spawns(level, 24, start_share=0.0)  # sampled floors only, not its start
    assert {s["kind"] for s in got} == {"sampled"}
    assert max(s["position"][2] for s in got) < 2.0, got  # floor 0 or the 1.6 m mezzanine


def test_two_storey_house_never_on_the_roof_nor_a_wall_top_nor_a_block(tmp_path):
    got = spawns(two_storey(tmp_path / "house.glb"), 30)
    zs = sorted(round(s["position"][2], 2) for s in got)
    assert max(zs) < ROOF_Z - 1.0, zs
    inside = [s for s in got if abs(s["position"][0]) < 5.7 and abs(s["position"][1]) < 5.7]
    assert all(s["position"][2] < 3.1 for s in inside)  # ground floor or first floor


def test_named_start_is_where_trajectories_begin(tmp_path):
    got = spawns(two_storey(tmp_path / "house.glb", start=True), 4)
    assert [s["kind"] for s in got] == ["start"] * 4
    for s in got:
        assert s["position"][:2] == pytest.approx([15.0, -12.0], abs=1e-4)
        assert s["position"][2] == pytest.approx(0.0, abs=0.02)


EGG_WORLD = """<CoordinateSystem> { Z-Up }
<Group> world {
  <Group> ground {
    <VertexPool> g {
      <Vertex> 0 { -20 -20 0 } <Vertex> 1 { 20 -20 0 }
      <Vertex> 2 { 20 20 0 } <Vertex> 3 { -20 20 0 }
    }
    <Polygon> { <VertexRef> { 0 1 2 3 <Ref> { g } } }
  }
  <Group> start_point { <Transform> { <Translate> { 4 -3 0.5 } } }
}
"""


def test_roaming_ralph_style_egg_start_point_and_override_starts(tmp_path):
    level = tmp_path / "world.egg"
    level.write_text(EGG_WORLD)
    got = spawns(level, 2)
    assert [s["position"][:2] for s in got] == [pytest.approx([4.0, -3.0], abs=1e-4)] * 2
    # starts from overrides.yaml: used when the level has none of its own
    flat = tmp_path / "flat.egg"
    flat.write_text(EGG_WORLD.replace("start_point", "marker"))
    got = spawns(flat, 2, extra=[((-7.0, 6.0, 0.0), 90.0)])
    assert [s["kind"] for s in got] == ["override"] * 2
    assert got[0]["position"] == pytest.approx([-7.0, 6.0, 0.0], abs=1e-3)


def test_start_names_and_override_parsing():
    for name in ("start_point", "PlayerStart", "PlayerStart_3", "player-spawn", "SpawnPoint",
                 "info_player_start", "START"):
        assert is_start_node(name), name
    for name in ("Startled_Cat", "Restart_Sign", "Wall", "spawner_fx"):
        assert not is_start_node(name), name
    assert is_start_node("Empty.001", {"role": "player_start"})
    assert is_start_node("Empty", {"player_start": "1"})
    assert parse_starts([[1, 2, 3], [1, 2, 3, 90], {"position": [0, 0, 1], "yaw_deg": 45}],
                        "o.yaml: L") == [((1, 2, 3), 0.0), ((1, 2, 3), 90.0), ((0, 0, 1), 45.0)]
    for bad in ([[1, 2]], [["a", 2, 3]], "1,2,3", [{"pos": [1, 2, 3]}], [[1, 2, float("nan")]]):
        with pytest.raises(ValueError, match="o.yaml: L"):
            parse_starts(bad, "o.yaml: L")
