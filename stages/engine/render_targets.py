"""Stage II's off-screen buffers and cameras, and the resolve pass.

Every (view, spatial sample, temporal sample) is a display region of one atlas buffer (linear
light, packed float), each with its own camera; with deferred shading the atlas also carries the
G-buffer planes and the lighting pass (``deferred.LightingPass``) runs between it and the
resolve. The resolve averages each view's samples in linear light (``texelFetch``), applies the
exposure and the tone map and encodes sRGB into a strip of the five views, copied to RAM once a
frame, as is the mask buffer (flat white character, per view): with ``render.readback`` sync
by Panda3D at the end of the frame, with pbo through pixel-pack buffers and fences a frame or
more later (``gl_readback``; :meth:`RenderTargets.submit` then :meth:`RenderTargets.collect`).
With ``render.yuv`` device a GL pass packs the views' yuv420p planes (``gl_yuv``) and those
are read instead of the strip. Draw masks: temporal sample t's colour cameras see bit t
(first-person: FP_BIT_BASE + t), the mask cameras MASK_BIT (first-person: FP_MASK_BIT, which
nothing shows).

``scene_targets.SceneTargets`` is the GL-free half (settings, scene root, cameras, tile
layout, the frame protocol of a renderer that draws at submit): the compute backend builds on
it and opens no GL context; :class:`RenderTargets` adds the GL context, buffers and passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from .look import Look
from .scene_targets import SceneTargets

READBACKS = ("sync", "pbo")  # render.readback's values
READBACK_SLOTS = 3  # pbo: frames in flight at most (collect() lags submit() by up to 2)



class RenderTargets(SceneTargets):
    """The GL context, the atlas, mask and resolve buffers, every sample's camera and the
    resolve cards of one renderer (see the module docstring)."""

    def __init__(self, width: int, height: int, spatial: int = 1, temporal: int = 1,
                 display: str = "p3headlessgl", mask_scale: int = 2, near: float = 0.05,
                 far: float = 4000.0, *, look: Look, readback: str = "sync",
                 readback_slots: int = READBACK_SLOTS, yuv: bool | None = False):
        if readback not in READBACKS:
            raise ValueError(f"render.readback is {readback!r}; expected sync or pbo")
        if yuv and readback != "pbo":
            raise ValueError("render.yuv is device but render.readback is sync: the GL "
                             "backend's yuv420p planes are read back through pbo only")
        super().__init__(width, height, spatial, temporal, display, mask_scale, near, far,
                         look=look)
        from panda3d.core import (
            FrameBufferProperties,
            GraphicsEngine,
            GraphicsPipe,
            GraphicsPipeSelection,
            Texture,
            WindowProperties,
        )

        self.engine = GraphicsEngine.getGlobalPtr()
        pipe = GraphicsPipeSelection.getGlobalPtr().makeModulePipe(display)
        if pipe is None:
            raise RuntimeError(f"render: no graphics pipe from {display!r} (is EGL installed?)")
        self.pipe = pipe
        aw, ah = self.atlas_size

        def fbp(depth: bool, hdr: bool = False, gbuffer: bool = False) -> Any:
            p = FrameBufferProperties()
            p.setRgbColor(True)
            p.setFloatColor(hdr)
            # linear light in packed 32-bit floats (R11G11B10F): half the bandwidth of RGBA16F
            p.setRgbaBits(*((11, 11, 10, 0) if hdr else (8, 8, 8, 8)))
            p.setDepthBits(24 if depth else 0)
            if gbuffer:  # colour 0: emission; 1: base colour, metallic; 2: normal, rough, shadow
                # (RGBA16F both: Panda3D gives an aux_rgba plane the colour's format, here one
                # without alpha); depth as 32-bit float: positions are rebuilt from it
                p.setAuxHrgba(2)
                p.setFloatDepth(True)
                p.setDepthBits(32)
            return p

        flags = GraphicsPipe.BF_refuse_window
        # a tiny host buffer owns the GL context; the atlas is a float framebuffer object on it
        # (EGL pbuffers offer no float formats)
        self.host = self.engine.makeOutput(pipe, "host", -10, fbp(False),
                                           WindowProperties.size(16, 16), flags, None, None)
        if self.host is None:
            raise RuntimeError("render: could not create an offscreen GL context")
        self.shading = self._choose_shading()
        self.deferred = self.shading == "deferred"
        self.atlas = self.engine.makeOutput(
            pipe, "atlas", 0, fbp(True, hdr=True, gbuffer=self.deferred),
            WindowProperties.size(aw, ah),
            flags | GraphicsPipe.BF_refuse_parasite, self.host.getGsg(), self.host)
        if self.atlas is None:
            raise RuntimeError(f"render: could not create a {aw}x{ah} float offscreen buffer")
        self.gsg = self.atlas.getGsg()
        self.atlas_tex = Texture("atlas")
        self.atlas_tex.setFormat(Texture.F_r11_g11_b10)
        self.atlas_tex.setComponentType(Texture.T_float)
        self.atlas.addRenderTexture(self.atlas_tex, self.atlas.RTM_bind_or_copy,
                                    self.atlas.RTP_color)
        if self.deferred:
            from .deferred import add_gbuffer

            self.gbuf = add_gbuffer(self.atlas)
        self.atlas.setClearColorActive(True)
        self.out_tex = Texture("resolved")
        self.resolve = self.engine.makeOutput(pipe, "resolve", 10, fbp(False),
                                              WindowProperties.size(width * len(VIEWS), height),
                                              flags, self.gsg, self.atlas)
        # sync: Panda3D copies to RAM at the frame's end; pbo: the texture stays on the GPU
        # (the same framebuffer attachment) and gl_readback reads it
        rtm = self.resolve.RTM_copy_ram if readback == "sync" else self.resolve.RTM_bind_or_copy
        self.resolve.addRenderTexture(self.out_tex, rtm, self.resolve.RTP_color)
        mw, mh = self.mask_size
        self.mask_tex = Texture("mask")
        self.mask_buf = self.engine.makeOutput(pipe, "mask", 5, fbp(True),
                                               WindowProperties.size(mw * len(VIEWS), mh),
                                               flags, self.gsg, self.atlas)
        self.mask_buf.addRenderTexture(self.mask_tex, rtm, self.mask_buf.RTP_color)
        self.mask_buf.setClearColor((0, 0, 0, 1))
        self._bind_regions(aw, ah)
        self._build_resolve(aw, ah)
        self.readback = readback
        # render.yuv: the views leave as yuv420p planes made by a GL pass (gl_yuv); None
        # (auto) where the readback is pbo on a GPU's driver, not a software rasterizer
        if yuv is None:
            yuv = readback == "pbo" and not self.software
        self.yuv = bool(yuv)
        if self.yuv:
            from .gl_yuv import YuvPass

            self.yuv_pass = YuvPass(self)
        if readback == "pbo":
            from .gl_readback import PboReadback

            self.pbo = PboReadback(self, readback_slots)

    def _choose_shading(self) -> str:
        """``render.shading`` made concrete for this GL driver: auto is deferred where compute
        shaders run on a GPU, forward on a software rasterizer (llvmpipe is ~17 % slower
        deferred: it has no few-graphics-units bottleneck to escape) or without compute."""
        self.engine.openWindows()
        gsg = self.host.getGsg()
        renderer = str(gsg.getDriverRenderer())
        compute = bool(gsg.getSupportsComputeShaders())
        self.software = any(k in renderer.lower() for k in ("llvmpipe", "softpipe", "swrast"))
        if self.look.shading == "deferred" and not compute:
            raise RuntimeError(f"render.shading is deferred but the GL driver ({renderer}) has "
                               "no compute shaders (OpenGL 4.3); use auto or forward")
        if self.look.shading != "auto":
            return self.look.shading
        return "deferred" if compute and not self.software else "forward"

    def _bind_regions(self, aw: int, ah: int) -> None:
        """A display region of the atlas for every sample's camera (its tile) and one of the
        mask buffer for each view's mask camera, made in the cameras' order."""
        for view in VIEWS:
            for t in range(self.T):
                for s in range(self.S):
                    x0, y0 = self.tile_origin[(view, t * self.S + s)]
                    dr = self.atlas.makeDisplayRegion(x0 / aw, (x0 + self.W) / aw,
                                                      y0 / ah, (y0 + self.H) / ah)
                    dr.setCamera(self.cams[(view, t, s)])
        for v, view in enumerate(VIEWS):
            dr = self.mask_buf.makeDisplayRegion(v / len(VIEWS), (v + 1) / len(VIEWS), 0, 1)
            dr.setCamera(self.mask_cams[view])

    def _build_resolve(self, aw: int, ah: int) -> None:
        from panda3d.core import (
            Camera,
            CardMaker,
            NodePath,
            OrthographicLens,
            PTA_LVecBase2i,
            Shader,
        )

        root = NodePath("resolve")
        lens = OrthographicLens()
        lens.setFilmSize(len(VIEWS), 1)
        lens.setFilmOffset(len(VIEWS) / 2, 0.5)
        lens.setNearFar(-10, 10)
        cam = root.attachNewNode(Camera("resolve_cam", lens))
        cam.setP(-90)  # look down -Z onto cards in the XY plane
        dr = self.resolve.makeDisplayRegion()
        dr.setCamera(cam)
        from .pbr_shaders import RESOLVE_FRAG, RESOLVE_VERT

        shader = Shader.make(Shader.SL_GLSL, RESOLVE_VERT, RESOLVE_FRAG)
        self.resolve_cards: list[Any] = []
        for v, view in enumerate(VIEWS):
            cm = CardMaker(f"card_{view}")
            cm.setFrame(v, v + 1, 0, 1)
            card = root.attachNewNode(cm.generate())
            card.setP(-90)
            card.setShader(shader)
            card.setShaderInput("atlas", self.atlas_tex)
            origins = PTA_LVecBase2i.emptyArray(64)  # emptyArray does not zero: every slot set
            for k in range(64):
                origins[k] = self.tile_origin[(view, k)] if k < self.N else (0, 0)
            card.setShaderInput("origins", origins)
            card.setShaderInput("nsamples", self.N)
            card.setShaderInput("region", (v * self.W, 0))
            card.setShaderInput("exposure", 1.0)
            card.setShaderInput("tone_map", 1 if self.look.tone_map == "aces" else 0)
            card.setShaderInput("meter", 0)
            self.resolve_cards.append(card)
        self.resolve_root = root
        self.lighting: Any = None  # deferred.LightingPass when shading is deferred
        if self.deferred:
            from .deferred import LightingPass

            self.lighting = LightingPass(self, aw, ah)

    def set_exposure(self, multiplier: float) -> None:
        """The linear exposure multiplier the resolve applies before the tone map."""
        for card in self.resolve_cards:
            card.setShaderInput("exposure", float(multiplier))

    def set_meter(self, on: bool) -> None:
        """Meter mode: the resolve writes each pixel's log2 luminance (8-bit codes over 24
        stops) instead of the tone-mapped colour. Meter frames are read as RGB (the yuv pass,
        if any, is off meanwhile)."""
        for card in self.resolve_cards:
            card.setShaderInput("meter", 1 if on else 0)
        self.meter_on = bool(on)
        if self.yuv_pass is not None:
            self.yuv_pass.set_active(not on)

    def draw(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Draw one frame with the cameras as placed; colour (H, W, 3) and mask (h, w) per
        view, read back from the resolve and mask buffers."""
        if self.pbo is not None:
            if self.in_flight:
                raise RuntimeError(f"render: draw() with {self.in_flight} submitted frame(s) "
                                   "not collected; collect() them first")
            self.submit()
            return self.collect()
        if self.lighting is not None:
            self.lighting.before_frame()
        self.engine.renderFrame()
        img = _ram(self.out_tex, self.W * len(VIEWS), self.H)
        mask = _ram(self.mask_tex, self.mask_size[0] * len(VIEWS), self.mask_size[1])
        return self._split(img, mask[..., 0])

    def _split(self, img: np.ndarray | None, mask: np.ndarray
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Per view: colour (H, W, 3) of the strip ``img`` (none without it) and mask (h, w)
        of ``mask``."""
        colors = ({} if img is None else
                  {v: img[:, i * self.W:(i + 1) * self.W, :3] for i, v in enumerate(VIEWS)})
        mw = self.mask_size[0]
        masks = {v: mask[:, i * mw:(i + 1) * mw] > 127 for i, v in enumerate(VIEWS)}
        return colors, masks

    # ------------------------------------------------------------------ pipelined frames

    @property
    def lag(self) -> int:
        """Frames :meth:`collect` may trail :meth:`submit` by: 0 (sync), slots - 1 (pbo)."""
        return 0 if self.pbo is None else self.pbo.slots - 1

    @property
    def in_flight(self) -> int:
        """Frames submitted and not collected yet."""
        return len(self._done) if self.pbo is None else self.pbo.in_flight

    def submit(self) -> None:
        """Draw one frame with the cameras as placed; its images come from :meth:`collect`,
        in submission order (sync: read now; pbo: read back behind a fence)."""
        if self.pbo is None:
            super().submit()
            return
        if self.lighting is not None:
            self.lighting.before_frame()
        self.pbo.submit(("yuv" if self.yuv and not self.meter_on else "colour", "mask"))

    def collect(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The oldest submitted frame's colour (H, W, 3) — with ``yuv``, a
        :class:`~stages.media.video.Yuv420` per view and, ``with_preview``, the preview's —
        and mask (h, w) per view."""
        if self.pbo is None:
            return super().collect()
        got = self.pbo.collect()
        if "yuv" in got:  # the planes' bytes are in order from GL's first (bottom) row
            colors = self.yuv_pass.unpack(got["yuv"], self.with_preview)
            return colors, self._split(None, got["mask"][::-1, :, 0])[1]
        return self._split(got["colour"][::-1], got["mask"][::-1, :, 0])  # rows bottom-up

    def discard(self) -> None:
        """Forget every submitted frame not collected (after an error mid-clip)."""
        super().discard()
        if self.pbo is not None:
            self.pbo.discard()

    def warmup(self, frames: int) -> None:
        for _ in range(frames):
            self.engine.renderFrame()

    def close(self) -> None:
        if self.pbo is not None:
            self.pbo.close()
        self.engine.removeAllWindows()


def _ram(tex: Any, w: int, h: int) -> np.ndarray:
    data = tex.getRamImageAs("RGB")
    arr = np.frombuffer(memoryview(data), np.uint8)
    if arr.size != w * h * 3:
        raise RuntimeError(f"render: read back {arr.size} bytes, expected {w}x{h}x3")
    # GL rows are bottom-up. No copy here: getRamImageAs("RGB") converts from Panda3D's BGR
    # into a new buffer every frame, and each encoder makes its view contiguous itself
    return arr.reshape(h, w, 3)[::-1]
