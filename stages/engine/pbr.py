"""Stage II's look (paper §7.1): physically based shading, a sun with soft shadows that follow
the character, a procedural sky that also lights the scene (image-based diffuse from its
spherical harmonics, specular from the sky itself), and — in the resolve pass — exposure and a
filmic tone map applied to the linear-light mean of the samples, then the sRGB encode.

Shaders of our own (GLSL 330) rather than panda3d-simplepbr's pipeline: simplepbr renders one
camera into one window through a FilterManager and passes a single camera position as a shader
input, while Stage II renders every (view, sample) camera of a frame into one atlas in a single
``renderFrame``; our shader reads each camera's pose from ``p3d_ViewMatrixInverse`` instead. The
BRDF is the same one simplepbr and the Khronos glTF sample viewer use (GGX, Smith, Schlick).

Panda3D 1.10 binds a model's textures by their stage mode: ``p3d_TextureModulate`` (base colour),
``p3d_TextureSelector`` (metallic-roughness, as panda3d-gltf loads it), ``p3d_TextureNormal``,
``p3d_TextureEmission`` (defaults when a model has none: white, flat normal, black).

Material mapping: glTF metallic-roughness (base colour, metal-rough, normal, emissive textures,
factors) as panda3d-gltf loads it; egg/obj materials through Panda3D's Material (diffuse → base
colour, default roughness 0.8, metallic 0) and their colour textures read as sRGB. glTF occlusion
textures are not loaded by panda3d-gltf and are not used.

The GLSL sources are data of their own (``engine.pbr_shaders``); this module holds the CPU side:
sky presets and their spherical harmonics, the sky dome, exposure from the meter pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

# the GLSL sources live in pbr_shaders and stay importable from here (level_render, deferred,
# the compute backend and the look benchmark read them as pbr.<NAME>)
from .pbr_shaders import (
    MAX_LIGHTS,
    PBR_FRAG,
    PBR_VERT,
    RESOLVE_FRAG,
    SHADE_GLSL,
    SHADOW_FRAG,
    SHADOW_VERT,
    SKY_FRAG,
    SKY_GLSL,
    SKY_VERT,
)

__all__ = ["MAX_LIGHTS", "PBR_FRAG", "PBR_VERT", "RESOLVE_FRAG", "SHADE_GLSL", "SHADOW_FRAG",
           "SHADOW_VERT", "SKY_FRAG", "SKY_GLSL", "SKY_VERT", "SKY_PRESETS",
           "exposure_from_meter", "sh9", "sky_radiance", "sky_settings", "sphere"]

# sky presets by the level's lighting preset (linear radiance); a level without a preset is day
SKY_PRESETS: dict[str, dict[str, Sequence[float]]] = {
    "day": {"zenith": (0.18, 0.36, 0.80), "horizon": (0.62, 0.74, 0.90),
            "ground": (0.22, 0.20, 0.18)},
    "dusk": {"zenith": (0.10, 0.12, 0.30), "horizon": (0.95, 0.52, 0.30),
             "ground": (0.12, 0.09, 0.08)},
    "night": {"zenith": (0.004, 0.006, 0.018), "horizon": (0.02, 0.025, 0.05),
              "ground": (0.01, 0.01, 0.012)},
    "interior": {"zenith": (0.05, 0.05, 0.055), "horizon": (0.06, 0.058, 0.055),
                 "ground": (0.03, 0.028, 0.025)},
}


def sky_settings(lighting: dict) -> dict:
    """Zenith/horizon/ground colours, sun direction and disc colour for a level's preset."""
    preset = str(lighting.get("lighting") or lighting.get("preset") or "day")
    sky = dict(SKY_PRESETS.get(preset, SKY_PRESETS["day"]))
    d = np.asarray(lighting.get("sun_dir", (-0.4, -0.3, -0.85)), float)
    d = d / max(float(np.linalg.norm(d)), 1e-9)
    sun = np.asarray(lighting.get("sun_color", (1.0, 0.96, 0.9)), float)
    strength = 0.0 if preset in ("interior", "night") else 1.0
    return {"preset": preset, "zenith": tuple(sky["zenith"]), "horizon": tuple(sky["horizon"]),
            "ground": tuple(sky["ground"]), "sun_dir": tuple(float(x) for x in d),
            "sun_radiance": tuple(float(x) * strength for x in sun)}


