"""``FakeEditor``: one fake Unreal Editor process. Its worlds (editor and PIE), the PIE world
tick on the embedded engine (Bullet resolves each character's movement input in the tick after
the callback that gave it, as in Unreal), and the ``-ExecutePythonScript`` run: the script gets
``namespace`` as its ``unreal`` module, then, frame by frame, the editor ticks the PIE world and
the render in progress (``mrq_render``) and calls the Slate post-tick callbacks with the fixed
step. A stand-in: no Unreal runs here."""

from __future__ import annotations

import math
import os
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.unreal import host, mrq_render
from tests.fakes.unreal import namespace as fu

# the scripts' own modules (unreal/): imported again by each run, against this fake
SCRIPT_MODULES = ("ue_frame", "ue_paths", "ue_engine", "ue_publish", "ue_layers", "ue_sequence")


class FakeEditor:
    """One fake editor process: maps, assets, an embedded engine, the frame loop."""

    def __init__(self, maps: dict[str, dict], assets: dict[str, Any] | None = None,
                 fps: int = 30, fixed_step: bool = True, level_actors: list[fu.Actor] | None = None,
                 crash_after_jobs: int | None = None, stdout: Any = None,
                 disk: dict[str, Any] | None = None, game_mode_pawn: bool = True,
                 world_partition: bool = False, wp_cell_m: float = 10.0,
                 wp_range_m: float = 12.0, wp_delay_frames: int = 12, wp_stalls: bool = False):
        from stages.engine.embedded import EmbeddedEngine

        self.maps, self.fps, self.fixed_step = maps, fps, fixed_step
        # the project's saved assets: pass the same dict to the next editor (a retry) and it
        # finds what this one saved and did not delete
        self.disk: dict[str, Any] = disk if disk is not None else {}
        self.assets: dict[str, Any] = dict(assets or {})
        self.assets.update(self.disk)
        self.world_dt = 1.0 / fps
        self.game_mode_pawn = game_mode_pawn
        # World Partition: the level's ground is a Landscape and only cells near the player's
        # view target are loaded (here: the level's corners come from the runtime bounds only)
        self.world_partition = world_partition
        self.world_partition_bounds: Any = None
        # ... and its collision streams in by cells around player 0's view point (cell size,
        # loading range in metres, frames to activate; stalls: nothing streams after PIE starts)
        self.wp_grid = (wp_cell_m, wp_range_m, wp_delay_frames, wp_stalls)
        self.partition: Any = None  # world_partition.StreamingCells while a PIE world runs
        self.yaw_ticks: list[tuple[int, float | None, float]] = []  # (frame, set, body)
        self.world_states: list[dict] = []  # what each MRQ sample saw (mrq_render)
        self.assets_in_use = False  # delete_loaded_asset refuses (the asset is referenced)
        self.destroyed_actors: list[fu.Actor] = []
        self.pawns_at_spawn: list[list[str]] = []  # pawn classes in PIE at each runtime spawn
        self.watch_files: list[Path] = []  # files whose changes are recorded per frame ...
        self._watched: dict[Path, Any] = {}
        self.file_changes: list[tuple[int, str, bool]] = []  # ... (frame, name, in PIE)
        self.engine = EmbeddedEngine()
        self.editor_world = fu.World("EditorWorld", pie=False)
        self.pie_world: fu.World | None = None
        self.level: Any = None
        self.map = ""
        self.dirty = False
        self.subsystems: dict[type, Any] = {c: c() for c in (
            fu.LevelEditorSubsystem, fu.UnrealEditorSubsystem, fu.EditorActorSubsystem,
            fu.MoviePipelineQueueSubsystem)}
        self.callbacks: list[Callable[[float], None]] = []
        self.requests: list[str] = []
        self.calls: list[str] = []
        self.keep_alive = False
        self.quit_requested = False
        self.frame = 0
        self.log_lines: list[str] = []
        self.pie_log: list[tuple[int, str]] = []
        self.render: dict | None = None
        self.renders: list[tuple[list, Any]] = []  # (jobs, executor) of each render started
        self.world_ticks: list[tuple[int, tuple[float, float], tuple[float, ...]]] = []
        self.rendered_jobs = 0
        self.crash_after_jobs = crash_after_jobs
        self.saved: list[str] = []
        self.deleted: list[str] = []
        self.sequences: dict[str, Any] = {}  # every sequence made, deleted or not
        self.destroyed: list[str] = []
        self.level_actors = level_actors or []
        self.stdout = stdout

    # ---- logging in Unreal's format
    def write_log(self, category: str, verbosity: str, text: str) -> None:
        line = f"[2025.01.01-00.00.00:000][{self.frame:3d}]{category}: {verbosity}{text}"
        self.log_lines.append(line)
        if self.stdout is not None:
            print(line, file=self.stdout, flush=True)

    def crash(self, assertion: str, frame_fn: str) -> None:
        self.write_log("LogCore", "Error: ", f"appError called: {assertion}")
        self.write_log("LogCore", "", "=== Critical error: ===")
        self.log_lines.append(f"0x00007f1c2b2e9c02 libUnrealEditor-Engine.so!{frame_fn}")
        self.write_log("LogCore", "", "Fatal error!")
        raise fu.FakeCrash(assertion)

    # ---- world
    def open_map(self, path: str) -> bool:
        if path not in self.maps:
            return False
        m = self.maps[path]
        self.map = path
        self.level = self.engine.load_level(m["file"], m["level_id"], m.get("scale", 1.0),
                                            m.get("up_axis", "Z"))
        self.editor_world = fu.World(path, pie=False)
        for a in self.level_actors:
            self.add_actor(self.editor_world, a)
        self.dirty = False
        return True

    def add_actor(self, world: fu.World, a: fu.Actor) -> None:
        a.world = world
        world.actors.append(a)
        if not world.pie:
            self.dirty = True

    def destroy(self, a: fu.Actor) -> None:
        if a.world is not None and a in a.world.actors:
            a.world.actors.remove(a)
            if not a.world.pie:
                self.dirty = True
        self.destroyed.append(a.get_name())
        self.destroyed_actors.append(a)

    def pie_characters(self) -> list[fu.Character]:
        w = self.pie_world
        return [a for a in w.actors if isinstance(a, fu.Character)] if w else []

    def _begin_play(self) -> None:
        """The PIE world: the level's static meshes and player starts as actors."""
        info = self.level
        w = fu.World(f"UEDPIE_0_{self.map}", pie=True)
        n = len(info.large_objects)
        for i, c in enumerate(info.large_objects):  # larger first, as the engine listed them
            a = fu.StaticMeshActor()
            a.origin, a.extent = fu._ue(c), fu.Vector((n - i), (n - i), (n - i))
            self.add_actor(w, a)
        lo, hi = fu._ue(info.bounds_min), fu._ue(info.bounds_max)
        if self.world_partition:  # the ground is a landscape, partly loaded
            land = fu.Landscape()
            mid = fu.Vector((lo.x + hi.x) / 2, (lo.y + hi.y) / 2, (lo.z + hi.z) / 2)
            land.origin = mid
            land.extent = fu.Vector(abs(hi.x - lo.x) / 4, abs(hi.y - lo.y) / 4,
                                    abs(hi.z - lo.z) / 2)  # the loaded cells: a half of it
            self.add_actor(w, land)
            ppv = fu.PostProcessVolume()  # an overlapping brush far larger than the level
            ppv.origin, ppv.extent = mid, fu.Vector(1e6, 1e6, 1e6)
            self.add_actor(w, ppv)
            self.world_partition_bounds = fu.Box(fu.Vector(min(lo.x, hi.x), min(lo.y, hi.y),
                                                           min(lo.z, hi.z)),
                                                 fu.Vector(max(lo.x, hi.x), max(lo.y, hi.y),
                                                           max(lo.z, hi.z)), True)
        else:
            for corner in (info.bounds_min, info.bounds_max):
                a = fu.StaticMeshActor()
                a.origin, a.extent = fu._ue(corner), fu.Vector(0, 0, 0)
                self.add_actor(w, a)
        for pos, yaw in info.player_starts:
            self.add_actor(w, fu.PlayerStart(fu._ue(pos), fu.Rotator(0, 0, -yaw)))
        # the GameMode puts player 0's controller at the start spot (its pawn's, below)
        pc = fu.PlayerController(fu._ue(info.player_starts[0][0]) if info.player_starts
                                 else None)
        self.add_actor(w, pc)
        if self.world_partition:
            from tests.fakes.unreal.world_partition import StreamingCells

            cell, rng, delay, stalls = self.wp_grid
            self.partition = StreamingCells(self.engine, cell, rng, delay, stalls)
            self.partition.subsystem._world = w
            self.partition.begin(fu._m(pc.location))
        if self.game_mode_pawn and info.player_starts:
            # the level's GameMode spawns its DefaultPawn for player 0 at the first PlayerStart
            pos, yaw = info.player_starts[0]
            self.add_actor(w, fu.DefaultPawn(fu._ue(pos), fu.Rotator(0, 0, -yaw)))
        self.pie_world = w
        self.pie_log.append((self.frame, "begin"))

    def _end_play(self) -> None:
        if self.partition is not None:
            self.partition.end()
            self.partition = None
        self.pie_world = None
        self.pie_log.append((self.frame, "end"))

    def _tick_world(self, dt: float) -> None:
        from stages.core.engine_types import CharacterSpec
        from tests.fakes.unreal import world_partition as wp

        pcs = [a for a in self.pie_world.actors if isinstance(a, fu.PlayerController)]
        for pc in pcs:  # the camera manager's view point, then World Partition streams there
            p = wp.view_point(pc)
            wp.streaming_source(pc, p)
            if self.partition is not None and pc.enable_streaming_source:
                self.partition.tick(self.frame, p)
        for ch in self.pie_characters():
            cap, mv = ch.capsule_component, ch.character_movement
            hh_cm = cap.get_scaled_capsule_half_height()
            if not ch.spawned_in_engine:
                r = cap.get_scaled_capsule_radius() / 100.0
                spec = CharacterSpec(
                    ch.get_name(), r, max(0.0, hh_cm / 100.0 - r), 2 * hh_cm / 100.0,
                    walk_speed=mv.max_walk_speed / 100.0, step_height=mv.max_step_height / 100.0,
                    locomotion="fly" if mv.mode is fu.MovementMode.MOVE_FLYING else "walk",
                    max_slope_deg=mv.walkable_floor_angle)
                c = fu._m(ch.location)
                self.engine.spawn_character(spec, (c[0], c[1], c[2] - hh_cm / 100.0),
                                            -ch.rotation.yaw)
                ch.spawned_in_engine = True
            move = (0.0, 0.0)
            if ch.input:
                x = sum(v[0] for v in ch.input)
                y = sum(v[1] for v in ch.input)
                n = math.hypot(x, y)
                if n > 1e-9:
                    move = (x / n, -y / n)
            ch.input = []
            # the rotation rules of a Character: toward the movement (orient rotation to
            # movement), else the controller's yaw (use controller rotation yaw), else as set
            if ch.character_movement.orient_rotation_to_movement and move != (0.0, 0.0):
                ch.rotation = fu.Rotator(0, 0, -math.degrees(math.atan2(move[1], move[0])))
            elif ch.use_controller_rotation_yaw:
                ch.rotation = fu.Rotator(0, 0, ch.controller_yaw)
            self.yaw_ticks.append((self.frame, ch.wanted_yaw, ch.rotation.yaw))
            self.engine.apply_input(move, -ch.rotation.yaw, dt)
            st = self.engine.character_state()
            self.world_ticks.append((self.frame, move, st.position))
            ch.location = fu._ue((st.position[0], st.position[1], st.position[2] + hh_cm / 100.0))
            ch.velocity = fu._ue(st.velocity)
            ch.grounded = bool(st.grounded)

    def _watch(self) -> None:
        for p in self.watch_files:
            try:
                st = p.stat()
                sig = (st.st_size, st.st_mtime_ns, p.read_bytes())
            except FileNotFoundError:
                sig = None
            if sig != self._watched.get(p):
                self._watched[p] = sig
                if sig is not None:
                    self.file_changes.append((self.frame, p.name, self.pie_world is not None))

    @property
    def pawns_at_first_spawn(self) -> list[str]:
        return self.pawns_at_spawn[0] if self.pawns_at_spawn else []

    # ---- Movie Render Queue (mrq_render.py renders the frames)
    def start_render(self, queue: fu.MoviePipelineQueue,
                     executor: fu.MoviePipelineExecutorBase) -> None:
        self.render = mrq_render.start(queue, executor)
        self.renders.append((list(queue.jobs), executor))

    # ---- running a script like -ExecutePythonScript
    def run(self, script: Path, env: dict[str, str], map_path: str = "",
            max_frames: int = 100_000) -> int:
        """Like ``UnrealEditor-Cmd <project> [map] -ExecutePythonScript=<script>``: 0 after
        quit_editor; 1 for a Python error in the script; 139 for a crash; 124 past
        ``max_frames``. The script's globals are kept in ``self.script_globals``."""
        host.install(self)  # what the namespace's calls talk to
        me = fu
        old_mod = sys.modules.get("unreal")
        sys.modules["unreal"] = me
        for m in SCRIPT_MODULES:  # scripts imported against another fake are imported again
            if getattr(sys.modules.get(m), "unreal", me) is not me:
                sys.modules.pop(m, None)
        old_env = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        self.script_globals: dict[str, Any] = {}
        try:
            if map_path and not self.open_map(map_path):
                self.write_log("LogInit", "Error: ", f"map {map_path} not found")
                return 1
            try:
                self.script_globals = runpy.run_path(str(script), run_name="__main__")
            except Exception as exc:  # noqa: BLE001 - the editor logs it and carries on
                self.write_log("LogPython", "Error: ", f"{type(exc).__name__}: {exc}")
                return 1
            if not self.keep_alive:
                return 0  # the script returned and nothing keeps it: the editor exits
            last = time.monotonic()
            while not self.quit_requested and self.frame < max_frames:
                self.frame += 1
                now = time.monotonic()
                # Slate's post-tick callback gets the wall-clock delta (FSlateApplication's
                # DeltaTime), whatever the engine's fixed step; the world ticks by the fixed step
                # only with -UseFixedTimeStep (else by the same wall-clock delta)
                dt = max(now - last, 1e-4)
                last = now
                self.world_dt = 1.0 / self.fps if self.fixed_step else dt
                for req in self.requests:
                    self._begin_play() if req == "begin_play" else self._end_play()
                self.requests = []
                try:
                    if self.pie_world is not None:
                        self._tick_world(self.world_dt)
                    if self.render is not None:
                        mrq_render.tick(self)
                    for cb in list(self.callbacks):
                        cb(dt)
                except fu.FakeCrash:
                    return 139
                self._watch()
            return 0 if self.quit_requested else 124
        finally:
            for k, v in old_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            for m in SCRIPT_MODULES:
                sys.modules.pop(m, None)
            if old_mod is not None:
                sys.modules["unreal"] = old_mod
            else:
                sys.modules.pop("unreal", None)
            self.engine.close()
