"""`pools` stage: partition the retained levels into one persistent pool per cluster node
(paper §5.2).

Assignment by rendezvous (highest-random-weight) hashing: a level goes to the node with the
largest hash of (level, node). So the assignment is stable by construction — adding or removing
a level moves only that level; adding a node moves only the levels the new node wins (about
1/(n+1) of them); removing a node moves only that node's levels. Each pool is reshuffled per
pass (``cluster.passes``) with a seed derived from the global seed, the node and the pass.
Output ``pools.parquet``: level_id, node, pass, position.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from .cluster.pool_plan import assign, pass_order, pool_levels
from .parquet_io import write_parquet
from .shared.stage_args import stage_args

COLUMNS = ["level_id", "node", "pass", "position"]


def build_pools(levels: list[str], nodes: list[str], passes: int, seed: int) -> pd.DataFrame:
    owner = assign(levels, nodes)
    rows = []
    for node in nodes:
        mine = [lv for lv in levels if owner[lv] == node]
        for p in range(max(1, passes)):
            for i, lv in enumerate(pass_order(mine, node, p, seed)):
                rows.append({"level_id": lv, "node": node, "pass": p, "position": i})
    return pd.DataFrame(rows, columns=COLUMNS)


def main(argv: list[str] | None = None) -> int:
    parsed = stage_args("wmforge pools", __doc__, argv, {
        "select": "data/select/levels.parquet", "out": "data/pools"})
    if parsed is None:
        return 2
    args, cfg = parsed
    sel = pd.read_parquet(args.select)
    levels = sorted(sel[sel["retained"].astype(bool)]["level_id"].astype(str))
    pools = build_pools(levels, list(cfg.cluster.nodes), cfg.cluster.passes, cfg.seed)
    write_parquet(pools, Path(args.out) / "pools.parquet")
    sizes = pools[pools["pass"] == 0].groupby("node").size().to_dict()
    print(f"pools: {len(levels)} levels over {len(cfg.cluster.nodes)} node(s) {sizes} → "
          f"{args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["assign", "build_pools", "pass_order", "pool_levels"]
