"""Short clips of a set of levels through Stage I and Stage II at a screening preset, for the
`screen` and `score` stages. Each level's Stage I runs in its own engine process with a timeout
(an engine that exits, raises or hangs is a failure row, never a crash of the stage); Stage II
runs one renderer process per level (``render.instance_timeout_s``)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pandas as pd

from .config import RenderConfig, WmforgeConfig
from .render import run_render

STAGE1_FAIL_COLUMNS = ["level_id", "trajectory", "reason", "detail"]


def clip_render_config(cfg: WmforgeConfig, preset: str, width: int, height: int,
                       spatial: int, timeout_s: float) -> RenderConfig:
    return dataclasses.replace(cfg.render, preset=preset, width=width, height=height,
                               spatial_samples=spatial, temporal_samples=1, preview=False,
                               warmup_frames=2, instance_timeout_s=timeout_s)


def run_clips(cfg: WmforgeConfig, params: Path, inventory: Path, level_ids: list[str],
              clips: int, clip_s: float, seed_offset: int, characters: list[str],
              rcfg: RenderConfig, out: Path, timeout_s: float, overrides: list[str],
              log=print) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(Stage I failures, rendered index, Stage II failures) for ``clips`` clips per level,
    written under ``out/trajectories`` and ``out/renders``. Finished clips are kept across runs
    (same config: same files), so a re-run only makes what is missing."""
    traj = out / "trajectories"
    traj.mkdir(parents=True, exist_ok=True)
    frames = max(1, round(clip_s * cfg.engine.fps))
    fails: list[dict] = []
    chars = "[" + ",".join(characters) + "]"
    for lid in level_ids:
        cmd = [sys.executable, "-m", "stages.trajectories", "--params", str(params),
               "--inventory", str(inventory), "--out", str(traj)]
        for o in overrides:  # the caller's own overrides first; the clip settings win
            cmd += ["-S", o]
        cmd += ["-S", f"trajectories.levels=[{lid}]", "-S", f"trajectories.per_level={clips}",
                "-S", f"trajectories.frames={frames}", "-S", f"seed={cfg.seed + seed_offset}",
                "-S", f"trajectories.characters={chars}"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s or None)
            rc, tail = r.returncode, (r.stdout + r.stderr).strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            rc, tail = -9, [f"timed out after {timeout_s:.0f} s"]
        fp = traj / "failures.parquet"
        if fp.exists():
            fails += pd.read_parquet(fp).to_dict("records")
            fp.unlink()
        if rc != 0:
            fails.append({"level_id": lid, "trajectory": -1, "reason": "load_failed",
                          "detail": f"engine process exit {rc}: {' | '.join(tail)[-400:]}"})
            log(f"clips: {lid}: Stage I engine process failed (exit {rc})")
    index, rfails = run_render(rcfg, traj, out / "renders", cfg.engine.display, cfg.engine.fps,
                               log=log)
    wanted = set(level_ids)
    index = index[index["level_id"].isin(wanted)].reset_index(drop=True)
    rfails = rfails[rfails["level_id"].isin(wanted)].reset_index(drop=True)
    return pd.DataFrame(fails, columns=STAGE1_FAIL_COLUMNS), index, rfails
