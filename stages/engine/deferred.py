"""Deferred shading for Stage II (issue #20's speed work): the same look as the forward shader
of :mod:`stages.engine.pbr`, split in two passes.

Why: an H100/H200 runs pixel shaders on two of its TPCs only, while compute shaders run on all
of its SMs. Measured on the lent H200 (``tests/benchmarks/bench_compute_vs_fragment.py``, the
same per-pixel BRDF over 10240x3600 pixels): 22.0 ms as a fragment shader, 3.0 ms as a compute
shader. So the fragment shader does only what needs the rasterizer — the material's texture
reads, the normal map, the sun's shadow tap — and writes a small G-buffer; a compute shader
then lights every pixel of the atlas (lights, image-based light, the sky where nothing was
drawn) and the resolve pass runs unchanged.

G-buffer (per atlas pixel, one per view and sample as before):

- colour (R11G11B10F, the atlas the resolve reads): the material's emission; the compute pass
  adds the light to it in place (``imageLoad``/``imageStore``);
- aux RGBA16F: the base colour, metallic;
- aux RGBA16F: the world normal (octahedral, already turned toward the camera), roughness, the
  sun's shadow factor;
- depth (32-bit float): the compute pass rebuilds each pixel's world position from it and its tile's
  inverse view-projection (a sky pixel is one where nothing was drawn: depth 1).

Differences from the forward shader: alpha below 0.5 is cut out (as the shadow pass does)
instead of blended; the sky is seen along each pixel's exact view ray (the forward pass draws a
dome centred on the world origin).
"""

from __future__ import annotations

import math
from typing import Any

from .pbr import MAX_LIGHTS, PBR_FRAG, SHADE_GLSL, SKY_GLSL

# the forward fragment shader with its lighting replaced by the G-buffer writes
_GBUF_HEAD, _rest = PBR_FRAG.split("void main() {", 1)
GBUF_FRAG = _GBUF_HEAD.replace(
    "out vec4 o_color;",
    "layout(location = 0) out vec4 o_color;   // emission (linear light)\n"
    "layout(location = 1) out vec4 o_albedo;  // base colour, metallic\n"
    "layout(location = 2) out vec4 o_normal;  // octahedral world normal, roughness, shadow\n"
) + """
vec2 oct_encode(vec3 n) {
    n /= abs(n.x) + abs(n.y) + abs(n.z);
    vec2 s = vec2(n.x >= 0.0 ? 1.0 : -1.0, n.y >= 0.0 ? 1.0 : -1.0);
    return n.z >= 0.0 ? n.xy : (1.0 - abs(n.yx)) * s;
}
void main() {
    vec4 albedo = texture(p3d_TextureModulate, v_texcoord);
    vec4 mr = texture(p3d_TextureSelector, v_texcoord);
    vec3 nm = texture(p3d_TextureNormal, v_texcoord).rgb;
    float sun_shadow = shadow_light >= 0 ? shadow_pcf(sun.shadowMap, v_shadow_pos) : 1.0;
    vec4 base = p3d_Material.baseColor * v_color * p3d_ColorScale * (albedo + p3d_TexAlphaOnly);
    if (base.a < 0.5) discard;  // cut-out (a G-buffer holds one surface a pixel)
    float metallic = clamp(p3d_Material.metallic * mr.b, 0.0, 1.0);
    float rough = clamp(p3d_Material.roughness * mr.g, 0.04, 1.0);
    vec3 n = normalize(v_view_tbn[2]);
    if (dot(v_view_tbn[0], v_view_tbn[0]) > 0.5 && nm != vec3(1.0)) {
        vec2 xy = nm.rg * 2.0 - 1.0;
        vec3 tn = vec3(xy, sqrt(clamp(1.0 - dot(xy, xy), 0.0, 1.0)));
        n = normalize(v_view_tbn * tn);
    }
    if (dot(n, -v_view_position) < 0.0) n = -n;  // two-sided: light the side that is seen
    vec3 wn = normalize(transpose(mat3(p3d_ViewMatrix)) * n);  // view → world (rotation)
    vec3 emission = vec3(0.0);
    if (dot(p3d_Material.emission.rgb, vec3(1.0)) > 0.0) {  // no fetch for the unlit
        emission = p3d_Material.emission.rgb * texture(p3d_TextureEmission, v_texcoord).rgb;
    }
    o_color = vec4(emission, 1.0);
    o_albedo = vec4(base.rgb, metallic);
    o_normal = vec4(oct_encode(wn), rough, sun_shadow);
}
"""

