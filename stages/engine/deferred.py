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

from typing import Any

from .pbr import MAX_LIGHTS, PBR_FRAG, SKY_GLSL

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
uniform mat4 clip_to_world[64];  // per tile: its camera's inverse view-projection
uniform vec3 eye[64];            // per tile: its camera's position (world)
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
uniform vec3 sh_coeffs[9];
uniform float ibl_strength;
uniform float sky_strength;
@SKY@
const float PI = 3.141592653589793;
vec3 irradiance_sh(vec3 n) {
    return sh_coeffs[0] * 0.282095
        + sh_coeffs[1] * 0.488603 * n.y + sh_coeffs[2] * 0.488603 * n.z
        + sh_coeffs[3] * 0.488603 * n.x
        + sh_coeffs[4] * 1.092548 * n.x * n.y + sh_coeffs[5] * 1.092548 * n.y * n.z
        + sh_coeffs[6] * 0.315392 * (3.0 * n.z * n.z - 1.0)
        + sh_coeffs[7] * 1.092548 * n.x * n.z
        + sh_coeffs[8] * 0.546274 * (n.x * n.x - n.y * n.y);
}
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
        if (range > 0.0) {  // KHR_lights_punctual's window: falls smoothly to 0 at the range
            float q = dist / range;
            float w = clamp(1.0 - q * q * q * q, 0.0, 1.0);
            atten *= w * w;
        }
        float cut = light_spot[i].w;
        if (cut > 0.001) {
            float sc = dot(light_spot[i].xyz, -l);
            atten *= smoothstep(cut - 0.02, cut + 0.02, sc);
        }
        if (i == shadow_light) atten *= sun_shadow;
        vec3 h = normalize(l + v);
        float nl = clamp(dot(n, l), 0.0, 1.0);
        float nh = clamp(dot(n, h), 0.0, 1.0);
        float vh = clamp(dot(v, h), 0.0, 1.0);
        vec3 F = f0 + (1.0 - f0) * pow(1.0 - vh, 5.0);
        float a2 = a * a;
        float d = nh * nh * (a2 - 1.0) + 1.0;
        float D = a2 / (PI * d * d);
        float gv = nl * sqrt(nv * nv * (1.0 - a2) + a2);
        float gl = nv * sqrt(nl * nl * (1.0 - a2) + a2);
        float V = (gv + gl) > 0.0 ? 0.5 / (gv + gl) : 0.0;
        color += nl * lc * atten * ((1.0 - F) * diffuse / PI + F * D * V);
    }
    vec3 wr = normalize(reflect(-v, n));
    vec3 irr = max(irradiance_sh(n), 0.0);
    vec4 c0 = vec4(-1.0, -0.0275, -0.572, 0.022);   // Karis' analytic environment BRDF
    vec4 c1 = vec4(1.0, 0.0425, 1.04, -0.04);
    vec4 r4 = rough * c0 + c1;
    float a004 = min(r4.x * r4.x, exp2(-9.28 * nv)) * r4.x + r4.y;
    vec2 ab = vec2(-1.04, 1.04) * a004 + r4.zw;
    vec3 spec_env = rough > 0.75 ? irr / PI : mix(sky_radiance(wr), irr / PI, rough);
    color += ibl_strength * (diffuse * irr / PI + spec_env * (f0 * ab.x + ab.y));
    imageStore(radiance, p, vec4(color, 1.0));
}
""".replace("@MAX_LIGHTS@", str(MAX_LIGHTS)).replace("@SKY@", SKY_GLSL)


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
    import math

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
