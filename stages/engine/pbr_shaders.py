"""GLSL 330 sources of Stage II's look (``engine.pbr`` says what they do, why our own)."""

from __future__ import annotations

MAX_LIGHTS = 4  # the sun and three level lights (priority order)

PBR_VERT = """#version 330
uniform mat4 p3d_ProjectionMatrix;
uniform mat4 p3d_ModelViewMatrix;
uniform mat3 p3d_NormalMatrix;
uniform mat4 p3d_TextureMatrix;
// the sun (a NodePath input): only its shadow matrix is fetched, once per object and camera
uniform struct SunParameters { sampler2DShadow shadowMap; mat4 shadowViewMatrix; } sun;
in vec4 p3d_Vertex;
in vec4 p3d_Color;
in vec3 p3d_Normal;
in vec4 p3d_Tangent;
in vec2 p3d_MultiTexCoord0;
out vec3 v_view_position;
out vec4 v_color;
out vec2 v_texcoord;
out mat3 v_view_tbn;
out vec4 v_shadow_pos;
void main() {
    vec4 view_position = p3d_ModelViewMatrix * p3d_Vertex;
    v_view_position = view_position.xyz;
    v_color = p3d_Color;
    v_texcoord = (p3d_TextureMatrix * vec4(p3d_MultiTexCoord0, 0, 1)).xy;
    v_shadow_pos = sun.shadowViewMatrix * view_position;
    vec3 n = normalize(p3d_NormalMatrix * p3d_Normal);
    vec3 t = p3d_NormalMatrix * p3d_Tangent.xyz;
    t = length(t) > 1e-6 ? normalize(t - n * dot(n, t)) : vec3(0.0);
    vec3 b = cross(n, t) * (p3d_Tangent.w == 0.0 ? 1.0 : p3d_Tangent.w);
    v_view_tbn = mat3(t, b, n);
    gl_Position = p3d_ProjectionMatrix * view_position;
}
""".replace("@MAX_LIGHTS@", str(MAX_LIGHTS))

SKY_GLSL = """
uniform vec3 sky_zenith;
uniform vec3 sky_horizon;
uniform vec3 sky_ground;
uniform vec3 sun_dir_world;   // direction the sunlight travels (world, unit)
uniform vec3 sun_radiance;    // the sun disc's colour in the sky (linear)
vec3 sky_radiance(vec3 d) {
    float h = d.z;
    vec3 up = mix(sky_horizon, sky_zenith, pow(clamp(h, 0.0, 1.0), 0.45));
    vec3 down = mix(sky_horizon, sky_ground, pow(clamp(-h, 0.0, 1.0), 0.35));
    vec3 c = h >= 0.0 ? up : down;
    float cs = dot(d, -sun_dir_world);
    c += sun_radiance * (pow(max(cs, 0.0), 600.0) * 40.0 + pow(max(cs, 0.0), 8.0) * 0.25)
         * step(0.0, h + 0.02);
    return c;
}
"""

# GLSL shared by the forward shader (PBR_FRAG) and the deferred lighting pass (deferred.py)
SHADE_GLSL = """
uniform vec3 sh_coeffs[9];
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
// KHR_lights_punctual's window: falls smoothly to 0 at the range (range > 0)
float range_window(float dist, float range) {
    float q = dist / range;
    float w = clamp(1.0 - q * q * q * q, 0.0, 1.0);
    return w * w;
}
// one light's BRDF (GGX, Smith, Schlick) toward l: (diffuse + specular, n.l)
vec4 brdf(vec3 n, vec3 v, vec3 l, float nv, float a, vec3 f0, vec3 diffuse) {
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
    return vec4((1.0 - F) * diffuse / PI + F * D * V, nl);
}
// the sky's image-based light (world normal and reflection): diffuse through its SH
// irradiance, specular by sampling the sky along the reflection, widened toward the
// irradiance as roughness grows; Karis' analytic environment BRDF
vec3 sky_light(vec3 wn, vec3 wr, float nv, float rough, vec3 f0, vec3 diffuse) {
    vec3 irr = max(irradiance_sh(wn), 0.0);
    vec4 c0 = vec4(-1.0, -0.0275, -0.572, 0.022);
    vec4 c1 = vec4(1.0, 0.0425, 1.04, -0.04);
    vec4 r4 = rough * c0 + c1;
    float a004 = min(r4.x * r4.x, exp2(-9.28 * nv)) * r4.x + r4.y;
    vec2 ab = vec2(-1.04, 1.04) * a004 + r4.zw;
    vec3 spec_env = rough > 0.75 ? irr / PI : mix(sky_radiance(wr), irr / PI, rough);
    return diffuse * irr / PI + spec_env * (f0 * ab.x + ab.y);
}
"""

