"""Per-level overrides from overrides.yaml are applied (issue 19, point 4): ``walk_speed``
changes Stage I's speed (measured displacement per second), ``exposure_compensation`` changes
Stage II's exposure in linear light (mean luma moves the expected way, ~2x linear per stop);
``starts`` are where trajectories begin when the level has none of its own."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from stages.config import ConfigError, load_params
from stages.inventory import run_inventory
from stages.media.video import read_frames
from stages.render import run_render
from stages.trajectories import run_trajectories
from tests.conftest import small_render_cfg
from tests.small_library import build_small_library, plain_level

OVERRIDES = """Yard/Fast:
  walk_speed: 3.2
  exposure_compensation: 1.0
Yard/Open:
  starts: [[-12.0, 5.0, 0.0, 90.0]]
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("ovlib")
    lib = build_small_library(root / "lib", levels={
        "Plain": plain_level("Plain"), "Fast": plain_level("Fast"),
        "Open": plain_level("Open", start=None)}, overrides=OVERRIDES)
    cfg = load_params(overrides=[
        "trajectories.per_level=1", "trajectories.frames=90",
        f"node.work_dir={root / 'work'}", f"node.snapshot_dir={root / 'snap'}"])
    inv = run_inventory(lib, cfg.inventory, "overrides.yaml")
    out = root / "traj"
    fails = run_trajectories(cfg, inv.levels, inv.characters, lib, out, log=lambda m: None)
    assert fails.empty, fails.to_dict("records")
    return root, inv, out


def _speed(traj) -> float:
    fr = pd.read_parquet(traj / "frames.parquet")
    moving = fr[(fr["action"] != "IDLE") & fr["grounded"]]
    return float(np.median(np.hypot(moving["vel_x"], moving["vel_y"])))


def test_walk_speed_override_changes_stage1_speed(made):
    _, inv, out = made
    default = float(inv.characters.iloc[0]["walk_speed"])
    assert _speed(out / "Yard__Plain/traj_0000") == pytest.approx(default, rel=0.05)
    assert _speed(out / "Yard__Fast/traj_0000") == pytest.approx(3.2, rel=0.05)
    meta = json.loads((out / "Yard__Fast/traj_0000/meta.json").read_text())
    assert meta["level"]["walk_speed"] == 3.2 and meta["level"]["exposure_compensation"] == 1.0


def test_override_starts_used_when_the_level_has_none(made):
    _, _, out = made
    meta = json.loads((out / "Yard__Open/traj_0000/meta.json").read_text())
    assert meta["spawns"][0]["kind"] == "override"
    assert meta["spawns"][0]["position"][:2] == pytest.approx([-12.0, 5.0])
    plain = json.loads((out / "Yard__Plain/traj_0000/meta.json").read_text())
    assert plain["spawns"][0]["kind"] == "start"  # its start_point node


def _lin(v):
    v = np.asarray(v, float) / 255.0
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def test_exposure_compensation_in_linear_light(made):
    root, _, out = made
    src = out / "Yard__Plain/traj_0000"
    evs = {"traj_0000": 0.0, "traj_0001": 1.0, "traj_0002": -1.0}
    lv = root / "exp" / "Yard__Plain"
    for name, ev in evs.items():
        shutil.copytree(src, lv / name)
        meta = json.loads((lv / name / "meta.json").read_text())
        meta["level"]["exposure_compensation"] = ev
        (lv / name / "meta.json").write_text(json.dumps(meta))
    # tone map off: the compensation scales linear light, which the tone map then curves
    index, fails = run_render(small_render_cfg(preview=False, width=128, height=72,
                                               tone_map="none"),
                              root / "exp", root / "renders", log=lambda m: None)
    assert fails.empty and len(index) == 3
    frames = {}
    for r in index.to_dict("records"):
        v = read_frames(root / "renders" / r["path"] / "back.mp4")
        frames[evs[r["trajectory"]]] = np.stack(v[::10]).astype(float)
        m = json.loads((root / "renders" / r["path"] / "meta.json").read_text())
        assert m["level"]["exposure_compensation"] == evs[r["trajectory"]]
    luma = {ev: f.mean() for ev, f in frames.items()}
    assert luma[-1.0] < luma[0.0] - 10 < luma[1.0] - 20, luma
    # linear light: one stop doubles it, where neither picture clips
    a, b = _lin(frames[0.0]), _lin(frames[1.0])
    ok = (a > 0.02) & (a < 0.4)
    assert np.median(b[ok] / a[ok]) == pytest.approx(2.0, rel=0.12)


def test_bad_override_values_are_config_errors(tmp_path):
    build_small_library(tmp_path, overrides="Yard/Plain:\n  walk_speed: fast\n")
    with pytest.raises(ConfigError, match=r"Yard/Plain\.walk_speed.*'fast'"):
        run_inventory(tmp_path, load_params().inventory, "overrides.yaml")
    (tmp_path / "overrides.yaml").write_text("Yard/Plain:\n  starts: [[1, 2]]\n")
    with pytest.raises(ConfigError, match=r"Yard/Plain: starts\[0\]"):
        run_inventory(tmp_path, load_params().inventory, "overrides.yaml")


EGG_TEXTURED = """<CoordinateSystem> { Z-Up }
<Texture> ground_tex { "tex/ground.png" }
<Group> ground {
  <VertexPool> g {
    <Vertex> 0 { -20 -20 0 <UV> { 0 0 } } <Vertex> 1 { 20 -20 0 <UV> { 1 0 } }
    <Vertex> 2 { 20 20 0 <UV> { 1 1 } } <Vertex> 3 { -20 20 0 <UV> { 0 1 } }
  }
  <Polygon> { <TRef> { ground_tex } <VertexRef> { 0 1 2 3 <Ref> { g } } }
}
"""


def test_level_references_resolve_in_its_pack_when_a_character_shares_it(tmp_path):
    """A pack holding a level and a character (Panda3D's samples do): the level's texture,
    relative to the staged level, is inside the staged pack (not the character's copy)."""
    from stages.assetgen.gltf_writer import encode_png

    lib = build_small_library(tmp_path / "lib", pack="Mixed", levels={}, char_pack="Mixed")
    (lib / "Mixed/tex").mkdir()
    (lib / "Mixed/tex/ground.png").write_bytes(encode_png(np.full((8, 8, 3), 120, np.uint8)))
    (lib / "Mixed/Field.egg").write_text(EGG_TEXTURED)
    cfg = load_params(overrides=["trajectories.per_level=1", "trajectories.frames=10",
                                 f"node.work_dir={tmp_path / 'work'}",
                                 f"node.snapshot_dir={tmp_path / 'snap'}"])
    inv = run_inventory(lib, cfg.inventory, "overrides.yaml")
    assert inv.levels.set_index("level_id").loc["Mixed/Field", "enabled"]
    fails = run_trajectories(cfg, inv.levels, inv.characters, lib, tmp_path / "traj",
                             log=lambda m: None)
    assert fails.empty, fails.to_dict("records")
