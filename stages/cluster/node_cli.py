"""``wmforge node``: the node runner outside DVC (production) and its inspection commands.

- ``wmforge node run``  — the whole per-level lifecycle (Stage I then Stage II) on every slot
  of this machine, for this node's pool pass by pass, with the same output layout as the DVC
  stages (``data/trajectories``, ``data/renders``);
- ``wmforge node slots`` — the slot plan: GPUs found through NVML, slots per GPU, and the EGL
  device each GPU maps to;
- ``wmforge node snapshots`` — failure snapshots aggregated by reason (paper App. C).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ..config import ConfigError, load_params
from ..parquet_io import write_parquet


def _cfg(args: argparse.Namespace):
    return load_params(args.params, args.set)


def cmd_run(args: argparse.Namespace) -> int:
    from .lifecycle import run_levels
    from .pool_plan import pool_order

    cfg = _cfg(args)
    inv = Path(args.inventory)
    levels = pd.read_parquet(inv / "levels.parquet")
    chars = pd.read_parquet(inv / "characters.parquet")
    order = None
    if args.pools and Path(args.pools).exists():
        order = pool_order(pd.read_parquet(args.pools), cfg.cluster.node, cfg.cluster.passes)
        levels = levels[levels["level_id"].isin({lv for lv, _ in order})]
    traj, rend = Path(args.trajectories), Path(args.renders)
    out = run_levels(cfg, levels, chars, Path(cfg.library.root), traj, rend, order)
    write_parquet(out["stage1_failures"], traj / "failures.parquet")
    write_parquet(out["index"], rend / "index.parquet")
    write_parquet(out["render_failures"], rend / "failures.parquet")
    idx = out["index"]
    minutes = idx["duration_s"].sum() / 60 if len(idx) else 0.0
    print(f"node: {len(idx)} trajectories rendered ({minutes:.1f} five-view minutes), "
          f"{len(out['stage1_failures'])} Stage I and {len(out['render_failures'])} Stage II "
          f"failures → {traj}, {rend}")
    return 0


def cmd_slots(args: argparse.Namespace) -> int:
    from ..engine.device import egl_devices, egl_index_for_gpu
    from .gpus import nvml_gpus, plan_slots

    cfg = _cfg(args)
    gpus = nvml_gpus()
    egl = egl_devices()
    print(f"NVML GPUs: {len(gpus)}; EGL devices (EGL_CUDA_DEVICE_NV): {egl}")
    for g in gpus:
        try:
            idx: object = egl_index_for_gpu(g.index, egl)
        except RuntimeError as exc:
            idx = f"none ({exc})"
        print(f"  GPU {g.index} {g.name} {g.uuid} {g.memory_total / 2**30:.0f} GiB → EGL {idx}")
    for p in plan_slots(cfg.node, gpus):
        print(f"slot {p.slot}: {'CPU' if p.gpu is None else f'GPU {p.gpu.index}'}")
    return 0


def cmd_snapshots(args: argparse.Namespace) -> int:
    from .snapshots import read_snapshots, summarize

    root = Path(args.dir) if args.dir else Path(_cfg(args).node.snapshot_dir)
    snaps = read_snapshots(root)
    print(f"{len(snaps)} failure snapshot(s) under {root}")
    print(summarize(snaps))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge node", description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="Stage I then Stage II per level on every slot")
    r.add_argument("--inventory", default="data/inventory")
    r.add_argument("--pools", default="data/pools/pools.parquet",
                   help="this node's pool (cluster.node), pass by pass; all enabled levels "
                   "when the file does not exist")
    r.add_argument("--trajectories", default="data/trajectories")
    r.add_argument("--renders", default="data/renders")
    sub.add_parser("slots", help="GPUs, slots and EGL devices of this machine")
    s = sub.add_parser("snapshots", help="failure snapshots by reason")
    s.add_argument("--dir", default="", help="snapshot root (default: node.snapshot_dir)")
    args = ap.parse_args(argv)
    try:
        return {"run": cmd_run, "slots": cmd_slots, "snapshots": cmd_snapshots}[args.cmd](args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
