"""A glTF level's ``scale`` from pack.json (issue 28: a Quake map converted to glTF is in
inches) reaches every measurement the inventory writes, as it already did for obj and egg."""

import json

import pytest

from stages.assetgen.level_builder import LevelBuilder
from stages.assetgen.primitives import _quad
from stages.config import InventoryConfig
from stages.inventory import inventory_levels


def _library(tmp_path, scale):
    b = LevelBuilder("Yard", "day", 16, 0)
    b.part("Ground", _quad((-400, -200, 0), (400, -200, 0), (400, 200, 0), (-400, 200, 0),
                           (0, 0, 1), 1.0), "grass")
    b.marker("player_start", "PlayerStart_0", (100.0, 40.0, 0.0))
    pack = tmp_path / "lib" / "Inches"
    pack.mkdir(parents=True)
    (pack / "yard.glb").write_bytes(b.to_glb())
    levels = {} if scale is None else {"levels": {"yard.glb": {"scale": scale}}}
    (pack / "pack.json").write_text(json.dumps(levels))
    return tmp_path / "lib"


def test_gltf_level_scale_from_pack_json_reaches_extent_bounds_and_starts(tmp_path):
    raw = inventory_levels(_library(tmp_path / "a", None), InventoryConfig()).iloc[0]
    assert raw["kind"] == "persistent" and raw["extent_x_m"] == pytest.approx(800.0)
    row = inventory_levels(_library(tmp_path / "b", 0.0254), InventoryConfig()).iloc[0]
    assert row["kind"] == "persistent" and row["scale"] == pytest.approx(0.0254)
    assert (row["extent_x_m"], row["extent_y_m"]) == pytest.approx((20.32, 10.16))
    bounds = json.loads(row["bounds_json"])
    assert bounds["min"][:2] == pytest.approx([-10.16, -5.08])
    assert json.loads(row["player_starts_json"]) == [pytest.approx([2.54, 1.016, 0.0])]
