"""Deferred lighting of G-buffer planes in torch: the compute Stage II's port of the GL lighting
pass (``deferred.LIGHT_CS`` with ``pbr.SHADE_GLSL`` and ``pbr.SKY_GLSL``), the same code on CPU
(tests) and CUDA.

Every function mirrors its GLSL line by line, in float32, so that the two agree to float
rounding: the lights in the G-buffer shader's priority order (the sun first, the only one
scaled by the shadow factor), the sky's image-based light (SH irradiance, the sky along the
reflection widened toward it by roughness, Karis' environment BRDF), the emission, and the sky
itself where nothing was drawn (depth 1), along each pixel's exact view ray.

Layout: planes are ``[..., H, W, C]`` with any leading batch shape (views, or views x samples),
row 0 the top of the image (as the resolved images); GL's rows run bottom-up, so a pixel's NDC
y is ``1 - (row + 0.5) / H * 2``. ``inv_view_proj[..., 4, 4]`` maps clip to world for column
vectors (``world = M @ clip``; Panda3D's row-vector matrix transposed), ``eye[..., 3]`` is the
camera's world position, as the GL pass takes them.
"""

from __future__ import annotations

from typing import Any

import torch

from ..pbr import MAX_LIGHTS
from .lighting import Lighting

PI = 3.141592653589793


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(-1, keepdim=True)


def _normalize(a: torch.Tensor) -> torch.Tensor:
    return a * torch.rsqrt(_dot(a, a))


def _mix(a: Any, b: Any, t: Any) -> Any:
    return a * (1.0 - t) + b * t


def _smoothstep(e0: float, e1: float, x: torch.Tensor) -> torch.Tensor:
    t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def oct_encode(n: torch.Tensor) -> torch.Tensor:
    """A unit normal ``[..., 3]`` → the G-buffer's octahedral ``[..., 2]`` (``GBUF_FRAG``'s
    ``oct_encode``; GL then stores it as half floats)."""
    n = n / (n[..., 0].abs() + n[..., 1].abs() + n[..., 2].abs())[..., None]
    x, y, z = n[..., 0], n[..., 1], n[..., 2]
    sx = torch.where(x >= 0.0, 1.0, -1.0)
    sy = torch.where(y >= 0.0, 1.0, -1.0)
    neg = z < 0.0
    return torch.stack([torch.where(neg, (1.0 - y.abs()) * sx, x),
                        torch.where(neg, (1.0 - x.abs()) * sy, y)], -1)


def oct_decode(e: torch.Tensor) -> torch.Tensor:
    """The G-buffer's octahedral normal ``[..., 2]`` → unit vector ``[..., 3]``."""
    x, y = e[..., 0], e[..., 1]
    z = 1.0 - x.abs() - y.abs()
    sx = torch.where(x >= 0.0, 1.0, -1.0)
    sy = torch.where(y >= 0.0, 1.0, -1.0)
    neg = z < 0.0
    nx = torch.where(neg, (1.0 - y.abs()) * sx, x)
    ny = torch.where(neg, (1.0 - x.abs()) * sy, y)
    return _normalize(torch.stack([nx, ny, z], -1))


# ---------------------------------------------------------------- SKY_GLSL and SHADE_GLSL

def sky_radiance(d: torch.Tensor, lt: Lighting) -> torch.Tensor:
    """``sky_radiance(d)`` of SKY_GLSL for unit directions ``[..., 3]``."""
    h = d[..., 2:3]
    up = _mix(lt.sky_horizon, lt.sky_zenith, h.clamp(0.0, 1.0).pow(0.45))
    down = _mix(lt.sky_horizon, lt.sky_ground, (-h).clamp(0.0, 1.0).pow(0.35))
    c = torch.where(h >= 0.0, up, down)
    cs = _dot(d, -lt.sun_dir_world).clamp_min(0.0)
    return c + lt.sun_radiance * (cs.pow(600.0) * 40.0 + cs.pow(8.0) * 0.25) * (
        (h + 0.02) >= 0.0).to(d.dtype)


def irradiance_sh(n: torch.Tensor, sh: torch.Tensor) -> torch.Tensor:
    x, y, z = n[..., 0:1], n[..., 1:2], n[..., 2:3]
    return (sh[0] * 0.282095
            + sh[1] * 0.488603 * y + sh[2] * 0.488603 * z
            + sh[3] * 0.488603 * x
            + sh[4] * 1.092548 * x * y + sh[5] * 1.092548 * y * z
            + sh[6] * 0.315392 * (3.0 * z * z - 1.0)
            + sh[7] * 1.092548 * x * z
            + sh[8] * 0.546274 * (x * x - y * y))


