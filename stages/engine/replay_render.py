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

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from .clips import EggPoser, GltfPoser, read_gltf_clips

MASK_BIT = 30
# first-person cameras see the level but never the character's own body (§6.3): their colour
# cameras use bits FP_BIT_BASE + t (no character copy is shown on them) and their mask camera
# FP_MASK_BIT (nothing is shown on it), so the first-person mask is empty
FP_BIT_BASE = 16
FP_MASK_BIT = 29
LEVEL_HIDE = 29  # level geometry is hidden from mask cameras

RESOLVE_VERT = """#version 330
uniform mat4 p3d_ModelViewProjectionMatrix;
in vec4 p3d_Vertex;
void main() { gl_Position = p3d_ModelViewProjectionMatrix * p3d_Vertex; }
"""


@dataclass
class Look:
    """Stage II's look settings: built from a render's RenderSettings (:meth:`from_settings`);
    no defaults of its own (they live once, in ``stages.config.RenderConfig``)."""

    # sun shadow map size, px (per side), and the half-width of the area around the character
    # it covers, m (the map is refitted around the character every frame)
    shadow_map_size: int
    shadow_extent_m: float
    # shadow-map taps per output pixel (1, 2, 4 or 8; each a hardware 2x2 comparison):
    # softness; a pixel's taps are spread over its samples (at 8 samples each takes one tap,
    # so the cost per sample is one tap whatever this is)
    shadow_pcf_taps: int
    # exposure: metered on the first frames of each trajectory to bring the geometric mean
    # luminance to exposure_key; 0 frames = fixed exposure 1 (then only the compensation)
    meter_frames: int
    exposure_key: float
    # "aces" (filmic) or "none" (clamp)
    tone_map: str
    # strength of the sky's image-based light
    ibl_strength: float
    # "deferred": a G-buffer from the rasterizer, lit by a compute pass (stages/engine/
    # deferred.py; fast where pixel shaders run on few units, as on an H200); "forward": the
    # whole look in the fragment shader (the reference); "auto": deferred on a GPU with
    # compute shaders, forward on a software rasterizer
    shading: str

    @classmethod
    def from_settings(cls, s: Any) -> Look:
        """The look of a RenderSettings (or anything with these attributes)."""
        return cls(**{f.name: getattr(s, f.name) for f in dataclasses.fields(cls)})


def halton(i: int, base: int) -> float:
    f, r = 1.0, 0.0
    while i > 0:
        f /= base
        r += f * (i % base)
        i //= base
    return r


def jitter_offsets(n: int) -> list[tuple[float, float]]:
    """Sub-pixel offsets in pixels, centred on 0; a single sample is exactly the pixel centre."""
    if n == 1:
        return [(0.0, 0.0)]
    pts = [(halton(i + 1, 2), halton(i + 1, 3)) for i in range(n)]
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    return [(p[0] - mx, p[1] - my) for p in pts]


def temporal_offsets(n: int, shutter: float) -> list[float]:
    """Sub-frame times (in frames) inside the shutter interval centred on the frame."""
    if n == 1:
        return [0.0]
    return [((k + 0.5) / n - 0.5) * shutter for k in range(n)]


def cv_to_panda_mat(q: tuple[float, float, float, float]) -> list[list[float]]:
    """Rows of Panda3D's camera rotation (x right, y forward, z up) from a world-from-camera
    OpenCV quaternion (x right, y down, z forward)."""
    w, x, y, z = q
    r = [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]
    cx = [r[0][0], r[1][0], r[2][0]]
    cy = [r[0][1], r[1][1], r[2][1]]
    cz = [r[0][2], r[1][2], r[2][2]]
    return [cx, cz, [-v for v in cy]]  # panda x = cv x, panda y = cv z, panda z = -cv y


@dataclass
class ViewPose:
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]  # world-from-camera, OpenCV
    fov_deg: float


@dataclass
class CharacterPose:
    pos: tuple[float, float, float]  # feet
    quat: tuple[float, float, float, float]  # w x y z
    scale: tuple[float, float, float]
    clip: str | None
    clip_time: float


@dataclass
class SamplePose:
    character: CharacterPose
    views: dict[str, ViewPose]


@dataclass
class LevelReport:
    removed: list[str] = field(default_factory=list)
    textures: int = 0
    textures_full_res: int = 0
    lights: int = 0
    props: int = 0


