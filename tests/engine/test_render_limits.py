"""``render.limits`` (issue #30, "Bad input and faults"): levels with 8k textures or too many
triangles either render or fail with a reason that names the limit.

A generated level (one ground quad) carries an 8192x8192 base-colour texture, written here as a
PNG that compresses to under 1 MB. At the default ``max_texture_px`` it renders on GL at full
size; with a lower limit the texture is halved at load, on GL and on the compute backend, and
meta.json (and the render log) say from what size to what and which key set it. A level over a
lowered ``max_triangles`` is failed by screening (``over_limit``, carried to selection) and by
Stage II (``scene_over_limit``), naming both numbers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from stages.cluster.keys import render_settings
from stages.config import ConfigError, load_params
from stages.engine.render_settings import RenderSettings, RenderSettingsError
from stages.engine.scene_limits import texture_limit
from stages.engine.stage2 import Stage2Failure
from tests.conftest import make_trajectories
from tests.heavy_levels import replay_on, write_textured_level

FRAMES = 3
# the renderer's line for each level it loads (its path may hold any word)
LOADED = re.compile(r"^render: level \S+ loaded, known by its (content|size:mtime) @ ")
BIG = 8192


@pytest.fixture(scope="module")
def big_level(tmp_path_factory) -> Path:
    return write_textured_level(tmp_path_factory.mktemp("big_texture") / "Big" / "big.glb", BIG)


@pytest.fixture(scope="module")
def traj_on_big_level(sample_library, tmp_path_factory, big_level) -> Path:
    """A short Stage I trajectory (AlpineMeadow, Alex) whose meta.json names the big-texture
    level instead: the cameras and character are replayed over the quad (no props)."""
    src = make_trajectories(sample_library, tmp_path_factory.mktemp("traj_limits"), 1, FRAMES)
    return replay_on(src / "NatureValley__AlpineMeadow" / "traj_0000",
                     tmp_path_factory.mktemp("traj_big") / "traj_0000", big_level)


def _renderer(out: Path, backend: str = "gl", *over: str, log=print):
    from stages.engine.instance_render import InstanceRenderer

    rcfg = load_params(overrides=[
        "render.width=64", "render.height=36", "render.spatial_samples=1",
        "render.temporal_samples=1", "render.mask_scale=1", "render.warmup_frames=1",
        "render.shadow_map_size=256", "render.preview=false", "render.meter_frames=1",
        f"render.backend={backend}", *over]).render
    out.mkdir(parents=True, exist_ok=True)
    return InstanceRenderer(out, render_settings(rcfg, 30), "p3headlessgl", Path.cwd(), log=log)


def _render(traj: Path, out: Path, backend: str = "gl", *over: str
            ) -> tuple[dict, list[str], list[list[int]]]:
    """(meta.json, the render log's lines, the compute texture table's level-0 sizes)."""
    lines: list[str] = []
    ir = _renderer(out, backend, *over, log=lines.append)
    try:
        meta = ir.render(traj, "traj_0000", "k" * 16)
        geo = getattr(ir.r.targets, "_geo", None)
        sizes = geo.textures.size[:, 0].tolist() if geo is not None else []
    finally:
        ir.close()
    return meta, lines, sizes


def test_an_8k_texture_renders_at_full_size_on_gl(traj_on_big_level, tmp_path):
    meta, lines, _ = _render(traj_on_big_level, tmp_path / "gl")
    lv = meta["level"]
    assert lv["max_texture_px"] == BIG and lv["textures_downscaled"] == []
    assert lv["textures"] == lv["textures_full_res"] == 1
    assert lv["triangles"] == 2 and "max_texture_px" not in meta["settings"]
    assert not [x for x in lines if "texture" in x and not LOADED.match(x)]
    assert meta["frame_count"] == FRAMES and meta["alignment"]["aligned_fraction"] >= 0.95


@pytest.mark.parametrize("backend", ["gl", "compute"])
def test_a_texture_over_max_texture_px_is_halved_and_the_note_says_so(traj_on_big_level,
                                                                      tmp_path, backend):
    meta, lines, sizes = _render(traj_on_big_level, tmp_path / backend, backend,
                                 "render.limits.max_texture_px=3000")
    lv = meta["level"]
    assert meta["backend"] == backend and meta["settings"]["max_texture_px"] == 3000
    assert lv["max_texture_px"] == 2048 and lv["textures_full_res"] == 0
    (note,) = lv["textures_downscaled"]
    assert note["from"] == [BIG, BIG] and note["to"] == [2048, 2048]
    assert note["limit"] == "render.limits.max_texture_px 3000"
    assert note["file"] == "ground.png"  # beside the level: no machine's staging path
    assert any("8192x8192 -> 2048x2048: over render.limits.max_texture_px 3000" in x
               for x in lines), lines
    assert meta["alignment"]["aligned_fraction"] >= 0.95
    if backend == "compute":  # its texture table holds the texture at the size GL renders it
        assert [2048, 2048] in sizes and max(max(z) for z in sizes) == 2048, sizes


def test_an_8k_texture_renders_at_full_size_on_the_compute_backend(traj_on_big_level, tmp_path):
    """~15 s on the 2-core box: the texture table's mip chain of an 8192x8192 sRGB texture."""
    meta, _, sizes = _render(traj_on_big_level, tmp_path / "compute", "compute")
    assert meta["level"]["max_texture_px"] == BIG and meta["level"]["textures_downscaled"] == []
    assert [BIG, BIG] in sizes and meta["alignment"]["aligned_fraction"] >= 0.95