def range_window(dist: torch.Tensor, rng: float) -> torch.Tensor:
    q = dist / rng
    w = (1.0 - q * q * q * q).clamp(0.0, 1.0)
    return w * w


def brdf(n: torch.Tensor, v: torch.Tensor, ld: torch.Tensor, nv: torch.Tensor, a: torch.Tensor,
         f0: torch.Tensor, diffuse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One light's GGX/Smith/Schlick BRDF toward ``ld`` (GLSL's ``l``): (diffuse +
    specular, n.l)."""
    h = _normalize(ld + v)
    nl = _dot(n, ld).clamp(0.0, 1.0)
    nh = _dot(n, h).clamp(0.0, 1.0)
    vh = _dot(v, h).clamp(0.0, 1.0)
    F = f0 + (1.0 - f0) * (1.0 - vh).pow(5.0)
    a2 = a * a
    d = nh * nh * (a2 - 1.0) + 1.0
    D = a2 / (PI * d * d)
    gv = nl * torch.sqrt(nv * nv * (1.0 - a2) + a2)
    gl = nv * torch.sqrt(nl * nl * (1.0 - a2) + a2)
    s = gv + gl
    V = torch.where(s > 0.0, 0.5 / torch.where(s > 0.0, s, 1.0), 0.0)
    return (1.0 - F) * diffuse / PI + F * D * V, nl


def sky_light(wn: torch.Tensor, wr: torch.Tensor, nv: torch.Tensor, rough: torch.Tensor,
              f0: torch.Tensor, diffuse: torch.Tensor, lt: Lighting) -> torch.Tensor:
    """The sky's image-based light (``sky_light`` of SHADE_GLSL)."""
    irr = irradiance_sh(wn, lt.sh_coeffs).clamp_min(0.0)
    r4x = rough * -1.0 + 1.0
    r4y = rough * -0.0275 + 0.0425
    r4z = rough * -0.572 + 1.04
    r4w = rough * 0.022 - 0.04
    a004 = torch.minimum(r4x * r4x, torch.exp2(-9.28 * nv)) * r4x + r4y
    abx = -1.04 * a004 + r4z
    aby = 1.04 * a004 + r4w
    spec_env = torch.where(rough > 0.75, irr / PI,
                           _mix(sky_radiance(wr, lt), irr / PI, rough))
    return diffuse * irr / PI + spec_env * (f0 * abx + aby)


# ---------------------------------------------------------------- the pass