class ReplayRenderer:
    def __init__(self, width: int, height: int, spatial: int = 1, temporal: int = 1,
                 display: str = "p3headlessgl", mask_scale: int = 2, near: float = 0.05,
                 far: float = 4000.0, *, look: Look):
        from panda3d.core import loadPrcFileData

        loadPrcFileData("wmforge-render", f"""
            window-type none
            load-display {display}
            audio-library-name null
            model-cache-dir
            textures-power-2 none
            max-texture-dimension -1
            compressed-textures 0
            notify-level-display error
            notify-level-glgsg error
            sync-video 0
        """)
        from panda3d.core import (
            FrameBufferProperties,
            GraphicsEngine,
            GraphicsPipe,
            GraphicsPipeSelection,
            NodePath,
            Texture,
            WindowProperties,
        )

        self.W, self.H, self.S, self.T = width, height, spatial, temporal
        self.N = spatial * temporal
        if self.N > 64:
            raise ValueError(f"render: spatial x temporal = {self.N} samples; at most 64")
        if temporal > FP_MASK_BIT - FP_BIT_BASE:
            raise ValueError(f"render.temporal_samples is {temporal}; at most "
                             f"{FP_MASK_BIT - FP_BIT_BASE} (one camera bit per sample)")
        self.near, self.far = near, far
        self.look = look
        if self.look.shadow_pcf_taps not in (1, 2, 4, 8):
            raise ValueError(f"render.shadow_pcf_taps is {self.look.shadow_pcf_taps}; "
                             "expected 1, 2, 4 or 8")
        if self.look.shading not in ("auto", "deferred", "forward"):
            raise ValueError(f"render.shading is {self.look.shading!r}; expected "
                             "auto|deferred|forward")
        self.deferred = False  # decided once the GL context exists (_choose_shading)
        if self.look.tone_map not in ("aces", "none"):
            raise ValueError(f"render.tone_map is {self.look.tone_map!r}; expected aces|none")
        self.engine = GraphicsEngine.getGlobalPtr()
        pipe = GraphicsPipeSelection.getGlobalPtr().makeModulePipe(display)
        if pipe is None:
            raise RuntimeError(f"render: no graphics pipe from {display!r} (is EGL installed?)")
        self.pipe = pipe
        self.scene = NodePath("scene")
        self.tiles_per_row = max(1, min(self.N * len(VIEWS), 16384 // width))
        ntiles = self.N * len(VIEWS)
        rows = math.ceil(ntiles / self.tiles_per_row)
        aw, ah = self.tiles_per_row * width, rows * height
        if ah > 16384:
            raise ValueError(f"render: {ntiles} tiles of {width}x{height} exceed a 16384 px "
                             "atlas; use fewer samples or a smaller preset")

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
        self.resolve.addRenderTexture(self.out_tex, self.resolve.RTM_copy_ram,
                                      self.resolve.RTP_color)
        mw, mh = max(1, width // mask_scale), max(1, height // mask_scale)
        self.mask_scale = mask_scale
        self.mask_size = (mw, mh)
        self.mask_tex = Texture("mask")
        self.mask_buf = self.engine.makeOutput(pipe, "mask", 5, fbp(True),
                                               WindowProperties.size(mw * len(VIEWS), mh),
                                               flags, self.gsg, self.atlas)
        self.mask_buf.addRenderTexture(self.mask_tex, self.mask_buf.RTM_copy_ram,
                                       self.mask_buf.RTP_color)
        self.mask_buf.setClearColor((0, 0, 0, 1))
        self._build_cameras(aw, ah)
        self._build_resolve(aw, ah)
        self.level_np: Any = None
        self.char_copies: list[Any] = []
        self.prop_pivots: list[Any] = []
        self.prop_names: list[str] = []
        self.char_posers: list[Any] = []
        self.jitter = jitter_offsets(spatial)
        self.sun: Any = None
        self.sky_np: Any = None
        self.exposure_comp_ev = 0.0
        self.auto_exposure = 1.0
        self._setup_shading()

    # ------------------------------------------------------------------ set-up

    def _choose_shading(self) -> str:
        """``render.shading`` made concrete for this GL driver: auto is deferred where compute
        shaders run on a GPU, forward on a software rasterizer (llvmpipe is ~17 % slower
        deferred: it has no few-graphics-units bottleneck to escape) or without compute."""
        self.engine.openWindows()
        gsg = self.host.getGsg()
        renderer = str(gsg.getDriverRenderer())
        compute = bool(gsg.getSupportsComputeShaders())
        if self.look.shading == "deferred" and not compute:
            raise RuntimeError(f"render.shading is deferred but the GL driver ({renderer}) has "
                               "no compute shaders (OpenGL 4.3); use auto or forward")
        if self.look.shading != "auto":
            return self.look.shading
        soft = any(k in renderer.lower() for k in ("llvmpipe", "softpipe", "swrast"))
        return "deferred" if compute and not soft else "forward"

    def _lens(self) -> Any:
        from panda3d.core import PerspectiveLens

        lens = PerspectiveLens()
        lens.setFilmSize(self.W, self.H)
        lens.setNearFar(self.near, self.far)
        return lens

    def _build_cameras(self, aw: int, ah: int) -> None:
        from panda3d.core import (
            BitMask32,
            Camera,
            ColorAttrib,
            LightAttrib,
            MaterialAttrib,
            RenderState,
            ShaderAttrib,
            TextureAttrib,
        )

        self.cams: dict[tuple[str, int, int], Any] = {}
        self.tile_origin: dict[tuple[str, int], tuple[int, int]] = {}
        for v, view in enumerate(VIEWS):
            for t in range(self.T):
                for s in range(self.S):
                    k = t * self.S + s
                    tile = v * self.N + k
                    col, row = tile % self.tiles_per_row, tile // self.tiles_per_row
                    x0, y0 = col * self.W, row * self.H
                    self.tile_origin[(view, k)] = (x0, y0)
                    dr = self.atlas.makeDisplayRegion(x0 / aw, (x0 + self.W) / aw,
                                                      y0 / ah, (y0 + self.H) / ah)
                    cam = Camera(f"{view}_{t}_{s}", self._lens())
                    cam.setCameraMask(BitMask32.bit(FP_BIT_BASE + t if view == "fp" else t))
                    np_ = self.scene.attachNewNode(cam)
                    dr.setCamera(np_)
                    self.cams[(view, t, s)] = np_
        mw, mh = self.mask_size
        state = RenderState.make(ColorAttrib.makeFlat((1, 1, 1, 1)), TextureAttrib.makeAllOff(),
                                 LightAttrib.makeAllOff(), MaterialAttrib.makeOff(),
                                 ShaderAttrib.makeOff(), 100)
        self.mask_cams: dict[str, Any] = {}
        for v, view in enumerate(VIEWS):
            dr = self.mask_buf.makeDisplayRegion(v / len(VIEWS), (v + 1) / len(VIEWS), 0, 1)
            lens = self._lens()
            cam = Camera(f"mask_{view}", lens)
            cam.setCameraMask(BitMask32.bit(FP_MASK_BIT if view == "fp" else MASK_BIT))
            cam.setInitialState(state)
            np_ = self.scene.attachNewNode(cam)
            dr.setCamera(np_)
            self.mask_cams[view] = np_
        del mw, mh

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
        from .pbr import RESOLVE_FRAG

        shader = Shader.make(Shader.SL_GLSL, RESOLVE_VERT, RESOLVE_FRAG)
        self.resolve_cards: list[Any] = []
        for v, view in enumerate(VIEWS):
            cm = CardMaker(f"card_{view}")
            cm.setFrame(v, v + 1, 0, 1)
            card = root.attachNewNode(cm.generate())
            card.setP(-90)
            card.setShader(shader)
            card.setShaderInput("atlas", self.atlas_tex)
            origins = PTA_LVecBase2i.emptyArray(64)
            for k in range(self.N):
                x0, y0 = self.tile_origin[(view, k)]
                origins[k] = (x0, y0)
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

    def _shading_input(self, name: str, value: Any) -> None:
        """A shader input of the look: on the scene (forward or G-buffer shader) and on the
        deferred lighting pass."""
        self.scene.setShaderInput(name, value)
        if self.lighting is not None:
            self.lighting.set_input(name, value)

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
        e = self.auto_exposure * 2.0 ** self.exposure_comp_ev
        for card in self.resolve_cards:
            card.setShaderInput("exposure", float(e))

    def _setup_shading(self) -> None:
        """The PBR shader on the whole scene, a fallback material, the sky dome."""
        from panda3d.core import (
            BitMask32,
            ColorWriteAttrib,
            CullBinAttrib,
            DepthWriteAttrib,
            Material,
            NodePath,
            Shader,
            ShaderAttrib,
        )

        from .deferred import GBUF_FRAG
        from .pbr import PBR_FRAG, PBR_VERT, SKY_FRAG, SKY_VERT, sphere

        self.pbr_shader = Shader.make(Shader.SL_GLSL, PBR_VERT,
                                      GBUF_FRAG if self.deferred else PBR_FRAG)
        self.scene.setAttrib(ShaderAttrib.make(self.pbr_shader))
        fallback = Material("wmforge-fallback")
        fallback.setBaseColor((1, 1, 1, 1))
        fallback.setRoughness(0.8)
        fallback.setMetallic(0.0)
        self.scene.setMaterial(fallback)
        self.scene.setShaderInput("ibl_strength", float(self.look.ibl_strength))
        self.scene.setShaderInput("shadow_bias", 0.0015)
        self.scene.setShaderInput("shadow_texel", 1.0 / self.look.shadow_map_size)
        self.scene.setShaderInput("shadow_light", -1)
        self.scene.setShaderInput("pcf_taps", int(self.look.shadow_pcf_taps))
        self.scene.setShaderInput("inv_tile_size", (1.0 / self.W, 1.0 / self.H))
        self.scene.setShaderInput("tiles_per_row", float(self.tiles_per_row))
        self.scene.setShaderInput("nsamples", float(self.N))
        self._set_light_ranges([])
        from panda3d.core import DirectionalLight

        self._no_sun = NodePath(DirectionalLight("no_sun"))  # until a level brings its sun
        self.scene.setShaderInput("sun", self._no_sun)
        sky = NodePath(sphere(self.far * 0.8))
        sky.reparentTo(self.scene)
        sky.setShader(Shader.make(Shader.SL_GLSL, SKY_VERT, SKY_FRAG), 10)
        sky.setShaderInput("sky_strength", 1.0)
        # drawn after the opaque geometry with the depth test on, so only the pixels where the
        # sky shows are shaded (a full-screen sky pass per view and sample costs a lot on GPUs
        # whose graphics units are few, like the H200's), and before the transparent ones
        from panda3d.core import CullBinManager

        bins = CullBinManager.getGlobalPtr()
        if bins.findBin("wmforge_sky") < 0:
            bins.addBin("wmforge_sky", CullBinManager.BT_fixed, 25)
        sky.setAttrib(CullBinAttrib.make("wmforge_sky", 0))
        sky.setAttrib(DepthWriteAttrib.make(DepthWriteAttrib.M_off))
        sky.setLightOff(10)
        sky.setMaterialOff(10)
        sky.hide(BitMask32.bit(MASK_BIT) | BitMask32.bit(FP_MASK_BIT))
        if self.deferred:  # the lighting pass draws the sky where nothing else was drawn
            sky.hide(BitMask32.allOn())
            # a G-buffer holds one surface a pixel: blending would mix its planes (the alpha
            # of each holds data) with the previous frame's; see-through materials are cut out
            # at alpha 0.5 by the G-buffer shader instead
            from panda3d.core import TransparencyAttrib

            self.scene.setTransparency(TransparencyAttrib.M_none, 1000)
        del ColorWriteAttrib
        self.sky_np = sky
        self._set_sky({})

    def _set_light_ranges(self, lights: list[Any]) -> None:
        """How many lights the shader reads and each one's glTF range (metres in the scene,
        0 = unbounded), in the shader's (priority) order."""
        from panda3d.core import PTA_float

        from .pbr import MAX_LIGHTS

        ranges = PTA_float.emptyArray(MAX_LIGHTS)
        for i in range(MAX_LIGHTS):  # emptyArray does not zero
            ranges[i] = 0.0
        for i, ln in enumerate(lights[:MAX_LIGHTS]):
            node = ln.node()
            d = float(node.getMaxDistance()) if hasattr(node, "getMaxDistance") else 0.0
            scale = abs(float(ln.getScale(self.scene).x))  # a mirrored pack: still a range
            ranges[i] = d * scale if math.isfinite(d) and d > 0 else 0.0
        self.scene.setShaderInput("light_range", ranges)
        self.scene.setShaderInput("num_lights", min(len(lights), MAX_LIGHTS))
        if self.lighting is not None:
            self.lighting.set_lights(lights, [ranges[i] for i in range(MAX_LIGHTS)],
                                     self.prop_pivots)

    def _set_sky(self, lighting: dict) -> dict:
        from .pbr import sh9, sky_settings

        s = sky_settings(lighting)
        for k, name in (("zenith", "sky_zenith"), ("horizon", "sky_horizon"),
                        ("ground", "sky_ground"), ("sun_dir", "sun_dir_world"),
                        ("sun_radiance", "sun_radiance")):
            self._shading_input(name, tuple(float(x) for x in s[k]))
        from panda3d.core import PTA_LVecBase3f

        coeffs = PTA_LVecBase3f.emptyArray(9)
        for i, c in enumerate(sh9(s)):
            coeffs[i] = c
        self._shading_input("sh_coeffs", coeffs)
        self.sky = s
        return s

    # ------------------------------------------------------------------ level

    def load_level(self, model: Any, lighting: dict | None = None) -> LevelReport:
        """Attach a loaded level (a NodePath in the contract frame); sanitize it, light it and
        make every texture resident at full resolution."""
        from panda3d.core import (
            BitMask32,
            DirectionalLight,
            LightLensNode,
            SequenceNode,
        )

        rep = LevelReport()
        if self.sun is not None:
            self.sun.removeNode()
            self.sun = None
        if self.level_np is not None:
            self.scene.clearLight()
            self.level_np.removeNode()
        model.reparentTo(self.scene)
        self.level_np = model
        for cam in model.findAllMatches("**/+Camera"):
            if cam.node().isOfType(LightLensNode.getClassType()):
                continue  # a directional or spot light is a Camera subclass (shadow lens)
            rep.removed.append(f"camera:{cam.getName()}")
            cam.removeNode()
        for anim in model.findAllMatches("**/+AnimBundleNode"):
            rep.removed.append(f"animation:{anim.getName()}")
            anim.removeNode()
        for seq in model.findAllMatches("**/+SequenceNode"):
            node = seq.node()
            assert isinstance(node, SequenceNode)
            node.pose(0)  # a flip-book that plays by itself: hold its first frame
            rep.removed.append(f"autoplay:{seq.getName()}")
        # pushable props: a pivot at the centre of each one's bounds, as Stage I built them, so
        # the recorded world-from-pivot transforms place them exactly
        self.prop_pivots = []
        for prop in model.findAllMatches("**/=dynamic"):
            lo, hi = prop.getTightBounds(self.scene)
            pivot = model.attachNewNode(f"pivot:{prop.getName()}")
            pivot.setPos(self.scene, (lo + hi) * 0.5)
            prop.wrtReparentTo(pivot)
            self.prop_pivots.append(pivot)
        self.prop_names = [p.getName().removeprefix("pivot:") for p in self.prop_pivots]
        rep.props = len(self.prop_pivots)
        from .embedded import is_collision_only

        for gnp in model.findAllMatches("**/+GeomNode"):
            if is_collision_only(gnp):  # custom collision (UCX_…) and invisible blockers
                rep.removed.append(f"collision_only:{gnp.getName()}")
                gnp.removeNode()
        for tag in ("autoplay", "animated"):
            for n in model.findAllMatches(f"**/={tag}"):
                rep.removed.append(f"{tag}:{n.getName()}")
                n.clearTag(tag)
        lit = lighting or {}
        # a fixed priority per light: the shader reads at most MAX_LIGHTS lights, in priority
        # order; fixed priorities keep the choice the same in every process. The sun (the first
        # directional light, or a default one along the preset's sun direction) comes first:
        # it is p3d_LightSource[0] and the only shadow caster.
        lights = [ln for ln in model.findAllMatches("**/+Light")
                  if not (ln.node().isAmbientLight()
                          if hasattr(ln.node(), "isAmbientLight") else False)]
        lights.sort(key=lambda ln: not ln.node().isOfType(DirectionalLight.getClassType()))
        if not lights or not lights[0].node().isOfType(DirectionalLight.getClassType()):
            sun = DirectionalLight("default_sun")
            c = lit.get("sun_color", (1.0, 0.96, 0.9))
            lux = float(lit.get("sun_lux", 3.0))
            sun.setColor((c[0] * lux, c[1] * lux, c[2] * lux, 1))
            sun_np = model.attachNewNode(sun)
            d = lit.get("sun_dir", (-0.4, -0.3, -0.85))
            from panda3d.core import Point3, Vec3

            up = Vec3(0, 1, 0) if abs(d[2]) > 0.99 * math.hypot(*d) else Vec3(0, 0, 1)
            sun_np.lookAt(Point3(*d), up)
            lights.insert(0, sun_np)
        for i, ln in enumerate(lights):
            ln.node().setPriority(len(lights) + 100 - i)
            self.scene.setLight(ln)
            rep.lights += 1
        self._set_light_ranges(lights)
        self._make_sun(lights[0])
        self._shading_input("shadow_light", 0)
        self.scene.setShaderInput("sun", self.sun)
        self._set_sky(lit)
        self.atlas.setClearColor((0, 0, 0, 1))
        _srgb_colour_textures(model)
        model.hide(BitMask32.bit(MASK_BIT) | BitMask32.bit(FP_MASK_BIT))
        # texture residency: upload everything now, at the file's full resolution
        texs = model.findAllTextures()
        rep.textures = texs.getNumTextures()
        for i in range(rep.textures):
            tex = texs.getTexture(i)
            ox, oy = tex.getOrigFileXSize(), tex.getOrigFileYSize()
            if (ox == 0 or tex.getXSize() == ox) and (oy == 0 or tex.getYSize() == oy):
                rep.textures_full_res += 1
        model.prepareScene(self.gsg)
        return rep

    def _make_sun(self, sun_np: Any) -> None:
        """The sun casts the shadows: an orthographic shadow map refitted around the character
        every frame (``fit_sun``), rendered with a depth-only shader, seeing the level and the
        first temporal copy of the character."""
        from panda3d.core import BitMask32, OrthographicLens, RenderState, Shader, ShaderAttrib

        from .pbr import SHADOW_FRAG, SHADOW_VERT

        sun_np.wrtReparentTo(self.scene)
        node = sun_np.node()
        fwd = sun_np.getQuat(self.scene).getForward()
        self.sun_dir = (fwd.x, fwd.y, fwd.z)
        size = int(self.look.shadow_map_size)
        node.setShadowCaster(True, size, size)
        lens = OrthographicLens()
        r = float(self.look.shadow_extent_m)
        lens.setFilmSize(2 * r, 2 * r)
        lens.setNearFar(1.0, 4 * r + 200.0)
        node.setLens(lens)
        node.setCameraMask(BitMask32.bit(0))
        shader = Shader.make(Shader.SL_GLSL, SHADOW_VERT, SHADOW_FRAG)
        node.setInitialState(RenderState.make(ShaderAttrib.make(shader), 100))
        self.sun = sun_np

    def fit_sun(self, target: tuple[float, float, float]) -> None:
        """Centre the sun's shadow frustum on ``target`` (the character), keeping its
        direction: the shadow map always covers the area around the character."""
        if self.sun is None:
            return
        d = self.sun_dir
        far = 2 * float(self.look.shadow_extent_m) + 100.0
        self.sun.setPos(self.scene, target[0] - d[0] * far, target[1] - d[1] * far,
                        target[2] - d[2] * far)
        from panda3d.core import Point3, Vec3

        up = Vec3(0, 1, 0) if abs(d[2]) > 0.99 else Vec3(0, 0, 1)
        self.sun.lookAt(self.scene, Point3(*target), up)

    # ------------------------------------------------------------------ character

    def load_character(self, model: Any, model_path: str, clip_files: dict[str, str],
                       yaw_correction_deg: float = 0.0) -> None:
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
        for k in range(self.T + 1):
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
        for t, sp in enumerate(samples):
            self._place_character(t, sp.character, mesh_dz)
            for view in VIEWS:
                for s in range(self.S):
                    self._place_camera(self.cams[(view, t, s)], sp.views[view], self.jitter[s])
        self._place_character(self.T, exact.character, mesh_dz)
        for view in VIEWS:
            self._place_camera(self.mask_cams[view], exact.views[view], (0.0, 0.0))
        self.fit_sun(exact.character.pos)
        if self.lighting is not None:
            self.lighting.before_frame()
        self.engine.renderFrame()
        img = _ram(self.out_tex, self.W * len(VIEWS), self.H)
        mask = _ram(self.mask_tex, self.mask_size[0] * len(VIEWS), self.mask_size[1])
        colors = {v: img[:, i * self.W:(i + 1) * self.W] for i, v in enumerate(VIEWS)}
        mw = self.mask_size[0]
        masks = {v: mask[:, i * mw:(i + 1) * mw, 0] > 127 for i, v in enumerate(VIEWS)}
        return colors, masks, self.placed(exact)

    def place_props(self, transforms: list[tuple[tuple[float, ...], tuple[float, ...]]]) -> None:
        """World-from-pivot (pos, quat w x y z) for each prop, in ``prop_names`` order."""
        from panda3d.core import LQuaternionf

        for pivot, (pos, q) in zip(self.prop_pivots, transforms, strict=True):
            pivot.setPosQuat(self.scene, pos, LQuaternionf(*q))

    def placed(self, exact: SamplePose) -> dict:
        """The transforms Panda3D holds for the exact pose (read back from the scene graph)."""
        ch = self.char_copies[self.T]
        p, q, s = ch.getPos(), ch.getQuat(), ch.getScale()
        quat = (q.getR(), q.getI(), q.getJ(), q.getK())
        out: dict[str, Any] = {"character": {"pos": (p.x, p.y, p.z), "quat": quat,
                                             "scale": (s.x, s.y, s.z)}}
        props = []
        for pivot in self.prop_pivots:
            pp, pq = pivot.getPos(self.scene), pivot.getQuat(self.scene)
            props.append(((pp.x, pp.y, pp.z), (pq.getR(), pq.getI(), pq.getJ(), pq.getK())))
        out["props"] = props
        for view, np_ in self.mask_cams.items():
            cp = np_.getPos()
            out[view] = (cp.x, cp.y, cp.z)
        del exact
        return out

    def meter(self, samples: list[SamplePose], exact: SamplePose, mesh_dz: float) -> np.ndarray:
        """Render one frame in meter mode: the resolve writes each pixel's log2 luminance
        (8-bit codes over 24 stops, all five views) instead of the tone-mapped colour."""
        for card in self.resolve_cards:
            card.setShaderInput("meter", 1)
        try:
            colors, _, _ = self.render(samples, exact, mesh_dz)
            return np.concatenate([colors[v][..., 0] for v in VIEWS], axis=1).copy()
        finally:
            for card in self.resolve_cards:
                card.setShaderInput("meter", 0)

    def warmup(self, frames: int) -> None:
        for _ in range(frames):
            self.engine.renderFrame()

    def close(self) -> None:
        self.engine.removeAllWindows()


def _ram(tex: Any, w: int, h: int) -> np.ndarray:
    data = tex.getRamImageAs("RGB")
    arr = np.frombuffer(memoryview(data), np.uint8)
    if arr.size != w * h * 3:
        raise RuntimeError(f"render: read back {arr.size} bytes, expected {w}x{h}x3")
    # GL rows are bottom-up. No copy here: getRamImageAs("RGB") converts from Panda3D's BGR
    # into a new buffer every frame, and each encoder makes its view contiguous itself
    return arr.reshape(h, w, 3)[::-1]


def _srgb_colour_textures(model: Any) -> None:
    """Colour (modulate, emission) textures of egg/obj/bam models are sRGB-encoded images
    loaded as plain RGB: mark them sRGB so the GPU decodes them to linear light for shading
    (glTF's are marked by panda3d-gltf already)."""
    from panda3d.core import Texture, TextureStage

    plain = {Texture.F_rgb: Texture.F_srgb, Texture.F_rgb8: Texture.F_srgb,
             Texture.F_rgba: Texture.F_srgb_alpha, Texture.F_rgba8: Texture.F_srgb_alpha}
    stages = model.findAllTextureStages()
    for i in range(stages.getNumTextureStages()):
        st = stages.getTextureStage(i)
        if st.getMode() not in (TextureStage.M_modulate, TextureStage.M_emission,
                                TextureStage.M_replace, TextureStage.M_decal):
            continue
        texs = model.findAllTextures(st)
        for k in range(texs.getNumTextures()):
            tex = texs.getTexture(k)
            if tex.getFormat() in plain:
                tex.setFormat(plain[tex.getFormat()])


def load_level_lighting(path: str) -> dict:
    """The wmforge lighting preset a sample level carries in its glTF scene extras."""
    if not path.lower().endswith((".glb", ".gltf")):
        return {}
    from ..core.gltf import read_gltf

    try:
        doc, _ = read_gltf(Path(path))
    except (OSError, ValueError):
        return {}
    scenes = doc.get("scenes") or [{}]
    return dict((scenes[doc.get("scene", 0)].get("extras") or {}).get("wmforge") or {})
