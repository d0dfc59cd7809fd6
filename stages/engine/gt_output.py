"""The ground-truth files of one rendered trajectory (issue #33): per view a
:class:`~stages.engine.gt_views.ViewLayerStream` on an encoder thread of its own, the id table
``instances.parquet``, and meta.json's ``"ground_truth"`` block. Inert when
``render.ground_truth`` is empty: nothing is written and meta.json has no block."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.trajectory import VIEWS
from ..media.layers import LayerWriter, ground_truth_meta, validate_layers
from .gt_views import OCCLUSION_ABS_M, OCCLUSION_REL, GtFrame, ViewLayerStream

INSTANCES_FILE = "instances.parquet"
INSTANCE_KINDS = ("character", "level", "prop")


def write_instances(path: Path, rows: Sequence[Any]) -> None:
    """The id table: id (uint32), kind, name, source; deterministic bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": pa.array([r.id for r in rows], pa.uint32()),
                      "kind": pa.array([r.kind for r in rows], pa.string()),
                      "name": pa.array([r.name for r in rows], pa.string()),
                      "source": pa.array([r.source for r in rows], pa.string())})
    pq.write_table(table, path, compression="zstd", write_statistics=True)


class GroundTruthOutput:
    """Opens, feeds and closes one trajectory's layer files (see the module docstring)."""

    def __init__(self, out: Path, layers: Sequence[str], width: int, height: int, fps: int,
                 renderer: Any):
        self.out, self.W, self.H, self.fps = out, width, height, fps
        self.layers = validate_layers(layers)
        self.on = bool(self.layers)
        self.r = renderer
        self.streams: dict[str, ViewLayerStream] = {}
        self.encoder: Any = None
        self.entries: dict[str, dict] = {}
        if self.on and getattr(renderer, "gt", None) is None:
            raise RuntimeError("render.ground_truth is on but the renderer has no "
                               "ground-truth pass")

    def open(self) -> None:
        if not self.on:
            return
        from ..media.video import AsyncEncoder

        self.r.start_ground_truth()
        near = float(self.r.targets.near)
        for v in VIEWS:
            self.streams[v] = ViewLayerStream(
                LayerWriter(self.out, v, self.layers, self.W, self.H, self.fps), near)
        self.encoder = AsyncEncoder(self.streams, depth=2)

    def put(self, planes: dict[str, dict], has_prev: bool, has_next: bool) -> None:
        self.encoder.put({v: GtFrame(planes[v], has_prev, has_next) for v in VIEWS})

    def close(self, frames: int) -> None:
        if not self.on:
            return
        self.encoder.finish()
        self.encoder = None
        self.entries = {v: s.close(frames) for v, s in self.streams.items()}
        write_instances(self.out / INSTANCES_FILE, self.r.gt.instance_rows())

    def abort(self) -> None:
        if self.encoder is not None:
            with contextlib.suppress(Exception):  # the files are being thrown away
                self.encoder.finish()
            self.encoder = None
        for s in self.streams.values():
            s.abort()
        (self.out / INSTANCES_FILE).unlink(missing_ok=True)

    def meta(self) -> dict | None:
        """meta.json's ``"ground_truth"`` block, or None when off."""
        if not self.on:
            return None
        g = ground_truth_meta(self.layers, self.entries)
        g["instances"] = {"file": INSTANCES_FILE, "count": len(self.r.gt.instance_rows()),
                          "granularity": "the character; each mesh (GeomNode) of the level, "
                                         "kind prop under a pushable prop's pivot"}
        g["renderer"] = {
            "pass": "its own float32 render targets, one camera per view at the recorded "
                    "pose with no sub-pixel jitter (the pixel centre), drawn once per frame",
            "normals": "interpolated vertex normals (no normal maps), turned toward the camera",
            "cut_out": "level surfaces whose base-colour alpha is below 0.5 are see-through",
            "flow": "from geometry: each surface point projected with the previous / next "
                    "frame's camera, prop pivot transforms and skinned vertices",
            "flow_validity": f"seen in the other frame: inside its image, in front of its "
                             f"camera, and its z there at most the other frame's depth (max "
                             f"over the 2x2 pixels around it) x (1 + {OCCLUSION_REL}) + "
                             f"{OCCLUSION_ABS_M} m; none across a respawn"}
        return g