@pytest.mark.parametrize("fmt", ["glb", "obj"])
def test_a_level_over_max_triangles_fails_stage2_naming_the_limit(traj_on_big_level, tmp_path,
                                                                    monkeypatch, big_level, fmt):
    """A glTF is refused from its accessors' counts before it is loaded; another format is
    counted once loaded. Either way the level's next trajectory fails without a new load."""
    import stages.engine.models as models

    level = big_level
    if fmt == "obj":  # the same quad as an OBJ
        level = tmp_path / "quad" / "quad.obj"
        level.parent.mkdir()
        level.write_text("v -50 0 -50\nv 50 0 -50\nv 50 0 50\nv -50 0 50\nf 1 3 2\nf 1 4 3\n")
    traj = replay_on(traj_on_big_level, tmp_path / "traj" / "traj_0000", level)
    loads = []
    real = models.load_model
    monkeypatch.setattr(models, "load_model", lambda *a, **k: loads.append(a) or real(*a, **k))
    ir = _renderer(tmp_path / "inst", "gl", "render.limits.max_triangles=1")
    want = f"{level}: 2 triangles > render.limits.max_triangles 1" + (
        " (the glTF's accessors, not loaded)" if fmt == "glb" else "")
    try:
        for _ in range(2):
            with pytest.raises(Stage2Failure) as exc:
                ir.render(traj, "traj_0000", "k" * 16)
            assert (exc.value.reason, exc.value.detail) == ("scene_over_limit", want)
    finally:
        ir.close()
    assert len(loads) == (0 if fmt == "glb" else 1)
    assert not (tmp_path / "inst" / "traj_0000").exists()


def test_screening_fails_a_level_over_max_triangles_and_selection_says_why(tmp_path):
    from stages.screen import screen_levels
    from stages.select import select_levels

    inv = tmp_path / "inventory"
    inv.mkdir()
    pd.DataFrame({"level_id": ["Pack/Huge", "Pack/Off"], "enabled": [True, False],
                  "triangles": [12_345_678, 50_000_000], "category": ["city", "city"],
                  "path": ["Pack/huge.glb", "Pack/off.glb"], "scale": [1.0, 1.0],
                  "up_axis": [None, None]}).to_parquet(inv / "levels.parquet")
    pd.DataFrame({"character_id": ["Pack/Walker"], "ok": [True], "locomotion": ["walk"]}
                 ).to_parquet(inv / "characters.parquet")
    cfg = load_params(overrides=["render.limits.max_triangles=10000000"])
    review = {"Pack/Huge": {"verdict": "pass", "note": "looks fine"}}
    clips, levels = screen_levels(cfg, inv, tmp_path / "screen", review, tmp_path / "lib",
                                  log=lambda *_: None)
    assert clips.empty and levels["level_id"].tolist() == ["Pack/Huge"]  # the disabled one: not
    row = levels.iloc[0]
    assert (row["verdict"], row["auto_verdict"], row["reasons"]) == ("fail", "fail", "over_limit")
    assert row["detail"].startswith(
        "12,345,678 triangles > render.limits.max_triangles 10,000,000 (inventory count)")
    assert "does not lift" in row["detail"] and row["review_verdict"] == "pass"
    assert (tmp_path / "screen" / row["contact_sheet"]).is_file()
    views = pd.DataFrame(columns=["level_id", "view", "ok", "aes", "lum_mean", "reason"])
    sel = select_levels(views, levels, load_params().select, "brisque")
    assert sel.iloc[0]["reason"] == "screen:over_limit" and not sel.iloc[0]["retained"]


def test_limits_are_checked_at_start_up_and_travel_in_the_settings():
    with pytest.raises(ConfigError, match="render.limits.max_texture_px 0: expected a whole "
                       "number >= 1"):
        load_params(overrides=["render.limits.max_texture_px=0"])
    with pytest.raises(ConfigError, match="render.limits.max_triangles"):
        load_params(overrides=["render.limits.max_triangles=-5"])
    default = render_settings(load_params().render, 30)
    assert not {"max_triangles", "max_texture_px"} & set(default.as_dict())  # old keys
    s = render_settings(load_params(overrides=["render.limits.max_triangles=5"]).render, 30)
    d = s.as_dict()
    assert d["max_triangles"] == 5 and RenderSettings.from_dict(d) == s
    with pytest.raises(RenderSettingsError, match="max_texture_px 'big'"):
        RenderSettings.from_dict({**d, "max_texture_px": "big"}, "inst/instance.json")


def test_the_gl_drivers_maximum_caps_the_texture_limit():
    assert texture_limit(8192, 16384) == (8192, "render.limits.max_texture_px 8192")
    assert texture_limit(32768, 16384) == (16384, "the GL driver's maximum texture size 16384")
    assert texture_limit(8192, 0) == (8192, "render.limits.max_texture_px 8192")
