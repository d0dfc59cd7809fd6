"""Replay arithmetic (stages/core/replay.py, engine/replay_poses.py, engine/clips.py)."""

import math

import pytest

from stages.core import replay
from stages.engine.replay_poses import cv_to_panda_mat, jitter_offsets, temporal_offsets

ANIMS = {"W": "walk", "A": "strafe", "S": "back", "D": "strafe", "WA": "walk", "WD": "walk",
         "SA": "back", "SD": "back", "IDLE": "idle"}


def test_clip_schedule_is_frame_driven_and_shows_idle_when_blocked():
    acts = ["IDLE"] * 3 + ["W"] * 4 + ["W"] * 2 + ["A"] * 2
    speeds = [0.0] * 3 + [1.6] * 4 + [0.0] * 2 + [1.6] * 2
    sched = replay.clip_schedule(acts, speeds, [0] * 11, ANIMS, 30)
    assert [c for c, _ in sched] == ["idle"] * 3 + ["walk"] * 4 + ["idle"] * 2 + ["strafe"] * 2
    # clip time = frames since that clip started / fps
    assert [round(t * 30) for _, t in sched] == [0, 1, 2, 0, 1, 2, 3, 0, 1, 0, 1]


def test_clip_schedule_falls_back_to_idle_or_rest_for_missing_clips():
    sched = replay.clip_schedule(["W", "IDLE"], [1.6, 0.0], [0, 0], ANIMS, 30,
                                 available={"idle"})
    assert [c for c, _ in sched] == ["idle", "idle"]
    sched = replay.clip_schedule(["W"], [1.6], [0], {"W": "walk", "IDLE": None}, 30, set())
    assert sched == [(None, 0.0)]
    with pytest.raises(ValueError, match="row 0"):
        replay.clip_schedule(["JUMP"], [0.0], [0], ANIMS, 30)


def test_standing_without_an_idle_clip_holds_the_walk_clips_first_frame():
    """IDLE looks idle: no idle clip → the walk clip held at its first frame (a neutral stance),
    never the bind pose; the walk starts from its own beginning afterwards."""
    anims = {"W": "walk", "IDLE": None}
    sched = replay.clip_schedule(["IDLE"] * 3 + ["W"] * 3 + ["IDLE"] * 2, [0.0] * 3 + [1.6] * 3
                                 + [0.0] * 2, [0] * 8, anims, 30, {"walk"})
    assert sched == [("walk", 0.0)] * 3 + [("walk", i / 30) for i in range(3)] + [
        ("walk", 0.0)] * 2
    assert replay.idle_pose_source(anims, {"walk"}) == "walk_first_frame"
    assert replay.idle_pose_source(ANIMS, {"idle", "walk"}) == "idle_clip"
    assert replay.idle_pose_source(anims, set()) == "bind_pose"
    # no clips at all: the bind pose is all there is
    assert replay.clip_schedule(["IDLE"], [0.0], [0], anims, 30, set()) == [(None, 0.0)]


def test_temporal_interpolation_never_crosses_a_respawn():
    rows = [{"pos_x": float(i), "pos_y": 0.0, "pos_z": 0.0, "rot_w": 1.0, "rot_x": 0.0,
             "rot_y": 0.0, "rot_z": 0.0, "scale_x": 1.0, "scale_y": 1.0, "scale_z": 1.0}
            for i in range(4)]
    rows[2]["pos_x"] = 100.0  # teleport at the respawn
    segs = [0, 0, 1, 1]
    assert replay.character_pose(rows, 0, 0.25, segs)["pos"][0] == pytest.approx(0.25)
    assert replay.character_pose(rows, 1, 0.25, segs)["pos"][0] == 1.0  # clamped
    assert replay.character_pose(rows, 1, 0.0, segs)["pos"] == (1.0, 0.0, 0.0)  # exact


def test_sample_offsets_centre_on_the_frame():
    assert jitter_offsets(1) == [(0.0, 0.0)] and temporal_offsets(1, 0.5) == [0.0]
    j = jitter_offsets(8)
    assert len(set(j)) == 8 and abs(sum(x for x, _ in j)) < 1e-9
    assert all(abs(x) < 0.5 and abs(y) < 0.5 for x, y in j)
    t = temporal_offsets(4, 0.5)
    assert t == pytest.approx([-0.1875, -0.0625, 0.0625, 0.1875])


def test_opencv_to_panda_camera_axes():
    # identity OpenCV pose looks along world +Z with image-down = world +Y
    x, y, z = cv_to_panda_mat((1.0, 0.0, 0.0, 0.0))
    assert x == [1, 0, 0] and y == [0, 0, 1] and z == [0, -1, -0]


def test_projection_of_a_point_in_front_of_the_camera():
    s = math.sqrt(0.5)
    # camera at origin looking along world +X (OpenCV z = +X, x = -Y, y = -Z)
    q = (0.5, -0.5, 0.5, -0.5)
    u, v, d = replay.project((5.0, 0.0, 0.0), (0, 0, 0), q, 100, 100, 64, 36)
    assert (u, v, d) == pytest.approx((64, 36, 5.0))
    u, v, d = replay.project((5.0, -1.0, 0.0), (0, 0, 0), q, 100, 100, 64, 36)
    assert u == pytest.approx(64 + 20) and v == pytest.approx(36)  # -Y is image right
    assert s > 0
