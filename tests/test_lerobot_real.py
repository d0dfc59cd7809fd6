"""The LeRobot export loaded by the real, unmodified ``LeRobotDataset`` of
``lerobot[dataset]==0.6.1`` (slow: run with ``-m slow``).

LeRobot 0.6.1 needs Python >= 3.12 and torch < 2.12, which cannot live in the project's venv
(Python 3.11, torch 2.14.1): the test runs it from its own virtual environment, made on first use
under ``.cache/lerobot-venv`` (about 5 GB: PyPI's torch is a CUDA build) or taken from
``$WMFORGE_LEROBOT_VENV``. The default suite checks the same files with pyarrow
(tests/test_layer_exports.py, tests/test_reader_labels.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from stages.core.trajectory import VIEWS

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent
LOADER = """
import json, sys
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
ds = LeRobotDataset("wmforge/test", root=sys.argv[1])
out = {"episodes": ds.num_episodes, "frames": ds.num_frames, "fps": ds.fps, "items": {}}
for i in (0, 30):
    item = ds[i]
    out["items"][i] = {k: {"shape": list(getattr(v, "shape", [])),
                           "dtype": str(getattr(v, "dtype", type(v).__name__))}
                       for k, v in item.items()}
    out["items"][i]["depth_back"] = item["observation.depth.back"].numpy().tolist()
    out["items"][i]["action_index"] = int(item["action.index"])
    out["items"][i]["valid"] = bool(item["action.valid"])
out["stats_state_count"] = ds.meta.stats["observation.state"]["count"].tolist()
json.dump(out, open(sys.argv[2], "w"))
"""


def _lerobot_python() -> Path:
    env = os.environ.get("WMFORGE_LEROBOT_VENV")
    venv = Path(env) if env else REPO / ".cache" / "lerobot-venv"
    py = venv / "bin" / "python"
    if py.exists():
        return py
    base = shutil.which("python3.12") or shutil.which("python3.13")
    if base is None:
        pytest.fail("LeRobot 0.6.1 needs Python >= 3.12: none on PATH (set "
                    "$WMFORGE_LEROBOT_VENV to a venv with lerobot[dataset]==0.6.1)")
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "lerobot[dataset]==0.6.1"],
                   check=True, timeout=3600)
    return py


def test_lerobot_dataset_loads_every_feature_with_its_shape_and_dtype(rendered, tmp_path):
    from stages.datasets.clip_spans import list_clips
    from stages.datasets.lerobot_v3 import export_lerobot
    from stages.media.layers import read_layer
    from tests.fakes.fake_layers import write_fake_layers

    root, index, _ = rendered
    dst = tmp_path / "renders"
    for p in index["path"]:
        shutil.copytree(root / p, dst / p)
        write_fake_layers(dst / p)
    clips = list_clips(dst, index, 0.0, 1.0)
    info = export_lerobot(clips, {c.key: f"task {c.key}" for c in clips}, tmp_path / "lr")
    py = _lerobot_python()
    out = tmp_path / "loaded.json"
    r = subprocess.run([str(py), "-c", LOADER, str(tmp_path / "lr"), str(out)],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(out.read_text())
    assert (got["episodes"], got["frames"], got["fps"]) == (len(clips), info["total_frames"], 30)
    assert got["stats_state_count"] == [info["total_frames"]]
    item = got["items"]["0"]
    for key, feat in info["features"].items():
        if feat["dtype"] == "video":
            assert item[key]["shape"] == [3, *feat["shape"][:2]], key  # CHW float
            continue
        shape = [] if feat["shape"] == [1] else feat["shape"]
        assert item[key]["shape"] == shape, key
        want = {"float32": "torch.float32", "int64": "torch.int64", "bool": "torch.bool"}
        assert item[key]["dtype"] == want[feat["dtype"]], key
    for v in VIEWS:
        assert f"observation.depth.{v}" in item and f"observation.flow_fwd.{v}" in item
    depth = np.array(got["items"]["30"]["depth_back"], np.float32)  # episode 1, frame 6
    assert np.array_equal(depth, read_layer(clips[1].render_dir, "back", "depth")[6])
