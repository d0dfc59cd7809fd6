"""The Stage I controller (paper §6.1–6.2): a frame-driven state machine, one non-blocking
``tick()`` per engine frame, talking to the engine only through the protocol — so the same object
runs in the embedded loop and in Unreal's per-frame callback.

initialize → enter runtime → prepare scene/character (↔ stream: wait for a streamed world around
the spawn point) → warm up → trajectory loop ↔ respawn → exit runtime → compute cameras → next
trajectory → done.

Standard library only.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from .actions import ACTIONS, DIRECTIONS
from .cameras import CameraRigConfig, collapse_stats, compute_tracks
from .engine_types import CharacterSpec, LevelInfo
from .spawns import (
    ENCLOSED_SHARE,
    Candidate,
    column_floors,
    enclosed_share,
    pick_floor,
    start_ground,
)
from .trajectory import SCHEMA_VERSION, action_stats, yaw_quat
from .world_stream import WorldWait


@dataclass
class ActionConfig:
    # probability of each of the nine actions at a decision point (must sum to 1)
    weights: dict[str, float] = field(default_factory=lambda: {
        "W": 0.40, "A": 0.07, "S": 0.07, "D": 0.07, "WA": 0.09, "WD": 0.09, "SA": 0.04,
        "SD": 0.04, "IDLE": 0.13})
    # hold length, frames: uniform between min and max
    hold_min_frames: int = 15
    hold_max_frames: int = 60
    # "character" (paper §6.2) or "camera" (§9: forward = deeper into the image)
    coordinates: str = "character"
    # point-of-interest guidance: max turn rate toward the POI, deg/s; re-target period, s
    poi_turn_rate_deg_s: float = 25.0
    poi_retarget_s: float = 8.0
    # camera-relative mode: how fast the character turns toward its movement, deg/s
    face_turn_rate_deg_s: float = 240.0
    # camera-relative mode: how fast the reference (camera) yaw follows the character, 1/s
    ref_follow_rate: float = 1.0
    # dead end: moving input but under min_progress_m over window_frames
    deadend_window_frames: int = 20
    deadend_min_progress_m: float = 0.15
    # escape: rotate by at least this angle, deg; respawn after this many failed escapes
    escape_min_deg: float = 100.0
    escape_turn_rate_deg_s: float = 360.0
    max_escapes: int = 3
    # an escape has worked once the character gets this far from where it got stuck, m
    escape_clear_m: float = 3.0


@dataclass
class SpawnConfig:
    # candidate attempts before the level is declared to have no walkable region
    max_attempts: int = 24
    # drop height above the surface, m; time allowed to settle, s; frames of stable contact
    drop_height_m: float = 0.6
    settle_timeout_s: float = 3.0
    settle_frames: int = 8
    # max speed considered at rest, m/s
    rest_speed: float = 0.05
    # warm-up frames after settling, not recorded
    warmup_frames: int = 10
    # respawn when the character falls this far below the level's lowest point, m
    fall_limit_m: float = 5.0
    # share of trajectories (and respawns) that begin at a start (the level's start nodes, then
    # overrides.yaml starts) when the level has any; the rest, and any start that fails, try
    # sampled floors (1.0: starts first, always)
    start_share: float = 1.0
    # a sampled surface narrower than this many capsule diameters (a wall top) is not a floor
    min_floor_width_caps: float = 3.0
    # an engine that streams its world (Unreal World Partition) must have the world around a
    # spawn point loaded before its floor is searched and while the character settles; after
    # this many seconds of engine frames (1/fps each) without it the trajectory fails
    # (streaming_timeout). An engine whose level is all loaded (embedded) never waits
    stream_timeout_s: float = 60.0


def validate_action_config(cfg: ActionConfig, key: str = "trajectories.actions") -> None:
    """Raise ValueError naming the key for a bad action distribution."""
    unknown = sorted(set(cfg.weights) - set(ACTIONS))
    if unknown:
        raise ValueError(f"{key}.weights: unknown action(s) {unknown}; expected {ACTIONS}")
    neg = {a: w for a, w in cfg.weights.items() if w < 0}
    if neg:
        raise ValueError(f"{key}.weights: negative weight(s) {neg}")
    total = sum(cfg.weights.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"{key}.weights: weights sum to {total:.6g}, expected 1")
    if not 1 <= cfg.hold_min_frames <= cfg.hold_max_frames:
        raise ValueError(f"{key}.hold_min_frames/hold_max_frames: need 1 <= min <= max")
    if cfg.coordinates not in ("character", "camera"):
        raise ValueError(f"{key}.coordinates: {cfg.coordinates!r}; expected character|camera")


def _wrap(a: float) -> float:
    return (a + 180.0) % 360.0 - 180.0


def _turn(current: float, target: float, max_step: float) -> float:
    d = _wrap(target - current)
    return (current + max(-max_step, min(max_step, d))) % 360.0


@dataclass
class TrajectoryResult:
    index: int
    frames: list[dict]
    cameras: list[dict]
    meta: dict
    failure: str | None = None
    detail: str = ""
    props: list[dict] = field(default_factory=list)


class Stage1Controller:
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

    def _spawn_candidates(self) -> list[Candidate]:
        """Starts first (the level's own, then overrides.yaml's), then sampled columns: around
        points of interest (preferring the floor nearest the POI's height) and big static parts,
        then anywhere inside the level's bounds."""
        assert self.level is not None
        rng = self.rng
        starts = [Candidate("start", *p, yaw) for p, yaw in self.level.player_starts]
        rng.shuffle(starts)
        starts += [Candidate("override", *p, yaw) for p, yaw in self.extra_starts]
        near = []
        for c, hint in [(c, c[2]) for c in self.level.pois] + [
                (c, None) for c in self.level.large_objects]:
            for _ in range(2):
                a = rng.uniform(0, 2 * math.pi)
                r = rng.uniform(2.0, 6.0)
                near.append(Candidate("sampled", c[0] + r * math.cos(a), c[1] + r * math.sin(a),
                                      None, rng.uniform(0, 360), hint))
        rng.shuffle(near)
        lo, hi = self.level.bounds_min, self.level.bounds_max
        rand = [Candidate("sampled", rng.uniform(lo[0], hi[0]), rng.uniform(lo[1], hi[1]), None,
                          rng.uniform(0, 360)) for _ in range(self.scfg.max_attempts)]
        if starts and rng.random() >= self.scfg.start_share:
            return near + rand + starts
        return starts + near + rand

    def _spawn_height(self, c: Candidate) -> float | None:
        """The height of the floor a candidate spawns on, or None when it has none."""
        assert self.level is not None
        ch = self.char
        ray = self.engine.raycast
        lo, hi = self.level.bounds_min, self.level.bounds_max
        cos_max = math.cos(math.radians(ch.max_slope_deg))
        if c.z is not None:
            hit = start_ground(ray, c.x, c.y, c.z, depth=c.z - lo[2] + 5.0)
            if hit is None or hit.normal[2] < cos_max:
                return None
            return float(hit.position[2])
        reach = 10.0 + math.dist(lo, hi)
        floors = column_floors(ray, c.x, c.y, hi[2] + 5.0, lo[2] - 5.0, ch.total_height,
                               ch.step_height, ch.max_slope_deg,
                               self.scfg.min_floor_width_caps * 2 * ch.capsule_radius, reach,
                               base_z=lo[2], interior=self._interior_t)
        f = pick_floor(floors, c.hint_z, self.rng.randrange)
        if f is None and floors and all(x.roof for x in floors if not (x.narrow or x.inside)) \
                and any(x.roof for x in floors):
            self._roof_only += 1
        return None if f is None else f.z

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
        ch = self.char
        q = yaw_quat(self.yaw)
        vals = (*st.position, *st.velocity, *q)
        if not all(math.isfinite(v) for v in vals):
            self.failure = ("non_finite_transform", f"frame {len(self.frames)}: {vals}")
            self.state = "exit_runtime"
            return
        f = len(self.frames)
        self.frames.append({
            "frame": f, "t": f / self.fps, "action": self.action,
            "pos_x": st.position[0], "pos_y": st.position[1], "pos_z": st.position[2],
            "rot_w": q[0], "rot_x": q[1], "rot_y": q[2], "rot_z": q[3],
            "yaw_deg": self.yaw, "ref_yaw_deg": ref,
            "scale_x": ch.scale, "scale_y": ch.scale, "scale_z": ch.scale,
            "capsule_radius_m": self._capsule[0], "capsule_half_height_m": self._capsule[1],
            "grounded": bool(st.grounded or ch.locomotion != "walk"),
            "vel_x": st.velocity[0], "vel_y": st.velocity[1], "vel_z": st.velocity[2],
            "speed": math.hypot(st.velocity[0], st.velocity[1]),
            "segment": self.segment, "event": self._event,
        })
        self._event = "none"
        props = getattr(self.engine, "prop_transforms", None)
        for k, (name, pos, q) in enumerate(props() if props else []):
            self.props.append({"frame": f, "prop_index": k, "prop": name,
                               "pos_x": pos[0], "pos_y": pos[1], "pos_z": pos[2],
                               "rot_w": q[0], "rot_x": q[1], "rot_y": q[2], "rot_z": q[3]})

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

    def _on_exit_runtime(self) -> None:
        self.state = "cameras"

    def _on_cameras(self) -> None:
        idx = self.indices[self._k]
        meta = {
            "schema_version": SCHEMA_VERSION, "level_id": self.level_id,
            "character_id": self.char.character_id, "trajectory_index": idx,
            "seed": self.seed, "fps": self.fps, "frame_count": len(self.frames),
            "engine": getattr(self.engine, "name", "?"),
            "engine_version": getattr(self.engine, "version", "?"),
            "config": self.resolved_config, "segments": self.segment + 1,
            "level": {"path": self.level_path, "scale": self.level_scale,
                      "up_axis": self.level_up_axis, **self.level_record,
                      **({"interior": self._detected} if self._detected else {})},
            "spawns": self.spawns,
            "action_stats": action_stats([f["action"] for f in self.frames]),
            "character": {"visual_height_m": self.char.visual_height,
                          "locomotion": self.char.locomotion, "model": self.char.model_path,
                          "animations": self.char.animations,
                          "yaw_correction_deg": self.char.yaw_correction_deg,
                          "up_axis": self.char.up_axis},
        }
        if self.frames:
            meta["capsule"] = {
                "requested": {"radius_m": self.char.capsule_radius,
                              "half_height_m": self.char.capsule_half_height},
                "observed": {"radius_m": self._capsule[0], "half_height_m": self._capsule[1]},
                "source": self._capsule_source}
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