PBR_FRAG = """#version 330
#define MAX_LIGHTS @MAX_LIGHTS@
uniform struct p3d_MaterialParameters {
    vec4 baseColor; vec4 emission; float roughness; float metallic;
} p3d_Material;
uniform struct p3d_LightSourceParameters {
    vec4 position; vec4 diffuse; vec3 attenuation; vec3 spotDirection; float spotCosCutoff;
} p3d_LightSource[MAX_LIGHTS];
uniform struct SunParameters { sampler2DShadow shadowMap; mat4 shadowViewMatrix; } sun;
uniform mat4 p3d_ViewMatrix;
uniform vec4 p3d_ColorScale;
uniform vec4 p3d_TexAlphaOnly;
uniform sampler2D p3d_TextureModulate;
uniform sampler2D p3d_TextureSelector;
uniform sampler2D p3d_TextureNormal;
uniform sampler2D p3d_TextureEmission;
uniform float ibl_strength;
uniform float shadow_bias;
uniform float shadow_texel;
uniform int shadow_light;    // index of the shadow-casting sun among the lights (-1: none)
uniform int pcf_taps;        // soft-shadow taps per output pixel (1, 2, 4 or 8)
uniform vec2 tile_size_inv;  // the atlas: tiles of one view and sample each (1 / size, px),
uniform float tiles_per_row; // tiles_per_row wide, view-major (tile = view * nsamples + sample)
uniform float nsamples;      // samples per view (spatial x temporal)
uniform int num_lights;      // lights bound (at most MAX_LIGHTS)
uniform float light_range[MAX_LIGHTS];  // glTF range per light, m (0: unbounded)
@SKY@
@SHADE@
in vec3 v_view_position;
in vec4 v_color;
in vec2 v_texcoord;
in mat3 v_view_tbn;
in vec4 v_shadow_pos;
out vec4 o_color;
// a Poisson disc; each tap is a hardware 2x2 comparison
const vec2 PCF_TAPS[8] = vec2[](vec2(-0.326, -0.406), vec2(0.962, -0.195), vec2(-0.203, 0.621),
    vec2(0.473, -0.480), vec2(-0.840, -0.074), vec2(0.519, 0.767), vec2(0.185, -0.893),
    vec2(-0.696, 0.457));
float shadow_pcf(sampler2DShadow m, vec4 p) {
    vec3 c = p.xyz / p.w;
    // the pcf_taps taps of a pixel (1, 2, 4 or 8) are spread over its samples (the atlas tile
    // this fragment is in says which sample it is): each sample takes ceil(pcf_taps / samples)
    // of them, cycling through the pcf_taps, so the resolved pixel averages exactly those taps
    // while each sample pays for few (1 tap: every sample takes the same one, a hard edge)
    // (float arithmetic: integer division is slow on GPUs; the values are small integers)
    vec2 tc = floor(gl_FragCoord.xy * tile_size_inv);
    float tile = tc.y * tiles_per_row + tc.x;
    int k = int(tile - nsamples * floor((tile + 0.5) / nsamples));
    int n = clamp(pcf_taps, 1, 8);
    int per = max(1, int(ceil(float(n) / nsamples - 1e-4)));
    int first = k * per;
    int wrap = n - 1;  // n is a power of two: (i & wrap) is i mod n
    vec2 r = vec2(shadow_texel * 2.5);
    float z = c.z - shadow_bias;
    // the first tap outside any branch or loop, so that it is read with the material textures
    float s = texture(m, vec3(c.xy + PCF_TAPS[first & wrap] * r, z));
    for (int j = 1; j < per; ++j) {
        s += texture(m, vec3(c.xy + PCF_TAPS[(first + j) & wrap] * r, z));
    }
    bool outside = c.x < 0.0 || c.x > 1.0 || c.y < 0.0 || c.y > 1.0 || c.z > 1.0;
    return outside ? 1.0 : s / float(per);
}
void main() {
    // every texture read first and together, the sun's shadow tap too: on a GPU with few
    // graphics units (the H200's) this shader waits on memory, and reads issued together
    // overlap their latencies where reads inside branches and loops would queue one by one
    vec4 albedo = texture(p3d_TextureModulate, v_texcoord);
    vec4 mr = texture(p3d_TextureSelector, v_texcoord);
    vec3 nm = texture(p3d_TextureNormal, v_texcoord).rgb;
    float sun_shadow = shadow_light >= 0 ? shadow_pcf(sun.shadowMap, v_shadow_pos) : 1.0;
    vec4 base = p3d_Material.baseColor * v_color * p3d_ColorScale * (albedo + p3d_TexAlphaOnly);
    float metallic = clamp(p3d_Material.metallic * mr.b, 0.0, 1.0);
    float rough = clamp(p3d_Material.roughness * mr.g, 0.04, 1.0);
    float a = rough * rough;
    vec3 diffuse = base.rgb * (1.0 - metallic) * 0.96;
    vec3 f0 = mix(vec3(0.04), base.rgb, metallic);
    vec3 n = normalize(v_view_tbn[2]);
    // a normal map needs tangents; Panda3D binds a flat (white) one where a model has none
    if (dot(v_view_tbn[0], v_view_tbn[0]) > 0.5 && nm != vec3(1.0)) {
        vec2 xy = nm.rg * 2.0 - 1.0;
        vec3 tn = vec3(xy, sqrt(clamp(1.0 - dot(xy, xy), 0.0, 1.0)));
        n = normalize(v_view_tbn * tn);
    }
    vec3 v = normalize(-v_view_position);
    if (dot(n, v) < 0.0) n = -n;  // two-sided and back faces: light the side that is seen
    float nv = clamp(dot(n, v), 1e-4, 1.0);
    vec3 color = vec3(0.0);
    // a constant bound, unrolled: each light's parameters are then direct constant reads
#pragma optionNV(unroll all)
    for (int i = 0; i < MAX_LIGHTS; ++i) {
        if (i >= num_lights) break;
        vec3 lc = p3d_LightSource[i].diffuse.rgb;
        if (dot(lc, lc) < 1e-6) continue;
        vec3 lp = p3d_LightSource[i].position.xyz - v_view_position * p3d_LightSource[i].position.w;
        float dist = length(lp);
        float range = light_range[i];
        if (range > 0.0 && dist >= range) continue;  // beyond the light's glTF range: no light
        vec3 l = lp / max(dist, 1e-6);
        vec3 att = p3d_LightSource[i].attenuation;
        float atten = p3d_LightSource[i].position.w == 0.0 ? 1.0
            : 1.0 / max(att.x + att.y * dist + att.z * dist * dist, 1e-4);
        if (range > 0.0) atten *= range_window(dist, range);
        float cut = p3d_LightSource[i].spotCosCutoff;
        if (cut > 0.001) {
            float sc = dot(normalize(p3d_LightSource[i].spotDirection), -l);
            atten *= smoothstep(cut - 0.02, cut + 0.02, sc);
        }
        if (i == shadow_light) atten *= sun_shadow;
        vec4 b = brdf(n, v, l, nv, a, f0, diffuse);
        color += b.w * lc * atten * b.xyz;
    }
    // image-based light from the sky (in world space)
    mat3 to_world = transpose(mat3(p3d_ViewMatrix));  // view → world (rotation only)
    vec3 wn = normalize(to_world * n);
    vec3 wr = normalize(to_world * reflect(-v, n));
    color += ibl_strength * sky_light(wn, wr, nv, rough, f0, diffuse);
    if (dot(p3d_Material.emission.rgb, vec3(1.0)) > 0.0) {  // no fetch for the unlit
        color += p3d_Material.emission.rgb * texture(p3d_TextureEmission, v_texcoord).rgb;
    }
    o_color = vec4(color, base.a);
}
""".replace("@MAX_LIGHTS@", str(MAX_LIGHTS)).replace("@SKY@", SKY_GLSL).replace(
    "@SHADE@", SHADE_GLSL)

