"""Process trees read from /proc (Linux): a process and every process below it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def process_tree(pids: Iterable[int], exclude: int | None = None) -> list[int]:
    """``pids`` and every live process below them, sorted; ``exclude`` (and what is below it)
    left out. Parents come from each process's /proc/<pid>/stat, which a process that retitles
    itself (Ray's agents) cannot overwrite."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
            ppid = int(raw[raw.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out: set[int] = set()
    todo = list(pids)
    while todo:
        p = todo.pop()
        if p in out or p == exclude:
            continue
        out.add(p)
        todo += children.get(p, [])
    return sorted(out)
