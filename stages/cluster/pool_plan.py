"""Pools (paper §5.2): the level → node binding (rendezvous hashing), each pass's shuffled order,
and reading a node's pool from ``pools.parquet``. Shared by the ``pools`` stage and the
allocator."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable

import pandas as pd


def _weight(level_id: str, node: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{node}\0{level_id}".encode()).digest()[:8], "big")


def assign(levels: Iterable[str], nodes: list[str]) -> dict[str, str]:
    """level → node (rendezvous hashing)."""
    out: dict[str, str] = {}
    for lv in levels:
        out[lv] = max(nodes, key=lambda n: (_weight(lv, n), n))  # noqa: B023 - used at once
    return out


def pass_order(levels: list[str], node: str, pass_index: int, seed: int) -> list[str]:
    """The node's levels in the shuffled order of one pass."""
    h = hashlib.sha256(f"{seed}\0{node}\0{pass_index}".encode()).digest()
    order = sorted(levels)
    random.Random(int.from_bytes(h[:8], "big")).shuffle(order)
    return order


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
