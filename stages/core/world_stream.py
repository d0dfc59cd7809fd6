"""Waiting for an engine's streamed world around a spawn point (Unreal World Partition loads
cells near a streaming source only): the Stage I controller asks the engine's optional
``world_ready(point) -> bool`` once per frame, bounded by ``spawn.stream_timeout_s`` of frames.
An engine without the hook, or whose world is all loaded (the embedded engine), is ready at once.

Standard library only.
"""

from __future__ import annotations

from typing import Any

from .engine_types import Vec3


class WorldWait:
    """The frames spent waiting for the world around one spawn point."""

    def __init__(self, engine: Any, limit_frames: int):
        self._ask = getattr(engine, "world_ready", None)
        self._why = getattr(engine, "world_status", None)
        self.limit = max(1, int(limit_frames))
        self.point: Vec3 = (0.0, 0.0, 0.0)
        self.frames = 0

    def start(self, point: Vec3) -> None:
        """A new spawn point: its wait starts from zero."""
        self.point, self.frames = point, 0

    def ready(self) -> bool:
        """Whether the world under and around the point is there (the engine may start bringing
        it in when asked)."""
        return True if self._ask is None else bool(self._ask(self.point))

    def waited(self) -> bool:
        """Count one more frame without the world; False once past the bound."""
        self.frames += 1
        return self.frames <= self.limit

    def failure(self, level_id: str, level_path: str, kind: str, segment: int,
                fps: int) -> tuple[str, str]:
        """The ``streaming_timeout`` failure: the level, the spawn and what the engine says."""
        x, y, z = self.point
        why = self._why() if self._why is not None else ""
        return ("streaming_timeout",
                f"level {level_id} ({level_path}): the world around the {kind} spawn at "
                f"({x:.2f}, {y:.2f}, {z:.2f}) (segment {segment}) did not finish streaming in "
                f"{self.limit} frames ({self.limit / fps:g} s at {fps} fps; "
                f"trajectories.spawn.stream_timeout_s)" + (f": {why}" if why else ""))
