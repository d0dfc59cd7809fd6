"""Publishing one rendered trajectory (DESIGN §3 "Render output"), owned by no engine: every
Stage II engine ends a trajectory here, so the files beside the videos, the checksums and the
atomic ``meta.json`` are the same whichever engine made the pixels."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

TRAJ_FILES = ("frames.parquet", "cameras.parquet")
# Render folder schema. v1 -> v2: cameras.parquet carries K (width, height, fx, fy, cx, cy) at the
# render's size instead of Stage I's nominal 1280x720 (poses unchanged), and every view has a
# <view>.camera.json (K in pixels, 4x4 camera-to-world per frame, OpenCV axes, metres). A v1
# folder is still read: readers recompute K from fov_deg and the video's size.
RENDER_SCHEMA_VERSION = 2
OPTIONAL_TRAJ_FILES = ("props.parquet",)  # contract v2; absent in v1 trajectories


def traj_files(traj_dir: Path) -> tuple[str, ...]:
    """The trajectory's motion files present in ``traj_dir`` (what Stage II reads)."""
    return TRAJ_FILES + tuple(f for f in OPTIONAL_TRAJ_FILES if (traj_dir / f).is_file())


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def publish_trajectory(traj_dir: Path, out: Path, rmeta: dict) -> dict:
    """Copy the trajectory's files beside the videos in ``out`` (its meta.json as
    ``trajectory.json``; cameras.parquet with K at the render's size, and one
    ``<view>.camera.json`` per view), add the sha256 of every file in ``out`` to ``rmeta`` and
    write it as ``out/meta.json`` atomically: a render folder with a meta.json is complete."""
    from .render_cameras import write_render_cameras

    for f in traj_files(traj_dir):
        if f != "cameras.parquet":
            shutil.copyfile(traj_dir / f, out / f)
    st = rmeta["settings"]
    write_render_cameras(traj_dir, out, int(st["width"]), int(st["height"]), int(rmeta["fps"]))
    rmeta["schema_version"] = RENDER_SCHEMA_VERSION
    shutil.copyfile(traj_dir / "meta.json", out / "trajectory.json")
    rmeta["sha256"] = {p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.is_file()}
    tmp = out / "meta.json.tmp"
    tmp.write_text(json.dumps(rmeta, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, out / "meta.json")
    return rmeta
