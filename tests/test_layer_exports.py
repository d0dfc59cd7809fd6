"""Ground-truth layers in the exports (#33): LeRobot features with shape, dtype and units read
back the way LeRobot reads its data files (pyarrow, nested lists → arrays), the layer files in
the WebDataset samples (cut to the clip without re-encoding), and the dataset card's table.

The renders are the session's real Stage II renders; their layers come from the stand-in in
tests/fakes/fake_layers.py, written through the real LayerWriter (the renderer's own layers are
another helper's part of #33)."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from stages.core.trajectory import VIEWS
from stages.datasets.clip_spans import list_clips
from stages.media.layers import LAYERS, read_layer
from tests.fakes.fake_layers import CHARACTER_ID, fake_planes, write_fake_layers


@pytest.fixture(scope="module")
def layered(rendered, tmp_path_factory):
    """(root, clips): a copy of two rendered trajectories with every layer added."""
    root, index, fails = rendered
    assert fails.empty
    dst = tmp_path_factory.mktemp("layered") / "renders"
    index = index.iloc[:2]
    for p in index["path"]:
        shutil.copytree(root / p, dst / p)
        write_fake_layers(dst / p)
    return dst, list_clips(dst, index, 0.0, 1.0)


def test_lerobot_layer_features_have_shape_dtype_units_and_read_back(layered, tmp_path):
    import pyarrow.parquet as pq

    from stages.datasets.lerobot_v3 import export_lerobot

    root, clips = layered
    info = export_lerobot(clips, {c.key: "t" for c in clips}, tmp_path / "lr")
    f = info["features"]
    assert f["observation.depth.back"]["shape"] == [108, 192]
    assert f["observation.depth.back"]["dtype"] == "float32"
    assert f["observation.depth.back"]["units"] == "m"
    assert "OpenCV +z" in f["observation.depth.back"]["description"]
    assert f["observation.normals.top"]["shape"] == [108, 192, 3]
    assert f["observation.ids.fp"]["dtype"] == "int64"
    assert f["observation.mask.left"]["dtype"] == "bool"
    assert f["observation.flow_fwd.right"]["units"] == "px"
    table = pq.read_table(tmp_path / "lr" / info["data_path"].format(chunk_index=0,
                                                                     file_index=0))
    assert table.num_rows == info["total_frames"]
    for layer in LAYERS:
        for v in ("back", "top"):
            key = f"observation.{layer}.{v}"
            col = table.column(key)
            for ep, clip in enumerate(clips):
                row = 24 * ep + 5
                got = np.array(col[row].as_py(), dtype=f[key]["dtype"])
                assert list(got.shape) == f[key]["shape"]
                want = read_layer(clip.render_dir, v, layer)[5]
                assert np.array_equal(got, want.astype(got.dtype)), (layer, v, ep)
    # the fake's depth at frame 5: 2 m at the left edge + 0.05, inf on the sky rows
    d = np.array(table.column("observation.depth.back")[5].as_py(), np.float32)
    assert np.isinf(d[0]).all() and d[-1, 0] == pytest.approx(2.05, abs=1e-4)
    stats = json.loads((tmp_path / "lr" / "meta" / "stats.json").read_text())
    assert stats["observation.depth.back"]["count"] == [info["total_frames"]]
    assert stats["observation.depth.back"]["min"] == pytest.approx([2.0], abs=1e-4)
    assert "observation.ids.back" not in stats  # categories, not quantities


def test_shard_samples_carry_the_layer_files_and_their_units(layered, tmp_path):
    import av
    import webdataset as wds

    from stages.config import load_params
    from stages.shard import write_shards

    root, clips = layered
    caps = pd.DataFrame({"key": [c.key for c in clips], "caption": ["c"] * len(clips)})
    levels = pd.DataFrame({"level_id": ["NatureValley/AlpineMeadow"], "category": ["nature"]})
    write_shards(clips, caps, levels, tmp_path, load_params().shard)
    for s, clip in zip(wds.WebDataset(str(tmp_path / "shard-000000.tar"), shardshuffle=False),
                       clips, strict=True):
        meta = json.loads(s["json"])
        gt = meta["ground_truth"]
        assert gt["layers"] == list(LAYERS) and gt["units"]["depth"]["units"] == "m"
        assert gt["files"]["back"]["depth"] == "back.depth.mkv"
        inst = pd.read_parquet(io.BytesIO(s["instances.parquet"]))
        assert CHARACTER_ID in inst["id"].tolist()
        for v in VIEWS:
            for layer in LAYERS:
                data = s[f"{v}.{layer}.mkv"]
                assert data == (clip.render_dir / f"{v}.{layer}.mkv").read_bytes()
        with av.open(io.BytesIO(s["back.ids.mkv"])) as c:
            assert sum(1 for _ in c.decode(video=0)) == 24


def test_a_cut_clip_gets_exactly_its_frames_of_each_layer(layered, tmp_path):
    from dataclasses import replace

    from stages.datasets.layer_exports import cut_layer_file

    root, clips = layered
    clip = replace(clips[0], key="cut", start=12, end=24)
    for layer in ("depth", "ids", "flow_fwd"):
        p = cut_layer_file(clip, "left", layer, tmp_path)
        shutil.copyfile(p, tmp_path / f"left.{layer}.mkv")
        got = read_layer(tmp_path, "left", layer)
        want = read_layer(clip.render_dir, "left", layer)[12:24]
        assert len(got) == 12 and np.array_equal(got, want), layer
    plane = fake_planes(12, 192, 108)["ids"]
    assert np.array_equal(read_layer(tmp_path, "left", "ids")[0], plane)


def test_dataset_card_lists_layers_units_and_bytes_per_five_view_minute(layered):
    from stages.report import dataset_card, dataset_metrics

    root, clips = layered
    m, _ = dataset_metrics(clips, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(),
                           pd.DataFrame({"path": []}), 2.0)
    gt = m["ground_truth"]
    assert gt["layers"] == list(LAYERS)
    minutes = 2 * 24 / 30 / 60
    assert gt["five_view_minutes"] == pytest.approx(minutes, abs=1e-6)
    for layer in LAYERS:
        total = sum(json.loads((c.render_dir / "meta.json").read_text())["ground_truth"]
                    ["views"][v][layer]["bytes"] for c in clips for v in VIEWS)
        assert gt["bytes_per_five_view_minute"][layer] == pytest.approx(total / minutes, abs=1)
    card = dataset_card(m, [], {})
    assert "## Ground truth" in card and "| depth | m | 0.001 | inf |" in card
    mb = gt["bytes_per_five_view_minute"]["ids"] / 1e6
    assert f"{mb:.1f} |" in card
