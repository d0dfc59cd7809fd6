"""The same per-pixel shading as a fragment shader and as a compute shader (issue #20's speed
work): on GPUs whose graphics units are few (an H100/H200 runs pixel shaders on two of its
TPCs), how much faster is the shading when it runs as compute over the same pixels?

    python tests/benchmarks/bench_compute_vs_fragment.py [--size 10240x3600] [--frames 20]

Prints milliseconds per pass for: a fragment shader writing a constant, the shading as a
fragment shader over a full-screen quad, and the shading as a compute shader (8x8 groups) into
an image of the same size and format, and the checksum of both images (they must agree).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

SHADE = """
vec3 shade(vec2 px) {
    // a pixel's inputs made up from its position (same in both shaders): a normal, a view
    // vector, a roughness, four lights; then GGX/Smith/Schlick for each, and SH irradiance
    vec3 n = normalize(vec3(sin(px.x * 0.013), cos(px.y * 0.011), 1.3));
    vec3 v = normalize(vec3(0.2, -0.3, 1.0) + 0.1 * vec3(sin(px.y * 0.01), 0.0, 0.0));
    float rough = 0.2 + 0.7 * fract(px.x * 0.001 + px.y * 0.0007);
    float a = rough * rough, a2 = a * a;
    float nv = clamp(dot(n, v), 1e-4, 1.0);
    vec3 color = vec3(0.0);
    for (int i = 0; i < 4; ++i) {
        vec3 lp = vec3(float(i) * 3.0 - 4.0, 2.0, 5.0) - vec3(px * 0.001, 0.0);
        float dist = length(lp);
        vec3 l = lp / dist;
        float atten = 1.0 / (1.0 + 0.1 * dist * dist);
        vec3 h = normalize(l + v);
        float nl = clamp(dot(n, l), 0.0, 1.0), nh = clamp(dot(n, h), 0.0, 1.0);
        float vh = clamp(dot(v, h), 0.0, 1.0);
        vec3 F = vec3(0.04) + 0.96 * pow(1.0 - vh, 5.0);
        float d = nh * nh * (a2 - 1.0) + 1.0;
        float D = a2 / (3.14159 * d * d);
        float gv = nl * sqrt(nv * nv * (1.0 - a2) + a2);
        float gl = nv * sqrt(nl * nl * (1.0 - a2) + a2);
        float V = (gv + gl) > 0.0 ? 0.5 / (gv + gl) : 0.0;
        color += nl * atten * ((1.0 - F) * 0.3 + F * D * V);
    }
    color += 0.1 * vec3(0.5 + 0.3 * n.z + 0.1 * n.x * n.y, 0.4, 0.6 * n.y * n.z);
    return color;
}
"""

FS = """#version 330
out vec4 o;
uniform int mode;
""" + SHADE + """
void main() { o = mode == 0 ? vec4(0.5) : vec4(shade(gl_FragCoord.xy - 0.5), 1.0); }
"""

VS = """#version 330
uniform mat4 p3d_ModelViewProjectionMatrix;
in vec4 p3d_Vertex;
void main() { gl_Position = p3d_ModelViewProjectionMatrix * p3d_Vertex; }
"""

CS = """#version 430
layout(local_size_x = 8, local_size_y = 8) in;
layout(rgba16f) writeonly uniform image2D dst;
uniform ivec2 size;
""" + SHADE + """
void main() {
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) return;
    imageStore(dst, p, vec4(shade(vec2(p)), 1.0));
}
"""


def _pixels(tex) -> np.ndarray:
    dt = {2: np.float16, 4: np.float32}[tex.getComponentWidth()]
    return np.frombuffer(memoryview(tex.getRamImage()), dt).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="10240x3600")
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    from panda3d.core import loadPrcFileData

    loadPrcFileData("", "window-type none\nload-display p3headlessgl\naudio-library-name null\n"
                    "notify-level-display error\nsync-video 0\ntextures-power-2 none\n")
    from panda3d.core import (
        Camera,
        CardMaker,
        FrameBufferProperties,
        GraphicsEngine,
        GraphicsPipe,
        GraphicsPipeSelection,
        NodePath,
        OrthographicLens,
        Shader,
        ShaderAttrib,
        Texture,
        WindowProperties,
    )

    eng = GraphicsEngine.getGlobalPtr()
    pipe = GraphicsPipeSelection.getGlobalPtr().makeModulePipe("p3headlessgl")
    fbp = FrameBufferProperties()
    fbp.setRgbColor(True)
    fbp.setFloatColor(True)
    fbp.setRgbaBits(16, 16, 16, 16)
    flags = GraphicsPipe.BF_refuse_window
    host = eng.makeOutput(pipe, "host", -10, FrameBufferProperties(),
                          WindowProperties.size(16, 16), flags, None, None)
    buf = eng.makeOutput(pipe, "fs", 0, fbp, WindowProperties.size(w, h),
                         flags | GraphicsPipe.BF_refuse_parasite, host.getGsg(), host)
    gsg = buf.getGsg()
    fs_tex = Texture("fs")
    buf.addRenderTexture(fs_tex, buf.RTM_bind_or_copy, buf.RTP_color)
    root = NodePath("root")
    lens = OrthographicLens()
    lens.setFilmSize(1, 1)
    lens.setFilmOffset(0.5, 0.5)
    lens.setNearFar(-10, 10)
    cam = root.attachNewNode(Camera("cam", lens))
    cam.setP(-90)
    dr = buf.makeDisplayRegion()
    dr.setCamera(cam)
    cm = CardMaker("card")
    cm.setFrame(0, 1, 0, 1)
    card = root.attachNewNode(cm.generate())
    card.setP(-90)
    card.setShader(Shader.make(Shader.SL_GLSL, VS, FS))
    card.setShaderInput("mode", 0)
    cs_tex = Texture("cs")
    cs_tex.setup2dTexture(w, h, Texture.T_half_float, Texture.F_rgba16)
    cs_np = NodePath("cs")
    cs_np.setShader(Shader.makeCompute(Shader.SL_GLSL, CS))
    cs_np.setShaderInput("dst", cs_tex)
    cs_np.setShaderInput("size", (w, h))
    attrib = cs_np.getAttrib(ShaderAttrib)
    groups = ((w + 7) // 8, (h + 7) // 8, 1)
    probe = Texture("probe")  # a tiny read-back after the passes waits for the GPU
    buf.setActive(True)

    def fence() -> None:
        eng.extractTextureData(probe if probe.getXSize() > 1 else cs_tex, gsg)

    probe.setup2dTexture(1, 1, Texture.T_unsigned_byte, Texture.F_rgba8)
    out: dict[str, float] = {}
    for mode, label in ((0, "fs_const"), (1, "fs_shade")):
        card.setShaderInput("mode", mode)
        eng.renderFrame()
        eng.extractTextureData(fs_tex, gsg)
        t0 = time.perf_counter()
        for _ in range(a.frames):
            eng.renderFrame()
        eng.extractTextureData(fs_tex, gsg)
        out[label] = (time.perf_counter() - t0) / a.frames * 1e3
    fs_img = _pixels(fs_tex)
    buf.setActive(False)
    eng.dispatchCompute(groups, attrib, gsg)
    eng.extractTextureData(cs_tex, gsg)
    t0 = time.perf_counter()
    for _ in range(a.frames):
        eng.dispatchCompute(groups, attrib, gsg)
    eng.extractTextureData(cs_tex, gsg)
    out["cs_shade"] = (time.perf_counter() - t0) / a.frames * 1e3
    cs_img = _pixels(cs_tex)
    # fs_img is BGRA in Panda3D's RAM layout; compare the green channels, the same in both
    g_fs = fs_img.reshape(h, w, 4)[..., 1].astype(np.float32)
    g_cs = cs_img.reshape(h, w, 4)[..., 1].astype(np.float32)
    out["max_abs_diff"] = float(np.max(np.abs(g_fs - g_cs)))
    out.update(width=w, height=h, frames=a.frames,
               renderer=str(gsg.getDriverRenderer()))
    out["cs_speedup_over_fs"] = out["fs_shade"] / out["cs_shade"]
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
