"""`render` stage (Stage II, paper §7, §8.1–8.2): replay every finished trajectory and render its
five views offline, supersampled, into H.264 MP4s plus a tiled preview.

Layout: ``data/renders/<scene>/<level>/<instance>/<traj>/`` with an instance id of node id +
UTC timestamp + sequence number, so reruns never overwrite. The stage runs through the local
node runner (``stages.cluster``): one renderer process per level and slot, every slot of this
machine busy, stalls killed and retried, failures snapshotted. Each renderer
(``stages.engine.render_worker``) appends one progress line per finished trajectory and writes
``COMPLETE`` only after a normal shutdown; interrupted instances are recovered first (kept:
trajectories with a progress line whose videos decode to the expected frame count). A finished
trajectory — same trajectory bytes, render settings, Stage II code version and asset bytes —
is never rendered twice.

Per trajectory, ``meta.json`` holds the encode settings, sha256 of every file, the level
sanitization and texture report, the alignment gate and the lineage (engine and version, code
version, trajectory seed, lighting).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from .cluster.keys import render_settings
from .cluster.lifecycle import render_trajectories
from .cluster.lifetimes import under_dvc
from .cluster.pool_plan import pool_order
from .cluster.recovery import prune_instances, recover_all, recover_instance
from .config import ConfigError, RenderConfig, WmforgeConfig, load_params
from .parquet_io import write_parquet

__all__ = ["prune_instances", "render_settings", "run_render", "recover_instance"]


def run_render(rcfg: RenderConfig, traj_root: Path, root: Path, display: str = "p3headlessgl",
               fps: int = 30, log=print, levels: list[str] | None = None,
               cfg: WmforgeConfig | None = None, watch: list | None = None
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Render every trajectory not rendered yet on this machine's slots; (index, failures)."""
    import dataclasses

    base = cfg or load_params()
    base = dataclasses.replace(base, render=rcfg, engine=dataclasses.replace(
        base.engine, display=display, fps=fps))
    return render_trajectories(base, traj_root, root, rcfg, log, levels, watch)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge render", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    rc = sub.add_parser("recover", help="recover interrupted instances under a path")
    rc.add_argument("path")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--trajectories", default="data/trajectories")
    ap.add_argument("--out", default="data/renders")
    ap.add_argument("--pools", default="", help="pools.parquet: render only the levels of this "
                    "machine's pool (cluster.node; every pool when empty)")
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--prune", action="store_true", help="after the run, remove the instance "
                    "folders of the levels it rendered that neither the index nor the "
                    "failures name (the DVC stage's)")
    args = ap.parse_args(argv)
    if args.cmd == "recover":
        p = Path(args.path)
        if (p / "instance.json").exists():
            recover_instance(p)
        else:
            recover_all(p)
        return 0
    try:
        cfg = load_params(args.params, args.set)
        out = Path(args.out)
        only = None
        if args.pools:
            order = pool_order(pd.read_parquet(args.pools), cfg.cluster.node,
                               cfg.cluster.passes)
            only = list(dict.fromkeys(lv for lv, _ in order))
        index, failures = run_render(cfg.render, Path(args.trajectories), out,
                                     cfg.engine.display, cfg.engine.fps, levels=only, cfg=cfg,
                                     watch=under_dvc())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_parquet(index, out / "index.parquet")
    write_parquet(failures, out / "failures.parquet")
    if args.prune:
        gone = prune_instances(out, index, failures)
        if gone:
            print(f"render: removed {len(gone)} instance folder(s) no current render uses")
    hours = index["duration_s"].sum() / 3600 if len(index) else 0.0
    print(f"render: {len(index)} trajectories ({hours * 60:.1f} five-view minutes), "
          f"{len(failures)} failures → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
