"""Stage I inside Unreal Editor (paper §6.1): started by ``-ExecutePythonScript`` with the
spec path in ``WMFORGE_SPEC`` (the node runner's spec.json, the same one the embedded engine
reads). The script keeps Python alive, registers a Slate post-tick callback and returns; each
engine frame the callback does one step and returns to the engine:

    open map → request PIE → wait for the PIE world → controller ticks (stages.core.stage1,
    unchanged; one tick per frame at the fixed step) → end PIE → wait → COMPLETE → quit editor

Unreal resolves movement input in the world tick that follows the callback, so the state the
controller reads right after ``apply_input`` is the previous frame's. The driver therefore
overwrites each recorded frame's position, velocity and ground contact with the state read at
the start of the next callback — the state that input produced — before the controller uses the
frame again (camera tracks are computed two ticks later). The capsule columns carry the capsule
the engine really used (read back after spawning, §7.2).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _p in (str(HERE), str(HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import ue_publish  # noqa: E402
from ue_engine import UnrealPieEngine  # noqa: E402

import unreal  # noqa: E402
from stages.core.cameras import CameraRigConfig  # noqa: E402
from stages.core.engine_types import CharacterSpec  # noqa: E402
from stages.core.progress import COMPLETE  # noqa: E402
from stages.core.stage1 import Stage1Controller  # noqa: E402
from stages.core.stage1_config import ActionConfig, SpawnConfig  # noqa: E402

PHASES = ("open_map", "start_pie", "wait_pie", "run", "stop_pie", "wait_stop", "quit")
PIE_WAIT_FRAMES = 3000  # frames to wait for the PIE world before giving up (a log line says so)
HEARTBEAT_EVERY = 30  # frames between heartbeats, in every phase (the node runner watches it)
FIXED_STEP_TOLERANCE = 1e-3  # relative: the world's step must be 1/fps


def log(msg: str) -> None:
    unreal.log(msg)


def controller(engine: Any, spec: dict) -> Stage1Controller:
    chars = [CharacterSpec(**c) for c in spec["characters"]]
    return Stage1Controller(
        engine, spec.get("load_path") or spec["level_path"], spec["level_id"], chars,
        list(spec["indices"]), spec["frames"], spec["fps"], spec["seed"],
        ActionConfig(**spec["actions"]), SpawnConfig(**spec["spawn"]),
        CameraRigConfig(**spec["cameras"]), level_scale=float(spec["scale"]),
        level_up_axis=spec.get("up_axis"), camera_rays=bool(spec["camera_rays"]),
        camera_scale=spec.get("camera_scale"),
        resolved_config=spec.get("resolved_config") or {})


class Stage1Driver:
    """The per-frame state machine around the controller."""

    def __init__(self, spec: dict, spec_path: Path):
        self.spec, self.spec_path = spec, spec_path
        self.map = "" if spec.get("map_on_command_line") else str(spec.get("ue_map") or "")
        self.engine = UnrealPieEngine(str((spec.get("unreal") or {}).get("pawn_class") or ""),
                                      log)
        self.level_editor = unreal.get_editor_subsystem(unreal.LevelEditorSubsystem)
        self.ctrl: Stage1Controller | None = None
        self.phase = "open_map"
        self.phases_seen: list[str] = []
        self.ctrl_states: list[str] = []  # the controller's states in the order it took them
        self.frames = 0
        self.waited = 0
        self.published = 0
        self.pending: dict | None = None
        self.error = ""
        self.handle: object | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        unreal.EditorPythonScripting.set_keep_python_script_alive(True)
        self.handle = unreal.register_slate_post_tick_callback(self.on_tick)
        log(f"wmforge: stage1: started for level {self.spec['level_id']} "
            f"({len(self.spec['indices'])} trajectories)")

    def on_tick(self, delta_seconds: float) -> None:
        """One engine frame: the work of the current phase only."""
        self.frames += 1
        if self.phase not in self.phases_seen:
            self.phases_seen.append(self.phase)
        if self.frames == 1 or self.frames % HEARTBEAT_EVERY == 0:
            self._heartbeat()
        try:
            getattr(self, f"_on_{self.phase}")(delta_seconds)
        except Exception as exc:  # noqa: BLE001 - a failure is a row and a clean shutdown
            self._fail("load_failed" if self.published == 0 else "engine_error",
                       f"{type(exc).__name__}: {exc}")

    def _fail(self, reason: str, detail: str) -> None:
        if self.error:  # failing again while shutting down: quit without further steps
            unreal.log_error(f"wmforge: stage1: during shutdown: {detail}")
            self.phase = "done"
            unreal.SystemLibrary.quit_editor()
            return
        self.error = detail
        with open(self.spec["failures"], "a") as f:
            f.write(json.dumps({"level_id": self.spec["level_id"], "trajectory": -1,
                                "reason": reason, "detail": detail}) + "\n")
        unreal.log_error(f"wmforge: stage1: {reason}: {detail}")
        self.phase = "stop_pie" if self._in_pie() else "quit"

    def _heartbeat(self) -> None:
        """The file the node runner watches: it changes in every phase (loading the map and
        waiting for PIE take many frames before the first trajectory)."""
        try:
            Path(self.spec["heartbeat"]).write_text(f"{self.frames} {self.phase}\n")
        except OSError as exc:  # a heartbeat that cannot be written is a log line, not a crash
            unreal.log_warning(f"wmforge: stage1: heartbeat: {exc}")

    def _in_pie(self) -> bool:
        le = self.level_editor
        return bool(le is not None and le.is_in_play_in_editor())

    # ------------------------------------------------------------------ phases

    def _on_open_map(self, dt: float) -> None:
        if self.map:
            le = self.level_editor
            if le is None or not le.load_level(self.map):
                raise RuntimeError(f"map {self.map} did not load")
        self.phase = "start_pie"

    def _on_start_pie(self, dt: float) -> None:
        assert self.level_editor is not None
        self.level_editor.editor_request_begin_play()
        self.phase = "wait_pie"

    def _on_wait_pie(self, dt: float) -> None:
        self.waited += 1
        ues = unreal.get_editor_subsystem(unreal.UnrealEditorSubsystem)
        if self._in_pie() and ues is not None and ues.get_game_world() is not None:
            self.engine.remove_foreign_pawns()
            self.ctrl = controller(self.engine, self.spec)
            self.phase = "run"
        elif self.waited > PIE_WAIT_FRAMES:
            raise RuntimeError(f"PIE did not start within {PIE_WAIT_FRAMES} frames")

    def _on_run(self, dt: float) -> None:
        ctrl = self.ctrl
        assert ctrl is not None
        fps = self.spec["fps"]
        # the world's step, not ``dt``: Slate's post-tick gets wall-clock time even with a fixed
        # engine step, so only the world tells whether -UseFixedTimeStep -FPS took effect
        step = unreal.GameplayStatics.get_world_delta_seconds(self.engine.world())
        if abs(step * fps - 1.0) > FIXED_STEP_TOLERANCE:
            self._fail("fixed_step_missing", f"the PIE world stepped {step:.6f} s, expected 1/{fps}"
                       f" s: start the editor with -UseFixedTimeStep -FPS={fps}")
            return
        if self.pending is not None:  # the state the last recorded input produced
            self._patch(self.pending)
            self.pending = None
        before = len(getattr(ctrl, "frames", []))
        frames_obj = getattr(ctrl, "frames", None)
        ctrl.tick()
        if not self.ctrl_states or self.ctrl_states[-1] != ctrl.state:
            self.ctrl_states.append(ctrl.state)
        after = getattr(ctrl, "frames", None)
        if after is frames_obj and after is not None and len(after) == before + 1:
            self.pending = after[-1]
        while self.published < len(ctrl.results):
            ue_publish.publish(ctrl.results[self.published], self.spec, log)
            self.published += 1
        if ctrl.done:
            self.phase = "stop_pie"

    def _patch(self, row: dict) -> None:
        st = self.engine.character_state()
        row["pos_x"], row["pos_y"], row["pos_z"] = st.position
        row["vel_x"], row["vel_y"], row["vel_z"] = st.velocity
        row["speed"] = math.hypot(st.velocity[0], st.velocity[1])
        ctrl = self.ctrl
        assert ctrl is not None
        row["grounded"] = bool(st.grounded or ctrl.char.locomotion != "walk")
        r, hh = self.engine.capsule_used[ctrl.char.character_id]
        row["capsule_radius_m"], row["capsule_half_height_m"] = r, hh

    def _on_stop_pie(self, dt: float) -> None:
        self.engine.close()
        if self.level_editor is not None and self._in_pie():
            self.level_editor.editor_request_end_play()
        self.phase = "wait_stop"

    def _on_wait_stop(self, dt: float) -> None:
        if not self._in_pie():
            self.phase = "quit"

    def _on_quit(self, dt: float) -> None:
        if not self.error:
            (self.spec_path.parent / COMPLETE).write_text(
                json.dumps({"trajectories": self.published}) + "\n")
        log(f"wmforge: stage1: finished: {self.published} trajectories, "
            f"{'error: ' + self.error if self.error else 'ok'}")
        if self.handle is not None:
            unreal.unregister_slate_post_tick_callback(self.handle)
            self.handle = None
        self.phase = "done"
        unreal.SystemLibrary.quit_editor()

    def _on_done(self, dt: float) -> None:
        return


def main() -> Stage1Driver:
    spec_path = Path(os.environ.get("WMFORGE_SPEC") or sys.argv[-1])
    spec = json.loads(spec_path.read_text())
    t0 = time.time()
    driver = Stage1Driver(spec, spec_path)
    driver.start()
    log(f"wmforge: stage1: driver registered in {time.time() - t0:.2f} s")
    return driver


if __name__ not in ("stage1_pie", "stage2_mrq"):  # run by -ExecutePythonScript, not imported
    DRIVER = main()  # referenced from module scope for as long as the editor runs