def _ndc(h: int, w: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Each pixel's NDC x, y (pixel centres; row 0 at the top)."""
    x = (torch.arange(w, device=device, dtype=torch.float32) + 0.5) / float(w) * 2.0 - 1.0
    gl_row = torch.arange(h - 1, -1, -1, device=device, dtype=torch.float32)
    y = (gl_row + 0.5) / float(h) * 2.0 - 1.0
    return x.expand(h, w), y[:, None].expand(h, w)


def _apply(m: torch.Tensor, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``(m @ (x, y, z, 1)).xyz / w`` per pixel, as four multiply-adds per row (no TF32);
    ``m[..., 4, 4]`` broadcasts against ``x[...]`` once its two matrix axes are dropped."""
    out = [m[..., r, 0] * x + m[..., r, 1] * y + m[..., r, 2] * z + m[..., r, 3]
           for r in range(4)]
    return torch.stack(out[:3], -1) / out[3][..., None]


def shade(emission: torch.Tensor, albedo: torch.Tensor, metallic: torch.Tensor,
          normal: torch.Tensor, roughness: torch.Tensor, shadow: torch.Tensor,
          depth: torch.Tensor, inv_view_proj: torch.Tensor, eye: torch.Tensor,
          lt: Lighting, block_px: int | None = None) -> torch.Tensor:
    """Linear radiance ``[..., H, W, 3]`` of every pixel: the GL lighting pass's result before
    it is stored (see :func:`quantize_r11g11b10` for the atlas' storage). Scalars per pixel
    (metallic, roughness, shadow, depth) are ``[..., H, W]``; ``normal`` is the world normal
    (unit, already turned toward the camera). ``block_px``: at most this many pixels shaded
    at a time, in blocks of rows, to bound the memory of the intermediates (default: all at
    once; on this 2-core CPU 64k-pixel blocks were 2x slower at 540p; the values do not
    depend on it)."""
    h, w = depth.shape[-2:]
    if emission.shape[-3:] != (h, w, 3) or albedo.shape[-3:] != (h, w, 3) or \
            normal.shape[-3:] != (h, w, 3):
        raise ValueError(f"compute shade: planes of {tuple(depth.shape)} depth need "
                         f"[..., {h}, {w}, 3] emission, albedo and normal; got "
                         f"{tuple(emission.shape)}, {tuple(albedo.shape)}, {tuple(normal.shape)}")
    if inv_view_proj.shape[-2:] != (4, 4) or eye.shape[-1] != 3:
        raise ValueError("compute shade: inv_view_proj must be [..., 4, 4] and eye [..., 3]; "
                         f"got {tuple(inv_view_proj.shape)}, {tuple(eye.shape)}")
    if block_px is None:
        block_px = depth.numel()
    batch = max(1, depth[..., 0, 0].numel())
    rows = max(1, min(h, block_px // max(1, w * batch)))
    if rows >= h:
        return _shade_rows(emission, albedo, metallic, normal, roughness, shadow, depth,
                           inv_view_proj, eye, lt, 0, h)
    out = torch.empty((*depth.shape, 3), dtype=torch.float32, device=depth.device)
    for y0 in range(0, h, rows):
        y1 = min(h, y0 + rows)
        out[..., y0:y1, :, :] = _shade_rows(
            emission[..., y0:y1, :, :], albedo[..., y0:y1, :, :], metallic[..., y0:y1, :],
            normal[..., y0:y1, :, :], roughness[..., y0:y1, :], shadow[..., y0:y1, :],
            depth[..., y0:y1, :], inv_view_proj, eye, lt, y0, h)
    return out


def _shade_rows(emission: torch.Tensor, albedo: torch.Tensor, metallic: torch.Tensor,
                normal: torch.Tensor, roughness: torch.Tensor, shadow: torch.Tensor,
                depth: torch.Tensor, inv_view_proj: torch.Tensor, eye: torch.Tensor,
                lt: Lighting, y0: int, h: int) -> torch.Tensor:
    """:func:`shade` of rows ``y0 ..`` of pictures ``h`` rows high (the planes' rows)."""
    nx, ny = _ndc(h, depth.shape[-1], depth.device)
    nx, ny = nx[y0:y0 + depth.shape[-2]], ny[y0:y0 + depth.shape[-2]]
    return shade_points(emission, albedo, metallic, normal, roughness, shadow, depth, nx, ny,
                        inv_view_proj.to(torch.float32)[..., None, None, :, :],
                        eye.to(torch.float32)[..., None, None, :], lt)


def shade_points(emission: torch.Tensor, albedo: torch.Tensor, metallic: torch.Tensor,
                 normal: torch.Tensor, roughness: torch.Tensor, shadow: torch.Tensor,
                 depth: torch.Tensor, nx: torch.Tensor, ny: torch.Tensor,
                 inv_view_proj: torch.Tensor, eye: torch.Tensor, lt: Lighting) -> torch.Tensor:
    """:func:`shade`'s arithmetic at any set of points: each with its planes (``[...]`` or
    ``[..., 3]``), window depth, NDC x, y, and its camera's clip-to-world matrix
    ``[..., 4, 4]`` and position ``[..., 3]`` (broadcast against the points). The pixel
    grids of :func:`shade` are one such set; the compute renderer's shading once per pixel
    and triangle (``merged``) hands it a list of samples."""
    f32 = torch.float32
    lt = lt.to(depth.device)
    depth = depth.to(f32)
    e = eye.to(f32)
    inv = inv_view_proj.to(f32)
    sky = depth >= 1.0
    sky_rgb = sky_points(nx, ny, inv, e, lt, torch.ones_like(depth))
    # the surface
    pos = _apply(inv, nx, ny, depth * 2.0 - 1.0)
    base = albedo.to(f32)
    met = metallic.to(f32)[..., None]
    rough = roughness.to(f32)[..., None]
    sun_shadow = shadow.to(f32)[..., None]
    n = normal.to(f32)
    a = rough * rough
    diffuse = base * (1.0 - met) * 0.96
    f0 = _mix(torch.full_like(base, 0.04), base, met)
    v = _normalize(e - pos)
    nv = _dot(n, v).clamp(1e-4, 1.0)
    color = emission.to(f32).clone()
    for i, (on, positional, rng, cut) in enumerate(lt.light_flags[:MAX_LIGHTS]):
        if not on:
            continue
        lc = lt.light_color[i]
        lv = lt.light_vec[i]
        lp = lv[:3] - pos * lv[3]
        dist = torch.sqrt(_dot(lp, lp))
        l_ = lp / dist.clamp_min(1e-6)
        if not positional:
            atten = torch.ones_like(dist)
        else:
            att = lt.light_att[i]
            atten = 1.0 / (att[0] + att[1] * dist + att[2] * dist * dist).clamp_min(1e-4)
        if rng > 0.0:
            atten = atten * range_window(dist, rng)
        if cut > 0.001:
            atten = atten * _smoothstep(cut - 0.02, cut + 0.02, _dot(lt.light_spot[i, :3], -l_))
        if i == lt.shadow_light:
            atten = atten * sun_shadow
        b, nl = brdf(n, v, l_, nv, a, f0, diffuse)
        term = nl * lc * atten * b
        if rng > 0.0:
            term = torch.where(dist >= rng, 0.0, term)
        color = color + term
    refl = _normalize(-v - 2.0 * _dot(n, -v) * n)  # reflect(-v, n)
    color = color + lt.ibl_strength * sky_light(n, refl, nv, rough, f0, diffuse, lt)
    return torch.where(sky[..., None], sky_rgb, color)


def sky_points(nx: torch.Tensor, ny: torch.Tensor, inv_view_proj: torch.Tensor,
               eye: torch.Tensor, lt: Lighting, ones: torch.Tensor | None = None
               ) -> torch.Tensor:
    """The sky's radiance along the view ray of each point (NDC ``nx``, ``ny``; its camera's
    clip-to-world matrix and position, broadcast against the points): :func:`shade_points`'
    value where the depth is 1, without a surface to shade. ``ones``: the points' shape as
    ones (where the NDC coordinates broadcast to more points than they hold)."""
    f32 = torch.float32
    e = eye.to(f32)
    inv = inv_view_proj.to(f32)
    far = _apply(inv, nx, ny, torch.ones_like(nx) if ones is None else ones)
    return lt.sky_strength * sky_radiance(_normalize(far - e), lt)


def quantize_r11g11b10(x: torch.Tensor) -> torch.Tensor:
    """Values as the R11G11B10F atlas stores them (6-bit mantissas for R, G; 5 for B; no sign;
    the mantissa truncated): what the resolve then reads. Truncation is what Mesa's llvmpipe
    does (measured: with it, this pass reproduces GL's lit atlas bit for bit on a sample level;
    round-to-nearest matched half the pixels); a GPU driver may round instead, which moves a
    value by at most one step (2^-6 relative)."""
    x = torch.nan_to_num(x.to(torch.float32), nan=0.0).clamp(0.0, 65024.0)
    bits = torch.tensor([6, 6, 5], device=x.device, dtype=torch.float32)
    # the exponent of each value, floored at the formats' smallest normal (2^-14): below it
    # the step is that of the denormals (frexp: x = m 2^e, m in [0.5, 1))
    _, ex = torch.frexp(x.clamp_min(2.0 ** -14))
    step = torch.exp2(ex.to(torch.float32) - 1.0 - bits)
    q = torch.floor(x / step) * step
    return torch.where(x > 0, q, 0.0).clamp(max=torch.tensor([65024.0, 65024.0, 64512.0],
                                                             device=x.device))


# emission, albedo, metallic, normal, roughness, shadow
Planes = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
               torch.Tensor]


def stored_planes(emission: torch.Tensor, albedo: torch.Tensor, metallic: torch.Tensor,
                  normal: torch.Tensor, roughness: torch.Tensor, shadow: torch.Tensor
                  ) -> Planes:
    """The G-buffer planes as GL's deferred atlas stores them (emission in R11G11B10F, the
    others in RGBA16F, the normal octahedral; docs/compute-shading.md): the values GL's
    lighting pass reads. Order: emission, albedo, metallic, normal, roughness, shadow."""

    def half(x: torch.Tensor) -> torch.Tensor:
        return x.half().float()

    return (quantize_r11g11b10(emission), half(albedo), half(metallic),
            oct_decode(half(oct_encode(normal))), half(roughness), half(shadow))


__all__ = ["PI", "Planes", "brdf", "oct_decode", "oct_encode", "quantize_r11g11b10", "shade",
           "shade_points", "sky_light", "sky_points", "sky_radiance", "stored_planes"]
