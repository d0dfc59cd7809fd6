"""`wmforge export rerun` on a real Stage II render: the .rrd is read back with the SDK's own
reader (entity paths, rows, values) and checked by `rerun rrd verify`; depth and segmentation
come from layer files written by the real LayerWriter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stages.core.trajectory import VIEWS

RERUN = Path(sys.executable).with_name("rerun")


def _chunks(rrd: Path) -> dict[str, list]:
    import rerun.chunk as rc

    out: dict[str, list] = {}
    for ch in rc.RrdReader(str(rrd)).stream():
        out.setdefault(ch.entity_path, []).append(ch)
    return out


def _column(chunks: list, suffix: str) -> list:
    """Values of the component column whose name ends with ``suffix``, over the entity's
    temporal chunks, in frame order (one value per row: each row holds a list of one)."""
    rows = []
    for ch in chunks:
        rb = ch.to_record_batch()
        if "frame" not in rb.schema.names:
            continue
        name = next(n for n in rb.schema.names if n.endswith(suffix))
        rows += list(zip(rb.column("frame").to_pylist(), rb.column(name).to_pylist(),
                         strict=True))
    got = [v for _, v in sorted(rows, key=lambda r: r[0])]
    assert all(isinstance(v, list) and len(v) == 1 for v in got)
    return [v[0] for v in got]


def _cli_env() -> dict:
    return {**os.environ, "CI": "1"}  # the rerun CLI skips its usage analytics on CI


@pytest.fixture(scope="module")
def render_dir(rendered) -> Path:
    root, index, fails = rendered
    assert fails.empty
    return root / index["path"].iloc[0]


def test_recording_holds_cameras_videos_path_and_actions(render_dir, tmp_path):
    from stages.cli import main as cli
    from stages.datasets.clip_spans import Clip
    from stages.datasets.samples import export_frames

    out = tmp_path / "traj.rrd"
    assert cli(["export", "rerun", str(render_dir), "--out", str(out)]) == 0
    r = subprocess.run([str(RERUN), "rrd", "verify", str(out)], capture_output=True, text=True,
                       env=_cli_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    ch = _chunks(out)
    want = {"/world", "/world/character", "/world/character/path", "/actions/key",
            "/actions/index", "/actions/valid", "/actions/yaw_delta_deg",
            "/actions/view_yaw_delta_deg", "/conventions"}
    for v in VIEWS:
        want |= {f"/world/cameras/{v}", f"/world/cameras/{v}/image",
                 f"/world/cameras/{v}/image/rgb"}
    assert set(ch) == want
    meta = json.loads((render_dir / "meta.json").read_text())
    n = meta["frame_count"]
    for v in VIEWS:
        cam = json.loads((render_dir / f"{v}.camera.json").read_text())
        # per frame camera-to-world: translation and rotation as in the camera JSON
        t = np.array(_column(ch[f"/world/cameras/{v}"], "translation"))
        m = np.array(_column(ch[f"/world/cameras/{v}"], "mat3x3"), np.float64)
        c2w = np.array([f["camera_to_world"] for f in cam["frames"]])
        assert t.shape == (n, 3) and np.allclose(t, c2w[:, :3, 3], atol=1e-4)
        # Rerun stores Mat3x3 column-major
        assert np.allclose(m.reshape(n, 3, 3).transpose(0, 2, 1), c2w[:, :3, :3], atol=1e-5)
        # a static pinhole in RDF with K at the video's size
        pin = ch[f"/world/cameras/{v}/image"][0].to_record_batch()
        k = np.array(pin.column(next(x for x in pin.schema.names
                                     if x.endswith("image_from_camera"))).to_pylist()[0][0])
        assert np.allclose(k.reshape(3, 3).T, cam["frames"][0]["K"], atol=1e-4)
        assert ch[f"/world/cameras/{v}/image"][0].is_static
        # the MP4 embedded (its bytes), one frame reference per frame
        static = [c for c in ch[f"/world/cameras/{v}/image/rgb"] if c.is_static][0]
        rb = static.to_record_batch()
        blob = rb.column(next(x for x in rb.schema.names if x.endswith("blob"))).to_pylist()
        assert bytes(blob[0][0]) == (render_dir / f"{v}.mp4").read_bytes()
        ts = _column(ch[f"/world/cameras/{v}/image/rgb"], "timestamp")
        assert len(ts) == n and all(np.diff(np.ravel(ts)) > 0)
    frames, _ = export_frames(Clip("k", "l", render_dir.name, render_dir, 0, n, 30, 192, 108, n))
    assert _column(ch["/actions/key"], "text") == frames["action"].tolist()
    pos = np.array(_column(ch["/world/character"], "positions")).reshape(n, 3)
    assert np.allclose(pos, frames[["pos_x", "pos_y", "pos_z"]], atol=1e-5)
    # same render, same data (the bytes differ: Rerun gives every chunk a fresh row id, and
    # writes chunks in the order its threads deliver them)
    again = tmp_path / "again.rrd"
    assert cli(["export", "rerun", str(render_dir), "--out", str(again)]) == 0
    r = subprocess.run([str(RERUN), "rrd", "compare", "--unordered", str(out), str(again)],
                       capture_output=True, text=True, env=_cli_env(), timeout=120)
    assert r.returncode == 0, r.stderr


def test_depth_and_segmentation_with_class_labels(render_dir, tmp_path):
    from stages.datasets.rerun_export import export_rerun
    from stages.media.layers import read_layer
    from tests.fakes.fake_layers import fake_planes, write_fake_layers

    d = tmp_path / render_dir.name
    shutil.copytree(render_dir, d)
    n = json.loads((d / "meta.json").read_text())["frame_count"]
    write_fake_layers(d, ("depth", "ids"))
    s = export_rerun(d, tmp_path / "gt.rrd", layer_every=4)
    ch = _chunks(tmp_path / "gt.rrd")
    for v in VIEWS:
        assert f"/world/cameras/{v}/image/depth" in ch and \
            f"/world/cameras/{v}/image/segmentation" in ch
    assert f"world/cameras/{VIEWS[0]}/image/depth" in s["entities"]
    got = _column(ch["/world/cameras/back/image/depth"], "buffer")
    assert len(got) == len(range(0, n, 4))
    z = np.frombuffer(bytes(np.asarray(got[1], np.uint8)), np.float32).reshape(108, 192)
    depth = read_layer(d, "back", "depth")[4]  # the second logged frame is frame 4
    assert np.isinf(depth[0]).all()  # the stand-in's sky
    assert np.array_equal(z, np.where(np.isfinite(depth), depth, 0))  # 0: no surface
    seg = _column(ch["/world/cameras/back/image/segmentation"], "buffer")
    s0 = np.frombuffer(bytes(np.asarray(seg[0], np.uint8)), np.uint16).reshape(108, 192)
    assert np.array_equal(s0, fake_planes(0, 192, 108)["ids"])
    ctx = ch["/world"]
    text = json.dumps([c.to_record_batch().to_pylist() for c in ctx], default=str)
    assert "character: Alex" in text and "level: ground" in text
