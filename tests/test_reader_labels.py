"""The labels as trainers read them (#33), on real Stage I + Stage II output: two 90-frame
trajectories with short holds (3-9 frames, so the action changes often), rendered at 64x36.

- action timing: action[t] is the input applied after frame t, so the motion from frame t to
  t+1 agrees with it; the contract's own order (the input that produced frame t) does not;
- statistics over every episode, with per-episode stats in meta/episodes as LeRobot writes them;
- the render folder's intrinsics at the render's size, and one camera JSON per view;
- orientation that does not jump.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from stages.core.actions import ACTIONS, DIRECTIONS
from stages.core.trajectory import VIEWS
from stages.datasets.clip_spans import list_clips
from stages.media.video import read_frames

FRAMES = 90


@pytest.fixture(scope="module")
def turning(sample_library, tmp_path_factory):
    """(renders root, index): two trajectories whose action changes every 3-9 frames."""
    from stages.config import load_params
    from stages.inventory import run_inventory, write_parquet
    from stages.render import run_render
    from stages.trajectories import run_trajectories

    from .conftest import small_render_cfg

    cfg = load_params(overrides=[
        "trajectories.per_level=2", f"trajectories.frames={FRAMES}",
        "trajectories.actions.hold_min_frames=3", "trajectories.actions.hold_max_frames=9",
        "trajectories.levels=[NatureValley/AlpineMeadow]",
        "trajectories.characters=[CharacterPack/Alex]"])
    inv = run_inventory(sample_library, cfg.inventory, "overrides.yaml")
    trajs = tmp_path_factory.mktemp("turning_traj")
    assert run_trajectories(cfg, inv.levels, inv.characters, sample_library, trajs).empty
    root = tmp_path_factory.mktemp("turning_renders")
    index, fails = run_render(small_render_cfg(width=64, height=36, spatial_samples=1,
                                               temporal_samples=1, preview=False), trajs, root)
    assert fails.empty
    write_parquet(index, root / "index.parquet")
    return root, index


@pytest.fixture(scope="module")
def clips(turning):
    root, index = turning
    return list_clips(root, index, 0.0, 1.0)


@pytest.fixture(scope="module")
def lerobot(clips, tmp_path_factory):
    from stages.datasets.lerobot_v3 import export_lerobot

    out = tmp_path_factory.mktemp("lr") / "lerobot"
    info = export_lerobot(clips, {c.key: f"task {c.key}" for c in clips}, out)
    return out, info


def _agrees(action: str, move_xy: np.ndarray, yaw_deg: float) -> bool:
    """The horizontal move from one frame to the next is what ``action`` asks for, in the
    character's frame at ``yaw_deg``: standing still for IDLE, else within 22.5° (half the gap
    between two of the eight directions) of the action's direction."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    local = (move_xy[0] * c + move_xy[1] * s, -move_xy[0] * s + move_xy[1] * c)
    m = math.hypot(*local)
    if action == "IDLE":
        return m < 1e-3
    dx, dy = DIRECTIONS[action]
    return m >= 1e-3 and (local[0] * dx + local[1] * dy) / m > math.cos(math.radians(22.5))


def test_next_frame_motion_agrees_with_action_t_in_the_lerobot_export(lerobot, clips):
    root, info = lerobot
    data = pd.read_parquet(root / info["data_path"].format(chunk_index=0, file_index=0))
    assert "applied after observing frame t" in info["features"]["action"]["description"]
    assert "frame t+1" in info["conventions"]["action_timing"]
    hits = {"export": 0, "recorded": 0}
    checked = changes = 0
    for ep, clip in enumerate(clips):
        rows = data[data["episode_index"] == ep].sort_values("frame_index")
        state = np.stack(list(rows["observation.state"])).astype(np.float64)
        names = info["features"]["observation.state"]["names"]
        xy = state[:, [names.index("pos_x"), names.index("pos_y")]]
        yaw = np.degrees(np.arctan2(state[:, names.index("yaw_sin")],
                                    state[:, names.index("yaw_cos")]))
        act = [ACTIONS[i] for i in rows["action.index"]]
        onehot = np.stack(list(rows["action"]))
        assert [ACTIONS[int(np.argmax(a[:-1]))] for a in onehot] == act
        valid = rows["action.valid"].tolist()
        assert valid[-1] is False and sum(valid) == len(valid) - 1  # no respawn here
        # the trajectory's own label: the input of the tick that produced the frame
        recorded = pd.read_parquet(clip.render_dir / "frames.parquet").sort_values("frame")
        rec = recorded["action"].astype(str).tolist()
        assert act[:-1] == rec[1:]  # shifted by exactly one frame
        changes += sum(a != b for a, b in zip(rec, rec[1:], strict=False))
        for t in range(len(act) - 1):
            move = xy[t + 1] - xy[t]
            hits["export"] += _agrees(act[t], move, yaw[t])
            hits["recorded"] += _agrees(rec[t], move, yaw[t])
            checked += 1
    assert changes >= 20  # the fixture changes action often: the check can tell the two apart
    assert hits["export"] / checked >= 0.99, hits
    assert hits["recorded"] / checked < 0.95, hits  # the old order: stale at every change


