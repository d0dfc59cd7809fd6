"""A stand-in for the renderer's ground-truth layers (another part of #33): made-up planes with
the contract's dtypes and meanings, written through the real LayerWriter into a real render
folder, with instances.parquet and meta.json's "ground_truth" block. The exports under test read
them exactly as they will read the renderer's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from stages.core.trajectory import VIEWS
from stages.media.layers import LAYERS, LayerWriter, ground_truth_meta

CHARACTER_ID, GROUND_ID = 7, 1


def fake_planes(f: int, w: int, h: int) -> dict[str, np.ndarray]:
    """Frame ``f``: sky (no surface) on the top quarter, ground below with depth 2..4 m growing
    0.01 m a frame, the character (id 7, the mask) in a box that moves one pixel a frame, normals
    facing the camera, flow one pixel right (not valid on the sky)."""
    depth = np.tile(np.linspace(2, 4, w, dtype=np.float32), (h, 1)) + np.float32(0.01 * f)
    sky = np.zeros((h, w), bool)
    sky[: h // 4] = True
    depth[sky] = np.inf
    ids = np.where(sky, 0, GROUND_ID).astype(np.uint32)
    x0 = (w // 3 + f) % (w // 2)
    ids[h // 3:2 * h // 3, x0:x0 + w // 6] = CHARACTER_ID
    normals = np.zeros((h, w, 3), np.float32)
    normals[~sky] = (0.0, 0.0, -1.0)
    flow = np.zeros((h, w, 3), np.float32)
    flow[~sky] = (1.0, 0.0, 1.0)
    return {"depth": depth, "normals": normals, "ids": ids, "mask": ids == CHARACTER_ID,
            "flow_fwd": flow, "flow_bwd": -flow * np.float32([1, 1, -1])}


def write_fake_layers(d: Path, layers: tuple[str, ...] = LAYERS) -> None:
    """Add ``layers`` to the render folder ``d`` (every view, every frame)."""
    meta = json.loads((d / "meta.json").read_text())
    n, w, h = meta["frame_count"], meta["settings"]["width"], meta["settings"]["height"]
    views = {}
    for v in VIEWS:
        lw = LayerWriter(d, v, layers, w, h, meta["fps"])
        for f in range(n):
            lw.add({k: p for k, p in fake_planes(f, w, h).items() if k in layers})
        views[v] = lw.close()
    pd.DataFrame({"id": np.array([GROUND_ID, CHARACTER_ID], np.uint32),
                  "kind": ["level", "character"], "name": ["ground", "Alex"],
                  "source": ["level.glb", "Alex.glb"]}).to_parquet(d / "instances.parquet")
    meta["ground_truth"] = ground_truth_meta(layers, views)
    (d / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