SKY_VERT = """#version 330
uniform mat4 p3d_ModelViewProjectionMatrix;
uniform mat4 p3d_ModelMatrix;
in vec4 p3d_Vertex;
out vec3 v_dir;
void main() {
    v_dir = (p3d_ModelMatrix * vec4(p3d_Vertex.xyz, 0.0)).xyz;
    gl_Position = p3d_ModelViewProjectionMatrix * p3d_Vertex;
}
"""

SKY_FRAG = """#version 330
@SKY@
uniform float sky_strength;
in vec3 v_dir;
out vec4 o_color;
void main() { o_color = vec4(sky_strength * sky_radiance(normalize(v_dir)), 1.0); }
""".replace("@SKY@", SKY_GLSL)

SHADOW_VERT = """#version 330
uniform mat4 p3d_ModelViewProjectionMatrix;
in vec4 p3d_Vertex;
in vec2 p3d_MultiTexCoord0;
out vec2 v_texcoord;
void main() {
    v_texcoord = p3d_MultiTexCoord0;
    gl_Position = p3d_ModelViewProjectionMatrix * p3d_Vertex;
}
"""

SHADOW_FRAG = """#version 330
uniform struct p3d_MaterialParameters { vec4 baseColor; } p3d_Material;
uniform sampler2D p3d_TextureModulate;
in vec2 v_texcoord;
out vec4 o_color;
void main() {
    float alpha = p3d_Material.baseColor.a * texture(p3d_TextureModulate, v_texcoord).a;
    if (alpha < 0.5) discard;  // cut-out foliage casts its shape
    o_color = vec4(1.0);
}
"""

