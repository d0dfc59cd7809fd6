"""The node runner's live view (issue: progress display): one row per slot — level, stage,
trajectories done/total, frames/s, ETA. A table redrawn in place on a terminal (rich); plain
lines, one per change, when the output is a file or a CI log."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SlotView:
    slot: str
    gpu: int | None
    level: str
    stage: str  # idle, staging, stage1, render (+ retry count)
    done: int
    total: int
    frames: int
    elapsed_s: float

    @property
    def fps(self) -> float:
        return self.frames / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        if self.done <= 0 or self.total <= self.done:
            return None
        return (self.total - self.done) * self.elapsed_s / self.done


def _fmt_eta(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{int(s // 60)}:{int(s % 60):02d}"


class SlotBoard:
    def __init__(self, mode: str = "auto", log: Callable[[str], Any] = print):
        self.log = log
        self.mode = mode
        if mode == "auto":
            self.mode = "live" if sys.stdout.isatty() else "plain"  # rich draws on stdout
        self._live: Any = None
        self._last: dict[str, tuple] = {}
        self._t0 = time.monotonic()
        if self.mode == "live":
            try:
                from rich.live import Live
            except ImportError:
                self.mode = "plain"
            else:
                self._live = Live(refresh_per_second=4, transient=False)
                self._live.start()

    def _table(self, views: list[SlotView], queued: int) -> Any:
        from rich.table import Table

        t = Table(title=f"wmforge node: {sum(v.stage != 'idle' for v in views)}/{len(views)} "
                        f"slots busy, {queued} levels queued, "
                        f"{time.monotonic() - self._t0:.0f} s")
        for col in ("slot", "gpu", "level", "stage", "done", "frames/s", "ETA"):
            t.add_column(col)
        for v in views:
            t.add_row(v.slot, "-" if v.gpu is None else str(v.gpu), v.level, v.stage,
                      f"{v.done}/{v.total}" if v.total else "", f"{v.fps:.1f}" if v.frames
                      else "", _fmt_eta(v.eta_s))
        return t

    def update(self, views: list[SlotView], queued: int) -> None:
        if self.mode == "off":
            return
        if self._live is not None:
            self._live.update(self._table(views, queued))
            return
        for v in views:
            key = (v.level, v.stage, v.done)
            if self._last.get(v.slot) == key:
                continue
            self._last[v.slot] = key
            if v.stage == "idle":
                continue
            extra = (f" {v.done}/{v.total} trajectories, {v.fps:.1f} frames/s, ETA "
                     f"{_fmt_eta(v.eta_s)}" if v.total else "")
            self.log(f"node: slot {v.slot}{'' if v.gpu is None else f' (GPU {v.gpu})'}: "
                     f"{v.level}: {v.stage}{extra}")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
