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
    ``trajectory.json``), add the sha256 of every file in ``out`` to ``rmeta`` and write it as
    ``out/meta.json`` atomically: a render folder with a meta.json is complete."""
    for f in traj_files(traj_dir):
        shutil.copyfile(traj_dir / f, out / f)
    shutil.copyfile(traj_dir / "meta.json", out / "trajectory.json")
    rmeta["sha256"] = {p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.is_file()}
    tmp = out / "meta.json.tmp"
    tmp.write_text(json.dumps(rmeta, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, out / "meta.json")
    return rmeta
