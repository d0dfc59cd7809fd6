"""Reading a node's pool (``pools.parquet``, paper §5.2): which levels, in which order."""

from __future__ import annotations

import pandas as pd


def pool_levels(pools: pd.DataFrame, node: str = "", pass_index: int = 0) -> list[str]:
    """Levels of one node's pool (every pool when ``node`` is empty) in that pass's order."""
    p = pools[pools["pass"] == pass_index]
    if node:
        p = p[p["node"] == node]
    return p.sort_values(["node", "position"])["level_id"].astype(str).tolist()


def pool_order(pools: pd.DataFrame, node: str, passes: int) -> list[tuple[str, int]]:
    """(level, pass) in the order the node consumes its pool: pass by pass, each pass in its own
    shuffled order; a level appears once per pass."""
    return [(lv, p) for p in range(max(1, passes)) for lv in pool_levels(pools, node, p)]
