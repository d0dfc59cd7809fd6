"""Stage II inside Unreal Editor (paper §7): a fresh editor process that reads only the
trajectory folders named in the instance spec (``WMFORGE_SPEC`` = ``instance.json``).

Per Slate post-tick, one step: sanitise the level (auto-playing sequence actors removed and
recorded) → for each trajectory, two MRQ jobs (:data:`PASSES`), each a Level Sequence of its
own (:mod:`ue_sequence`) rendered with the PIE executor: spatial/temporal samples and warm-up
from the ``render`` config, PNG or EXR per camera at the preset resolution, texture streaming
fully loaded, MRQ's samples as the only anti-aliasing → when both finished, the executor's
callbacks have appended a line to ``rendered.jsonl`` (the launcher on the node side verifies
the frames, encodes them and writes the progress line) → ``ENGINE_DONE`` → quit the editor.
With ``render.ground_truth`` on, each trajectory also gets one ``layers_<view>`` job per camera
after those two (:mod:`ue_layers`: one un-jittered sample, depth, normals and object ids as
EXR), and its line in ``rendered.jsonl`` is written once they finished too.

Why two jobs: MRQ renders all cameras of a job from one world state, and the first-person
camera sits inside the character's head. The ``fp`` job renders only that camera, with the
character keyed and animated as in the other job but left out of the main pass
(``set_render_in_main_pass(False)``: its shadow and reflections stay, as in the embedded
engine's first-person view). Owner-no-see was the alternative; it hides a component only in
views whose view actor owns it (a possessing player's camera), and MRQ's render-all-cameras
views are CineCameraActors that own nothing, so it would hide nothing. The price is a second
job start (PIE world and warm-up) per trajectory.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _p in (str(HERE), str(HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import ue_layers  # noqa: E402
import ue_paths  # noqa: E402
import ue_sequence  # noqa: E402

import unreal  # noqa: E402
from stages.core.trajectory import VIEWS  # noqa: E402

PACKAGE = "/Game/Wmforge/Sequences"  # + the instance: a package of its own per run
FILE_NAME_FORMAT = "{camera_name}/{frame_number}"
RENDERED = "rendered.jsonl"
MAX_ERRORS_IN_A_ROW = 3  # frames that fail one after another before the editor quits
# (name, cameras, character drawn in the main pass) of the MRQ jobs of one trajectory
PASSES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("views", tuple(v for v in VIEWS if v != "fp"), True),
    ("fp", ("fp",), False))


def ground_truth(spec: dict) -> list[str]:
    """The ground-truth layers asked for (``render.ground_truth``, in the spec or its
    settings); empty: none."""
    return [str(x) for x in (spec.get("ground_truth")
                             or (spec.get("settings") or {}).get("ground_truth") or [])]


def all_passes(layers: list[str]) -> list[tuple[str, tuple[str, ...], bool]]:
    """The RGB jobs, then with ground truth one ``layers_<view>`` job per camera
    (ue_layers: one sample, the camera cut's camera only); in ``layers_fp`` the character is
    hidden, not only out of the main pass."""
    return list(PASSES) + ([(f"layers_{v}", (v,), v != "fp") for v in VIEWS] if layers else [])


def log(msg: str) -> None:
    unreal.log(msg)


def texture_residency(cvars: unreal.MoviePipelineConsoleVariableSetting, pool_mb: int) -> None:
    """§7.2: a large pool, textures fully resident, no pool limit, detail biased up."""
    for name, value in (("r.Streaming.PoolSize", float(pool_mb)),
                        ("r.Streaming.FullyLoadUsedTextures", 1.0),
                        ("r.Streaming.LimitPoolSizeToVRAM", 0.0),
                        ("r.Streaming.HLODStrategy", 2.0),
                        ("r.Streaming.MipBias", -1.0)):
        cvars.add_or_update_console_variable(name, value)


def configure_job(job: unreal.MoviePipelineExecutorJob, settings: dict, ucfg: dict,
                  out_dir: Path, fps: int) -> dict:
    """MRQ settings from the render config; returns what was set (recorded in rendered.jsonl)."""
    cfg = job.get_configuration()
    ue_layers.set_output(cfg, out_dir, FILE_NAME_FORMAT, int(settings["width"]),
                         int(settings["height"]), fps)
    aa = cfg.find_or_add_setting_by_class(unreal.MoviePipelineAntiAliasingSetting)
    aa.spatial_sample_count = int(settings["spatial_samples"])
    aa.temporal_sample_count = int(settings["temporal_samples"])
    aa.render_warm_up_count = int(settings["warmup_frames"])
    aa.engine_warm_up_count = int(ucfg.get("engine_warmup_frames", 32))
    # the warm-up frames are rendered (not only ticked): Lumen's caches, virtual shadow maps
    # and eye adaptation build up over rendered frames, so frame 0 is not a cold picture
    aa.render_warm_up_frames = True
    aa.use_camera_cut_for_warm_up = False
    # MRQ's spatial/temporal samples are the anti-aliasing; the project's TSR/TAA on top would
    # blur across samples and differ from the embedded views
    aa.override_anti_aliasing = True
    aa.anti_aliasing_method = unreal.AntiAliasingMethod.AAM_NONE
    cam = cfg.find_or_add_setting_by_class(unreal.MoviePipelineCameraSetting)
    cam.render_all_cameras = True
    cfg.find_or_add_setting_by_class(unreal.MoviePipelineDeferredPassBase)
    if ucfg.get("image_format", "png") == "exr":
        cfg.find_or_add_setting_by_class(unreal.MoviePipelineImageSequenceOutput_EXR)
    else:
        cfg.find_or_add_setting_by_class(unreal.MoviePipelineImageSequenceOutput_PNG)
    game = cfg.find_or_add_setting_by_class(unreal.MoviePipelineGameOverrideSetting)
    game.flush_streaming_managers = True
    cvars = cfg.find_or_add_setting_by_class(unreal.MoviePipelineConsoleVariableSetting)
    texture_residency(cvars, int(ucfg.get("texture_pool_mb", 8192)))
    return {"spatial_samples": aa.spatial_sample_count,
            "temporal_samples": aa.temporal_sample_count,
            "render_warm_up_count": aa.render_warm_up_count,
            "engine_warm_up_count": aa.engine_warm_up_count, "render_warm_up_frames": True,
            "anti_aliasing_method": "none",
            "resolution": [int(settings["width"]), int(settings["height"])],
            "image_format": ucfg.get("image_format", "png"), "render_all_cameras": True}


class Stage2Driver:
    def __init__(self, spec: dict, inst: Path):
        self.spec, self.inst = spec, inst
        self.ucfg = spec.get("unreal") or {}
        self.jobs = list(spec["jobs"])
        self.k = -1
        self.p = 0  # the pass of the current trajectory (PASSES)
        self.data: tuple[list[dict], list[dict], dict] | None = None
        self.phase = "open_map"
        self.phases_seen: list[str] = []
        self.removed: list[str] = []
        self.current: dict | None = None
        self.spawned: list[unreal.Actor] = []
        self.sequence: unreal.LevelSequence | None = None
        self.executor: unreal.MoviePipelinePIEExecutor | None = None
        self.finished: bool | None = None
        self.errors: list[str] = []
        self.mrq: dict = {}
        self.handle: object | None = None
        self.errors_in_a_row = 0
        self.layers = ground_truth(spec)
        self.buffers = ue_layers.buffers_for(self.layers)
        self.passes = all_passes(self.layers)
        self.materials: dict[str, unreal.Material] = {}

    def start(self) -> None:
        unreal.EditorPythonScripting.set_keep_python_script_alive(True)
        self.handle = unreal.register_slate_post_tick_callback(self.on_tick)
        log(f"wmforge: stage2: started for {self.spec['level_id']} ({len(self.jobs)} jobs)")

    def on_tick(self, delta_seconds: float) -> None:
        if self.phase not in self.phases_seen:
            self.phases_seen.append(self.phase)
        try:
            getattr(self, f"_on_{self.phase}")()
            self.errors_in_a_row = 0
        except Exception as exc:  # noqa: BLE001 - this trajectory fails, the instance goes on
            unreal.log_error(f"wmforge: stage2: mrq_error {type(exc).__name__}: {exc}")
            self.errors_in_a_row += 1
            if self.phase == "quit" or self.errors_in_a_row > MAX_ERRORS_IN_A_ROW:
                # failing while shutting down, or over and over: leave (the launcher judges)
                self.phase = "done"
                unreal.SystemLibrary.quit_editor()
                return
            if self.current is not None:
                self._rendered(False, "mrq_error", f"{type(exc).__name__}: {exc}")
            self.phase = "next" if self.phase in ("next", "pass", "wait") else "quit"

    # ------------------------------------------------------------------ phases

    def _on_open_map(self) -> None:
        if not self.spec.get("map_on_command_line"):
            le = unreal.get_editor_subsystem(unreal.LevelEditorSubsystem)
            if le is None or not le.load_level(str(self.spec["ue_map"])):
                raise RuntimeError(f"map {self.spec.get('ue_map')} did not load")
        self.removed = ue_sequence.sanitize_level(log)
        if self.buffers:
            self.materials = ue_layers.materials(self.buffers, log)
        (self.inst / "sanitized.json").write_text(json.dumps({"removed": self.removed}) + "\n")
        self.phase = "next"

    def _on_next(self) -> None:
        try:
            self._cleanup()
        except Exception as exc:  # noqa: BLE001 - leftovers of one job never stop the next
            unreal.log_warning(f"wmforge: stage2: cleanup failed: {type(exc).__name__}: {exc}")
            self.spawned, self.sequence = [], None
        self.k += 1
        if self.k >= len(self.jobs):
            self.phase = "quit"
            return
        job = self.jobs[self.k]
        self.current, self.p, self.mrq = job, 0, {}
        traj = Path(job["traj_dir"])
        frames, cams = ue_sequence.read_trajectory(traj)
        self.data = (frames, cams, json.loads((traj / "meta.json").read_text()))
        self.phase = "pass"
        self._on_pass()

    def _on_pass(self) -> None:
        """Build and render pass ``self.p`` of the current trajectory."""
        self._cleanup()
        job, data = self.current, self.data
        assert job is not None and data is not None
        frames, cams, meta = data
        pass_name, views, in_main_pass = self.passes[self.p]
        is_layers = pass_name.startswith("layers_")
        st = self.spec["settings"]
        package = f"{PACKAGE}/{re.sub(r'[^A-Za-z0-9_]', '_', self.inst.name)}"
        seq, self.spawned = ue_sequence.build_sequence(
            f"{job['name']}_{pass_name}", package, frames, cams, meta, int(st["width"]),
            int(st["height"]), log, views=views,
            character_in_main_pass=in_main_pass or is_layers,
            character_hidden=is_layers and not in_main_pass)
        self.sequence = seq
        if self.spec.get("smoke_probe"):  # wmforge unreal smoke: what the keys do, read back
            rows = ue_sequence.probe(seq, self.spawned, frames, meta, pass_name, log)
            with open(self.inst / "probe.jsonl", "a") as f:
                for row in rows:
                    f.write(json.dumps({"trajectory": job["name"], **row}) + "\n")
        subsystem = unreal.get_editor_subsystem(unreal.MoviePipelineQueueSubsystem)
        if subsystem is None:
            raise RuntimeError("MoviePipelineQueueSubsystem unavailable (Movie Render Queue "
                               "plugin enabled?)")
        queue = subsystem.get_queue()
        queue.delete_all_jobs()
        mjob = queue.allocate_new_job(unreal.MoviePipelineExecutorJob)
        mjob.job_name = f"{job['name']}:{pass_name}"
        mjob.map = unreal.SoftObjectPath(ue_paths.map_object_path(str(self.spec["ue_map"])))
        mjob.sequence = unreal.SoftObjectPath(seq.get_path_name())
        if is_layers:
            done = ue_layers.configure_job(
                mjob, int(st["width"]), int(st["height"]), int(meta["fps"]),
                self.inst / "layers" / job["name"], self.buffers, self.materials)
        else:
            done = configure_job(mjob, st, self.ucfg, self.inst / "frames" / job["name"],
                                 int(meta["fps"]))
        self.mrq[pass_name] = dict(done, cameras=list(views),
                                   character_in_main_pass=in_main_pass)
        ex = unreal.MoviePipelinePIEExecutor()
        ex.set_allow_using_unsaved_levels(True)  # the sanitised level is not saved
        ex.on_executor_finished_delegate.add_callable(self._on_finished)
        ex.on_executor_errored_delegate.add_callable(self._on_errored)
        self.executor, self.finished, self.errors = ex, None, []
        log(f"wmforge: stage2: rendering {job['name']} pass {pass_name} {list(views)} "
            f"({len(frames)} frames)")
        subsystem.render_queue_with_executor_instance(ex)
        self.phase = "wait"

    def _on_wait(self) -> None:
        if self.finished is None:
            return
        ok = self.finished and not self.errors
        if ok and self.p + 1 < len(self.passes):
            self.p += 1
            self.phase = "pass"
            return
        detail = f"pass {self.passes[self.p][0]}: " + "; ".join(self.errors)
        self._rendered(ok, "" if ok else "mrq_error", detail if not ok else "")
        self.phase = "next"

    def _on_quit(self) -> None:
        self._cleanup()
        (self.inst / "ENGINE_DONE").write_text(json.dumps({"jobs": len(self.jobs)}) + "\n")
        if self.handle is not None:
            unreal.unregister_slate_post_tick_callback(self.handle)
            self.handle = None
        self.phase = "done"
        log("wmforge: stage2: finished")
        unreal.SystemLibrary.quit_editor()

    def _on_done(self) -> None:
        return

    # ------------------------------------------------------------------ callbacks

    def _on_finished(self, executor: unreal.MoviePipelineExecutorBase, success: bool) -> None:
        self.finished = bool(success)

    def _on_errored(self, executor: unreal.MoviePipelineExecutorBase,
                    pipeline: unreal.MoviePipeline, is_fatal: bool, error_text: Any) -> None:
        self.errors.append(f"{'fatal: ' if is_fatal else ''}{error_text}")
        unreal.log_error(f"wmforge: stage2: mrq_error fatal={is_fatal}: {error_text}")

    def _rendered(self, ok: bool, reason: str, detail: str) -> None:
        job = self.current
        assert job is not None
        with open(self.inst / RENDERED, "a") as f:
            f.write(json.dumps({"trajectory": job["name"], "ok": ok, "reason": reason,
                                "detail": detail, "mrq": self.mrq,
                                "ground_truth": self.layers,
                                "removed_sequence_actors": self.removed}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        log(f"wmforge: stage2: rendered {job['name']} {'ok' if ok else 'failed: ' + detail}")
        self.current = None

    def _cleanup(self) -> None:
        """The rendered trajectory's actors and sequence asset go (the project stays clean)."""
        actors = unreal.get_editor_subsystem(unreal.EditorActorSubsystem)
        for a in self.spawned:
            if actors is not None:
                actors.destroy_actor(a)
        self.spawned = []
        if self.sequence is not None:
            seq, self.sequence = self.sequence, None
            path = seq.get_path_name()
            if not unreal.EditorAssetLibrary.delete_loaded_asset(seq):
                # still referenced or not deletable: left for the next run's new_sequence, which
                # deletes a sequence in its way by path; say so in the log
                unreal.log_warning(f"wmforge: stage2: sequence {path} was not deleted")


def main() -> Stage2Driver:
    spec_path = Path(os.environ.get("WMFORGE_SPEC") or sys.argv[-1])
    driver = Stage2Driver(json.loads(spec_path.read_text()), spec_path.parent)
    driver.start()
    return driver


if __name__ not in ("stage1_pie", "stage2_mrq"):  # run by -ExecutePythonScript, not imported
    DRIVER = main()  # referenced from module scope for as long as the editor runs
