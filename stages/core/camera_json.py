"""One view's camera file (``<view>.camera.json``): K in pixels at the video's size and a 4x4
camera-to-world per frame, in OpenCV camera axes and metres, with its conventions written in it.

Standard library only: the render folder (engine/publish) and the exports (datasets) write the
same file from the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .projection import intrinsics
from .rotations import quat_matrix

CAMERA_JSON_SCHEMA = "wmforge.camera/1"
CONVENTIONS = {
    "K": "3x3 intrinsics in pixels at width x height (the video's size), from the horizontal "
         "fov: fx = fy = (width/2)/tan(fov/2), principal point at the image centre. Pixel "
         "coordinates: (0, 0) is the top-left corner of the top-left pixel, so pixel centres "
         "are at +0.5 (OpenCV puts them at integers: use cx - 0.5, cy - 0.5 there)",
    "camera_to_world": "4x4 row-major, maps a point in camera coordinates (OpenCV axes: x "
                       "right, y down, z forward) to world coordinates (right-handed, Z up), "
                       "metres; its last column is the camera centre; world_to_camera is its "
                       "inverse",
    "frame": "index of the video frame this entry belongs to (from 0); t = frame / fps, s",
}


def camera_to_world(row: dict) -> list[list[float]]:
    """4x4 camera-to-world (world-from-camera) of a cameras.parquet row, rounded to 1e-6."""
    r = quat_matrix(row["rot_w"], row["rot_x"], row["rot_y"], row["rot_z"])
    t = (row["pos_x"], row["pos_y"], row["pos_z"])
    return [[round(r[i][0], 6), round(r[i][1], 6), round(r[i][2], 6), round(t[i], 6)]
            for i in range(3)] + [[0.0, 0.0, 0.0, 1.0]]


def k_matrix(width: int, height: int, fov_deg: float) -> list[list[float]]:
    fx, fy, cx, cy = intrinsics(width, height, fov_deg)
    return [[round(fx, 6), 0.0, round(cx, 6)], [0.0, round(fy, 6), round(cy, 6)],
            [0.0, 0.0, 1.0]]


def camera_json(view: str, width: int, height: int, fps: int, rows: Sequence[dict]) -> dict:
    """The camera file of ``view`` from its cameras.parquet rows in frame order (each with
    ``pos_*``, ``rot_*`` world-from-camera and ``fov_deg``); frames are numbered from 0."""
    if width <= 0 or height <= 0:
        raise ValueError(f"camera {view}: size {width}x{height}, expected positive pixels")
    frames = []
    for i, r in enumerate(rows):
        fov = float(r["fov_deg"])
        if not 0 < fov < 180 or not math.isfinite(fov):
            raise ValueError(f"camera {view} frame {i}: fov_deg {fov}, expected 0 < fov < 180")
        frames.append({"frame": i, "K": k_matrix(width, height, fov),
                       "camera_to_world": camera_to_world(r)})
    ks = {str(f["K"]) for f in frames}
    return {"schema": CAMERA_JSON_SCHEMA, "view": view, "width": width, "height": height,
            "fps": fps, "frame_count": len(frames), "units": "metres, pixels, seconds",
            "conventions": CONVENTIONS, "K_constant": len(ks) <= 1, "frames": frames}
