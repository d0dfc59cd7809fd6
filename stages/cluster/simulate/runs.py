"""Run named scenarios, in parallel processes when asked (each run is deterministic alone)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from .config import SimConfig
from .model import ClusterSim


def run_one(item: tuple[str, SimConfig]) -> tuple[str, dict, float]:
    key, cfg = item
    t = time.perf_counter()
    fig = ClusterSim(cfg).run()
    return key, fig, time.perf_counter() - t


def run_all(cfgs: dict[str, SimConfig], jobs: int = 0,
            log: Callable[[str], object] = print) -> dict[str, dict]:
    """Figures per key, in the keys' order; ``jobs`` 0 = up to two processes."""
    jobs = jobs or min(2, os.cpu_count() or 1)
    out: dict[str, dict] = {}
    items = list(cfgs.items())
    done = 0
    if jobs <= 1:
        results = map(run_one, items)
        for key, fig, dt in results:
            done += 1
            log(f"  [{done}/{len(items)}] {key}: {fig['five_view_min_per_node_hour']} five-view "
                f"min per node-hour ({dt:.1f} s)")
            out[key] = fig
        return out
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        for key, fig, dt in ex.map(run_one, items):
            done += 1
            log(f"  [{done}/{len(items)}] {key}: {fig['five_view_min_per_node_hour']} five-view "
                f"min per node-hour ({dt:.1f} s)")
            out[key] = fig
    return {k: out[k] for k in cfgs}
