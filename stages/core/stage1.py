"""The Stage I controller (paper §6.1–6.2): a frame-driven state machine, one non-blocking
``tick()`` per engine frame, talking to the engine only through the protocol — so the same object
runs in the embedded loop and in Unreal's per-frame callback.

initialize → enter runtime → prepare scene/character (↔ stream: wait for a streamed world around
the spawn point) → warm up → trajectory loop ↔ respawn → exit runtime → compute cameras → next
trajectory → done. The spawn states (prepare, stream, warm up) are ``core.stage1_spawn``.

Standard library only.
"""

from __future__ import annotations

import math
import random
from typing import Any

from .actions import ACTIONS, DIRECTIONS
from .cameras import CameraRigConfig, collapse_stats, compute_tracks
from .engine_types import CharacterSpec, LevelInfo
from .spawns import Candidate
from .stage1_config import ActionConfig, SpawnConfig, validate_action_config
from .stage1_records import (
    TrajectoryResult,
    capsule_meta,
    frame_row,
    prop_rows,
    trajectory_meta,
)
from .stage1_spawn import SpawnStates
from .trajectory import yaw_quat
from .world_stream import WorldWait


def _wrap(a: float) -> float:
    return (a + 180.0) % 360.0 - 180.0


def _turn(current: float, target: float, max_step: float) -> float:
    d = _wrap(target - current)
    return (current + max(-max_step, min(max_step, d))) % 360.0


