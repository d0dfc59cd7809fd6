"""Short clips of a set of levels through Stage I and Stage II at a screening preset, for the
`screen` and `score` stages, on the node runner's slots. Each level's Stage I runs in its own
engine process with a timeout (an engine that exits, raises or hangs is a failure row, never a
crash of the stage); Stage II runs one renderer process per level (``render.instance_timeout_s``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from ..cluster.lifecycle import make_trajectories, render_trajectories
from ..cluster.lifetimes import under_dvc
from ..cluster.recovery import prune_instances
from ..config import RenderConfig, WmforgeConfig


def clip_render_config(cfg: WmforgeConfig, preset: str, width: int, height: int,
                       spatial: int, timeout_s: float) -> RenderConfig:
    return dataclasses.replace(cfg.render, preset=preset, width=width, height=height,
                               spatial_samples=spatial, temporal_samples=1, preview=False,
                               warmup_frames=2, instance_timeout_s=timeout_s)


def run_clips(cfg: WmforgeConfig, inventory: Path, level_ids: list[str], clips: int,
              clip_s: float, seed_offset: int, characters: list[str], rcfg: RenderConfig,
              out: Path, timeout_s: float, log=print
              ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(Stage I failures, rendered index, Stage II failures) for ``clips`` clips per level,
    written under ``out/trajectories`` and ``out/renders``, on every slot of this machine.
    Finished clips are kept across runs (same key: same files), so a re-run only makes what is
    missing; instance folders no current clip names are removed (``prune_instances``). Levels
    and characters travel as data (the engine processes' spec files), never as override
    strings."""
    traj = out / "trajectories"
    traj.mkdir(parents=True, exist_ok=True)
    frames = max(1, round(clip_s * cfg.engine.fps))
    ccfg = dataclasses.replace(
        cfg, seed=cfg.seed + seed_offset, render=rcfg,
        trajectories=dataclasses.replace(cfg.trajectories, levels=list(level_ids),
                                         per_level=clips, frames=frames,
                                         characters=list(characters)),
        node=dataclasses.replace(cfg.node, stage1_timeout_s=timeout_s))
    levels = pd.read_parquet(inventory / "levels.parquet")
    chars = pd.read_parquet(inventory / "characters.parquet")
    library = Path(cfg.library.root)
    watch = under_dvc()  # the stage dies with `dvc repro`, engines and all
    fails = make_trajectories(ccfg, levels, chars, library, traj, log, watch=watch)
    index, rfails = render_trajectories(ccfg, traj, out / "renders", rcfg, log,
                                        levels=list(level_ids), library=library, watch=watch)
    # renders of settings, code or trajectories no longer current: the stages' work folders
    # are DVC outputs kept across runs (persist), which would carry them on for ever
    try:
        gone = prune_instances(out / "renders", index, rfails)
    except OSError as exc:  # the clips stand; the next run prunes again
        log(f"clips: could not remove old instance folders under {out / 'renders'}: {exc}")
        gone = []
    if gone:
        log(f"clips: removed {len(gone)} instance folder(s) no current clip uses")
    wanted = set(level_ids)
    index = index[index["level_id"].isin(wanted)].reset_index(drop=True)
    rfails = rfails[rfails["level_id"].isin(wanted)].reset_index(drop=True)
    fails = fails[fails["level_id"].isin(wanted)].reset_index(drop=True)
    return fails, index, rfails
