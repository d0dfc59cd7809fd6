"""LeRobot dataset v3.0 export: one episode per clip.

Layout (lerobot's ``CODEBASE_VERSION = "v3.0"``): ``meta/info.json`` (codebase_version, fps,
features, path templates), ``meta/tasks.parquet``, ``meta/episodes/chunk-XXX/file-XXX.parquet``,
``meta/stats.json``, ``data/chunk-XXX/file-XXX.parquet`` (every frame of a chunk's episodes:
action, state, camera poses and intrinsics, indices) and
``videos/observation.images.<view>/chunk-XXX/file-XXX.mp4``.

Labels as trainers read them: ``action[t]`` is the input applied after frame t (producing
t+1), ``action.valid`` says where frame t+1 is its result; the state carries sin/cos of the yaw
and a w >= 0 quaternion; statistics cover every episode (lerobot_stats). The conventions are
written in ``info.json`` (``conventions``, and each feature's ``description``).

Choice: each episode's video is its own file (file index = episode index within the chunk), so
videos are the rendered bytes (or keyframe cuts) with no concatenation; the episode table maps
every episode to its file and time span, which is all the v3 reader needs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.actions import ACTIONS
from ..core.trajectory import VIEWS
from .clip_spans import Clip
from .layer_exports import clip_array, common_layers, feature_key, layer_stats, lerobot_features
from .lerobot_stats import aggregate, as_json, episode_columns, feature_stats, video_stats
from .reader_labels import ACTION_TIMING, ORIENTATION, POSITION_POINT
from .samples import CONVENTIONS, export_frames, view_video

CODEBASE_VERSION = "v3.0"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
# export schema 2 (was: yaw_deg in place of yaw_sin, yaw_cos; action[t] = the input that
# produced frame t; stats.json from the first episode only, no per-episode stats)
EXPORT_SCHEMA_VERSION = 2
STATE_NAMES = ["pos_x", "pos_y", "pos_z", "rot_w", "rot_x", "rot_y", "rot_z", "yaw_sin",
               "yaw_cos", "vel_x", "vel_y", "vel_z", "speed", "grounded"]
POSE_NAMES = ["pos_x", "pos_y", "pos_z", "rot_w", "rot_x", "rot_y", "rot_z"]
K_NAMES = ["fx", "fy", "cx", "cy"]


def _features(width: int, height: int, fps: int) -> dict:
    feats: dict[str, dict] = {}
    for v in VIEWS:
        feats[f"observation.images.{v}"] = {
            "dtype": "video", "shape": [height, width, 3],
            "names": ["height", "width", "channels"],
            "info": {"video.height": height, "video.width": width, "video.codec": "h264",
                     "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": fps,
                     "video.channels": 3, "has_audio": False}}
    feats["observation.state"] = {"dtype": "float32", "shape": [len(STATE_NAMES)],
                                  "names": STATE_NAMES,
                                  "description": f"{POSITION_POINT}; {ORIENTATION}; velocity m/s "
                                                 "(world), speed m/s (horizontal), grounded 0/1"}
    for v in VIEWS:
        feats[f"observation.camera.{v}.pose"] = {
            "dtype": "float32", "shape": [7], "names": POSE_NAMES,
            "description": "world-from-camera, OpenCV axes (x right, y down, z forward), m"}
        feats[f"observation.camera.{v}.intrinsics"] = {
            "dtype": "float32", "shape": [4], "names": K_NAMES,
            "description": f"px at the video's size ({width}x{height}); principal point at "
                           "the image centre, pixel centres at +0.5"}
    feats["action"] = {"dtype": "float32", "shape": [len(ACTIONS) + 1],
                       "names": [*ACTIONS, "view_yaw_delta_deg"],
                       "description": "one-hot of the key state (W A S D WA WD SA SD IDLE), then "
                                      "the back view's yaw change from frame t to t+1 (deg, CCW "
                                      "positive): the mouse. " + ACTION_TIMING}
    feats["action.index"] = {"dtype": "int64", "shape": [1], "names": None,
                             "description": "index of action[t] in W A S D WA WD SA SD IDLE"}
    feats["action.valid"] = {"dtype": "bool", "shape": [1], "names": None,
                             "description": "frame t+1 of this episode is the result of "
                                            "action[t] (false on the last frame and before a "
                                            "respawn)"}
    for k, dt in (("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"),
                  ("index", "int64"), ("task_index", "int64")):
        feats[k] = {"dtype": dt, "shape": [1], "names": None}
    return feats


def _nested(a: np.ndarray):
    """(frames, H, W[, C]) → a pyarrow column of nested lists (one H x W[x C] list per row)."""
    import pyarrow as pa

    arr = pa.array(np.ascontiguousarray(a).reshape(-1))
    for d in reversed(a.shape[1:]):
        arr = pa.ListArray.from_arrays(pa.array(np.arange(0, len(arr) + 1, d, dtype=np.int32)),
                                       arr)
    return arr


def _write_data(path: Path, frames: list[pd.DataFrame], layers: list[dict[str, np.ndarray]]
                ) -> None:
    """One data file: the frames' columns, then each ground-truth layer's column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False)
    for key in layers[0]:
        table = table.append_column(key, _nested(np.concatenate([g[key] for g in layers])))
    pq.write_table(table, path, compression="zstd")