def sky_radiance(dirs: np.ndarray, s: dict) -> np.ndarray:
    """The same sky as SKY_GLSL, for (N, 3) unit directions (numpy; used for its SH)."""
    h = dirs[:, 2:3]
    zen, hor, gro = (np.asarray(s[k], float) for k in ("zenith", "horizon", "ground"))
    up = hor + (zen - hor) * np.clip(h, 0, 1) ** 0.45
    down = hor + (gro - hor) * np.clip(-h, 0, 1) ** 0.35
    c = np.where(h >= 0, up, down)
    cs = np.clip(dirs @ -np.asarray(s["sun_dir"], float), 0, None)[:, None]
    c = c + np.asarray(s["sun_radiance"], float) * (cs ** 600 * 40 + cs ** 8 * 0.25) * (
        h + 0.02 >= 0)
    return c


def sh9(s: dict, n: int = 4096) -> list[tuple[float, float, float]]:
    """Irradiance SH coefficients (cosine lobe convolved, Ramamoorthi & Hanrahan) of the sky,
    from a Fibonacci sphere of ``n`` directions: deterministic."""
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    r = np.sqrt(1 - z * z)
    phi = i * math.pi * (3 - math.sqrt(5))
    d = np.stack([r * np.cos(phi), r * np.sin(phi), z], 1)
    L = sky_radiance(d, s)
    x, y, zz = d[:, 0], d[:, 1], d[:, 2]
    basis = np.stack([0.282095 * np.ones(n), 0.488603 * y, 0.488603 * zz, 0.488603 * x,
                      1.092548 * x * y, 1.092548 * y * zz, 0.315392 * (3 * zz * zz - 1),
                      1.092548 * x * zz, 0.546274 * (x * x - y * y)], 1)
    coef = (basis.T @ L) * (4 * math.pi / n)
    band = np.array([math.pi] + [2 * math.pi / 3] * 3 + [math.pi / 4] * 5)
    return [(float(r[0]), float(r[1]), float(r[2])) for r in coef * band[:, None]]


def sphere(radius: float, rings: int = 16, segments: int = 32) -> Any:
    """An inside-out UV sphere GeomNode (the sky dome)."""
    from panda3d.core import (
        Geom,
        GeomNode,
        GeomTriangles,
        GeomVertexData,
        GeomVertexFormat,
        GeomVertexWriter,
    )

    vdata = GeomVertexData("sky", GeomVertexFormat.getV3(), Geom.UH_static)
    w = GeomVertexWriter(vdata, "vertex")
    for i in range(rings + 1):
        th = math.pi * i / rings
        for j in range(segments + 1):
            ph = 2 * math.pi * j / segments
            w.addData3(radius * math.sin(th) * math.cos(ph), radius * math.sin(th) * math.sin(ph),
                       radius * math.cos(th))
    tris = GeomTriangles(Geom.UH_static)
    for i in range(rings):
        for j in range(segments):
            a, b = i * (segments + 1) + j, (i + 1) * (segments + 1) + j
            tris.addVertices(a, a + 1, b)  # wound to face inward
            tris.addVertices(a + 1, b + 1, b)
    geom = Geom(vdata)
    geom.addPrimitive(tris)
    node = GeomNode("sky_dome")
    node.addGeom(geom)
    return node


def exposure_from_meter(codes: np.ndarray, key: float) -> tuple[float, float]:
    """(exposure multiplier, log2 mean luminance) from metered 8-bit log-luminance codes: the
    geometric mean luminance is brought to ``key`` (mid grey), within [2^-8, 2^10]."""
    log2l = codes.astype(np.float64) / 255.0 * 24.0 - 16.0
    mean = float(np.mean(log2l))
    # in 1/8 stops, as a camera's meter steps: a renderer's state before the first metered
    # frame (a one-frame-old shadow map) must not move the exposure, nor the bytes
    ev = round((math.log2(key) - mean) * 8.0) / 8.0
    return float(2.0 ** min(max(ev, -8.0), 10.0)), mean
