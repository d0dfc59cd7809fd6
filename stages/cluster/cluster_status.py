"""The paper's three progress signals side by side (§8.2–8.3): trajectories finished per node
(the runners' progress logs), objects delivered per node (the object-store listing), and the
allocator's pool balance (its HTTP state)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ..core.progress import read_progress
from .uploader import COMPLETION


def finished_from_logs(work_root: Path) -> dict[str, int]:
    """node → trajectories with a progress line, from ``<work_root>/<node>/renders``."""
    out: dict[str, int] = {}
    for node_dir in sorted(p for p in work_root.iterdir() if p.is_dir()) if work_root.is_dir() \
            else []:
        logs = list((node_dir / "renders").glob("*/*/*/progress.log"))
        if logs:
            out[node_dir.name] = sum(len(read_progress(p.parent)) for p in logs)
    return out


def node_of_instance(instance: str) -> str:
    """Instance ids are ``<node>-<UTC stamp>-<sequence>`` (node runner)."""
    parts = instance.rsplit("-", 2)
    return parts[0] if len(parts) == 3 else instance


def delivered_from_store(store: Any, prefix: str) -> dict[str, int]:
    """node → completion objects under ``prefix`` (one per delivered trajectory)."""
    counts: Counter[str] = Counter()
    for key in store.list_keys(prefix.strip("/") + "/"):
        if key.endswith("/" + COMPLETION):
            instance = key.split("/")[-3]
            counts[node_of_instance(instance)] += 1
    return dict(counts)


def status_table(finished: dict[str, int], delivered: dict[str, int] | None,
                 alloc: dict | None) -> str:
    """``delivered`` None: the store could not be read (shown as ``?``, never as 0)."""
    bal = (alloc or {}).get("balance", {})
    known = delivered is not None
    delivered = delivered or {}
    nodes = sorted(set(finished) | set(delivered) | set(bal))
    head = (f"{'node':<12}{'finished (logs)':>16}{'delivered (S3)':>16}{'pool':>6}{'done':>6}"
            f"{'leased':>8}{'left':>6}{'lost':>6}  state")
    rows = [head, "-" * len(head)]
    for n in nodes:
        b = bal.get(n, {})
        state = ("gone" if b and not b.get("live") else
                 f"drained ({b['drained']})" if b.get("drained") else "live" if b else "?")
        got = delivered.get(n, 0) if known else "?"
        rows.append(f"{n:<12}{finished.get(n, 0):>16}{got:>16}"
                    f"{b.get('pool', '-'):>6}{b.get('done', '-'):>6}{b.get('leased', '-'):>8}"
                    f"{b.get('left', '-'):>6}{b.get('lost', '-'):>6}  {state}")
    total = sum(delivered.values()) if known else "?"
    rows.append(f"{'total':<12}{sum(finished.values()):>16}{total:>16}")
    if not known:
        rows.append("store: not readable (delivered unknown)")
    if alloc is None:
        rows.append("allocator: not reachable (no pool balance)")
    else:
        rows.append(f"allocator: {alloc.get('http')} pid {alloc.get('pid')}, "
                    f"{len(alloc.get('leases', []))} leases out, "
                    f"{'finished' if alloc.get('finished') else 'running'}")
    return "\n".join(rows)
