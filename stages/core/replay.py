"""Replay of a recorded trajectory (paper §7.2): per output frame, the transforms to place —
never re-sampled actions, never physics. Standard library only.

- Character: recorded position, rotation and scale, written explicitly; the mesh is placed so its
  lowest point sits at the capsule bottom the engine really used (feet = centre − radius −
  half-height), so it neither floats nor sinks.
- Clip: the recorded action's clip through the nine-action fallback map, the idle clip when a
  moving action made no headway (blocked by a wall), posed by frame number: the clip time is the
  number of frames since that clip started, divided by the fps.
- Temporal samples: transforms linearly interpolated (positions) and slerped (rotations) between
  neighbouring recorded frames at sub-frame offsets; offset 0 is exactly the recorded frame.
"""

from __future__ import annotations

import math
from typing import Any

from .actions import ACTIONS
from .rotations import quat_matrix

BLOCKED_SPEED = 0.1  # m/s: a moving action below this shows the idle clip


def slerp(a: tuple[float, ...], b: tuple[float, ...], u: float) -> tuple[float, ...]:
    if u == 0.0:
        return tuple(a)
    d = sum(x * y for x, y in zip(a, b, strict=True))
    if d < 0:
        b, d = tuple(-x for x in b), -d
    if d > 0.9995:
        r = tuple(x + (y - x) * u for x, y in zip(a, b, strict=True))
    else:
        th = math.acos(min(1.0, d))
        s = math.sin(th)
        r = tuple(math.sin((1 - u) * th) / s * x + math.sin(u * th) / s * y
                  for x, y in zip(a, b, strict=True))
    n = math.sqrt(sum(x * x for x in r))
    return tuple(x / n for x in r)


def lerp(a: tuple[float, ...], b: tuple[float, ...], u: float) -> tuple[float, ...]:
    if u == 0.0:
        return tuple(a)
    return tuple(x + (y - x) * u for x, y in zip(a, b, strict=True))


def idle_pose_source(animations: dict[str, str | None], available: set[str] | None) -> str:
    """What a standing character shows: its idle clip, else the first frame of its walk clip
    held still (a neutral stance), else the bind pose (a model without clips)."""
    def ok(c: str | None) -> bool:
        return c is not None and (available is None or c in available)

    if ok(animations.get("IDLE")):
        return "idle_clip"
    return "walk_first_frame" if ok(animations.get("W")) else "bind_pose"


def clip_schedule(actions: list[str], speeds: list[float], segments: list[int],
                  animations: dict[str, str | None], fps: int,
                  available: set[str] | None = None) -> list[tuple[str | None, float]]:
    """(clip, clip time in s) per frame, from frame numbers only. Standing without an idle
    clip holds the walk clip's first frame (time 0), never the bind pose."""
    out: list[tuple[str | None, float]] = []
    current: tuple[str | None, bool] | None = None
    start = 0
    idle = animations.get("IDLE")
    walk = animations.get("W")
    hold = idle_pose_source(animations, available) == "walk_first_frame"
    for f, (a, v, seg) in enumerate(zip(actions, speeds, segments, strict=True)):
        if a not in ACTIONS:
            raise ValueError(f"frames.parquet: column 'action' row {f}: {a!r}")
        clip = animations.get(a)
        if a != "IDLE" and v < BLOCKED_SPEED and idle is not None:
            clip = idle
        if available is not None and clip not in available:
            clip = idle if idle in available else None
        frozen = False
        if hold and clip is None:
            clip, frozen = walk, True
        if (clip, frozen) != current or (f > 0 and seg != segments[f - 1]):
            current, start = (clip, frozen), f
        out.append((clip, 0.0 if frozen else (f - start) / fps))
    return out


def frame_tables(frames: dict[str, list[Any]], cameras: dict[str, list[Any]]
                 ) -> tuple[list[dict], dict[str, list[dict]]]:
    """Row dicts per frame, and per view, from column dicts."""
    n = len(frames["frame"])
    rows = [{k: frames[k][i] for k in frames} for i in range(n)]
    views: dict[str, list[dict]] = {}
    for i in range(len(cameras["frame"])):
        r = {k: cameras[k][i] for k in cameras}
        views.setdefault(str(r["view"]), []).append(r)
    for v in views.values():
        v.sort(key=lambda r: r["frame"])
    return rows, views


def _neighbour(f: int, off: float, n: int, segs: list[int]) -> tuple[int, float]:
    """Frame pair (f, g) and fraction to interpolate at f + off, clamped at the trajectory ends
    and never across a respawn (a teleport)."""
    if off == 0.0:
        return f, 0.0
    g = f + (1 if off > 0 else -1)
    if g < 0 or g >= n or segs[g] != segs[f]:
        return f, 0.0
    return g, abs(off)


def character_pose(rows: list[dict], f: int, off: float, segs: list[int]) -> dict:
    g, u = _neighbour(f, off, len(rows), segs)
    a, b = rows[f], rows[g]
    pos = lerp((a["pos_x"], a["pos_y"], a["pos_z"]), (b["pos_x"], b["pos_y"], b["pos_z"]), u)
    quat = slerp((a["rot_w"], a["rot_x"], a["rot_y"], a["rot_z"]),
                 (b["rot_w"], b["rot_x"], b["rot_y"], b["rot_z"]), u)
    return {"pos": pos, "quat": quat,
            "scale": (float(a["scale_x"]), float(a["scale_y"]), float(a["scale_z"]))}


def camera_pose(view_rows: list[dict], f: int, off: float, segs: list[int]) -> dict:
    g, u = _neighbour(f, off, len(view_rows), segs)
    a, b = view_rows[f], view_rows[g]
    return {"pos": lerp((a["pos_x"], a["pos_y"], a["pos_z"]), (b["pos_x"], b["pos_y"],
                                                              b["pos_z"]), u),
            "quat": slerp((a["rot_w"], a["rot_x"], a["rot_y"], a["rot_z"]),
                          (b["rot_w"], b["rot_x"], b["rot_y"], b["rot_z"]), u),
            "fov_deg": float(a["fov_deg"])}


def project(point: tuple[float, float, float], cam_pos: tuple[float, ...],
            cam_quat: tuple[float, ...], fx: float, fy: float, cx: float, cy: float
            ) -> tuple[float, float, float]:
    """Pixel (u, v) and depth of a world point through a world-from-camera OpenCV pose."""
    d = (point[0] - cam_pos[0], point[1] - cam_pos[1], point[2] - cam_pos[2])
    r = quat_matrix(*cam_quat)  # camera-from-world = transpose of world-from-camera
    c = [sum(r[i][j] * d[i] for i in range(3)) for j in range(3)]
    if c[2] <= 1e-6:
        return math.nan, math.nan, c[2]
    return fx * c[0] / c[2] + cx, fy * c[1] / c[2] + cy, c[2]
