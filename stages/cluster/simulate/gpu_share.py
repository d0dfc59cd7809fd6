"""One GPU shared by the slots that render on it at once (processor sharing): with n jobs the
GPU makes ``fps(n)`` five-view frames/s, each job gets ``fps(n) / n``."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

Proc = Generator[Any, Any, None]  # a SimPy process

class SharedGPU:
    def __init__(self, env: simpy.Environment, fps: Callable[[int], float],
                 window: tuple[float, float]):
        self.env, self.fps, self.window = env, fps, window
        self.jobs: dict[simpy.Event, float] = {}  # completion event → frames left
        self.last = env.now
        self.busy_s = 0.0  # time with at least one job, inside the window
        self.frames = 0.0  # frames rendered inside the window
        self._wake = env.event()
        env.process(self._loop())

    def _overlap(self, a: float, b: float) -> float:
        lo, hi = self.window
        return max(0.0, min(b, hi) - max(a, lo))

    def flush(self) -> None:
        """Account up to now (the end of a run)."""
        self._advance()

    def _advance(self) -> None:
        now = self.env.now
        if self.jobs and now > self.last:
            n = len(self.jobs)
            rate = self.fps(n) / n
            dt = now - self.last
            for ev in self.jobs:
                self.jobs[ev] -= rate * dt
            ov = self._overlap(self.last, now)
            self.busy_s += ov
            self.frames += self.fps(n) * ov
        self.last = now

    def _poke(self) -> None:
        if not self._wake.triggered:
            self._wake.succeed()

    def render(self, frames: float) -> simpy.Event:
        """An event that fires when ``frames`` five-view frames are rendered."""
        self._advance()
        ev = self.env.event()
        self.jobs[ev] = frames
        self._poke()
        return ev

    def cancel(self, ev: simpy.Event) -> float:
        """Drop a job (its slot died); returns the frames it had left."""
        self._advance()
        left = self.jobs.pop(ev, 0.0)
        self._poke()
        return left

    def _loop(self) -> Proc:
        env = self.env
        while True:
            if not self.jobs:
                yield self._wake
                self._wake = env.event()
                continue
            n = len(self.jobs)
            rate = self.fps(n) / n
            dt = max(0.0, min(self.jobs.values()) / rate)
            yield self._wake | env.timeout(dt)
            if self._wake.triggered:
                self._wake = env.event()
            self._advance()
            for ev, left in list(self.jobs.items()):
                if left <= 1e-6:
                    del self.jobs[ev]
                    ev.succeed()
