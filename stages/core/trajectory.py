"""Trajectory contract v2 (DESIGN §3): the only input of Stage II. Every column and its unit is
written down here, once. Standard library only.

World frame: right-handed, Z up, metres, seconds; yaw counter-clockwise about +Z from +X, degrees;
rotations are unit quaternions (w, x, y, z); camera rotations are world-from-camera in the OpenCV
camera convention (x right, y down, z forward).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .actions import ACTIONS, NON_FORWARD

SCHEMA_VERSION = 3
# v1 → v2: adds props.parquet (the pushed props' transforms per frame). A v1 trajectory is still
# read: it has no props.parquet and its props are drawn where the level placed them.
# v2 → v3: cameras.parquet adds blocked, collapsed, char_share, swing_az_deg, swing_el_deg
# (views that show the character, §6.3) and meta.json "cameras" (per-view collapsed share) and
# "capsule" (requested vs observed, §7.2); v1/v2 are still read without them.
READABLE_SCHEMAS = (1, 2, 3)
VIEWS = ("back", "left", "right", "top", "fp")
EVENTS = ("none", "spawn", "escape", "respawn")

# column → (type, unit / meaning)
FRAME_COLUMNS: dict[str, tuple[str, str]] = {
    "frame": ("int", "frame index from 0"),
    "t": ("float", "s, frame / fps"),
    "action": ("str", f"one of {' '.join(ACTIONS)}"),
    "pos_x": ("float", "m, character feet (capsule bottom), world"),
    "pos_y": ("float", "m"),
    "pos_z": ("float", "m"),
    "rot_w": ("float", "unit quaternion world-from-character (yaw about +Z)"),
    "rot_x": ("float", "quaternion x"),
    "rot_y": ("float", "quaternion y"),
    "rot_z": ("float", "quaternion z"),
    "yaw_deg": ("float", "deg, character facing, CCW from +X"),
    "ref_yaw_deg": ("float", "deg, yaw of the frame the action is expressed in"),
    "scale_x": ("float", "model scale, written explicitly (§7.2)"),
    "scale_y": ("float", "model scale"),
    "scale_z": ("float", "model scale"),
    "capsule_radius_m": ("float", "m, capsule the engine really used"),
    "capsule_half_height_m": ("float", "m, half the cylinder part the engine really used"),
    "grounded": ("bool", "stable ground contact this frame"),
    "vel_x": ("float", "m/s, world"),
    "vel_y": ("float", "m/s"),
    "vel_z": ("float", "m/s"),
    "speed": ("float", "m/s, horizontal"),
    "segment": ("int", "increments on respawn"),
    "event": ("str", f"one of {' '.join(EVENTS)}"),
}
CAMERA_COLUMNS: dict[str, tuple[str, str]] = {
    "frame": ("int", "frame index"),
    "view": ("str", f"one of {' '.join(VIEWS)}"),
    "pos_x": ("float", "m, camera centre, world"),
    "pos_y": ("float", "m"),
    "pos_z": ("float", "m"),
    "rot_w": ("float", "unit quaternion world-from-camera, OpenCV axes"),
    "rot_x": ("float", "quaternion x"),
    "rot_y": ("float", "quaternion y"),
    "rot_z": ("float", "quaternion z"),
    "fov_deg": ("float", "deg, horizontal field of view"),
    "width": ("int", "px"),
    "height": ("int", "px"),
    "fx": ("float", "px, K[0,0]"),
    "fy": ("float", "px, K[1,1]"),
    "cx": ("float", "px, K[0,2]"),
    "cy": ("float", "px, K[1,2]"),
    "boom_m": ("float", "m, camera-to-target distance after occlusion and smoothing"),
    "boom_desired_m": ("float", "m, distance configured for this view and level, before "
                                "occlusion (rig scale and free-space fit applied)"),
    "occluded": ("bool", "geometry crossed the line of sight, or the view is blocked"),
}
CAMERA_COLUMNS_V3: dict[str, tuple[str, str]] = {
    "blocked": ("bool", "no clear spot outside the character's body: the camera is held at "
                        "the closest allowed boom and the frame is marked occluded"),
    "collapsed": ("bool", "boom below collapse_ratio of the configured distance"),
    "char_share": ("float", "share of the image covered by the character's projected box"),
    "swing_az_deg": ("float", "deg, boom swung around the character to see past an occluder"),
    "swing_el_deg": ("float", "deg, boom swung upward to see past an occluder"),
}
CAMERA_COLUMNS.update(CAMERA_COLUMNS_V3)
# props.parquet: one row per (frame, dynamic prop) while the level has any; zero rows otherwise.
# A prop is the pivot at the centre of its bounds when the level loaded (identity rotation);
# the transform is world-from-pivot.
PROP_COLUMNS: dict[str, tuple[str, str]] = {
    "frame": ("int", "frame index"),
    "prop_index": ("int", "order of the prop among the level's dynamic nodes (depth-first)"),
    "prop": ("str", "node name of the prop in the level file"),
    "pos_x": ("float", "m, pivot (bounds centre at load), world"),
    "pos_y": ("float", "m"),
    "pos_z": ("float", "m"),
    "rot_w": ("float", "unit quaternion world-from-pivot"),
    "rot_x": ("float", "quaternion x"),
    "rot_y": ("float", "quaternion y"),
    "rot_z": ("float", "quaternion z"),
}
META_KEYS = ("schema_version", "level_id", "character_id", "seed", "fps", "frame_count",
             "engine", "engine_version", "config", "action_stats")


class TrajectoryError(ValueError):
    """A trajectory that breaks the contract; the message names file, column and row."""


def _check_table(name: str, table: dict[str, Sequence], spec: dict[str, tuple[str, str]]) -> int:
    missing = [c for c in spec if c not in table]
    if missing:
        raise TrajectoryError(f"{name}: missing column(s) {missing}")
    n = len(table["frame"])
    for col, (kind, _unit) in spec.items():
        values = table[col]
        if len(values) != n:
            raise TrajectoryError(f"{name}: column '{col}' has {len(values)} rows, expected {n}")
        for i, v in enumerate(values):
            if kind == "float" and (not isinstance(v, int | float) or not math.isfinite(v)):
                raise TrajectoryError(f"{name}: column '{col}' row {i}: {v!r} is not finite")
    return n


def validate(frames: dict[str, Sequence], cameras: dict[str, Sequence], meta: dict) -> None:
    """Reject a bad trajectory, naming the file, column and row."""
    n = _check_table("frames.parquet", frames, FRAME_COLUMNS)
    for i, a in enumerate(frames["action"]):
        if a not in ACTIONS:
            raise TrajectoryError(f"frames.parquet: column 'action' row {i}: {a!r} not in "
                                  f"{ACTIONS}")
    for i, e in enumerate(frames["event"]):
        if e not in EVENTS:
            raise TrajectoryError(f"frames.parquet: column 'event' row {i}: {e!r}")
    for i, f in enumerate(frames["frame"]):
        if f != i:
            raise TrajectoryError(f"frames.parquet: column 'frame' row {i}: {f}, expected {i}")
    for i in range(n):
        q = [frames[c][i] for c in ("rot_w", "rot_x", "rot_y", "rot_z")]
        if abs(math.sqrt(sum(v * v for v in q)) - 1) > 1e-4:
            raise TrajectoryError(f"frames.parquet: rotation row {i} is not a unit quaternion")
    version = meta.get("schema_version")
    needed = CAMERA_COLUMNS if isinstance(version, int) and version >= 3 else {
        k: v for k, v in CAMERA_COLUMNS.items() if k not in CAMERA_COLUMNS_V3}
    m = _check_table("cameras.parquet", cameras, needed)
    if m != n * len(VIEWS):
        raise TrajectoryError(f"cameras.parquet: {m} rows, expected {n} frames x {len(VIEWS)}")
    for i, v in enumerate(cameras["view"]):
        if v not in VIEWS:
            raise TrajectoryError(f"cameras.parquet: column 'view' row {i}: {v!r}")
    for k in META_KEYS:
        if k not in meta:
            raise TrajectoryError(f"meta.json: missing key '{k}'")
    if meta["schema_version"] not in READABLE_SCHEMAS:
        raise TrajectoryError(f"meta.json: schema_version {meta['schema_version']}, "
                              f"expected one of {READABLE_SCHEMAS}")
    if meta["frame_count"] != n:
        raise TrajectoryError(f"meta.json: frame_count {meta['frame_count']} but frames.parquet "
                              f"has {n} rows")


def action_stats(actions: Sequence[str]) -> dict:
    """Shares of the nine actions, the non-forward share (§4.3: 46.6%), the transition matrix
    between consecutive holds, and the hold-length histogram (frames)."""
    n = len(actions)
    counts = {a: 0 for a in ACTIONS}
    for a in actions:
        counts[a] += 1
    holds: list[int] = []
    transitions = {a: {b: 0 for b in ACTIONS} for a in ACTIONS}
    run = 0
    for i, a in enumerate(actions):
        run += 1
        if i + 1 == n or actions[i + 1] != a:
            holds.append(run)
            run = 0
            if i + 1 < n:
                transitions[a][actions[i + 1]] += 1
    hist: dict[str, int] = {}
    for h in holds:
        key = str(h)
        hist[key] = hist.get(key, 0) + 1
    return {
        "frames": n,
        "shares": {a: (counts[a] / n if n else 0.0) for a in ACTIONS},
        "non_forward_share": (sum(counts[a] for a in NON_FORWARD) / n) if n else 0.0,
        "transitions": transitions,
        "hold_lengths": dict(sorted(hist.items(), key=lambda kv: int(kv[0]))),
        "mean_hold_frames": (sum(holds) / len(holds)) if holds else 0.0,
    }


def yaw_quat(yaw_deg: float) -> tuple[float, float, float, float]:
    h = math.radians(yaw_deg) / 2
    return (math.cos(h), 0.0, 0.0, math.sin(h))


def validate_props(props: dict[str, Sequence], n_frames: int) -> int:
    """Check props.parquet; returns the number of props per frame."""
    m = _check_table("props.parquet", props, PROP_COLUMNS)
    if m == 0:
        return 0
    count = len(set(props["prop_index"]))
    if m != count * n_frames:
        raise TrajectoryError(f"props.parquet: {m} rows, expected {n_frames} frames x {count} "
                              "props")
    for i, f in enumerate(props["frame"]):
        if not 0 <= f < n_frames:
            raise TrajectoryError(f"props.parquet: column 'frame' row {i}: {f} outside "
                                  f"0..{n_frames - 1}")
    for i in range(m):
        q = [props[c][i] for c in ("rot_w", "rot_x", "rot_y", "rot_z")]
        if abs(math.sqrt(sum(v * v for v in q)) - 1) > 1e-4:
            raise TrajectoryError(f"props.parquet: rotation row {i} is not a unit quaternion")
    return count
