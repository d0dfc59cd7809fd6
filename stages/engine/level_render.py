"""Stage II's scene: the look's shading on it (the PBR shader, a fallback material, the sky
dome), and the level it renders — loaded, sanitised (cameras, animations, autoplay and
collision-only nodes out; pushable props on pivots), lit (a fixed light priority, the sun as
the one shadow caster, refitted around the character every frame) and made resident.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .scene_targets import FP_MASK_BIT, MASK_BIT, SceneTargets


@dataclass
class LevelReport:
    removed: list[str] = field(default_factory=list)
    textures: int = 0
    textures_full_res: int = 0
    lights: int = 0
    props: int = 0


class LevelScene:
    """The scene of a :class:`~.scene_targets.SceneTargets` (GL or compute): the look's
    shading on it and the level loaded into it, with its lights, sun and sky."""

    def __init__(self, targets: SceneTargets):
        self.t = targets
        self.scene = targets.scene
        self.level_np: Any = None
        self.prop_pivots: list[Any] = []
        self.prop_names: list[str] = []
        self.sun: Any = None
        self.sky_np: Any = None
        self._setup_shading()

    def _shading_input(self, name: str, value: Any) -> None:
        """A shader input of the look: on the scene (forward or G-buffer shader) and on the
        deferred lighting pass."""
        self.scene.setShaderInput(name, value)
        if self.t.lighting is not None:
            self.t.lighting.set_input(name, value)

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
                                      GBUF_FRAG if self.t.deferred else PBR_FRAG)
        self.scene.setAttrib(ShaderAttrib.make(self.pbr_shader))
        fallback = Material("wmforge-fallback")
        fallback.setBaseColor((1, 1, 1, 1))
        fallback.setRoughness(0.8)
        fallback.setMetallic(0.0)
        self.scene.setMaterial(fallback)
        self.scene.setShaderInput("ibl_strength", float(self.t.look.ibl_strength))
        self.scene.setShaderInput("shadow_bias", 0.0015)
        self.scene.setShaderInput("shadow_texel", 1.0 / self.t.look.shadow_map_size)
        self.scene.setShaderInput("shadow_light", -1)
        self.scene.setShaderInput("pcf_taps", int(self.t.look.shadow_pcf_taps))
        # (not "inv_…": Panda3D reads that prefix as "the inverse of input …" and logs an
        # error for every shader, though it binds the vector all the same)
        self.scene.setShaderInput("tile_size_inv", (1.0 / self.t.W, 1.0 / self.t.H))
        self.scene.setShaderInput("tiles_per_row", float(self.t.tiles_per_row))
        self.scene.setShaderInput("nsamples", float(self.t.N))
        self._set_light_ranges([])
        from panda3d.core import DirectionalLight

        self._no_sun = NodePath(DirectionalLight("no_sun"))  # until a level brings its sun
        self.scene.setShaderInput("sun", self._no_sun)
        sky = NodePath(sphere(self.t.far * 0.8))
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
        if self.t.deferred:  # the lighting pass draws the sky where nothing else was drawn
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
        if self.t.lighting is not None:
            self.t.lighting.set_lights(lights, [ranges[i] for i in range(MAX_LIGHTS)],
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
        from .models import is_collision_only

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
        if self.t.atlas is not None:  # GL (the compute backend has no atlas)
            self.t.atlas.setClearColor((0, 0, 0, 1))
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
        if self.t.gsg is not None:  # GL; the compute backend reads the textures from RAM
            model.prepareScene(self.t.gsg)
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
        size = int(self.t.look.shadow_map_size)
        node.setShadowCaster(True, size, size)
        lens = OrthographicLens()
        r = float(self.t.look.shadow_extent_m)
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
        far = 2 * float(self.t.look.shadow_extent_m) + 100.0
        self.sun.setPos(self.scene, target[0] - d[0] * far, target[1] - d[1] * far,
                        target[2] - d[2] * far)
        from panda3d.core import Point3, Vec3

        up = Vec3(0, 1, 0) if abs(d[2]) > 0.99 else Vec3(0, 0, 1)
        self.sun.lookAt(self.scene, Point3(*target), up)


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
