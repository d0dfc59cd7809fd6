"""Stage II on the embedded engine: offscreen supersampled rendering of five replayed views.

One ``renderFrame`` produces a whole output frame. Every (view, spatial sample, temporal sample)
is a display region of one atlas buffer, each with its own camera: spatial samples shift the
lens by a sub-pixel film offset (Halton 2,3 jitter), temporal samples place the cameras and a
separate copy of the character (visible only to that sample's cameras, by draw mask) at
sub-frame interpolated transforms. The atlas holds linear light (16-bit float). A resolve pass
then averages each view's samples in linear light on the GPU (``texelFetch`` so no filtering
blurs it), applies the exposure (automatic per trajectory, metered on its first frames, times
the level's exposure compensation) and a filmic tone map, and encodes sRGB into a strip of the
five views, copied to RAM once per frame. A third buffer renders a per-view character mask (flat
white character, nothing else) at the frame's exact recorded transforms for the alignment gate.

Shading (``stages.engine.pbr``): metallic-roughness PBR with the level's own lights, a sun whose
soft shadow map is fitted around the character every frame, and a procedural sky (per the
level's lighting preset) drawn behind everything and lighting the scene (image-based diffuse and
specular). Headless through EGL (``p3headlessgl``): Mesa llvmpipe on CPU machines (Mesa 25, see
scripts/setup.sh), the NVIDIA driver on GPU machines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from .clips import Clip, EggPoser, GltfPoser, in_place, read_gltf_clips
from .level_render import LevelReport, LevelScene, load_level_lighting
from .look import Look
from .render_settings import YUV
from .render_targets import RenderTargets
from .replay_poses import (
    CharacterPose,
    SamplePose,
    ViewPose,
    cv_to_panda_mat,
    jitter_offsets,
    temporal_offsets,
)
from .scene_targets import MASK_BIT, SceneTargets

__all__ = ["CharacterPose", "LevelReport", "Look", "ReplayRenderer", "SamplePose", "ViewPose",
           "cv_to_panda_mat", "jitter_offsets", "load_level_lighting", "temporal_offsets"]


class ReplayRenderer:
    """Stage II's renderer of one replayed trajectory frame at a time: the render targets
    (``render_targets``), the level scene (``level_render``) and the character's copies,
    posed and placed with the cameras for each frame."""

    def __init__(self, width: int, height: int, spatial: int = 1, temporal: int = 1,
                 display: str = "p3headlessgl", mask_scale: int = 2, near: float = 0.05,
                 far: float = 4000.0, *, look: Look, ground_truth: Sequence[str] = (),
                 backend: str = "gl", readback: str = "sync", compute_shading: str = "pixel",
                 compute_leaders: str = "auto", yuv: str = "auto",
                 compile_cache: str | None = None, on_wait: Any = None):
        # backend: "gl" (RenderTargets) or "compute" (compute.targets.ComputeTargets: the same
        # role drawn in torch); "auto" is resolved by compute.backend.choose_backend first.
        # readback (render.readback): the GL path's, sync or pbo; compute has its own.
        # compute_shading (render.compute_shading): the compute path's shading rate;
        # compute_leaders (render.compute_leaders): its leaders' GPU path.
        # yuv (render.yuv): device, encoder or auto (RenderTargets / ComputeTargets decide).
        # compile_cache, on_wait: the compute path's compile cache folder and the heartbeat
        # called while it waits for another renderer's compile (compute/compile_cache.py)
        if yuv not in YUV:
            raise ValueError(f"render.yuv is {yuv!r}; expected one of {', '.join(YUV)}")
        on_device = {"auto": None, "device": True, "encoder": False}[yuv]
        self.backend = backend
        if backend == "compute":
            from .compute.backend import choose_backend, compute_device
            from .compute.targets import ComputeTargets

            choose_backend(backend, ground_truth)  # refuses ground-truth layers
            self.targets: SceneTargets = ComputeTargets(
                width, height, spatial, temporal, display, mask_scale, near, far, look=look,
                device=compute_device(), shading_rate=compute_shading, leaders=compute_leaders,
                yuv=on_device,
                compile_cache=compile_cache, on_wait=on_wait)
        elif backend == "gl":
            self.targets = RenderTargets(width, height, spatial, temporal, display, mask_scale,
                                         near, far, look=look, readback=readback,
                                         yuv=on_device)
        else:
            raise ValueError(f"render backend {backend!r}; expected gl or compute (resolve "
                             "auto with compute.backend.choose_backend)")
        t = self.targets
        self.W, self.H, self.S, self.T = t.W, t.H, t.S, t.T
        self.look, self.scene = t.look, t.scene
        self.shading, self.deferred, self.gsg = t.shading, t.deferred, t.gsg
        self.char_copies: list[Any] = []
        self.char_posers: list[Any] = []
        self.jitter = jitter_offsets(spatial)
        self.exposure_comp_ev = 0.0
        self.auto_exposure = 1.0
        self.level = LevelScene(t)
        self.level_key = ""  # level file @ content digest (the compute renderer's compile gate)
        if hasattr(t, "bind"):
            t.bind(self)
        # the ground-truth pass (issue #33): its own buffer and scene, only when asked for
        self.gt_layers = tuple(ground_truth)
        self.gt: Any = None
        self.gt_holder: Any = None
        self.gt_poser: Any = None
        if self.gt_layers:
            from .gt_pass import GroundTruthPass

            self.gt = GroundTruthPass(t, "normals" in self.gt_layers,
                                      any(x.startswith("flow") for x in self.gt_layers))

    # the level scene's state, read by the frame loop, the instance renderer and tests
    @property
    def lighting(self) -> Any:
        return self.targets.lighting

    @property
    def level_np(self) -> Any:
        return self.level.level_np

    @property
    def sun(self) -> Any:
        return self.level.sun

    @property
    def sky_np(self) -> Any:
        return self.level.sky_np

    @property
    def prop_names(self) -> list[str]:
        return self.level.prop_names

    def load_level(self, model: Any, lighting: dict | None = None,
                   source: str = "", stamp: str = "") -> LevelReport:
        """Attach a loaded level (``LevelScene.load_level``); ``source`` (its file) names it
        in the ground-truth id table; ``stamp`` (its folder's content digest, or the file's
        size and mtime) tells a level replaced in place from the one before it (the compute
        renderer's compile gate is per level: its lights and textures are compile-time
        constants)."""
        rep = self.level.load_level(model, lighting)
        self.level_key = f"{source}@{stamp}" if stamp else source
        if self.gt is not None:
            self.gt.set_level(self.level.level_np, self.level.prop_pivots, source)
        return rep

    def fit_sun(self, target: tuple[float, float, float]) -> None:
        self.level.fit_sun(target)

    def set_exposure(self, ev: float) -> None:
        """Exposure compensation in stops (the level's), applied to linear light before the
        tone map, on top of the automatic exposure."""
        self.exposure_comp_ev = float(ev)
        self._apply_exposure()

    def set_auto_exposure(self, multiplier: float) -> None:
        """The metered exposure multiplier of the current trajectory (1 = none)."""
        self.auto_exposure = float(multiplier)
        self._apply_exposure()

    def _apply_exposure(self) -> None:
        self.targets.set_exposure(self.auto_exposure * 2.0 ** self.exposure_comp_ev)

    # ------------------------------------------------------------------ character

    def load_character(self, model: Any, model_path: str, clip_files: dict[str, str],
                       yaw_correction_deg: float = 0.0, name: str = "",
                       source: str = "") -> None:
        """One copy of the character per temporal sample plus one for the mask pass. The model
        is turned by ``yaw_correction_deg`` (counter-clockwise about +Z) inside its holder, so
        that its own forward is the contract's +X at yaw 0 (§4.1 orientation correction)."""
        from panda3d.core import BitMask32

        for c in self.char_copies:
            c.removeNode()
        self.char_copies, self.char_posers = [], []
        self.clip_problems: list[str] = []
        clips = read_gltf_clips(model_path, self.clip_problems) if model_path.lower().endswith(
            (".glb", ".gltf")) else {}
        if clips or model_path.lower().endswith((".glb", ".gltf")):
            # glTF clip-only files beside the model (Mixamo "without skin"): their one clip,
            # keyed by the file as the inventory maps it, posing the model's joints by name
            for key, f in clip_files.items():
                if f.lower().endswith((".glb", ".gltf")):
                    got = read_gltf_clips(f, self.clip_problems)
                    if got:
                        first = next(iter(got.values()))
                        clips[key] = Clip(key, first.duration, first.channels)
            clips = {k: in_place(c) for k, c in clips.items()}
        if self.gt_holder is not None:
            self.gt_holder.removeNode()
        # copies 0..T-1: temporal samples; T: the gate's mask; T+1 (ground truth on): posed
        # like the mask copy under a root of its own, never drawn, read back by the pass
        for k in range(self.T + 1 + (self.gt is not None)):
            if k == self.T + 1:
                from panda3d.core import NodePath

                holder = NodePath("gt_pose").attachNewNode(f"character_{k}")
                turned = holder.attachNewNode("yaw_correction")
                turned.setH(yaw_correction_deg)
                copy = model.copyTo(turned)
                self.gt_holder = holder
                self.gt_poser = (GltfPoser(copy, clips) if clips else
                                 EggPoser(copy, clip_files))
                self.gt.set_character(holder, name or model_path, source or model_path)
                break
            holder = self.scene.attachNewNode(f"character_{k}")
            turned = holder.attachNewNode("yaw_correction")
            turned.setH(yaw_correction_deg)
            copy = model.copyTo(turned)
            holder.hide(BitMask32.allOn())
            holder.show(BitMask32.bit(MASK_BIT if k == self.T else k))
            self.char_copies.append(holder)
            self.char_posers.append(GltfPoser(copy, clips) if clips else
                                    EggPoser(copy, clip_files))
        self.model_min_z = model.getTightBounds()[0].z if model.getTightBounds() else 0.0

    def available_clips(self) -> set[str]:
        p = self.char_posers[0] if self.char_posers else None
        if isinstance(p, GltfPoser):
            return set(p.clips)
        if isinstance(p, EggPoser):
            return set(p.controls)
        return set()

    # ------------------------------------------------------------------ frames

    def _place_character(self, k: int, cp: CharacterPose, mesh_dz: float) -> None:
        from panda3d.core import LQuaternionf

        holder = self.char_copies[k]
        holder.setPosQuatScale((cp.pos[0], cp.pos[1], cp.pos[2] + mesh_dz),
                               LQuaternionf(*cp.quat), cp.scale)
        self.char_posers[k].pose(cp.clip, cp.clip_time)

    def prepare_ground_truth(self, f: int, segs: list[int], exact_at: Any, props_at: Any,
                             mesh_dz: float) -> tuple[bool, bool]:
        """Set the ground-truth pass for frame ``f`` before ``render``: ``exact_at(g)`` is
        frame g's exact SamplePose, ``props_at(g)`` its prop transforms (or None). Returns
        whether a previous / next frame exists in the same segment (no respawn between)."""
        n = len(segs)
        has_prev = f > 0 and segs[f - 1] == segs[f]
        has_next = f + 1 < n and segs[f + 1] == segs[f]
        fp, fn = (f - 1 if has_prev else f), (f + 1 if has_next else f)
        now, prev, nxt = exact_at(f), exact_at(fp), exact_at(fn)
        p = props_at(f)
        props = None if p is None else (props_at(fp), p, props_at(fn))
        bake = None
        if self.gt.character is not None:
            def place(g: int) -> None:
                cp = exact_at(g).character
                from panda3d.core import LQuaternionf

                self.gt_holder.setPosQuatScale((cp.pos[0], cp.pos[1], cp.pos[2] + mesh_dz),
                                               LQuaternionf(*cp.quat), cp.scale)
                self.gt_poser.pose(cp.clip, cp.clip_time)

            c = self.gt.character
            bake = (c.pose_at(f, place), c.pose_at(fp, place), c.pose_at(fn, place))
        self.gt.prepare(now, prev, nxt, self._place_camera, props, bake)
        return has_prev, has_next

    def start_ground_truth(self) -> None:
        """Forget the previous trajectory's character read-backs (frame numbers restart)."""
        if self.gt is not None and self.gt.character is not None:
            self.gt.character.cache.clear()

    def _place_camera(self, np_: Any, vp: ViewPose, jitter: tuple[float, float]) -> None:
        from panda3d.core import LMatrix3f, LMatrix4f, LVecBase3f

        r = cv_to_panda_mat(vp.quat)
        m3 = LMatrix3f(*r[0], *r[1], *r[2])
        np_.setMat(LMatrix4f(m3, LVecBase3f(*vp.pos)))
        lens = np_.node().getLens()
        fx = (self.W / 2) / math.tan(math.radians(vp.fov_deg) / 2)
        lens.setFocalLength(fx)
        lens.setFilmOffset(jitter[0], jitter[1])

    def render(self, samples: list[SamplePose], exact: SamplePose, mesh_dz: float
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict]:
        """Render one output frame: ``samples`` holds the T temporal poses, ``exact`` the
        recorded pose (mask pass). Returns colour (H, W, 3) and mask (h, w) per view and the
        transforms actually placed for the exact pose."""
        self._place_frame(samples, exact, mesh_dz)
        colors, masks = self.targets.draw()
        return colors, masks, self.placed(exact)

    def submit(self, samples: list[SamplePose], exact: SamplePose, mesh_dz: float) -> dict:
        """:meth:`render` pipelined: draw the frame and return the transforms placed; its
        images come from :meth:`collect` once up to ``lag`` later frames were submitted."""
        self._place_frame(samples, exact, mesh_dz)
        self.targets.submit()
        return self.placed(exact)

    def collect(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The oldest submitted frame's colour and mask per view."""
        return self.targets.collect()

    @property
    def lag(self) -> int:
        """Frames :meth:`collect` may trail :meth:`submit` by (render.readback pbo: 2)."""
        return self.targets.lag

    def discard(self) -> None:
        """Forget the submitted frames not collected (after an error mid-trajectory)."""
        self.targets.discard()

    def _place_frame(self, samples: list[SamplePose], exact: SamplePose,
                     mesh_dz: float) -> None:
        for t, sp in enumerate(samples):
            self._place_character(t, sp.character, mesh_dz)
            for view in VIEWS:
                for s in range(self.S):
                    self._place_camera(self.targets.cams[(view, t, s)], sp.views[view],
                                       self.jitter[s])
        self._place_character(self.T, exact.character, mesh_dz)
        for view in VIEWS:
            self._place_camera(self.targets.mask_cams[view], exact.views[view], (0.0, 0.0))
        self.fit_sun(exact.character.pos)

    def place_props(self, transforms: list[tuple[tuple[float, ...], tuple[float, ...]]]) -> None:
        """World-from-pivot (pos, quat w x y z) for each prop, in ``prop_names`` order."""
        from panda3d.core import LQuaternionf

        for pivot, (pos, q) in zip(self.level.prop_pivots, transforms, strict=True):
            pivot.setPosQuat(self.scene, pos, LQuaternionf(*q))

    def placed(self, exact: SamplePose) -> dict:
        """The transforms Panda3D holds for the exact pose (read back from the scene graph)."""
        ch = self.char_copies[self.T]
        p, q, s = ch.getPos(), ch.getQuat(), ch.getScale()
        quat = (q.getR(), q.getI(), q.getJ(), q.getK())
        out: dict[str, Any] = {"character": {"pos": (p.x, p.y, p.z), "quat": quat,
                                             "scale": (s.x, s.y, s.z)}}
        props = []
        for pivot in self.level.prop_pivots:
            pp, pq = pivot.getPos(self.scene), pivot.getQuat(self.scene)
            props.append(((pp.x, pp.y, pp.z), (pq.getR(), pq.getI(), pq.getJ(), pq.getK())))
        out["props"] = props
        for view, np_ in self.targets.mask_cams.items():
            cp = np_.getPos()
            out[view] = (cp.x, cp.y, cp.z)
        del exact
        return out

    def meter(self, samples: list[SamplePose], exact: SamplePose, mesh_dz: float) -> np.ndarray:
        """Render one frame in meter mode: the resolve writes each pixel's log2 luminance
        (8-bit codes over 24 stops, all five views) instead of the tone-mapped colour."""
        self.targets.set_meter(True)
        if self.gt is not None:
            self.gt.buf.setActive(False)  # nothing to record while metering
        try:
            colors, _, _ = self.render(samples, exact, mesh_dz)
            return np.concatenate([colors[v][..., 0] for v in VIEWS], axis=1).copy()
        finally:
            self.targets.set_meter(False)
            if self.gt is not None:
                self.gt.buf.setActive(True)

    def warmup(self, frames: int) -> None:
        self.targets.warmup(frames)

    def close(self) -> None:
        self.targets.close()
