"""The Stage II renderer of one instance (paper §7): one level loaded once, its trajectories
replayed and rendered into ``<instance>/<traj>/`` — five views and a tiled preview, encoded, with
meta.json (encode settings, checksums, level report, alignment gate, lineage). The engine process
that runs it is :mod:`stages.engine.render_worker`."""

from __future__ import annotations

import contextlib
import math
import shutil
import time
from pathlib import Path
from typing import Any

from ..core import replay
from ..core.projection import intrinsics_record
from ..core.trajectory import VIEWS
from .gt_output import GroundTruthOutput
from .level_cache import LevelCache
from .publish import TRAJ_FILES, publish_trajectory, sha256_file, traj_files
from .render_settings import RenderSettings
from .replay_inputs import _Fail, _load_traj, _resolve, prop_table

# kept importable from here for callers of the old path (tests import _Fail, _load_traj,
# _resolve and _level_up_axis from stages.engine.replay_inputs)
__all__ = ["TRAJ_FILES", "InstanceRenderer", "sha256_file", "traj_files"]


STEADY_SKIP = 10  # frames a trajectory's steady rate leaves out (start-up, compiling, caches)
HEARTBEAT = "heartbeat"  # touched while frames are made (node runner's stall check)


class InstanceRenderer:
    """The embedded GL Stage II renderer (:class:`~stages.engine.stage2.Stage2Renderer`): the
    trajectories of one level into one instance directory (one process)."""

    def __init__(self, inst: Path, settings: RenderSettings | dict, display: str, base: Path,
                 log=print, path_map: dict[str, str] | None = None, lineage: dict | None = None,
                 readback: str = "sync", compile_cache: str | None = None,
                 level_digests: dict[str, str] | None = None):
        self.inst, self.base, self.log = inst, base, log
        # render.readback (how GL frames reach RAM) and render.compile_cache_dir (made absolute
        # by the node; compute only): the same bytes either way, so not in the render key
        self.readback, self.compile_cache = readback, compile_cache
        self.s = RenderSettings.from_dict(settings, f"{inst / 'instance.json'}: settings")
        self.display = display
        self.path_map = dict(path_map or {})
        self.levels = LevelCache(self.s, base, self.path_map, level_digests, log)
        self.lineage = dict(lineage or {})
        self.r: Any = None
        self.char_key: str | None = None
        self.encoder: Any = None
        self._beat_at = -1e9
        self.frame_times: list[float] = []  # the last trajectory's frames, when each was done

    def beat(self, every_s: float = 0.5) -> None:
        """Touch ``<instance>/heartbeat`` (at most every ``every_s``): the node runner watches
        the instance folder's files, and a trajectory longer than node.stall_timeout_s must
        not look stalled while its frames are still being made."""
        now = time.monotonic()
        if now - self._beat_at >= every_s:
            self._beat_at = now
            # the instance folder may not exist yet: it is made with the first output
            with contextlib.suppress(FileNotFoundError):
                (self.inst / HEARTBEAT).touch()

    def _renderer(self) -> Any:
        if self.r is None:
            from .compute.backend import choose_backend
            from .look import Look
            from .replay_render import ReplayRenderer

            look = Look.from_settings(self.s)
            self.r = ReplayRenderer(self.s.width, self.s.height, self.s.spatial_samples,
                                    self.s.temporal_samples, self.display,
                                    self.s.mask_scale, look=look,
                                    ground_truth=self.s.ground_truth,
                                    backend=choose_backend(self.s.backend, self.s.ground_truth),
                                    readback=self.readback,
                                    compute_shading=self.s.compute_shading, yuv=self.s.yuv,
                                    compute_leaders=self.s.compute_leaders,
                                    compile_cache=self.compile_cache, on_wait=self.beat)
        return self.r

    def _ensure_level(self, meta: dict) -> None:
        self.levels.ensure(meta, self._renderer, self.beat)

    @property
    def level_digests(self) -> dict[str, str]:
        return self.levels.digests

    @level_digests.setter
    def level_digests(self, digests: dict[str, str]) -> None:
        self.levels.digests = dict(digests)

    @property
    def level_report(self) -> dict:
        return self.levels.report

    def _ensure_character(self, meta: dict) -> None:
        ch = meta.get("character") or {}
        path = _resolve(str(ch.get("model", "")), self.base, self.path_map)
        key = f"{path}|{ch.get('yaw_correction_deg') or 0.0}|{ch.get('up_axis')}"
        if key == self.char_key:
            return
        if not path.is_file():
            raise _Fail("missing_asset", f"character model {path} (meta.json character.model) "
                        "not found")
        from .models import load_model

        model = load_model(str(path), 1.0, ch.get("up_axis"))
        clip_files = {}
        for clip in set(v for v in (ch.get("animations") or {}).values() if v):
            f = path.parent / clip
            if f.is_file():
                clip_files[clip] = str(f)
        self.r.load_character(model, str(path), clip_files,
                              float(ch.get("yaw_correction_deg") or 0.0),
                              name=str(meta.get("character_id", "")),
                              source=str(ch.get("model", "")))
        self.char_key = key

    def render(self, traj_dir: Path, name: str, key: str) -> dict:
        from ..media.video import AsyncEncoder, VideoWriter, tile_preview

        frames, cams, meta, props = _load_traj(traj_dir)
        self._renderer()
        self._ensure_level(meta)
        self._ensure_character(meta)
        r = self.r
        ptab = prop_table(props, r.prop_names, len(frames))
        fps = int(meta["fps"])
        n = len(frames)
        fcols = {str(c): frames[c].tolist() for c in frames}
        ccols = {str(c): cams[c].tolist() for c in cams}
        rows, views = replay.frame_tables(fcols, ccols)
        segs = [int(x) for x in fcols["segment"]]
        ch = meta["character"]
        sched = replay.clip_schedule([str(a) for a in fcols["action"]],
                                     [float(v) for v in fcols["speed"]], segs,
                                     ch.get("animations") or {}, fps, r.available_clips())
        W, H = self.s.width, self.s.height
        out = self.inst / name
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        enc = self.s.encode()
        names = list(VIEWS) + (["preview"] if self.s.preview else [])
        writers: dict[str, Any] = {}
        layers = GroundTruthOutput(out, self.s.ground_truth, W, H, fps, r)
        try:
            for v in VIEWS:
                writers[v] = VideoWriter(out / f"{v}.mp4", W, H, fps, enc)
            if self.s.preview:
                pw, ph = 3 * (W // 2 // 2 * 2), 2 * (H // 2 // 2 * 2)
                penc = self.s.preview_encode()
                writers["preview"] = VideoWriter(out / "preview.mp4", pw, ph, fps, penc)
            layers.open()
            gate = self._frames(rows, views, segs, sched, meta, writers, tile_preview,
                                AsyncEncoder, ptab, layers)
            for w in writers.values():
                w.close(n)
            layers.close(n)
        except _Fail:
            for w in writers.values():
                w.abort()
            layers.abort()
            raise
        except Exception as exc:
            for w in writers.values():
                w.abort()
            layers.abort()
            reason = "disk_full" if isinstance(exc, OSError) and getattr(
                exc, "errno", None) in (28, 27) else "encode_failed"
            raise _Fail(reason, f"{type(exc).__name__}: {exc}") from None
        if gate["aligned_fraction"] < self.s.align_min or gate["transform_max_err"] > 1e-4:
            raise _Fail("misaligned", f"aligned {gate['aligned_fraction']:.3f} < "
                        f"{self.s.align_min} or transform error "
                        f"{gate['transform_max_err']:.2e} m")
        try:
            return self._publish(traj_dir, out, name, key, n, fps, enc, names, views, gate,
                                 meta, layers.meta())
        except OSError as exc:
            shutil.rmtree(out, ignore_errors=True)
            raise _Fail("disk_full" if exc.errno in (28, 27) else "write_failed",
                        f"{type(exc).__name__}: {exc}") from None

    def _publish(self, traj_dir: Path, out: Path, name: str, key: str, n: int, fps: int,
                 enc: Any, names: list[str], views: dict, gate: dict, meta: dict,
                 ground_truth: dict | None = None) -> dict:
        W, H = self.s.width, self.s.height
        t = getattr(self.r, "targets", None)
        rmeta = {
            "schema_version": 1, "trajectory": name, "level_id": meta["level_id"],
            "character_id": meta["character_id"], "frame_count": n, "fps": fps,
            "duration_s": n / fps, "render_key": key, "settings": self.s.as_dict(),
            "encode": enc.as_dict(), "videos": [f"{v}.mp4" for v in names],
            "intrinsics": {v: intrinsics_record(W, H, views[v][0]["fov_deg"]) for v in VIEWS},
            "level": self.level_report, "alignment": gate,
            "character_clip_problems": list(getattr(self.r, "clip_problems", [])),
            # the trajectory's exposure: metered auto exposure x the level's compensation
            "exposure": getattr(self, "exposure", None),
            # the shading the renderer used (render.shading auto resolves per GL driver)
            "shading": getattr(self.r, "shading", None),
            # the Stage II renderer used: gl or compute (render.backend auto resolves per machine)
            "backend": getattr(self.r, "backend", "gl"),
            # the compute backend's shading rate (render.compute_shading) and the leaders'
            # path that ran (render.compute_leaders; None at sample); both None on gl
            "compute_shading": getattr(t, "shading_rate", None),
            "compute_leaders": getattr(t, "leaders_path", None),
            # where the views became yuv420p (render.yuv auto resolves per machine)
            "yuv": "device" if getattr(t, "yuv", False) else "encoder",
            # §6.3 per-view collapsed share and §7.2 observed capsule, from Stage I (v3)
            "cameras": meta.get("cameras"), "capsule": meta.get("capsule"),
            # what the character shows while standing: idle_clip, walk_first_frame, bind_pose
            "idle_pose": replay.idle_pose_source(meta["character"].get("animations") or {},
                                                 self.r.available_clips()),
            # lineage: what made these bytes (DESIGN §6; the shard samples' "source")
            "lineage": {"engine": meta.get("engine"), "engine_version": meta.get("engine_version"),
                        "code_version": self.lineage.get("code_version"),
                        "stage1_code_version": (meta.get("config") or {}).get("code_version"),
                        "trajectory_seed": meta.get("seed"),
                        # the trajectory's own random stream (core.stage1): seed:level:index
                        "trajectory_rng": f"{meta.get('seed')}:{meta.get('level_id')}:"
                                          f"{meta.get('trajectory_index')}",
                        "trajectory_index": meta.get("trajectory_index"),
                        "lighting": self.level_report.get("lighting")},
        }
        if ground_truth is not None:  # absent, not empty, when render.ground_truth is off
            rmeta["ground_truth"] = ground_truth
        return publish_trajectory(traj_dir, out, rmeta)

    def _meter(self, r: Any, poses: Any, n: int, ptab: Any, dz: float) -> dict:
        """Meter the first ``meter_frames`` frames and set the trajectory's exposure."""
        import numpy as np

        from .pbr import exposure_from_meter

        k = min(int(self.s.meter_frames), n)
        if k <= 0:
            r.set_auto_exposure(1.0)
            return {"auto": 1.0, "metered_frames": 0}
        codes = []
        samples, exact = poses(0)
        r.meter(samples, exact, dz)  # prime: the shadow map and caches at the first pose
        for f in range(k):
            if ptab is not None:
                r.place_props(ptab[f])
            samples, exact = poses(f)
            codes.append(r.meter(samples, exact, dz))
        mult, mean = exposure_from_meter(np.stack(codes), float(self.s.exposure_key))
        r.set_auto_exposure(mult)
        del mean  # recorded only through the 1/8-stop exposure it gives (same bytes everywhere)
        return {"auto": mult, "auto_ev": math.log2(mult), "metered_frames": k,
                "key": float(self.s.exposure_key),
                "compensation_ev": r.exposure_comp_ev, "tone_map": self.s.tone_map}

    def _frames(self, rows, views, segs, sched, meta, writers, tile_preview, AsyncEncoder,
                ptab=None, layers: Any = None) -> dict:
        from collections import deque

        from .alignment_gate import AlignmentGate
        from .replay_poses import CharacterPose, SamplePose, ViewPose, temporal_offsets

        r = self.r
        offs = temporal_offsets(self.s.temporal_samples, self.s.shutter)
        dz = -r.model_min_z * float(rows[0]["scale_z"])
        fps = int(meta["fps"])
        gate = AlignmentGate(rows, views, self.s.width, self.s.height, self.s.mask_scale,
                             self.s.align_radius_px,
                             float(meta["character"].get("visual_height_m", 1.0)), dz,
                             len(r.prop_names) if ptab is not None else 0)
        # the compute backend on a GPU hands the views (and the preview) over as yuv420p
        # planes made on the device (compute.targets); else the preview is tiled here
        if getattr(r.targets, "yuv", False):
            r.targets.with_preview = "preview" in writers
        derived = ({"preview": lambda imgs: imgs["preview"] if "preview" in imgs else
                    tile_preview({v: imgs[v] for v in VIEWS}, VIEWS)}
                   if "preview" in writers else {})
        encoder = AsyncEncoder(writers, depth=4, derived=derived)
        self.encoder = encoder
        def poses(f: int) -> tuple[list, Any]:
            samples = []
            for off in offs:
                c = replay.character_pose(rows, f, off, segs)
                clip, ct = sched[f]
                cp = CharacterPose(c["pos"], c["quat"], c["scale"], clip, ct + off / fps)
                vp = {}
                for v in VIEWS:
                    p = replay.camera_pose(views[v], f, off, segs)
                    vp[v] = ViewPose(p["pos"], p["quat"], p["fov_deg"])
                samples.append(SamplePose(cp, vp))
            c0 = replay.character_pose(rows, f, 0.0, segs)
            exact = SamplePose(CharacterPose(c0["pos"], c0["quat"], c0["scale"], *sched[f]),
                               {v: ViewPose(*(lambda p: (p["pos"], p["quat"], p["fov_deg"]))(
                                   replay.camera_pose(views[v], f, 0.0, segs)))
                                for v in VIEWS})
            return samples, exact

        def exact_at(f: int) -> Any:
            return poses(f)[1]

        def finish(f: int, placed: dict) -> None:
            """Frame ``f``'s images (the oldest submitted): gate, then encode."""
            colors, masks = r.collect()
            gate.check(f, placed, masks, ptab[f] if ptab is not None else None)
            encoder.put(colors)
            self.frame_times.append(time.time())  # wall clock: comparable across renderers
            self.beat()

        # automatic exposure (§7.1): metered on the trajectory's first frames, deterministic
        self.exposure = self._meter(r, poses, len(rows), ptab, dz)
        # frames submitted, images not yet collected: up to r.lag (render.readback pbo), so
        # the GPU draws frame f while frame f - lag is copied, gated and encoded
        waiting: deque[tuple[int, dict]] = deque()
        from . import fault_injection

        inject = fault_injection.active()  # the drills' faults inside a trajectory
        self.frame_times = []
        try:
            for f in range(len(rows)):
                samples, exact = poses(f)
                if ptab is not None:
                    r.place_props(ptab[f])
                if layers is not None and layers.on:
                    nb = r.prepare_ground_truth(
                        f, segs, exact_at, (lambda g: ptab[g]) if ptab is not None
                        else (lambda g: None), dz)
                if inject:
                    fault_injection.at_frame("render", str(meta.get("level_id", "")), f)
                waiting.append((f, r.submit(samples, exact, dz)))
                if layers is not None and layers.on:
                    layers.put(r.gt.read(), *nb)
                while len(waiting) > r.lag:
                    finish(*waiting.popleft())
            while waiting:  # the trajectory's last frames
                finish(*waiting.popleft())
        except BaseException:
            r.discard()  # frames in flight: their fences and read-back slots let go
            raise
        finally:
            encoder.finish()
        return gate.result()

    def close(self) -> None:
        if self.r is not None:
            self.r.close()