def test_shard_sample_states_the_timing_and_matches_the_lerobot_actions(clips, lerobot,
                                                                          tmp_path):
    import webdataset as wds

    from stages.config import load_params
    from stages.shard import write_shards

    caps = pd.DataFrame({"key": [c.key for c in clips], "caption": ["c"] * len(clips)})
    levels = pd.DataFrame({"level_id": ["NatureValley/AlpineMeadow"], "category": ["nature"]})
    write_shards(clips, caps, levels, tmp_path, load_params().shard)
    root, info = lerobot
    data = pd.read_parquet(root / info["data_path"].format(chunk_index=0, file_index=0))
    for ep, s in enumerate(wds.WebDataset(str(tmp_path / "shard-000000.tar"),
                                          shardshuffle=False)):
        meta = json.loads(s["json"])
        assert meta["schema_version"] == 2
        assert "applied after observing frame t" in meta["conventions"]["action_timing"]
        assert meta["controls"]["timing"] == meta["conventions"]["action_timing"]
        seq = meta["controls"]["action_sequence"]
        rows = data[data["episode_index"] == ep].sort_values("frame_index")
        assert [a["action"] for a in seq] == [ACTIONS[i] for i in rows["action.index"]]
        assert [a["valid"] for a in seq] == rows["action.valid"].tolist()
        fr = pd.read_parquet(io.BytesIO(s["frames.parquet"]))
        assert fr["action"].tolist() == [a["action"] for a in seq]
        assert fr["action_recorded"].tolist()[1:] == fr["action"].tolist()[:-1]
        # the view's turn from t to t+1 is the LeRobot action's mouse column
        assert np.allclose([a["view_yaw_delta_deg"] for a in seq],
                           [a[-1] for a in rows["action"]], atol=1e-4)
        # one camera file per view, cut to the clip, equal to the sample's extrinsics
        for v in VIEWS:
            cam = json.loads(s[f"{v}.camera.json"])
            assert cam["frame_count"] == len(seq) and (cam["width"], cam["height"]) == (64, 36)
            assert [f["camera_to_world"] for f in cam["frames"]] == \
                meta["views"][v]["extrinsics_world_from_camera"]