class Stage1Controller(SpawnStates):
    """Generates ``count`` trajectories of ``frames`` frames on one loaded level."""

    STATES = ("initialize", "enter_runtime", "prepare", "stream", "warmup", "loop", "respawn",
              "exit_runtime", "cameras", "next", "done")

    def __init__(self, engine: Any, level_path: str, level_id: str, characters: list[CharacterSpec],
                 trajectory_indices: list[int], frames: int, fps: int, seed: int,
                 actions: ActionConfig, spawn: SpawnConfig, rig: CameraRigConfig,
                 level_scale: float = 1.0, level_up_axis: str | None = None,
                 camera_rays: bool = True, camera_scale: float | None = None,
                 resolved_config: dict | None = None,
                 extra_starts: list[tuple[tuple[float, float, float], float]] | None = None,
                 level_record: dict | None = None, interior: bool = False):
        validate_action_config(actions)
        # a level marked interior: no spawn under the sky, rooms between single-plane walls
        # are rooms (core.spawns.column_floors)
        self.interior = interior
        self._roof_only = 0  # spawn candidates whose every floor was a roof
        # an unmarked level whose candidates stood only on roofs and that is enclosed (a
        # ceiling over most of its columns, measured once) is screened as an interior for
        # that trajectory; the reason goes to meta.json "level" "interior"
        self._enclosure: float | None = None
        self._interior_t = interior
        self._detected: str | None = None
        # starts the user listed for this level (overrides.yaml), tried after the level's own
        self.extra_starts = list(extra_starts or [])
        # recorded under meta.json "level" beside path, scale, up axis (per-level overrides)
        self.level_record = dict(level_record or {})
        self.engine = engine
        self.level_path, self.level_id = level_path, level_id
        self.level_scale, self.level_up_axis = level_scale, level_up_axis
        self.characters = characters
        self.indices = list(trajectory_indices)
        self.n_frames, self.fps, self.seed = frames, fps, seed
        self.acfg, self.scfg, self.rig = actions, spawn, rig
        self.camera_rays = camera_rays
        self.camera_scale = camera_scale  # per-level rig scale (overrides.yaml camera_scale)
        self.resolved_config = resolved_config or {}
        self.dt = 1.0 / fps
        self.state = "initialize"
        self.results: list[TrajectoryResult] = []
        self.level: LevelInfo | None = None
        self.ticks = 0
        self._k = -1  # position in self.indices
        # the streamed world around the spawn point being tried (engine.world_ready)
        self._world = WorldWait(engine, round(spawn.stream_timeout_s * fps))
        self._pending: Candidate | None = None

    # -------------------------------------------------------------- driving

    @property
    def done(self) -> bool:
        return self.state == "done"

    def tick(self) -> None:
        """Do only the work of the current state, then return to the engine."""
        self.ticks += 1
        getattr(self, f"_on_{self.state}")()

    def run(self, max_ticks: int = 10_000_000) -> list[TrajectoryResult]:
        """Drive ``tick()`` to completion (the embedded loop; Unreal calls tick per frame)."""
        while not self.done and self.ticks < max_ticks:
            self.tick()
        return self.results

    # -------------------------------------------------------------- states

    def _on_initialize(self) -> None:
        self.level = self.engine.load_level(self.level_path, self.level_id, self.level_scale,
                                            self.level_up_axis)
        self.state = "enter_runtime"

    def _on_enter_runtime(self) -> None:
        # models and animations once per task, not per trajectory (§6.1)
        for spec in self.characters:
            self.engine.load_character(spec)
        self.state = "next"

    def _on_next(self) -> None:
        self._k += 1
        if self._k >= len(self.indices):
            self.state = "done"
            return
        idx = self.indices[self._k]
        self.rng = random.Random(f"{self.seed}:{self.level_id}:{idx}")
        self.char = self.characters[self.rng.randrange(len(self.characters))]
        self.frames: list[dict] = []
        self.props: list[dict] = []
        self.segment = 0
        self.attempts = 0
        self._roof_only = 0
        self._interior_t, self._detected = self.interior, None
        self.spawns: list[dict] = []
        self.failure: tuple[str, str] | None = None
        self._candidates = self._spawn_candidates()
        self._pending = None
        self.state = "prepare"

    def _begin_segment(self) -> None:
        assert self.level is not None
        self._event = "spawn" if self.segment == 0 else "respawn"
        self.action = "IDLE"
        self.hold = 0
        self.ref_yaw = self.yaw
        self.escapes = 0
        self._escape_target: float | None = None
        self._stuck_at: tuple[float, float] | None = None
        self._history: list[tuple[float, float]] = []
        self._poi: tuple[float, float, float] | None = None
        self._poi_t = 0
        self._retarget_poi()

    def _retarget_poi(self) -> None:
        assert self.level is not None
        pois = self.level.pois or self.level.large_objects
        self._poi = self.rng.choice(pois) if pois else None
        self._poi_t = int(self.acfg.poi_retarget_s * self.fps)

    def _sample_action(self) -> None:
        acts = [a for a in ACTIONS if self.acfg.weights.get(a, 0) > 0]
        self.action = self.rng.choices(acts, weights=[self.acfg.weights[a] for a in acts])[0]
        self.hold = self.rng.randint(self.acfg.hold_min_frames, self.acfg.hold_max_frames)

    def _on_loop(self) -> None:
        assert self.level is not None
        if self.hold <= 0:
            self._sample_action()
        self.hold -= 1
        st = self.engine.character_state()
        # facing: escape rotation > POI guidance (never touches the action probabilities)
        if self._escape_target is not None:
            self.yaw = _turn(self.yaw, self._escape_target,
                             self.acfg.escape_turn_rate_deg_s * self.dt)
            if abs(_wrap(self._escape_target - self.yaw)) < 1e-6:
                self._escape_target = None
        dx, dy = DIRECTIONS[self.action]
        if self.acfg.coordinates == "character":
            if self._escape_target is None and self._poi is not None:
                want = math.degrees(math.atan2(self._poi[1] - st.position[1],
                                               self._poi[0] - st.position[0]))
                self.yaw = _turn(self.yaw, want, self.acfg.poi_turn_rate_deg_s * self.dt)
            ref = self.yaw
        else:
            ref = self.ref_yaw
        c, s = math.cos(math.radians(ref)), math.sin(math.radians(ref))
        move = (dx * c - dy * s, dx * s + dy * c)
        if self.acfg.coordinates == "camera":
            if abs(dx) + abs(dy) > 0 and self._escape_target is None:
                want = math.degrees(math.atan2(move[1], move[0]))
                self.yaw = _turn(self.yaw, want, self.acfg.face_turn_rate_deg_s * self.dt)
            k = min(1.0, self.acfg.ref_follow_rate * self.dt)
            self.ref_yaw = (self.ref_yaw + _wrap(self.yaw - self.ref_yaw) * k) % 360.0
        self.engine.apply_input(move, self.yaw, self.dt)
        st = self.engine.character_state()
        self._record(st, ref)
        self._poi_t -= 1
        if self._poi_t <= 0 or (self._poi is not None and math.hypot(
                self._poi[0] - st.position[0], self._poi[1] - st.position[1]) < 2.0):
            self._retarget_poi()
        if self._detect_dead_end(st):
            return
        if st.position[2] < self.level.bounds_min[2] - self.scfg.fall_limit_m:
            self._start_respawn()  # fell out of the level
            return
        if len(self.frames) >= self.n_frames:
            self.state = "exit_runtime"

    def _detect_dead_end(self, st: Any) -> bool:
        w = self.acfg.deadend_window_frames
        self._history.append((st.position[0], st.position[1]) if self.action != "IDLE"
                             else (math.nan, math.nan))
        if len(self._history) < w or self._escape_target is not None:
            return False
        recent = self._history[-w:]
        if any(math.isnan(p[0]) for p in recent):
            return False
        if self._stuck_at is not None and math.dist(
                self._stuck_at, recent[-1]) > self.acfg.escape_clear_m:
            self.escapes, self._stuck_at = 0, None  # the last escape worked
        if math.dist(recent[0], recent[-1]) >= self.acfg.deadend_min_progress_m:
            return False
        self._history.clear()
        self._stuck_at = recent[-1]
        if self.escapes >= self.acfg.max_escapes:
            self._start_respawn()
            return True
        self.escapes += 1
        turn = self.rng.uniform(self.acfg.escape_min_deg, 180.0) * self.rng.choice((-1, 1))
        self._escape_target = (self.yaw + turn) % 360.0
        self._event = "escape"
        return False

    def _start_respawn(self) -> None:
        self.segment += 1
        self.attempts = 0
        self._roof_only = 0
        self._candidates = self._spawn_candidates()
        self._pending = None
        self.state = "respawn"

    def _on_respawn(self) -> None:
        self._on_prepare()

    def _record(self, st: Any, ref: float) -> None:
        q = yaw_quat(self.yaw)
        vals = (*st.position, *st.velocity, *q)
        if not all(math.isfinite(v) for v in vals):
            self.failure = ("non_finite_transform", f"frame {len(self.frames)}: {vals}")
            self.state = "exit_runtime"
            return
        f = len(self.frames)
        self.frames.append(frame_row(f, self.fps, self.action, st, q, self.yaw, ref, self.char,
                                     self._capsule, self.segment, self._event))
        self._event = "none"
        props = getattr(self.engine, "prop_transforms", None)
        self.props += prop_rows(f, props() if props else [])

    def _rays(self):
        """Every surface crossing on a segment (fractions, sorted): the engine's raycast_all,
        or its closest hit alone for an adapter without one."""
        every = getattr(self.engine, "raycast_all", None)
        if every is not None:
            return lambda a, b: [h.fraction for h in every(a, b)]

        def closest(a, b):
            hit = self.engine.raycast(a, b)
            return [hit.fraction] if hit else []
        return closest

    def _on_exit_runtime(self) -> None:
        self.state = "cameras"

    def _on_cameras(self) -> None:
        idx = self.indices[self._k]
        level = {"path": self.level_path, "scale": self.level_scale,
                 "up_axis": self.level_up_axis, **self.level_record,
                 **({"interior": self._detected} if self._detected else {})}
        meta = trajectory_meta(self.engine, self.level_id, self.char, idx, self.seed, self.fps,
                               self.frames, self.resolved_config, self.segment + 1, level,
                               self.spawns)
        if self.frames:
            meta["capsule"] = capsule_meta(self.char, self._capsule, self._capsule_source)
        if self.failure:
            self.results.append(TrajectoryResult(idx, [], [], meta, *self.failure))
        else:
            positions = [(f["pos_x"], f["pos_y"], f["pos_z"]) for f in self.frames]
            yaws = [f["yaw_deg"] if self.acfg.coordinates == "character" else f["ref_yaw_deg"]
                    for f in self.frames]
            cams = compute_tracks(positions, yaws, self.char.visual_height, self.rig,
                                  self._rays() if self.camera_rays else None,
                                  body_radius=self._capsule[0], fps=self.fps,
                                  body_width=self.char.footprint or None,
                                  level_scale=self.camera_scale)
            meta["cameras"] = {"views": collapse_stats(cams),
                               "collapse_ratio": self.rig.collapse_ratio,
                               "level_scale": self.camera_scale}
            self.results.append(TrajectoryResult(idx, self.frames, cams, meta,
                                                 props=self.props))
        self.state = "next"
