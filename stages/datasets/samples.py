"""One dataset sample per clip: the per-view MP4s, the JSON metadata (notes §4.3 schema,
extended), the caption, and the per-frame actions and poses as Parquet."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.actions import ACTIONS, yaw_deltas
from ..core.trajectory import VIEWS
from .clip_spans import Clip

SAMPLE_SCHEMA_VERSION = 1
ACTION_KEYS = {"W": ["W"], "A": ["A"], "S": ["S"], "D": ["D"], "WA": ["W", "A"],
               "WD": ["W", "D"], "SA": ["S", "A"], "SD": ["S", "D"], "IDLE": []}


def quat_to_matrix(w: float, x: float, y: float, z: float) -> list[list[float]]:
    return [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]


def extrinsic(row: dict) -> list[list[float]]:
    """4x4 world-from-camera (OpenCV axes: x right, y down, z forward), metres."""
    r = quat_to_matrix(row["rot_w"], row["rot_x"], row["rot_y"], row["rot_z"])
    t = (row["pos_x"], row["pos_y"], row["pos_z"])
    return [[round(r[i][0], 6), round(r[i][1], 6), round(r[i][2], 6), round(t[i], 6)]
            for i in range(3)] + [[0.0, 0.0, 0.0, 1.0]]


def intrinsics_matrix(fx: float, fy: float, cx: float, cy: float) -> list[list[float]]:
    return [[round(fx, 6), 0.0, round(cx, 6)], [0.0, round(fy, 6), round(cy, 6)],
            [0.0, 0.0, 1.0]]


def clip_frames(clip: Clip) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The clip's rows of frames.parquet and cameras.parquet, ``frame`` renumbered from 0 and
    the trajectory's frame kept as ``source_frame``."""
    fr = pd.read_parquet(clip.render_dir / "frames.parquet")
    fr = fr[(fr["frame"] >= clip.start) & (fr["frame"] < clip.end)].sort_values("frame")
    cams = pd.read_parquet(clip.render_dir / "cameras.parquet")
    cams = cams[(cams["frame"] >= clip.start) & (cams["frame"] < clip.end)]
    cams = cams.sort_values(["frame", "view"], key=lambda s: s.map(
        {v: i for i, v in enumerate(VIEWS)}) if s.name == "view" else s)
    for df in (fr, cams):
        df.insert(1, "source_frame", df["frame"])
        df["frame"] = df["frame"] - clip.start
    fr["t"] = fr["frame"] / clip.fps
    # Stage I writes K for its nominal camera size; the videos have the render's size, so the
    # intrinsics shipped with them are recomputed from each frame's fov at that size
    w, h = clip.width, clip.height
    fx = (w / 2) / np.tan(np.radians(cams["fov_deg"].to_numpy(np.float64)) / 2)
    cams = cams.assign(width=w, height=h, fx=fx, fy=fx, cx=w / 2, cy=h / 2)
    return fr.reset_index(drop=True), cams.reset_index(drop=True)


def _f(x: Any) -> float:
    v = float(x)
    return round(v, 6) if math.isfinite(v) else 0.0


def camera_yaws(cams: pd.DataFrame, view: str = "back") -> list[float]:
    """Yaw (deg, CCW from +X) of a view's optical axis per frame, from its recorded pose
    (world-from-camera, OpenCV axes: the axis is the camera's +z)."""
    c = cams[cams["view"] == view].sort_values("frame")
    out = []
    for r in c.to_dict("records"):
        m = quat_to_matrix(r["rot_w"], r["rot_x"], r["rot_y"], r["rot_z"])
        out.append(math.degrees(math.atan2(m[1][2], m[0][2])))
    return out


def turn_controls(frames: pd.DataFrame, cams: pd.DataFrame, fx_px: float) -> list[dict]:
    """Per frame: the character's yaw change, the (back) view's yaw change, and the view's
    change as a horizontal mouse delta in pixels at the view's focal length (a turn to the
    right, clockwise, is a positive x), so every rotation of the views is in the controls."""
    char = yaw_deltas([float(y) for y in frames.sort_values("frame")["yaw_deg"]])
    view = yaw_deltas(camera_yaws(cams))
    return [{"yaw_delta_deg": round(c, 6), "view_yaw_delta_deg": round(v, 6),
             "mouse_delta": [round(-fx_px * math.tan(math.radians(v)), 4), 0.0]}
            for c, v in zip(char, view, strict=True)]


def sample_json(clip: Clip, frames: pd.DataFrame, cams: pd.DataFrame, caption: dict,
                level: dict, meta: dict, selection: dict | None = None) -> dict:
    """The JSON of one sample: the notes' schema (clip_id, duration, fps, resolution, camera
    fov and intrinsics, controls.action_sequence with one entry per frame, caption,
    quality_score), extended with per-view per-frame extrinsics, character poses and
    schema_version."""
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
            "extrinsics_world_from_camera": [extrinsic(r) for r in c.to_dict("records")],
            "occluded": [bool(o) for o in c["occluded"]],
        }
        if "collapsed" in c:  # trajectory contract v3 (§6.3: views that show the character)
            views[v].update({
                "collapsed": [bool(o) for o in c["collapsed"]],
                "collapsed_share": _f(c["collapsed"].astype(bool).mean()),
                "character_share": [_f(x) for x in c["char_share"]]})
    back = views["back"]
    back_fx = cams[cams["view"] == "back"]["fx"].iloc[0]
    poses = [{"frame": int(r["frame"]), "position": [_f(r["pos_x"]), _f(r["pos_y"]),
                                                     _f(r["pos_z"])],
              "rotation_wxyz": [_f(r["rot_w"]), _f(r["rot_x"]), _f(r["rot_y"]), _f(r["rot_z"])],
              "yaw_deg": _f(r["yaw_deg"]), "velocity": [_f(r["vel_x"]), _f(r["vel_y"]),
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
            # mouse_delta: the back view's yaw change this frame as horizontal pixels at its
            # focal length (right turn positive); yaw_delta_deg / view_yaw_delta_deg: the
            # character's and the back view's yaw change, degrees per frame, CCW positive
            "mouse_delta_units": "px at the back view's focal length (x: right turn)",
            "action_sequence": [{"frame": int(f), "action": str(a), "keys": ACTION_KEYS[str(a)],
                                 **turn}
                                for f, a, turn in zip(frames["frame"], frames["action"],
                                                      turn_controls(frames, cams,
                                                                    float(back_fx)),
                                                      strict=True)],
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
        "conventions": "world: right-handed, Z up, metres; extrinsics world-from-camera, OpenCV "
                       "camera axes (x right, y down, z forward); quaternions (w, x, y, z)",
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
