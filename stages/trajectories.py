"""`trajectories` stage (Stage I, paper §6): physics-resolved trajectories with five camera
tracks, one directory per trajectory under ``data/trajectories/<level>/<traj>/``.

Runs through the local node runner (``stages.cluster``): each level's Stage I in its own engine
process on a slot of this machine, with a stall timeout and retries; each trajectory is
published atomically (meta.json last) the moment it is finished, so a crash loses only the one
in flight. A finished trajectory whose key matches — seed, config, the level row, the Stage I
code version and the bytes of the level and character packs — is never produced again.
Failures (``no_walkable_region``, ``non_finite_transform``, and per level ``engine_crashed``,
``stalled``, ``timeout``, ``engine_error``) are rows in ``failures.parquet``; the stage goes on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from .cluster.lifecycle import character_specs, make_trajectories
from .cluster.lifetimes import under_dvc
from .cluster.pool_plan import pool_order
from .config import ConfigError, WmforgeConfig, load_params
from .engine.stage1_worker import is_complete, write_trajectory
from .parquet_io import write_parquet

__all__ = ["character_specs", "is_complete", "run_trajectories", "write_trajectory"]


def run_trajectories(cfg: WmforgeConfig, levels: pd.DataFrame, chars: pd.DataFrame,
                     library: Path, out: Path, log=print,
                     order: list[tuple[str, int]] | None = None,
                     watch: list | None = None) -> pd.DataFrame:
    """Produce every missing trajectory on this machine's slots; return the failure rows."""
    return make_trajectories(cfg, levels, chars, library, out, log, order, watch)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge trajectories", description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--inventory", default="data/inventory")
    ap.add_argument("--out", default="data/trajectories")
    ap.add_argument("--pools", default="", help="pools.parquet: only the levels of this "
                    "machine's pool (cluster.node; every pool when empty), pass by pass")
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    try:
        cfg = load_params(args.params, args.set)
        inv = Path(args.inventory)
        levels = pd.read_parquet(inv / "levels.parquet")
        chars = pd.read_parquet(inv / "characters.parquet")
        order = None
        if args.pools:
            order = pool_order(pd.read_parquet(args.pools), cfg.cluster.node,
                               cfg.cluster.passes)
            levels = levels[levels["level_id"].isin({lv for lv, _ in order})]
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        failures = run_trajectories(cfg, levels, chars, Path(cfg.library.root), out,
                                    order=order, watch=under_dvc())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_parquet(failures, out / "failures.parquet")
    print(f"trajectories: {len(failures)} failures → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
