"""Rendered trajectories → dataset clips: names and frame spans (shared by caption, shard,
LeRobot export and report, so every stage agrees on what a clip is)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


class ClipError(ValueError):
    """A clip setting that cannot be honoured (names the key and the expected value)."""


@dataclass(frozen=True)
class Clip:
    key: str  # sample key: letters, digits, _ and - only (WebDataset keys end at the first dot)
    level_id: str
    trajectory: str
    render_dir: Path
    start: int  # first frame
    end: int  # one past the last frame
    fps: int
    width: int
    height: int
    source_frames: int  # frames of the whole rendered trajectory

    @property
    def frames(self) -> int:
        return self.end - self.start


def row_dict(df: pd.DataFrame | None, col: str, value: str) -> dict:
    """The first row of ``df`` whose ``col`` equals ``value``, as a dict with NaN as None
    ({} when there is none)."""
    if df is None or df.empty or col not in df:
        return {}
    hit = df[df[col] == value]
    return {} if hit.empty else {str(k): (None if pd.isna(v) else v)
                                  for k, v in hit.iloc[0].to_dict().items()}


def clip_index(trajectory: object) -> int:
    """The number of a trajectory name (``traj_0003`` → 3; a failure row's -1 stays -1)."""
    return int(str(trajectory).rsplit("_", 1)[-1])


def clip_key(level_id: str, trajectory: str, index: int) -> str:
    raw = f"{level_id.replace('/', '__')}__{trajectory}__c{index:03d}"
    return re.sub(r"[^A-Za-z0-9_-]", "_", raw)


def clip_spans(n: int, fps: int, clip_s: float, min_clip_s: float, gop: int
               ) -> list[tuple[int, int]]:
    """Frame spans [start, end) of the clips of an ``n``-frame trajectory."""
    if clip_s <= 0:
        return [(0, n)]
    length = round(clip_s * fps)
    if length <= 0 or length % gop:
        raise ClipError(f"clips.clip_s={clip_s} s is {length} frames at {fps} fps, not a multiple "
                        f"of the {gop}-frame GOP (render.gop_s): clips are cut at keyframes "
                        "without re-encoding, so pick a multiple")
    spans = [(s, min(s + length, n)) for s in range(0, n, length)]
    if len(spans) > 1 and spans[-1][1] - spans[-1][0] < min_clip_s * fps:
        spans.pop()
    return spans


def render_clip(render_dir: Path, meta: dict, key: str, level_id: str, trajectory: str,
                span: tuple[int, int] | None = None) -> Clip:
    """The clip ``span`` (frames [start, end); default: all of them) of the rendered trajectory
    in ``render_dir``, whose ``meta.json`` is ``meta``."""
    n = int(meta["frame_count"])
    start, end = span or (0, n)
    return Clip(key, level_id, trajectory, render_dir, start, end, int(meta["fps"]),
                int(meta["settings"]["width"]), int(meta["settings"]["height"]), n)


def list_clips(renders_root: Path, index: pd.DataFrame, clip_s: float, min_clip_s: float
               ) -> list[Clip]:
    """Every clip of every rendered trajectory in ``index`` (data/renders/index.parquet)."""
    out: list[Clip] = []
    if index.empty:
        return out
    for row in index.sort_values(["level_id", "trajectory"]).to_dict("records"):
        d = renders_root / str(row["path"])
        meta = json.loads((d / "meta.json").read_text())
        gop = int(meta["settings"]["gop"])
        n, fps = int(meta["frame_count"]), int(meta["fps"])
        level, traj = str(row["level_id"]), str(row["trajectory"])
        for i, span in enumerate(clip_spans(n, fps, clip_s, min_clip_s, gop)):
            out.append(render_clip(d, meta, clip_key(level, traj, i), level, traj, span))
    keys = [c.key for c in out]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise ClipError(f"{renders_root}/index.parquet: clip keys collide: {dup[:5]}")
    return out
