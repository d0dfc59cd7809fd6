"""Per-frame controls in the convention trainers read: ``action[t]`` is the input applied after
observing frame t, and frame t+1 is its result (LeRobot's ``a_t`` after ``o_t``; world models'
``o_{t+1} = f(o_t, a_t)``).

The trajectory contract records the other way round: its ``action`` at frame t is the input of
the tick that produced frame t (Stage I applies the input, then reads the state). The exports
shift it by one frame; the contract itself is unchanged.

Orientation for learning: sin/cos of the yaw (continuous through 0°/360°) and the yaw-only
quaternion with w >= 0 (one of the two equivalent signs, chosen the same way every frame).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..core.actions import yaw_deltas
from .clip_spans import Clip

ACTION_TIMING = (
    "action[t] is the input applied after observing frame t; frame t+1 is its result (the "
    "reader's convention: LeRobot a_t after o_t, world models o_{t+1} = f(o_t, a_t)). "
    "action_valid[t] is false where frame t+1 is not that result inside this clip: the clip's "
    "last frame (its action is the trajectory's next input when the trajectory goes on, else "
    "the last input held) and the last frame before a respawn. The trajectory files "
    "(data/trajectories, data/renders) keep Stage I's own order: there, action[t] is the input "
    "of the tick that produced frame t.")
POSITION_POINT = ("pos: the character's feet, the bottom of the capsule the engine used, for "
                  "every kind of character (a flyer's underside); world frame, metres")
ORIENTATION = ("yaw_sin, yaw_cos: sin and cos of the facing yaw (CCW about +Z from +X), "
               "continuous; rot_w..rot_z: the yaw-only quaternion world-from-character "
               "(w, x, y, z) with w >= 0")


def canonical_quat(q: np.ndarray) -> np.ndarray:
    """Quaternions (N, 4) as (w, x, y, z) with w >= 0 (q and -q are the same rotation)."""
    q = np.asarray(q, np.float64)
    return np.where(q[:, :1] < 0, -q, q)


def reader_controls(clip: Clip, frames_all: pd.DataFrame, view_yaws_all: list[float]
                    ) -> pd.DataFrame:
    """The clip's controls in the reader's convention, one row per clip frame (``frame`` from 0):
    ``action`` (next input), ``action_valid``, ``action_recorded`` (the contract's label of
    this frame), ``yaw_delta_deg`` and ``view_yaw_delta_deg`` (the character's and the back
    view's yaw change from frame t to t+1, degrees, CCW positive; 0 where the trajectory has no
    next frame). ``frames_all`` is the whole trajectory's frames.parquet (sorted by frame) and
    ``view_yaws_all`` the back view's yaw per trajectory frame."""
    fr = frames_all.sort_values("frame").reset_index(drop=True)
    n = len(fr)
    if len(view_yaws_all) != n:
        raise ValueError(f"{clip.render_dir}: {len(view_yaws_all)} camera frames for {n} "
                         "character frames")
    act = fr["action"].astype(str).tolist()
    seg = fr["segment"].to_numpy()
    char_d = yaw_deltas([float(y) for y in fr["yaw_deg"]])
    view_d = yaw_deltas([float(y) for y in view_yaws_all])
    rows = []
    for t in range(clip.start, clip.end):
        nxt = t + 1 < n
        valid = nxt and t + 1 < clip.end and seg[t + 1] == seg[t]
        rows.append({"frame": t - clip.start,
                     "action": act[t + 1] if nxt else act[t],
                     "action_valid": bool(valid),
                     "action_recorded": act[t],
                     # across a respawn the yaw jump is a teleport, not a turn
                     "yaw_delta_deg": char_d[t + 1] if nxt and seg[t + 1] == seg[t] else 0.0,
                     "view_yaw_delta_deg": (view_d[t + 1] if nxt and seg[t + 1] == seg[t]
                                            else 0.0)})
    return pd.DataFrame(rows)


def yaw_sin_cos(yaw_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = np.radians(np.asarray(yaw_deg, np.float64))
    return np.sin(r), np.cos(r)


def mouse_dx(view_yaw_delta_deg: float, fx_px: float) -> float:
    """A view's yaw change as a horizontal mouse delta in pixels at its focal length (a right
    turn, clockwise, is positive)."""
    return -fx_px * math.tan(math.radians(view_yaw_delta_deg))