# the resolve pass: mean of the samples in linear light → exposure → tone map → sRGB. In meter
# mode it writes each pixel's log2 luminance instead (exposure metering, 8 bits over 24 stops)
# full-screen passes (the resolve, the yuv420p packing of gl_yuv): a card under an
# orthographic camera
RESOLVE_VERT = """#version 330
uniform mat4 p3d_ModelViewProjectionMatrix;
in vec4 p3d_Vertex;
void main() { gl_Position = p3d_ModelViewProjectionMatrix * p3d_Vertex; }
"""

RESOLVE_FRAG = """#version 330
uniform sampler2D atlas;
uniform ivec2 origins[64];
uniform int nsamples;
uniform ivec2 region;
uniform float exposure;   // 2^EV: auto exposure x the level's exposure_compensation
uniform int tone_map;     // 0: clamp, 1: ACES filmic (Narkowicz's fit)
uniform int meter;
out vec4 color;
vec3 to_srgb(vec3 c) { return mix(c * 12.92, 1.055 * pow(c, vec3(1.0 / 2.4)) - 0.055,
                                  step(0.0031308, c)); }
vec3 aces(vec3 x) {
    return clamp((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14), 0.0, 1.0);
}
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy) - region;
    vec3 acc = vec3(0.0);
    for (int k = 0; k < nsamples; ++k) {
        acc += max(texelFetch(atlas, origins[k] + p, 0).rgb, vec3(0.0));
    }
    vec3 lin = acc / float(nsamples);
    if (meter == 1) {
        float lum = dot(lin, vec3(0.2126, 0.7152, 0.0722));
        float code = clamp((log2(max(lum, 1e-7)) + 16.0) / 24.0, 0.0, 1.0);
        color = vec4(vec3(code), 1.0);
        return;
    }
    lin *= exposure;
    vec3 mapped = tone_map == 1 ? aces(lin) : clamp(lin, 0.0, 1.0);
    color = vec4(to_srgb(mapped), 1.0);
}
"""
