"""One dataset sample per clip: the per-view MP4s and camera files, the JSON metadata (notes
§4.3 schema, extended), the caption, and the per-frame actions and poses as Parquet."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.actions import ACTIONS
from ..core.camera_json import camera_json, camera_to_world, quat_matrix
from ..core.trajectory import VIEWS
from .clip_spans import Clip
from .layer_exports import sample_ground_truth
from .reader_labels import (
    ACTION_TIMING,
    ORIENTATION,
    POSITION_POINT,
    canonical_quat,
    mouse_dx,
    reader_controls,
    yaw_sin_cos,
)

# v1 -> v2: controls.action_sequence in the reader's convention (action[t] applied after frame t,
# producing t+1; "valid" and "action_recorded" added; yaw and mouse deltas t -> t+1);
# "conventions" is an object (world, camera, action_timing, position, orientation); poses carry
# yaw_sin_cos and a quaternion with w >= 0; every view has camera_json (<key>.<view>.camera.json
# in the shard); frames.parquet's "action" is the reader's, Stage I's label is "action_recorded".
SAMPLE_SCHEMA_VERSION = 2
ACTION_KEYS = {"W": ["W"], "A": ["A"], "S": ["S"], "D": ["D"], "WA": ["W", "A"],
               "WD": ["W", "D"], "SA": ["S", "A"], "SD": ["S", "D"], "IDLE": []}
CONVENTIONS = {
    "world": "right-handed, Z up, metres, seconds; yaw CCW about +Z from +X, degrees",
    "camera": "extrinsics are camera-to-world (world-from-camera) 4x4 in OpenCV camera axes "
              "(x right, y down, z forward), metres; intrinsics K in pixels at the video's "
              "resolution; <view>.camera.json holds both per frame",
    "quaternions": "(w, x, y, z)",
    "action_timing": ACTION_TIMING,
    "position": POSITION_POINT,
    "orientation": ORIENTATION,
}


def intrinsics_matrix(fx: float, fy: float, cx: float, cy: float) -> list[list[float]]:
    return [[round(fx, 6), 0.0, round(cx, 6)], [0.0, round(fy, 6), round(cy, 6)],
            [0.0, 0.0, 1.0]]


def _read_trajectory(clip: Clip) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole rendered trajectory's frames.parquet and cameras.parquet, sorted."""
    fr = pd.read_parquet(clip.render_dir / "frames.parquet").sort_values("frame")
    cams = pd.read_parquet(clip.render_dir / "cameras.parquet")
    cams = cams.sort_values(["frame", "view"], key=lambda s: s.map(
        {v: i for i, v in enumerate(VIEWS)}) if s.name == "view" else s)
    return fr.reset_index(drop=True), cams.reset_index(drop=True)


def clip_frames(clip: Clip) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The clip's rows of frames.parquet and cameras.parquet, ``frame`` renumbered from 0 and
    the trajectory's frame kept as ``source_frame``."""
    fr, cams = _read_trajectory(clip)
    fr = fr[(fr["frame"] >= clip.start) & (fr["frame"] < clip.end)].copy()
    cams = cams[(cams["frame"] >= clip.start) & (cams["frame"] < clip.end)].copy()
    for df in (fr, cams):
        df.insert(1, "source_frame", df["frame"])
        df["frame"] = df["frame"] - clip.start
    fr["t"] = fr["frame"] / clip.fps
    # Stage I wrote K for its nominal camera size (render folders before schema v2 still carry
    # it); the videos have the render's size, so K is recomputed from each frame's fov there
    w, h = clip.width, clip.height
    fx = (w / 2) / np.tan(np.radians(cams["fov_deg"].to_numpy(np.float64)) / 2)
    cams = cams.assign(width=w, height=h, fx=fx, fy=fx, cx=w / 2, cy=h / 2)
    return fr.reset_index(drop=True), cams.reset_index(drop=True)


