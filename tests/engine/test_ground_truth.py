"""Ground-truth layers from the embedded GL renderer (issue #33): every layer written, decoded
and described in meta.json; the RGB unchanged by them; the same bytes run to run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stages.cluster.keys import render_settings
from stages.core.trajectory import VIEWS
from stages.engine.instance_render import InstanceRenderer
from stages.media.layers import LAYERS, read_layer

from ..conftest import RENDER_FRAMES as FRAMES
from ..conftest import small_render_cfg

W, H = 96, 54


def _render(trajs: Path, out: Path, name: str = "traj_0000", **kw) -> Path:
    cfg = small_render_cfg(width=W, height=H, spatial_samples=1, temporal_samples=1,
                           preview="false", **kw)
    ir = InstanceRenderer(out, render_settings(cfg, 30), "p3headlessgl", Path.cwd())
    try:
        ir.render(trajs / "NatureValley__AlpineMeadow" / name, name, "k" * 16)
    finally:
        ir.close()
    return out / name


@pytest.fixture(scope="module")
def gt_render(trajs, tmp_path_factory) -> Path:
    return _render(trajs, tmp_path_factory.mktemp("gt"),
                   ground_truth="[" + ",".join(LAYERS) + "]")


def test_every_layer_is_written_decoded_and_described(gt_render):
    d = gt_render
    meta = json.loads((d / "meta.json").read_text())
    g = meta["ground_truth"]
    assert g["layers"] == list(LAYERS) and "never averaged" in g["sampling"]
    for v in VIEWS:
        for layer in LAYERS:
            e = g["views"][v][layer]
            assert meta["sha256"][e["file"]] == e["sha256"] and e["frames"] == FRAMES
            a = read_layer(d, v, layer)
            assert a.shape[:3] == (FRAMES, H, W), (v, layer)
    inst = pd.read_parquet(d / "instances.parquet")
    assert meta["sha256"]["instances.parquet"]
    assert inst["id"].tolist()[0] == 1 and inst["kind"].tolist()[0] == "character"
    assert set(inst["kind"]) == {"character", "level", "prop"}
    depth = read_layer(d, "back", "depth")
    ids = read_layer(d, "back", "ids")
    assert np.isfinite(depth).mean() > 0.3 and (depth[np.isfinite(depth)] > 0).all()
    assert set(np.unique(ids)) <= set(inst["id"]) | {0}
    assert (np.isinf(depth) == (ids == 0)).all()
    mask = read_layer(d, "back", "mask")
    assert (mask == (ids == 1)).all() and mask.sum() > 20
    assert not read_layer(d, "fp", "mask").any()  # first person never sees its own body
    n = read_layer(d, "back", "normals")
    norm = np.linalg.norm(n, axis=-1)
    assert np.allclose(norm[ids > 0], 1, atol=2e-3) and (norm[ids == 0] == 0).all()
    fw, bw = read_layer(d, "back", "flow_fwd"), read_layer(d, "back", "flow_bwd")
    assert not fw[-1, ..., 2].any() and not bw[0, ..., 2].any()
    assert fw[:-1, ..., 2].mean() > 0.3 and bw[1:, ..., 2].mean() > 0.3


def _digests(d: Path, suffix: str) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.iterdir()) if p.name.endswith(suffix)}


def test_layers_change_no_rgb_byte_and_repeat_byte_identical(trajs, gt_render, tmp_path):
    """The same trajectory rendered without layers gives the same MP4 bytes, and again with
    every layer the same layer bytes (and the same meta.json)."""
    off = _render(trajs, tmp_path / "off")
    assert _digests(off, ".mp4") == _digests(gt_render, ".mp4")
    meta_off = json.loads((off / "meta.json").read_text())
    assert "ground_truth" not in meta_off and "ground_truth" not in meta_off["settings"]
    assert not list(off.glob("*.mkv")) and not (off / "instances.parquet").exists()
    again = _render(trajs, tmp_path / "again", ground_truth="[" + ",".join(LAYERS) + "]")
    assert _digests(again, ".mkv") == _digests(gt_render, ".mkv")
    assert len(_digests(again, ".mkv")) == len(VIEWS) * len(LAYERS)
    assert (again / "meta.json").read_bytes() == (gt_render / "meta.json").read_bytes()


def test_a_layer_the_backend_cannot_make_or_a_bad_name_fails_at_start_up(monkeypatch):
    from stages.config import ConfigError, load_params
    from stages.engine import stage2

    # both backends make every layer (Unreal through its MRQ passes); a backend that makes
    # fewer fails at load time, naming the layers and what it makes
    assert load_params(overrides=["engine.name=unreal", "render.ground_truth=[depth,flow_fwd]"]
                       ).render.ground_truth == ["depth", "flow_fwd"]
    monkeypatch.setitem(stage2.GROUND_TRUTH_LAYERS, "unreal", ("depth",))
    with pytest.raises(ConfigError, match="engine 'unreal' cannot produce layer\\(s\\) "
                       "\\['ids'\\] \\(it makes \\['depth'\\]\\)"):
        load_params(overrides=["engine.name=unreal", "render.ground_truth=[depth,ids]"])
    with pytest.raises(ConfigError, match="unknown ground-truth layer\\(s\\) \\['colour'\\]"):
        load_params(overrides=["render.ground_truth=[depth,colour]"])
    assert load_params(overrides=["engine.name=unreal"]).render.ground_truth == []


def test_layers_change_no_rgb_byte_with_deferred_shading(trajs, tmp_path):
    """Deferred shading (what render.shading=auto picks on a GPU): the RGB is the same with
    every layer on as with none."""
    off = _render(trajs, tmp_path / "off", shading="deferred")
    on = _render(trajs, tmp_path / "on", shading="deferred",
                 ground_truth="[" + ",".join(LAYERS) + "]")
    assert _digests(off, ".mp4") == _digests(on, ".mp4")


def test_recovery_drops_a_trajectory_whose_layer_file_is_cut_short(gt_render, tmp_path):
    """An interrupted copy (or a disk that lost a file's tail) of a finished trajectory with
    layers: recovery decodes the layer files too, and drops the trajectory whose depth layer
    no longer holds every frame, keeping the intact one."""
    import shutil

    from stages.cluster.recovery import recover_instance
    from stages.core.progress import PROGRESS, progress_line

    inst = tmp_path / "inst"
    for name in ("traj_0000", "traj_0001"):
        shutil.copytree(gt_render, inst / name)
    (inst / PROGRESS).write_text("".join(progress_line(n, FRAMES, "k" * 16)
                                         for n in ("traj_0000", "traj_0001")))
    cut = inst / "traj_0001" / "back.depth.mkv"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 3])
    assert recover_instance(inst, log=lambda m: None) == ["traj_0000"]
    assert not (inst / "traj_0001").exists() and (inst / "traj_0000" / "back.depth.mkv").exists()
