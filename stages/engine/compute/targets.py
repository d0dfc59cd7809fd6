"""Stage II's render targets drawn by the compute renderer (``render.backend: compute``): the
role of :class:`~stages.engine.render_targets.RenderTargets` — ``draw()`` gives each view's
resolved colour image and the alignment gate's character mask — with no GL drawing at all.

The Panda3D scene graph stays the scene's one description: the replay places the cameras (every
view, temporal and spatial sample, jitter in the lens), the sun, the posed character copies and
the props on their nodes exactly as for GL; ``draw()`` reads that state and renders it in torch:
the G-buffer from the scene's triangles (``gbuffer``: rasterizer, glTF materials, the sun's
shadow map, the character skinned from its joint matrices), the lighting and sky (``shade``),
the R11G11B10 storage of GL's atlas, the resolve (exposure, tone map, sRGB, 8 bits:
``resolve``), and the mask cameras' coverage of the mask copy of the character. No GL context
is opened: the scene root, cameras and tile layout come from
:class:`~stages.engine.scene_targets.SceneTargets`, the GL-free half of the GL backend's
targets, and the level's textures are read from RAM (``scene``), so the backend runs where no
EGL or GL library is (a GPU container with compute capabilities only).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np
import torch

from ...core.trajectory import VIEWS
from ...media.video import label_bitmap
from ..look import Look
from ..render_settings import COMPUTE_SHADING
from ..scene_targets import SceneTargets
from . import leaders_triton
from .cameras import cameras_from_nodes, cameras_from_targets, sun_from_node
from .compile_cache import FirstCompile, config_key, sources_digest, use_cache
from .compiled import Compiled
from .gbuffer import GBufferRenderer
from .gbuffer_types import GBuffer
from .lighting import Lighting, LightsRecord, light_inputs, make_lighting
from .merged import MergedShading, from_leaders
from .raster import NO_HIT, visibility
from .resolve import encode_linear, mean_samples, meter_codes
from .scene_geometry import SceneGeometry
from .shade import Planes, quantize_r11g11b10, shade, stored_planes
from .upload import upload
from .yuv import packed_planes, tile_preview, unpack_planes

log = logging.getLogger(__name__)


SHADE_BLOCK_PX = 1 << 22  # pixels lit at a time on a GPU


def _stored(gb: GBuffer) -> Planes:
    """The G-buffer planes as GL's deferred atlas stores them (emission in R11G11B10F, the
    others in RGBA16F, the normal octahedral; docs/compute-shading.md): the values GL's
    lighting pass reads, so the pictures match the deferred GL path's bytes where the planes
    do. Order: emission, albedo, metallic, normal, roughness, shadow."""
    return stored_planes(gb.emission, gb.albedo, gb.metallic, gb.normal, gb.roughness,
                         gb.shadow)


def light_view(emission: torch.Tensor, albedo: torch.Tensor, metallic: torch.Tensor,
               normal: torch.Tensor, roughness: torch.Tensor, shadow: torch.Tensor,
               depth: torch.Tensor, inv_view_proj: torch.Tensor, eye: torch.Tensor,
               lt: Lighting, exposure: torch.Tensor, tone_map: str) -> torch.Tensor:
    """One view's picture from its samples' G-buffer planes ``[N, H, W, ...]``: the atlas'
    storage, the lighting pass, R11G11B10, the resolve (mean of the samples, ``exposure`` (a
    0-d tensor, so a new exposure is no new graph), tone map, sRGB) → uint8 ``[H, W, 3]``. On
    a GPU this runs under torch.compile: one graph, fused."""
    rad = shade(*stored_planes(emission, albedo, metallic, normal, roughness, shadow), depth,
                inv_view_proj, eye, lt)
    return encode_linear(mean_samples(quantize_r11g11b10(rad)[None])[0] * exposure, tone_map)


def resolve_views(radiance: torch.Tensor, exposure: torch.Tensor, tone_map: str
                  ) -> torch.Tensor:
    """The resolve of stored radiance ``[V, N, H, W, 3]`` (GL rows) → uint8 ``[V, H, W, 3]``
    with row 0 at the top: the mean of the samples, ``exposure`` (a 0-d tensor), tone map,
    sRGB."""
    return encode_linear(mean_samples(radiance) * exposure, tone_map).flip(1)


def resolve_leaders(radiance: torch.Tensor, lead: torch.Tensor, exposure: torch.Tensor,
                    tone_map: str) -> torch.Tensor:
    """:func:`resolve_views` of the samples' radiance taken from their leaders
    (``merged.from_leaders``): under torch.compile the gather is read inside the resolve's
    own kernel, with no per-sample radiance written out."""
    return resolve_views(from_leaders(radiance, lead), exposure, tone_map)


class ComputeTargets(SceneTargets):
    """SceneTargets whose ``draw()`` renders in torch on ``device`` (see the module
    docstring). :meth:`bind` gives it the ReplayRenderer whose level and character it draws."""

    def __init__(self, width: int, height: int, spatial: int = 1, temporal: int = 1,
                 display: str = "p3headlessgl", mask_scale: int = 2, near: float = 0.05,
                 far: float = 4000.0, *, look: Look, device: str = "cpu",
                 cpu_threads: int | None = 1, yuv: bool | None = None,
                 shading_rate: str = "pixel", leaders: str = "auto",
                 compile_cache: str | None = None,
                 on_wait: Any = None):
        # the level's scene keeps the forward set-up (the GL deferred G-buffer pass is never
        # built); no GL context is opened
        super().__init__(width, height, spatial, temporal, display, mask_scale, near, far,
                         look=dataclasses.replace(look, shading="forward"))
        if shading_rate not in COMPUTE_SHADING:
            raise ValueError(f"render.compute_shading is {shading_rate!r}; expected one of "
                             f"{', '.join(COMPUTE_SHADING)}")
        # "pixel": material and lighting once per pixel and triangle (merged.py); "sample":
        # once per sample, as GL does
        self.shading_rate = shading_rate
        # render.compute_leaders, checked before anything is built (leaders_triton.setting)
        self.leaders = leaders_triton.setting(leaders)
        self.look = look
        # the compute pipeline is a deferred one (G-buffer, then a lighting pass); the GL
        # scene keeps forward's set-up (its deferred G-buffer pass is never built)
        self.shading = "deferred"
        self.lighting = LightsRecord()
        self.device = torch.device(device)
        # on a CPU, one torch thread unless told otherwise: on the shared 2-core box a 96x54
        # five-view frame took 1.9 s with one thread and 17 s with two (small ops, contended
        # cores); restored on close
        self._threads = torch.get_num_threads()
        if self.device.type == "cpu" and cpu_threads:
            torch.set_num_threads(int(cpu_threads))
        self.exposure = 1.0
        # colours leave as the encoders' yuv420p planes, converted here (yuv.py), where that
        # saves the host's CPU: on a GPU (None), or when asked; with_preview adds the tiled
        # preview, made on the device too (its encoder then converts nothing either)
        self.yuv = self.device.type == "cuda" if yuv is None else bool(yuv)
        self.replay: Any = None
        self._geo: SceneGeometry | None = None
        self._gbr: GBufferRenderer | None = None
        self._scene_sig: tuple = ()
        # on a GPU the lighting and resolve of a view run as one compiled graph
        self._light_view: Any = (torch.compile(light_view, dynamic=False)
                                 if self.device.type == "cuda" else light_view)
        self._resolve_leaders: Any = (torch.compile(resolve_leaders, dynamic=False)
                                      if self.device.type == "cuda" else resolve_leaders)
        # the views' conversion to yuv420p planes, one compiled graph per picture shape
        self._packed: Any = (Compiled(packed_planes, "yuv.packed_planes", dynamic=False)
                             if self.device.type == "cuda" else packed_planes)
        self._merged: MergedShading | None = None
        # the node's compile cache (render.compile_cache_dir) and its first-compile gate:
        # only where graphs are compiled (gate_compiles: on a GPU); on_wait is the renderer's
        # heartbeat while it waits for another renderer's compile
        self.compile_cache = use_cache(compile_cache) if compile_cache else None
        self.gate_compiles = self.device.type == "cuda"
        self._first: FirstCompile | None = None
        self._on_wait = on_wait
        self._gated_level: str | None = None  # the level whose first frames were gated last
        if self.compile_cache is not None and self.gate_compiles:
            self.start_gate(on_wait)
        self._lighting: tuple[str, Any] | None = None
        self._exposure_t: tuple[float, torch.Tensor] | None = None

    def start_gate(self, on_wait: Any = None) -> FirstCompile:
        """The first-compile gate for this configuration (entered at the first draw)."""
        if self.compile_cache is None:
            raise RuntimeError("compute render: no compile cache folder to gate compiles in")
        self._first = FirstCompile(self.compile_cache, self._gate_key(), beat=on_wait)
        return self._first

    def _level(self) -> str:
        """The loaded level's file and its stamp ('' before one is bound or loaded)."""
        return str(getattr(self.replay, "level_key", "") or "")

    def _gate_key(self) -> str:
        """Everything that shapes a compiled graph: the device, sizes, samples, the mask
        scale, the look (tone map, shadow map, PCF taps...), the preview, whether the leaders'
        Triton kernel shades (its own compile instead of the torch graph's), the code, and the
        level (its lights, sun and textures are compile-time constants of the leaders' kernel
        and guards of the torch graphs: each level compiles binaries of its own)."""
        name = (torch.cuda.get_device_name(self.device) if self.device.type == "cuda"
                else "cpu")
        # as MergedShading decides it (the gate is entered before the scene is built): the
        # kernel's variant (a register cap is its own binary) or None
        kernel = (leaders_triton.choose(self.device, self.leaders)
                  if self.shading_rate == "pixel" else None)
        return config_key(torch.__version__, name, self.W, self.H, self.S, self.T,
                          self.shading_rate, self.yuv, self.mask_scale, repr(self.look),
                          self.with_preview, kernel, sources_digest(), self._level())

    @property
    def leaders_path(self) -> str | None:
        """How the leaders were shaded (MergedShading.leaders_path; meta.json's
        compute_leaders): None at compute_shading sample or before the first frame."""
        if self.shading_rate != "pixel" or self._merged is None:
            return None
        return self._merged.leaders_path

    def bind(self, replay: Any) -> None:
        """The ReplayRenderer whose level (lights, sun, sky, props) and character copies this
        draws."""
        self.replay = replay

    # ------------------------------------------------------------------ the RenderTargets role

    def set_exposure(self, multiplier: float) -> None:
        self.exposure = float(multiplier)

    def set_meter(self, on: bool) -> None:
        self.meter_on = bool(on)

    def _signature(self) -> tuple:
        r = self.replay
        lv = r.level.level_np
        return (None if lv is None else lv.node().this,
                tuple(c.node().this for c in r.char_copies))

    def _geometry(self) -> GBufferRenderer:
        """The scene's triangles and materials, rebuilt when a level or character is loaded."""
        if self.replay is None:
            raise RuntimeError("compute render: ComputeTargets.bind(renderer) was not called")
        sig = self._signature()
        if self._gbr is None or sig != self._scene_sig:
            r = self.replay
            skins = [sk for p in r.char_posers for sk in getattr(p, "skins", [])]
            self._geo = SceneGeometry(self.scene, dynamic=list(r.level.prop_pivots),
                                      animated=list(r.char_copies), device=self.device,
                                      skins=skins)
            self._gbr = GBufferRenderer(self._geo, self.W, self.H)
            # (unused at compute_shading sample, which shades every sample: no kernel built)
            self._merged = MergedShading(self._gbr, self.S, self.leaders
                                         if self.shading_rate == "pixel" else "torch")
            self._scene_sig = sig
        return self._gbr

    def _lights(self) -> Any:
        """The lighting uniforms on the device, as the lights are placed now: uploaded only
        when they changed (a light moving with a prop), else the last frame's."""
        level = self.replay.level
        rec = self.lighting
        inputs = light_inputs(rec.lights, self.scene, rec.ranges)
        shadow = 0 if level.sun is not None else -1
        key = repr((inputs, sorted((level.sky or {}).items()), shadow,
                    float(self.look.ibl_strength)))
        if self._lighting is None or self._lighting[0] != key:
            lt = make_lighting(inputs, level.sky, shadow_light=shadow,
                               ibl_strength=float(self.look.ibl_strength))
            self._lighting = (key, lt.to(self.device))
        return self._lighting[1]

    def _exposure(self) -> torch.Tensor:
        """The exposure multiplier as a device scalar (uploaded when it changes)."""
        if self._exposure_t is None or self._exposure_t[0] != self.exposure:
            self._exposure_t = (self.exposure, upload(self.exposure, self.device,
                                                      torch.float32))
        return self._exposure_t[1]

    def draw(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """One frame with the cameras, sun, character and props as placed: colour (H, W, 3)
        uint8 and mask (h, w) bool per view (in meter mode each colour pixel holds the meter
        code in all three channels, as GL's resolve writes it).

        Where graphs are compiled (``gate_compiles``: on a GPU) and a compile cache is set,
        the frames until the first colour (not meter) frame are this configuration's first
        compile on the node (``compile_cache.FirstCompile``): one renderer compiles them while
        the others wait, then load them from the cache."""
        gate = self._gate()
        try:
            out = self._draw()
        except BaseException:
            if gate is not None:
                gate.leave(ok=False)
                self._first = None
            raise
        if gate is not None and not self.meter_on:
            gate.leave(ok=True)
            self._first = None
        return out

    def _gate(self) -> FirstCompile | None:
        """The first-compile gate of this renderer, entered (None once its frames are done,
        or where nothing is compiled or no cache is set). A level this renderer has not
        gated yet (a second level in one process) opens a gate of its own; one entered for
        another level and never left (that level's job failed between its meter frames and
        its first colour frame) is left unmarked first."""
        if (self._first is not None and self._first.entered
                and self._gated_level != self._level()):
            self._first.leave(ok=False)
            self._first = None
        if self._first is None:
            if (self.compile_cache is None or not self.gate_compiles
                    or self._gated_level in (None, self._level())):
                return None
            self.start_gate(self._on_wait)
        assert self._first is not None
        if not self._first.entered:
            self._first.key = self._gate_key()  # the preview is set after construction
            self._gated_level = self._level()
            role = self._first.enter()
            log.info("compute: first compile on this node as %s (waited %.1f s)", role,
                     self._first.waited_s)
        return self._first

    def _draw(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        gbr = self._geometry()
        level = self.replay.level
        sun = (sun_from_node(level.sun, self.scene, self.look.shadow_map_size,
                             self.look.shadow_pcf_taps, self.device)
               if level.sun is not None else None)
        cams = cameras_from_targets(self, self.device)
        if self.shading_rate == "pixel":
            assert self._merged is not None
            rad, lead = self._merged.radiance(cams, sun, self._lights(), gather=False)
            if self.meter_on:  # the exposure meter (warm-up frames only)
                img = meter_codes(from_leaders(rad, lead)).flip(1)[..., None].expand(
                    -1, -1, -1, 3)
            else:
                img = self._resolve_leaders(rad, lead, self._exposure(), self.look.tone_map)
            return self._colors(img), self._masks(gbr)
        gb = gbr.render(cams, sun)
        if self.meter_on:  # the exposure meter (warm-up frames only): eager
            rad = shade(*_stored(gb), gb.depth, gb.inv_view_proj, gb.camera_positions(),
                        self._lights(),
                        block_px=SHADE_BLOCK_PX if self.device.type == "cuda" else None)
            rad = quantize_r11g11b10(rad).reshape(len(VIEWS), self.N, self.H, self.W, 3)
            img = meter_codes(rad)[..., None].expand(-1, -1, -1, 3)
        else:
            lt, ex = self._lights(), self._exposure()
            planes = [p.reshape(len(VIEWS), self.N, *p.shape[1:]) for p in
                      (gb.emission, gb.albedo, gb.metallic, gb.normal, gb.roughness,
                       gb.shadow, gb.depth)]
            ivp = gb.inv_view_proj.reshape(len(VIEWS), self.N, 4, 4)
            eye = gb.camera_positions().reshape(len(VIEWS), self.N, 3)
            img = torch.stack([self._light_view(*(p[v] for p in planes), ivp[v], eye[v], lt,
                                                ex, self.look.tone_map)
                               for v in range(len(VIEWS))])
        return self._colors(img), self._masks(gbr)

    def _colors(self, img: torch.Tensor) -> dict[str, Any]:
        """Each view's picture from ``img`` [V, H, W, 3] uint8 (rows top-down): Yuv420
        planes (``yuv``, except the meter's codes) or RGB arrays, in host memory."""
        if self.yuv and not self.meter_on:
            return self._yuv_colors(img)
        out = self._to_host(img)
        return {v: out[i] for i, v in enumerate(VIEWS)}

    def _yuv_colors(self, img: torch.Tensor) -> dict[str, Any]:
        """The views (and the preview, with_preview) as Yuv420 pictures: converted on the
        device, one copy to the host for all of them."""
        parts = [self._packed(img)]
        if self.with_preview:
            hh = self.H // 2 // 2 * 2
            labels = [label_bitmap(v, max(10, hh // 12)) for v in VIEWS]
            parts.append(self._packed(tile_preview(img, labels)))
        flat = self._to_host(torch.cat(parts))
        n = len(VIEWS) * self.H * self.W * 3 // 2
        colors: dict[str, Any] = dict(zip(VIEWS, unpack_planes(flat[:n], len(VIEWS), self.H,
                                                                self.W), strict=True))
        if self.with_preview:
            pw, ph = 3 * (self.W // 2 // 2 * 2), 2 * (self.H // 2 // 2 * 2)
            colors["preview"] = unpack_planes(flat[n:], 1, ph, pw)[0]
        return colors

    def _to_host(self, img: torch.Tensor) -> np.ndarray:
        """The frame's pixels in host memory. From a GPU: an asynchronous copy into pinned
        memory (torch's caching host allocator; a block returns to it once the encoders have
        dropped the frame's arrays), then a wait on a blocking-sync CUDA event: the thread
        sleeps until the copy lands instead of spinning in the driver."""
        if self.device.type != "cuda":
            return img.cpu().numpy()
        host = torch.empty(img.shape, dtype=img.dtype, pin_memory=True)
        host.copy_(img, non_blocking=True)
        done = torch.cuda.Event(blocking=True)
        done.record()
        done.synchronize()
        return host.numpy()

    def _masks(self, gbr: GBufferRenderer) -> dict[str, np.ndarray]:
        """The mask cameras' view of what their draw-mask bits show (the mask copy of the
        character; nothing for first person), as GL's flat white mask pass: coverage only, no
        texture, so no alpha cut-out."""
        fr = gbr.frame_tris
        assert fr is not None
        mw, mh = self.mask_size
        cams = cameras_from_nodes([self.mask_cams[v] for v in VIEWS], self.scene, 1,
                                  self.device)
        vis = ((fr.bits[None, :] >> cams.bit[:, None]) & 1).bool()
        if not bool(vis.any()):
            return {v: np.zeros((mh, mw), bool) for v in VIEWS}
        # coverage is the depth pass's alone: no triangle ids or barycentrics to resolve
        key = visibility(fr.pos, cams.view_proj, mw, mh, visible=vis, cull=fr.cull,
                         budget=gbr.budget).key
        cov = (key != NO_HIT).view(len(VIEWS), mh, mw).flip(1).cpu().numpy()
        return {v: cov[i] for i, v in enumerate(VIEWS)}

    def close(self) -> None:
        if self._first is not None:  # closed inside the gate: let the others go, not warm
            self._first.leave(ok=False)
            self._first = None
        self._geo, self._gbr = None, None
        torch.set_num_threads(self._threads)
        super().close()


__all__ = ["ComputeTargets"]