def export_frames(clip: Clip) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`clip_frames` as the exports ship it: ``action`` in the reader's convention (the
    input applied after this frame) with ``action_valid`` and ``action_recorded`` (Stage I's
    label of this frame), ``yaw_delta_deg`` / ``view_yaw_delta_deg`` from this frame to the
    next, ``yaw_sin`` / ``yaw_cos``, and quaternions (character and cameras) with w >= 0."""
    fr, cams = clip_frames(clip)
    whole_fr, whole_cams = _read_trajectory(clip)
    ctl = reader_controls(clip, whole_fr, camera_yaws(whole_cams))
    fr = fr.assign(action=ctl["action"].to_numpy(), action_valid=ctl["action_valid"].to_numpy(),
                   action_recorded=fr["action"].astype(str).to_numpy(),
                   yaw_delta_deg=ctl["yaw_delta_deg"].to_numpy(),
                   view_yaw_delta_deg=ctl["view_yaw_delta_deg"].to_numpy())
    sin, cos = yaw_sin_cos(fr["yaw_deg"].to_numpy())
    fr = fr.assign(yaw_sin=sin, yaw_cos=cos)
    q = ["rot_w", "rot_x", "rot_y", "rot_z"]
    fr[q] = canonical_quat(fr[q].to_numpy())
    cams[q] = canonical_quat(cams[q].to_numpy())
    return fr, cams


def _f(x: Any) -> float:
    v = float(x)
    return round(v, 6) if math.isfinite(v) else 0.0


def camera_yaws(cams: pd.DataFrame, view: str = "back") -> list[float]:
    """Yaw (deg, CCW from +X) of a view's optical axis per frame, from its recorded pose
    (world-from-camera, OpenCV axes: the axis is the camera's +z)."""
    c = cams[cams["view"] == view].sort_values("frame")
    out = []
    for r in c.to_dict("records"):
        m = quat_matrix(r["rot_w"], r["rot_x"], r["rot_y"], r["rot_z"])
        out.append(math.degrees(math.atan2(m[1][2], m[0][2])))
    return out


def view_camera_json(clip: Clip, cams: pd.DataFrame, view: str) -> dict:
    """The clip's ``<view>.camera.json`` (frames numbered from the clip's first)."""
    rows = cams[cams["view"] == view].sort_values("frame").to_dict("records")
    return camera_json(view, clip.width, clip.height, clip.fps, rows)


def sample_json(clip: Clip, frames: pd.DataFrame, cams: pd.DataFrame, caption: dict,
                level: dict, meta: dict, selection: dict | None = None) -> dict:
    """The JSON of one sample from :func:`export_frames`' tables: the notes' schema (clip_id,
    duration, fps, resolution, camera fov and intrinsics, controls.action_sequence with one
    entry per frame, caption, quality_score), extended with per-view per-frame extrinsics and
    camera files, character poses, conventions and schema_version."""
    n = len(frames)
    views: dict[str, Any] = {}
    for v in VIEWS:
        c = cams[cams["view"] == v].sort_values("frame")
        first = c.iloc[0]
        fovs = sorted(set(round(float(f), 4) for f in c["fov_deg"]))
        views[v] = {
            "video": f"{v}.mp4",
            "fov_deg": fovs[0] if len(fovs) == 1 else [_f(f) for f in c["fov_deg"]],
            "intrinsics": intrinsics_matrix(first["fx"], first["fy"], first["cx"], first["cy"]),
            "extrinsics_world_from_camera": [camera_to_world(r) for r in c.to_dict("records")],
            "camera_json": f"{v}.camera.json",
            "occluded": [bool(o) for o in c["occluded"]],
        }
        if "collapsed" in c:  # trajectory contract v3 (§6.3: views that show the character)
            views[v].update({
                "collapsed": [bool(o) for o in c["collapsed"]],
                "collapsed_share": _f(c["collapsed"].astype(bool).mean()),
                "character_share": [_f(x) for x in c["char_share"]]})
    back = views["back"]
    back_fx = float(cams[cams["view"] == "back"]["fx"].iloc[0])
    poses = [{"frame": int(r["frame"]), "position": [_f(r["pos_x"]), _f(r["pos_y"]),
                                                     _f(r["pos_z"])],
              "rotation_wxyz": [_f(r["rot_w"]), _f(r["rot_x"]), _f(r["rot_y"]), _f(r["rot_z"])],
              "yaw_deg": _f(r["yaw_deg"]), "yaw_sin_cos": [_f(r["yaw_sin"]), _f(r["yaw_cos"])],
              "velocity": [_f(r["vel_x"]), _f(r["vel_y"]),
                                                        _f(r["vel_z"])],
              "grounded": bool(r["grounded"]), "segment": int(r["segment"]),
              "event": str(r["event"])} for r in frames.to_dict("records")]
    alignment = meta.get("alignment", {})
    lineage = meta.get("lineage") or {}
    return {
        "schema_version": SAMPLE_SCHEMA_VERSION,
        "clip_id": clip.key,
        "duration": round(n / clip.fps, 6),
        "fps": clip.fps,
        "resolution": [clip.width, clip.height],
        "camera": {"view": "back", "fov": back["fov_deg"], "intrinsics": back["intrinsics"]},
        "controls": {
            "input_type": "keyboard",
            "action_space": list(ACTIONS),
            # timing: action[t] is applied after frame t and produces frame t+1; mouse_delta:
            # the back view's yaw change from t to t+1 as horizontal pixels at its focal length
            # (right turn positive); yaw_delta_deg / view_yaw_delta_deg: the character's and
            # the back view's yaw change from t to t+1, degrees, CCW positive
            "timing": ACTION_TIMING,
            "mouse_delta_units": "px at the back view's focal length (x: right turn)",
            "action_sequence": [
                {"frame": int(r["frame"]), "action": str(r["action"]),
                 "keys": ACTION_KEYS[str(r["action"])], "valid": bool(r["action_valid"]),
                 "action_recorded": str(r["action_recorded"]),
                 "yaw_delta_deg": _f(r["yaw_delta_deg"]),
                 "view_yaw_delta_deg": _f(r["view_yaw_delta_deg"]),
                 "mouse_delta": [round(mouse_dx(float(r["view_yaw_delta_deg"]), back_fx), 4),
                                 0.0]}
                for r in frames.to_dict("records")],
        },
        "caption": caption.get("caption", ""),
        "captions": {v: caption.get(f"caption_{v}", "") for v in VIEWS},
        "caption_backend": caption.get("backend", ""),
        # VLM backend: one caption per key frame; every frame reuses the caption of the last key
        # frame at or before it (notes §4.6). Empty for grounded captions.
        "caption_keyframes": json.loads(caption.get("keyframes_json") or "[]"),
        # quality_score: the share of the level's scored views that passed selection (0..1;
        # null when the pipeline ran without the select stage); the parts under "quality"
        "quality_score": (round(float(selection["pass_rate"]), 6)
                          if selection and selection.get("pass_rate") is not None else None),
        "quality": {"aligned_fraction": alignment.get("aligned_fraction"),
                    "level_view_pass_rate": (selection or {}).get("pass_rate"),
                    "level_aes_mean": (selection or {}).get("aes_mean"),
                    "level_lum_mean": (selection or {}).get("lum_mean"),
                    "scorer": (selection or {}).get("scorer")},
        "views": views,
        # the render's ground-truth layers (units, files per view), null when it has none
        "ground_truth": sample_ground_truth(meta),
        "character": {"id": meta.get("character_id"), "poses": poses},
        # lineage: what made these bytes (render meta.json "lineage", DESIGN §6)
        "source": {"level_id": clip.level_id, "level_category": level.get("category"),
                   "lighting": level.get("lighting") or lineage.get("lighting"),
                   "trajectory": clip.trajectory,
                   "start_frame": clip.start, "end_frame": clip.end,
                   "render_key": meta.get("render_key"), "engine": lineage.get("engine"),
                   "engine_version": lineage.get("engine_version"),
                   "code_version": lineage.get("code_version"),
                   "stage1_code_version": lineage.get("stage1_code_version"),
                   "trajectory_seed": lineage.get("trajectory_seed"),
                   "trajectory_index": lineage.get("trajectory_index")},
        "conventions": CONVENTIONS,
    }


def dump_json(obj: dict) -> bytes:
    return (json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n").encode()


def parquet_bytes(df: pd.DataFrame) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    table = pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata({})
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def view_video(clip: Clip, view: str, scratch: Path) -> Path:
    """The clip's video of one view: the rendered file itself for a whole-trajectory clip, or
    a keyframe-aligned cut (no re-encoding) in ``scratch``."""
    from ..media.video import copy_clip

    src = clip.render_dir / f"{view}.mp4"
    if clip.start == 0 and clip.end == clip.source_frames:
        return src
    dst = scratch / f"{clip.key}.{view}.mp4"
    if not dst.exists():
        copy_clip(src, dst, clip.start, clip.frames, clip.fps)
    return dst