LIGHT_CS = """#version 430
#define MAX_LIGHTS @MAX_LIGHTS@
layout(local_size_x = 8, local_size_y = 8) in;
layout(r11f_g11f_b10f) uniform image2D radiance;  // the atlas: emission in, lit colour out
uniform sampler2D gb_albedo;
uniform sampler2D gb_normal;
uniform sampler2D gb_depth;
uniform mat4 clip_to_world[@TILES@];  // per tile: its camera's inverse view-projection
uniform vec3 eye[@TILES@];            // per tile: its camera's position (world)
uniform ivec2 tile_size;
uniform int tiles_per_row;
uniform int ntiles;
uniform int num_lights;
uniform int shadow_light;
uniform vec4 light_vec[MAX_LIGHTS];   // w 0: direction toward the light; w 1: its position
uniform vec3 light_color[MAX_LIGHTS];
uniform vec3 light_att[MAX_LIGHTS];   // constant, linear, quadratic
uniform vec4 light_spot[MAX_LIGHTS];  // spot direction, cos cutoff (0: not a spot)
uniform float light_range[MAX_LIGHTS];
uniform float ibl_strength;
uniform float sky_strength;
@SKY@
@SHADE@
vec3 oct_decode(vec2 e) {
    vec3 n = vec3(e, 1.0 - abs(e.x) - abs(e.y));
    if (n.z < 0.0) {
        vec2 s = vec2(n.x >= 0.0 ? 1.0 : -1.0, n.y >= 0.0 ? 1.0 : -1.0);
        n.xy = (1.0 - abs(n.yx)) * s;
    }
    return normalize(n);
}
void main() {
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    ivec2 tc = p / tile_size;
    int tile = tc.y * tiles_per_row + tc.x;
    if (tc.x >= tiles_per_row || tile >= ntiles) return;
    vec2 ndc = (vec2(p - tc * tile_size) + 0.5) / vec2(tile_size) * 2.0 - 1.0;
    float depth = texelFetch(gb_depth, p, 0).r;
    mat4 inv = clip_to_world[tile];
    vec3 e = eye[tile];
    if (depth >= 1.0) {  // nothing drawn: the sky along this pixel's view ray
        vec4 f = inv * vec4(ndc, 1.0, 1.0);
        vec3 d = normalize(f.xyz / f.w - e);
        imageStore(radiance, p, vec4(sky_strength * sky_radiance(d), 1.0));
        return;
    }
    vec4 w4 = inv * vec4(ndc, depth * 2.0 - 1.0, 1.0);
    vec3 pos = w4.xyz / w4.w;
    vec4 ga = texelFetch(gb_albedo, p, 0);
    vec4 gn = texelFetch(gb_normal, p, 0);
    vec3 base = ga.rgb;
    float metallic = ga.a;
    float rough = gn.z;
    float sun_shadow = gn.w;
    vec3 n = oct_decode(gn.xy);
    float a = rough * rough;
    vec3 diffuse = base * (1.0 - metallic) * 0.96;
    vec3 f0 = mix(vec3(0.04), base, metallic);
    vec3 v = normalize(e - pos);
    float nv = clamp(dot(n, v), 1e-4, 1.0);
    vec3 color = imageLoad(radiance, p).rgb;  // the emission
    for (int i = 0; i < MAX_LIGHTS; ++i) {
        if (i >= num_lights) break;
        vec3 lc = light_color[i];
        if (dot(lc, lc) < 1e-6) continue;
        vec4 lv = light_vec[i];
        vec3 lp = lv.xyz - pos * lv.w;
        float dist = length(lp);
        float range = light_range[i];
        if (range > 0.0 && dist >= range) continue;
        vec3 l = lp / max(dist, 1e-6);
        vec3 att = light_att[i];
        float atten = lv.w == 0.0 ? 1.0
            : 1.0 / max(att.x + att.y * dist + att.z * dist * dist, 1e-4);
        if (range > 0.0) atten *= range_window(dist, range);
        float cut = light_spot[i].w;
        if (cut > 0.001) {
            float sc = dot(light_spot[i].xyz, -l);
            atten *= smoothstep(cut - 0.02, cut + 0.02, sc);
        }
        if (i == shadow_light) atten *= sun_shadow;
        vec4 b = brdf(n, v, l, nv, a, f0, diffuse);
        color += b.w * lc * atten * b.xyz;
    }
    color += ibl_strength * sky_light(n, normalize(reflect(-v, n)), nv, rough, f0, diffuse);
    imageStore(radiance, p, vec4(color, 1.0));
}
""".replace("@MAX_LIGHTS@", str(MAX_LIGHTS)).replace("@SKY@", SKY_GLSL).replace(
    "@SHADE@", SHADE_GLSL)