def export_lerobot(clips: list[Clip], tasks_by_key: dict[str, str], out: Path,
                   chunk_size: int = 1000) -> dict:
    """Write the export under ``out`` (replaced) and return info.json."""
    if out.exists():
        shutil.rmtree(out)
    (out / "meta").mkdir(parents=True)
    if not clips:
        raise ValueError("no rendered clips to export")
    fps = clips[0].fps
    width, height = clips[0].width, clips[0].height
    odd = [c.key for c in clips if (c.fps, c.width, c.height) != (fps, width, height)]
    if odd:
        raise ValueError(f"LeRobot needs one fps and one resolution per dataset: clip {odd[0]} "
                         f"differs from {clips[0].key} ({fps} fps, {width}x{height})")
    features = _features(width, height, fps)
    metas = [json.loads((c.render_dir / "meta.json").read_text()) for c in clips]
    layers = common_layers(clips, metas)
    if layers:  # ground truth: per view and layer, one array per frame (shape, dtype, units)
        features.update(lerobot_features(layers, metas[0]["ground_truth"].get("units") or {},
                                         width, height))
    task_list = sorted(set(tasks_by_key.get(c.key, "") for c in clips))
    task_index = {t: i for i, t in enumerate(task_list)}
    data_parts: dict[int, list[tuple[pd.DataFrame, dict[str, np.ndarray]]]] = {}
    episodes = []
    ep_stats: list[dict[str, dict[str, np.ndarray]]] = []
    index = 0
    scratch = out / ".scratch"
    scratch.mkdir()
    for ep, clip in enumerate(clips):
        chunk, file_index = divmod(ep, chunk_size)
        frames, cams = export_frames(clip)
        n = len(frames)
        act = frames["action"].astype(str).tolist()
        onehot = np.zeros((n, len(ACTIONS) + 1), np.float32)
        onehot[np.arange(n), [ACTIONS.index(a) for a in act]] = 1
        onehot[:, -1] = frames["view_yaw_delta_deg"].to_numpy(np.float32)
        state = frames[STATE_NAMES[:-1]].to_numpy(np.float32)
        state = np.concatenate([state, frames[["grounded"]].to_numpy(np.float32)], axis=1)
        d = {"observation.state": list(state), "action": list(onehot),
             "action.index": np.array([ACTIONS.index(a) for a in act], np.int64),
             "action.valid": frames["action_valid"].to_numpy(bool),
             "timestamp": (np.arange(n) / fps).astype(np.float32),
             "frame_index": np.arange(n, dtype=np.int64),
             "episode_index": np.full(n, ep, np.int64),
             "index": np.arange(index, index + n, dtype=np.int64),
             "task_index": np.full(n, task_index[tasks_by_key.get(clip.key, "")], np.int64)}
        for v in VIEWS:
            c = cams[cams["view"] == v].sort_values("frame")
            d[f"observation.camera.{v}.pose"] = list(c[POSE_NAMES].to_numpy(np.float32))
            d[f"observation.camera.{v}.intrinsics"] = list(c[K_NAMES].to_numpy(np.float32))
        df = pd.DataFrame(d)
        # per-episode statistics of every numeric feature, as LeRobot's writer computes them
        stats = {k: feature_stats(np.stack(list(df[k])) if df[k].dtype == object
                                  else df[k].to_numpy())
                 for k in df.columns}
        gt: dict[str, np.ndarray] = {}
        for v in VIEWS:
            for layer in layers:
                key = feature_key(layer, v)
                gt[key] = clip_array(clip, v, layer)
                if len(gt[key]) != n:
                    raise ValueError(f"{clip.render_dir}: {v}.{layer} has {len(gt[key])} "
                                     f"frames for the clip's {n}")
                ls = layer_stats(layer, gt[key])
                if ls is not None:
                    stats[key] = ls
        data_parts.setdefault(chunk, []).append((df, gt))
        row: dict = {"episode_index": ep, "tasks": [tasks_by_key.get(clip.key, "")],
                     "length": n, "clip_key": clip.key, "level_id": clip.level_id,
                     "trajectory": clip.trajectory, "data/chunk_index": chunk,
                     "data/file_index": 0, "dataset_from_index": index,
                     "dataset_to_index": index + n, "meta/episodes/chunk_index": 0,
                     "meta/episodes/file_index": 0}
        for v in VIEWS:
            key = f"observation.images.{v}"
            dst = out / VIDEO_PATH.format(video_key=key, chunk_index=chunk,
                                          file_index=file_index)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(view_video(clip, v, scratch), dst)
            row[f"videos/{key}/chunk_index"] = chunk
            row[f"videos/{key}/file_index"] = file_index
            row[f"videos/{key}/from_timestamp"] = 0.0
            row[f"videos/{key}/to_timestamp"] = n / fps
            stats[key] = video_stats(dst, n)
        row.update(episode_columns(stats))
        ep_stats.append(stats)
        episodes.append(row)
        index += n
    shutil.rmtree(scratch)
    for chunk, parts in sorted(data_parts.items()):
        p = out / DATA_PATH.format(chunk_index=chunk, file_index=0)
        p.parent.mkdir(parents=True, exist_ok=True)
        _write_data(p, [x for x, _ in parts], [g for _, g in parts])
    ep_path = out / EPISODES_PATH.format(chunk_index=0, file_index=0)
    ep_path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(episodes).to_parquet(ep_path, index=False)
    tasks = pd.DataFrame({"task_index": list(range(len(task_list)))},
                         index=pd.Index(task_list, name="task"))
    tasks.to_parquet(out / "meta" / "tasks.parquet")
    # the whole dataset: every episode's statistics aggregated (count in frames)
    stats_all = {k: as_json(aggregate([s[k] for s in ep_stats])) for k in ep_stats[0]}
    (out / "meta" / "stats.json").write_text(json.dumps(stats_all, indent=1) + "\n")
    info = {"codebase_version": CODEBASE_VERSION, "robot_type": "wmforge_character",
            "total_episodes": len(clips), "total_frames": int(index),
            "total_tasks": len(task_list), "chunks_size": chunk_size,
            "data_files_size_in_mb": 100, "video_files_size_in_mb": 500, "fps": fps,
            "splits": {"train": f"0:{len(clips)}"}, "data_path": DATA_PATH,
            "video_path": VIDEO_PATH, "features": features,
            # not a LeRobot field (its reader ignores it, with a warning): how to read the labels
            "conventions": {"export_schema_version": EXPORT_SCHEMA_VERSION, **CONVENTIONS,
                            "stats": "meta/stats.json: every episode's statistics aggregated "
                                     "(count in frames; videos: ~100 sampled frames per "
                                     "episode, per channel in [0, 1]); per episode: the "
                                     "stats/<feature>/<stat> columns of meta/episodes"}}
    (out / "meta" / "info.json").write_text(json.dumps(info, indent=1) + "\n")
    return info
