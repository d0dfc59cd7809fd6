"""The fake editor process behind ``tests/fake_unreal.py``: its worlds (editor and PIE), the
PIE world tick on the embedded engine (Bullet resolves each character's movement input in the
tick after the callback that gave it, as in Unreal), Movie Render Queue's frames (ray-cast depth
pictures from the keyed camera poses) and the ``-ExecutePythonScript`` run with its Slate
post-tick loop. A stand-in: no Unreal runs here."""

from __future__ import annotations

import math
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import fake_unreal as fu
from tests import fake_unreal_base


class FakeEditor:
    """One fake editor process: maps, assets, an embedded engine, the frame loop."""

    def __init__(self, maps: dict[str, dict], assets: dict[str, Any] | None = None,
                 fps: int = 30, fixed_step: bool = True, level_actors: list[fu.Actor] | None = None,
                 crash_after_jobs: int | None = None, stdout: Any = None):
        from stages.engine.embedded import EmbeddedEngine

        self.maps, self.fps, self.fixed_step = maps, fps, fixed_step
        self.assets: dict[str, Any] = dict(assets or {})
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
        for corner in (info.bounds_min, info.bounds_max):
            a = fu.StaticMeshActor()
            a.origin, a.extent = fu._ue(corner), fu.Vector(0, 0, 0)
            self.add_actor(w, a)
        for pos, yaw in info.player_starts:
            self.add_actor(w, fu.PlayerStart(fu._ue(pos), fu.Rotator(0, 0, -yaw)))
        self.pie_world = w
        self.pie_log.append((self.frame, "begin"))

    def _end_play(self) -> None:
        self.pie_world = None
        self.pie_log.append((self.frame, "end"))

    def _tick_world(self, dt: float) -> None:
        from stages.core.engine_types import CharacterSpec

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
            self.engine.apply_input(move, -ch.rotation.yaw, dt)
            st = self.engine.character_state()
            self.world_ticks.append((self.frame, move, st.position))
            ch.location = fu._ue((st.position[0], st.position[1], st.position[2] + hh_cm / 100.0))
            ch.velocity = fu._ue(st.velocity)
            ch.grounded = bool(st.grounded)

    # ---- Movie Render Queue
    def start_render(self, queue: fu.MoviePipelineQueue,
                     executor: fu.MoviePipelineExecutorBase) -> None:
        self.render = {"queue": queue, "executor": executor, "job": 0, "frame": None}
        self.renders.append((list(queue.jobs), executor))

    def _tick_render(self) -> None:
        r = self.render
        assert r is not None
        ex = r["executor"]
        jobs = r["queue"].jobs
        if r["job"] >= len(jobs):
            self.write_log("LogMovieRenderPipeline", "", "MoviePipelineLinearExecutorBase "
                           f"finished {len(jobs)} jobs in +00:00:01.000.")
            self.render = None
            ex.on_executor_finished_delegate.broadcast(ex, True)
            return
        job = jobs[r["job"]]
        if r["frame"] is None:
            self.write_log("LogMovieRenderPipeline", "",
                           f"MoviePipelineLinearExecutorBase starting {len(jobs)} jobs.")
            if self.dirty and not getattr(ex, "allow_unsaved", False):
                ex.on_executor_errored_delegate.broadcast(
                    ex, fu.MoviePipeline(), True, fu.Text("the level has unsaved changes"))
                self.render = None
                ex.on_executor_finished_delegate.broadcast(ex, False)
                return
            r["frame"] = 0
            r["seq"] = self.assets[job.sequence.path]
        seq: fu.LevelSequence = r["seq"]
        k = r["frame"]
        if k >= seq.end:
            self.write_log("LogMovieRenderPipeline", "", "Finished rendering last shot. "
                           "Moving to Finalize to finish writing items to disk.")
            self.rendered_jobs += 1
            r["job"] += 1
            r["frame"] = None
            return
        if (self.crash_after_jobs is not None and self.rendered_jobs >= self.crash_after_jobs
                and k == 5):  # mid-render of the next job
            self.write_log("LogCore", "Error: ", "Caught signal 11 Segmentation fault")
            raise fu.FakeCrash("signal 11 during MRQ")
        self._render_frame(job, seq, k)
        r["frame"] = k + 1

    def _render_frame(self, job: fu.MoviePipelineExecutorJob, seq: fu.LevelSequence,
                      k: int) -> None:
        import numpy as np
        from PIL import Image

        cfg = job.config.settings
        out: fu.MoviePipelineOutputSetting = cfg[fu.MoviePipelineOutputSetting]
        cams = cfg.get(fu.MoviePipelineCameraSetting)
        cut = next(t for t in seq.tracks if isinstance(t, fu.MovieSceneCameraCutTrack))
        primary = cut.sections[0].camera  # type: ignore[attr-defined]
        bindings = [b for b in seq.bindings if isinstance(b.object, fu.CineCameraActor)]
        if not (cams and cams.render_all_cameras):
            bindings = [primary]
        W, H = out.output_resolution.x, out.output_resolution.y
        takeover = next((a for a in self.editor_world.actors if isinstance(a, fu.LevelSequenceActor)
                         and a.playback_settings.auto_play), None)
        for b in bindings:
            if takeover is not None:  # the level's own sequence owns the camera now
                loc, rot = takeover.showcase
            else:
                ch = {c.get_name(): c.keys for c in b.transform().channels}
                loc = fu.Vector(ch["Location.X"][k], ch["Location.Y"][k], ch["Location.Z"][k])
                rot = fu.Rotator(ch["Rotation.X"][k], ch["Rotation.Y"][k], ch["Rotation.Z"][k])
            cc = b.object.get_cine_camera_component()
            hfov = 2 * math.atan(cc.filmback.sensor_width / (2 * cc.current_focal_length))
            img = self._depth_picture(loc, rot, hfov, W, H)
            name = out.file_name_format.replace("{camera_name}", b.object.label).replace(
                "{frame_number}", f"{k:0{out.zero_pad_frame_numbers}d}")
            path = Path(out.output_directory.path) / f"{name}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.ascontiguousarray(img)).save(path)

    def _depth_picture(self, loc: fu.Vector, rot: fu.Rotator, hfov: float, W: int, H: int) -> Any:
        import numpy as np

        f, rt, up = fu.camera_basis(rot)
        o = fu._m(loc)
        th, tv = math.tan(hfov / 2), math.tan(hfov / 2) * H / W
        img = np.zeros((H, W, 3), np.uint8)
        step = 2  # one ray per 2x2 pixels
        for j in range(0, H, step):
            v = 1 - 2 * (j + 0.5) / H
            for i in range(0, W, step):
                u = 2 * (i + 0.5) / W - 1
                d = tuple(f[a] + u * th * rt[a] + v * tv * up[a] for a in range(3))
                end = tuple(o[a] + 60.0 * d[a] for a in range(3))
                hit = self.engine.raycast(o, end)  # type: ignore[arg-type]
                g = 0 if hit is None else int(255 * (1 - hit.fraction))
                if hit is not None:  # a 1 m checker "texture" so a moving camera sees motion
                    g = int(g * (0.7 + 0.3 * ((math.floor(hit.position[0]) +
                                                math.floor(hit.position[1])) % 2)))
                n = (0.0, 0.0, 1.0) if hit is None else hit.normal
                img[j:j + step, i:i + step] = (g, int(g * (0.5 + 0.5 * abs(n[2]))),
                                               int(g * (0.5 + 0.5 * abs(n[0]))))
        return img

    # ---- running a script like -ExecutePythonScript
    def run(self, script: Path, env: dict[str, str], map_path: str = "",
            max_frames: int = 100_000) -> int:
        """Like ``UnrealEditor-Cmd <project> [map] -ExecutePythonScript=<script>``: 0 after
        quit_editor; 1 for a Python error in the script; 139 for a crash; 124 past
        ``max_frames``. The script's globals are kept in ``self.script_globals``."""
        fake_unreal_base.EDITOR = self  # what the fake module's calls talk to
        me = fu
        old_mod = sys.modules.get("unreal")
        sys.modules["unreal"] = me
        for m in fu.SCRIPT_MODULES:  # scripts imported against another fake are imported again
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
            dt = 1.0 / self.fps if self.fixed_step else 0.0123
            while not self.quit_requested and self.frame < max_frames:
                self.frame += 1
                for req in self.requests:
                    self._begin_play() if req == "begin_play" else self._end_play()
                self.requests = []
                try:
                    if self.pie_world is not None:
                        self._tick_world(dt)
                    if self.render is not None:
                        self._tick_render()
                    for cb in list(self.callbacks):
                        cb(dt)
                except fu.FakeCrash:
                    return 139
            return 0 if self.quit_requested else 124
        finally:
            for k, v in old_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            for m in fu.SCRIPT_MODULES:
                sys.modules.pop(m, None)
            if old_mod is not None:
                sys.modules["unreal"] = old_mod
            else:
                sys.modules.pop("unreal", None)
            self.engine.close()