def add_gbuffer(atlas: Any) -> dict[str, Any]:
    """The G-buffer's planes as textures of the atlas buffer (whose properties asked for two
    aux RGBA16F planes and a float depth; Panda3D gives an aux_rgba plane the colour's format,
    here one without alpha, hence RGBA16F for both)."""
    from panda3d.core import Texture

    out = {}
    for name, plane in (("gb_albedo", atlas.RTP_aux_hrgba_0),
                        ("gb_normal", atlas.RTP_aux_hrgba_1), ("gb_depth", atlas.RTP_depth)):
        tex = Texture(name)
        atlas.addRenderTexture(tex, atlas.RTM_bind_or_copy, plane)
        out[name] = tex
    return out


class LightingPass:
    """The deferred lighting compute pass of a :class:`~.render_targets.RenderTargets`, in a
    buffer of its own drawn after the atlas (sort 0) and the mask (5) and before the resolve
    (10). Its own buffer, not a node in the resolve's scene: Panda3D 1.10 marks an image
    written by a shader for a memory barrier only when that shader's bindings are undone, which
    happens at the end of a buffer's frame (then it issues glMemoryBarrier before the resolve's
    texelFetch and before the next frame's atlas draw); inside one buffer it would not."""

    def __init__(self, r: Any, aw: int, ah: int):
        from panda3d.core import (
            Camera,
            ComputeNode,
            FrameBufferProperties,
            GraphicsPipe,
            NodePath,
            OmniBoundingVolume,
            Shader,
            ShaderInput,
            WindowProperties,
        )

        from ..core.trajectory import VIEWS

        self.r = r
        fbp = FrameBufferProperties()
        fbp.setRgbColor(True)
        fbp.setRgbaBits(8, 8, 8, 8)
        self.buf = r.engine.makeOutput(r.pipe, "lighting", 7, fbp, WindowProperties.size(16, 16),
                                       GraphicsPipe.BF_refuse_window, r.gsg, r.atlas)
        if self.buf is None:
            raise RuntimeError("render: could not create the deferred lighting buffer")
        self.buf.setClearColorActive(False)
        self.buf.setClearDepthActive(False)
        root = NodePath("lighting")
        self.buf.makeDisplayRegion().setCamera(root.attachNewNode(Camera("lighting_cam")))
        node = ComputeNode("deferred_lighting")
        node.addDispatch((aw + 7) // 8, (ah + 7) // 8, 1)
        node.setBounds(OmniBoundingVolume())
        node.setFinal(True)
        self.np = root.attachNewNode(node)
        # one matrix and eye per atlas tile (5 views x spatial x temporal samples; 80 at the
        # production 720p x 8 x 2): arrays of exactly that size
        self.ntiles = int(r.N * len(VIEWS))
        self.np.setShader(Shader.makeCompute(
            Shader.SL_GLSL, LIGHT_CS.replace("@TILES@", str(self.ntiles))))
        self.np.setShaderInput(ShaderInput("radiance", r.atlas_tex, True, True, -1, 0))
        for name, tex in r.gbuf.items():
            self.np.setShaderInput(name, tex)
        self.np.setShaderInput("tile_size", (r.W, r.H))
        self.np.setShaderInput("tiles_per_row", int(r.tiles_per_row))
        self.np.setShaderInput("ntiles", self.ntiles)
        self.np.setShaderInput("ibl_strength", float(r.look.ibl_strength))
        self.np.setShaderInput("sky_strength", 1.0)
        self.np.setShaderInput("shadow_light", -1)
        # (view, temporal, spatial) camera of each atlas tile, in tile order
        self.tile_cams = [r.cams[(view, t, s)] for view in VIEWS for t in range(r.T)
                          for s in range(r.S)]
        self.lights: list[Any] = []
        self.ranges: list[float] = []
        self.lights_move = False
        self.set_lights([], [], [])
        self.set_tile_cameras()

    def set_input(self, name: str, value: Any) -> None:
        self.np.setShaderInput(name, value)

    def set_lights(self, lights: list[Any], ranges: list[float], pivots: list[Any]) -> None:
        """The lights in world space (the forward shader's, same order); refreshed every frame
        when one of them hangs under a pushable prop's pivot (it moves with the prop)."""
        self.lights, self.ranges = list(lights), list(ranges)
        self.lights_move = any(p.isAncestorOf(ln) for p in pivots for ln in self.lights)
        self._apply_lights()

    def _apply_lights(self) -> None:
        for k, v in light_inputs(self.lights, self.r.scene, self.ranges).items():
            self.np.setShaderInput(k, v)

    def set_tile_cameras(self) -> None:
        """Each atlas tile's clip → world matrix and eye position, as its camera is placed for
        this frame (jitter included)."""
        from panda3d.core import LMatrix4f, PTA_LMatrix4f, PTA_LVecBase3f

        inv = PTA_LMatrix4f.emptyArray(self.ntiles)
        eye = PTA_LVecBase3f.emptyArray(self.ntiles)
        scene = self.r.scene
        for tile, cam in enumerate(self.tile_cams):
            m = LMatrix4f(cam.getMat(scene))
            m.invertInPlace()
            m = m * cam.node().getLens().getProjectionMat()
            m.invertInPlace()
            inv[tile] = m
            p = cam.getPos(scene)
            eye[tile] = (p.x, p.y, p.z)
        self.np.setShaderInput("clip_to_world", inv)
        self.np.setShaderInput("eye", eye)

    def before_frame(self) -> None:
        self.set_tile_cameras()
        if self.lights_move:
            self._apply_lights()


def light_inputs(lights: list[Any], scene: Any, ranges: list[float]) -> dict[str, Any]:
    """The compute pass's light uniforms (world space) for the lights the forward shader would
    bind, in the same (priority) order."""
    from panda3d.core import (
        PTA_float,
        PTA_LVecBase3f,
        PTA_LVecBase4f,
    )

    vec = PTA_LVecBase4f.emptyArray(MAX_LIGHTS)
    col = PTA_LVecBase3f.emptyArray(MAX_LIGHTS)
    att = PTA_LVecBase3f.emptyArray(MAX_LIGHTS)
    spot = PTA_LVecBase4f.emptyArray(MAX_LIGHTS)
    rng = PTA_float.emptyArray(MAX_LIGHTS)
    for i in range(MAX_LIGHTS):  # emptyArray does not zero: every slot set
        vec[i] = (0.0, 0.0, 0.0, 0.0)
        col[i] = (0.0, 0.0, 0.0)
        att[i] = (1.0, 0.0, 0.0)
        spot[i] = (0.0, 0.0, 0.0, 0.0)
        rng[i] = 0.0
    for i, ln in enumerate(lights[:MAX_LIGHTS]):
        node = ln.node()
        c = node.getColor()
        col[i] = (c[0], c[1], c[2])
        fwd = ln.getQuat(scene).getForward()
        fwd.normalize()
        if node.isOfType(_cls("DirectionalLight")):
            vec[i] = (-fwd.x, -fwd.y, -fwd.z, 0.0)
            att[i] = (1.0, 0.0, 0.0)
        else:
            p = ln.getPos(scene)
            vec[i] = (p.x, p.y, p.z, 1.0)
            a = node.getAttenuation()
            att[i] = (a[0], a[1], a[2])
        if node.isOfType(_cls("Spotlight")):
            fov = node.getLens().getHfov()
            spot[i] = (fwd.x, fwd.y, fwd.z, math.cos(math.radians(fov * 0.5)))
        rng[i] = ranges[i] if i < len(ranges) else 0.0
    return {"light_vec": vec, "light_color": col, "light_att": att, "light_spot": spot,
            "light_range": rng, "num_lights": min(len(lights), MAX_LIGHTS)}


def _cls(name: str) -> Any:
    import panda3d.core as pc

    return getattr(pc, name).getClassType()