def test_stats_cover_every_episode_with_counts_in_frames(lerobot):
    root, info = lerobot
    stats = json.loads((root / "meta" / "stats.json").read_text())
    data = pd.read_parquet(root / info["data_path"].format(chunk_index=0, file_index=0))
    eps = pd.read_parquet(root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    for key in ("observation.state", "action", "observation.camera.top.pose"):
        a = np.stack(list(data[key])).astype(np.float64)
        assert stats[key]["count"] == [len(data)] == [info["total_frames"]]
        assert np.allclose(stats[key]["mean"], a.mean(0), atol=1e-6)
        assert np.allclose(stats[key]["std"], a.std(0), atol=1e-6)
        assert np.allclose(stats[key]["min"], a.min(0)) and np.allclose(stats[key]["max"],
                                                                        a.max(0))
        for ep in eps.to_dict("records"):  # per episode, as LeRobot's writer stores them
            part = a[ep["dataset_from_index"]:ep["dataset_to_index"]]
            assert list(ep[f"stats/{key}/count"]) == [ep["length"]]
            assert np.allclose(np.asarray(ep[f"stats/{key}/mean"]), part.mean(0), atol=1e-6)
            assert np.allclose(np.asarray(ep[f"stats/{key}/std"]), part.std(0), atol=1e-6)
    # the two episodes differ: a first-episode-only std would not be the dataset's
    s0 = np.asarray(eps.iloc[0]["stats/observation.state/std"])
    assert not np.allclose(s0, stats["observation.state"]["std"], atol=1e-3)
    for v in VIEWS:  # videos: the sampled frames of every episode, per channel in [0, 1]
        key = f"observation.images.{v}"
        pix = []
        for ep in eps.to_dict("records"):
            p = root / info["video_path"].format(video_key=key, chunk_index=0,
                                                 file_index=ep["episode_index"])
            frames = read_frames(p)  # 90 frames: LeRobot samples all of a short episode
            assert len(frames) == ep["length"] == FRAMES
            assert list(ep[f"stats/{key}/count"]) == [FRAMES]
            pix.append(np.stack(frames).reshape(-1, 3) / 255.0)
        allpix = np.concatenate(pix)
        assert stats[key]["count"] == [FRAMES * len(eps)]
        assert np.asarray(stats[key]["mean"]).shape == (3, 1, 1)
        assert np.allclose(np.asarray(stats[key]["mean"]).ravel(), allpix.mean(0), atol=1e-6)
        assert np.allclose(np.asarray(stats[key]["std"]).ravel(), allpix.std(0), atol=1e-6)


def test_orientation_is_continuous_and_quaternions_keep_w_non_negative(lerobot):
    from stages.datasets.reader_labels import canonical_quat, yaw_sin_cos

    root, info = lerobot
    data = pd.read_parquet(root / info["data_path"].format(chunk_index=0, file_index=0))
    names = info["features"]["observation.state"]["names"]
    st = np.stack(list(data["observation.state"])).astype(np.float64)
    q = st[:, [names.index(k) for k in ("rot_w", "rot_x", "rot_y", "rot_z")]]
    assert (q[:, 0] >= 0).all() and np.allclose(np.linalg.norm(q, axis=1), 1, atol=1e-5)
    sc = st[:, [names.index("yaw_sin"), names.index("yaw_cos")]]
    assert np.allclose(np.hypot(sc[:, 0], sc[:, 1]), 1, atol=1e-5)
    # the quaternion and sin/cos say the same yaw
    assert np.allclose(np.arctan2(sc[:, 0], sc[:, 1]),
                       2 * np.arctan2(q[:, 3], q[:, 0]), atol=1e-4)
    for v in VIEWS:
        assert (np.stack(list(data[f"observation.camera.{v}.pose"]))[:, 3] >= 0).all()
    # through 0°/360°: the contract's yaw jumps by 359°, sin/cos move by under 2°
    yaw = np.array([356.0, 358.0, 0.0, 2.0, 4.0])
    half = np.radians(yaw) / 2
    raw = np.stack([np.cos(half), 0 * half, 0 * half, np.sin(half)], 1)
    assert raw[1, 0] < 0 < raw[2, 0]  # Stage I's quaternion flips sign here
    s, c = yaw_sin_cos(yaw)
    assert np.abs(np.diff(np.stack([s, c], 1), axis=0)).max() < np.radians(2.01)
    assert (canonical_quat(raw)[:, 0] >= 0).all()


def test_render_folder_intrinsics_are_at_the_render_size_and_project_onto_the_image(turning):
    """Stage I writes K for 1280x720; the render folder's cameras.parquet and camera JSONs carry
    K for the 64x36 videos beside them: the character's feet project into the back view."""
    root, index = turning
    d = root / index["path"].iloc[0]
    meta = json.loads((d / "meta.json").read_text())
    assert meta["schema_version"] == 2
    cams = pd.read_parquet(d / "cameras.parquet")
    frames = pd.read_parquet(d / "frames.parquet").sort_values("frame")
    assert set(cams["width"]) == {64} and set(cams["height"]) == {36}
    fx = 32 / np.tan(np.radians(cams["fov_deg"].to_numpy()) / 2)
    assert np.allclose(cams["fx"], fx) and np.allclose(cams["fy"], fx)
    assert set(cams["cx"]) == {32.0} and set(cams["cy"]) == {18.0}
    src = pd.read_parquet(d / "cameras.parquet")
    assert {"sha256"} <= set(meta) and "back.camera.json" in meta["sha256"]
    for v in VIEWS:
        cam = json.loads((d / f"{v}.camera.json").read_text())
        assert cam["schema"] == "wmforge.camera/1" and cam["view"] == v
        assert (cam["width"], cam["height"], cam["fps"]) == (64, 36, 30)
        assert cam["frame_count"] == len(read_frames(d / f"{v}.mp4")) == FRAMES
        assert "OpenCV" in cam["conventions"]["camera_to_world"]
        rows = src[src["view"] == v].sort_values("frame")
        c2w = np.array([f["camera_to_world"] for f in cam["frames"]])
        assert np.allclose(c2w[:, :3, 3], rows[["pos_x", "pos_y", "pos_z"]], atol=1e-5)
        assert np.allclose(np.linalg.det(c2w[:, :3, :3]), 1, atol=1e-4)
        assert np.allclose(c2w[:, 3], [0, 0, 0, 1])
        k = np.array([f["K"] for f in cam["frames"]])
        assert np.allclose(k[:, 0, 0], rows["fx"]) and np.allclose(k[:, :2, 2], [32, 18])
        if v != "back":
            continue
        # project the character (its feet, lifted 0.9 m to its middle) through K and the pose
        mid = frames[["pos_x", "pos_y", "pos_z"]].to_numpy() + [0, 0, 0.9]
        for f in range(0, FRAMES, 10):
            p = np.linalg.inv(c2w[f]) @ np.append(mid[f], 1.0)
            assert p[2] > 0  # in front of the camera
            u, w = (k[f] @ p[:3])[:2] / p[2]
            assert 0.25 * 64 < u < 0.75 * 64 and 0 < w < 36, (f, u, w)
