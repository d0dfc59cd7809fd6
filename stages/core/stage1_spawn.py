"""The spawn states of the Stage I controller (paper §6.1): pick a candidate, wait for its
streamed world, find its floor, drop the character, let it settle, warm it up.

Standard library only.
"""

from __future__ import annotations

import math
import random
from typing import Any

from .engine_types import CharacterSpec, LevelInfo
from .spawn_search import candidate_floor, spawn_candidates
from .spawns import ENCLOSED_SHARE, Candidate, enclosed_share
from .stage1_config import SpawnConfig
from .world_stream import WorldWait


class SpawnStates:
    """prepare ↔ stream → warmup of ``core.stage1.Stage1Controller``, which sets the attributes
    below (``__init__``, ``_on_next``) and owns the trajectory loop they hand over to."""

    engine: Any
    level: LevelInfo | None
    level_id: str
    level_path: str
    fps: int
    dt: float
    scfg: SpawnConfig
    interior: bool
    extra_starts: list[tuple[tuple[float, float, float], float]]
    rng: random.Random
    char: CharacterSpec
    state: str
    failure: tuple[str, str] | None
    attempts: int
    segment: int
    spawns: list[dict]
    yaw: float
    _world: WorldWait
    _pending: Candidate | None
    _candidates: list[Candidate]
    _roof_only: int
    _interior_t: bool
    _detected: str | None
    _enclosure: float | None
    _capsule: tuple[float, float]
    _capsule_source: str
    _settle_t: int
    _stable: int
    _warm: int

    def _begin_segment(self) -> None:
        """Start a segment of the trajectory loop (``Stage1Controller``)."""
        raise NotImplementedError

    def _spawn_candidates(self) -> list[Candidate]:
        assert self.level is not None
        return spawn_candidates(self.level, self.extra_starts, self.rng, self.scfg)

    def _spawn_height(self, c: Candidate) -> float | None:
        """The height of the floor a candidate spawns on, or None when it has none."""
        assert self.level is not None
        z, roof_only = candidate_floor(self.engine.raycast, self.level, self.char, c, self.scfg,
                                       self._interior_t, self.rng.randrange)
        self._roof_only += roof_only
        return z

    def _enclosed(self) -> float:
        """The level's enclosed share (core.spawns.enclosed_share), measured once."""
        assert self.level is not None
        if self._enclosure is None:
            self._enclosure = enclosed_share(self.engine.raycast, self.level.bounds_min,
                                             self.level.bounds_max, self.char.total_height,
                                             self.char.max_slope_deg)
        return self._enclosure

    def _on_prepare(self) -> None:
        """Pick a candidate, wait for the world around it (a streaming engine), find the floor it
        stands on, drop the character from above."""
        assert self.level is not None
        while True:
            c = self._pending
            if c is None and (self.attempts >= self.scfg.max_attempts or not self._candidates):
                roof_only = bool(self._roof_only and self._roof_only * 2 >= self.attempts)
                if roof_only and not self._interior_t and self._enclosed() >= ENCLOSED_SHARE:
                    # the roofs were the outside of a sealed shell (core.spawns)
                    self._interior_t = True
                    self._detected = (f"detected: {self._roof_only} of {self.attempts} spawn "
                                      f"candidates stood only on roofs, and a ceiling lies over "
                                      f"{self._enclosure:.0%} of the level's columns")
                    self.attempts, self._roof_only = 0, 0
                    self._candidates = self._spawn_candidates()
                    continue
                roofs = (f"; {self._roof_only} of them stood only on roofs (sky above"
                         + (", the level is marked interior" if self.interior else
                            ", the level is screened as an interior" if self._interior_t else
                            ", a storey below") + "): its only walkable surface found is a "
                         "roof" if roof_only else "")
                self.failure = ("no_walkable_region",
                                f"{self.attempts} spawn candidates did not settle{roofs}")
                self.state = "exit_runtime"
                return
            if c is None:
                self.attempts += 1
                c = self._candidates.pop(0)
                hint = c.z if c.z is not None else c.hint_z
                self._world.start((c.x, c.y, self.level.bounds_min[2] if hint is None else hint))
            if not self._world.ready():
                self._pending, self.state = c, "stream"
                return
            self._pending = None
            z = self._spawn_height(c)
            if z is None:
                continue
            lift = self.scfg.drop_height_m + (self.char.height_offset
                                              if self.char.locomotion != "walk" else 0.0)
            self.engine.spawn_character(self.char, (c.x, c.y, z + lift), c.yaw)
            self._capsule = self._observed_capsule()
            self.yaw = c.yaw
            if self.spawns and self.spawns[-1]["segment"] == self.segment:
                self.spawns.pop()  # the previous candidate of this segment did not settle
            self.spawns.append({"segment": self.segment, "kind": c.kind,
                                "position": [c.x, c.y, z]})
            self._settle_t = 0
            self._stable = 0
            self._warm = 0
            self._world.start((c.x, c.y, z))
            self.state = "warmup"
            return

    def _on_stream(self) -> None:
        """A frame spent waiting for the world around the candidate (then as in prepare)."""
        if self._stream_timed_out():
            return
        self._on_prepare()

    def _stream_timed_out(self) -> bool:
        if self._world.waited():
            return False
        kind = self._pending.kind if self._pending is not None else self.spawns[-1]["kind"]
        self.failure = self._world.failure(self.level_id, self.level_path, kind, self.segment,
                                           self.fps)
        self._pending = None
        self.state = "exit_runtime"
        return True

    def _on_warmup(self) -> None:
        self.engine.apply_input((0.0, 0.0), self.yaw, self.dt)
        st = self.engine.character_state()
        if not self._world.ready():  # the character is not let go until its world is there
            self._stable = self._warm = 0
            self._stream_timed_out()
            return
        self._settle_t += 1
        flying = self.char.locomotion != "walk"
        at_rest = math.sqrt(sum(v * v for v in st.velocity)) < self.scfg.rest_speed
        self._stable = self._stable + 1 if (st.grounded or flying) and at_rest else 0
        if self._stable >= self.scfg.settle_frames:
            self._warm += 1
            if self._warm >= self.scfg.warmup_frames:
                self._begin_segment()
                self.state = "loop"
        elif self._settle_t > self.scfg.settle_timeout_s * self.fps:
            self.state = "prepare"  # reject and resample

    def _observed_capsule(self) -> tuple[float, float]:
        """The capsule the engine really built (§7.2), read back after the spawn; an engine
        adapter without a read-back reports the requested one (meta says which)."""
        read = getattr(self.engine, "observed_capsule", None)
        if read is None:
            self._capsule_source = "requested"
            return (self.char.capsule_radius, self.char.capsule_half_height)
        self._capsule_source = "engine"
        r, hh = read()
        return (float(r), float(hh))
