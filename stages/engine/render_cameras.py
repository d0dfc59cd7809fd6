"""The render folder's camera files at the render's size: ``cameras.parquet`` with K (width,
height, fx, fy, cx, cy) recomputed for the videos beside it, and one ``<view>.camera.json`` per
view (K in pixels, 4x4 camera-to-world per frame, OpenCV axes, metres).

Stage I writes K for its nominal camera size (1280x720); a render is usually smaller, so a K
copied unchanged projects off the image by the size ratio. Poses are never touched.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core.camera_json import camera_json
from ..core.cameras import intrinsics
from ..core.trajectory import VIEWS


def write_render_cameras(traj_dir: Path, out: Path, width: int, height: int, fps: int) -> None:
    """Write ``out/cameras.parquet`` (the trajectory's, K at ``width`` x ``height``) and
    ``out/<view>.camera.json`` for every view."""
    import pandas as pd

    from ..parquet_io import write_parquet

    cams = pd.read_parquet(traj_dir / "cameras.parquet")
    k = [intrinsics(width, height, float(f)) for f in cams["fov_deg"]]
    cams = cams.assign(width=width, height=height, fx=[x[0] for x in k], fy=[x[1] for x in k],
                       cx=[x[2] for x in k], cy=[x[3] for x in k])
    write_parquet(cams, out / "cameras.parquet")
    for v in VIEWS:
        rows = cams[cams["view"] == v].sort_values("frame").to_dict("records")
        doc = camera_json(v, width, height, fps, rows)
        (out / f"{v}.camera.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
