"""A clip's ground-truth layers (depth, normals, ids, mask, flow) as the exports ship them: the
lossless layer files cut to the clip (WebDataset), per-frame arrays with LeRobot feature
descriptions (shape, dtype, units), and their statistics.

The layers, their units and the files come from the render folder's meta.json
``"ground_truth"`` block (stages/media/layers.py); a clip without it has no layers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from .clip_spans import Clip, ClipError

# LeRobot dtype and trailing shape of each layer's per-frame array (ids widened to int64: torch
# has no full uint32 support; every uint32 id fits)
LEROBOT_LAYOUT: dict[str, tuple[str, tuple[int, ...]]] = {
    "depth": ("float32", ()), "normals": ("float32", (3,)), "ids": ("int64", ()),
    "mask": ("bool", ()), "flow_fwd": ("float32", (3,)), "flow_bwd": ("float32", (3,))}


def clip_layers(meta: dict) -> list[str]:
    """The layers a render folder's meta.json lists (empty without a ground_truth block)."""
    return list((meta.get("ground_truth") or {}).get("layers") or [])


def common_layers(clips: list[Clip], metas: list[dict]) -> list[str]:
    """The one layer list every clip has; a clear error when clips differ (LeRobot needs one
    feature set per dataset)."""
    if not clips:
        return []
    first = clip_layers(metas[0])
    for c, m in zip(clips, metas, strict=True):
        if clip_layers(m) != first:
            raise ClipError(f"{c.render_dir}/meta.json: ground-truth layers "
                            f"{clip_layers(m)} differ from {clips[0].key}'s {first}: export "
                            "renders made with one render.ground_truth")
    return first


def feature_key(layer: str, view: str) -> str:
    return f"observation.{layer}.{view}"


def lerobot_features(layers: list[str], units: dict, width: int, height: int) -> dict:
    """info.json features of the layers: per view and layer, dtype, shape, names and units."""
    feats: dict[str, dict] = {}
    for layer in layers:
        dtype, tail = LEROBOT_LAYOUT[layer]
        u = dict(units.get(layer) or {})
        desc = "; ".join(f"{k}: {u[k]}" for k in ("meaning", "axes", "no_surface", "not_valid",
                                                   "table") if k in u)
        for v in VIEWS:
            feats[feature_key(layer, v)] = {
                "dtype": dtype, "shape": [height, width, *tail],
                "names": ["height", "width", *(["channels"] if tail else [])],
                "units": u.get("units"), "description": f"{layer} of the {v} view, {desc}",
                "precision": u.get("scale"),
                "source": f"{v}.{layer}.mkv (lossless FFV1, stages/media/layers.py)"}
    return feats


def clip_array(clip: Clip, view: str, layer: str) -> np.ndarray:
    """The clip's frames of one view's layer, in the LeRobot dtype."""
    from ..media.layers import read_layer

    a = read_layer(clip.render_dir, view, layer)
    if len(a) != clip.source_frames:
        raise ClipError(f"{clip.render_dir}/{view}.{layer}.mkv: {len(a)} frames, expected "
                        f"{clip.source_frames}")
    a = a[clip.start:clip.end]
    return a.astype(np.int64) if layer == "ids" else a


def layer_stats(layer: str, a: np.ndarray) -> dict[str, np.ndarray] | None:
    """Per-channel statistics of an episode's layer over its surface pixels (count in frames);
    None for ids (categories, not quantities)."""
    if layer == "ids":
        return None
    x = a.astype(np.float64).reshape(len(a), -1, 1 if a.ndim == 3 else a.shape[-1])
    flat = x.reshape(-1, x.shape[-1])
    if layer == "depth":
        flat = flat[np.isfinite(flat[:, 0])]
    elif layer in ("flow_fwd", "flow_bwd"):
        flat = flat[flat[:, 2] > 0.5]
    if not len(flat):
        flat = np.zeros((1, x.shape[-1]))
    return {"min": flat.min(0), "max": flat.max(0), "mean": flat.mean(0), "std": flat.std(0),
            "count": np.array([len(a)])}


def cut_layer_file(clip: Clip, view: str, layer: str, scratch: Path) -> Path:
    """The clip's part of a layer file: the file itself for a whole-trajectory clip, else its
    frames [start, end) remuxed without re-encoding (FFV1 frames are all key frames)."""
    import av

    from ..media.layers import layer_path

    src = layer_path(clip.render_dir, view, layer)
    if clip.start == 0 and clip.end == clip.source_frames:
        return src
    dst = scratch / f"{clip.key}.{view}.{layer}.mkv"
    with av.open(str(src)) as inp, av.open(str(dst), "w", format="matroska",
                                           options={"fflags": "+bitexact"}) as out:
        ist = inp.streams.video[0]
        ost = out.add_stream_from_template(ist)
        i, first = 0, -1
        for pkt in inp.demux(ist):
            if pkt.dts is None:
                continue
            if clip.start <= i < clip.end:
                dts = int(pkt.dts)
                first = dts if first < 0 else first
                pkt.stream = ost
                pkt.pts = pkt.dts = dts - first  # intra-only: pts == dts
                out.mux(pkt)
            i += 1
    return dst


def sample_ground_truth(meta: dict) -> dict[str, Any] | None:
    """The shard JSON's ``ground_truth``: layers, units, sampling and each view's files."""
    gt = meta.get("ground_truth")
    if not gt:
        return None
    layers = list(gt["layers"])
    return {"layers": layers, "units": gt.get("units"), "sampling": gt.get("sampling"),
            "instances": "instances.parquet",
            "files": {v: {x: f"{v}.{x}.mkv" for x in layers} for v in VIEWS},
            "read": "stages.media.layers.read_layer, or FFV1 gray16le planes at the fixed "
                    "scales in units"}
