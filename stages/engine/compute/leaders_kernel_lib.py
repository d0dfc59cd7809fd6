"""The Triton helpers of ``leaders_kernel`` (texture sampling, the sun's PCF shadow, the sky
and its SH light, the atlas' storage, torch's arithmetic: IEEE division and square root,
NaN-keeping clamps), each mirroring the torch function its docstring names.

Loaded as ``leaders_kernel`` is: compiled, and as a second copy for Triton's interpreter, whose
``_INTERPRET`` is set before it runs (``leaders_triton._module``).
"""
# ruff: noqa: ANN001, ANN202, N803, N806, PLR0913, E741 - Triton kernels: untyped lanes
# mypy: ignore-errors

import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

_INTERPRET = globals().get("_INTERPRET", False)
_jit = InterpretedFunction if _INTERPRET else triton.jit

@_jit
def _mx(a, b):
    """torch.maximum / clamp_min: a NaN stays NaN (Triton's maximum drops it)."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@_jit
def _mn(a, b):
    """torch.minimum / clamp_max: a NaN stays NaN."""
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@_jit
def _clamp(x, lo, hi):
    return _mn(_mx(x, lo), hi)


@_jit
def _div(a, b):
    """IEEE division, as torch's (a GPU's ``/`` is an approximation)."""
    return tl.div_rn(a, b)


@_jit
def _sqrt(x):
    """IEEE square root, as torch's."""
    return tl.sqrt_rn(x)


@_jit
def _mod(i, n):
    """Python's (and torch.remainder's) modulo for n > 0."""
    r = i % n
    return tl.where(r < 0, r + n, r)


@_jit
def _cell(x):
    """A bilinear filter's lower texel index (int64) and weight of the upper one."""
    x0 = tl.floor(x)
    return x0.to(tl.int64), x - x0


@_jit
def _wrap(i, n, mode):
    """gbuffer._wrap: repeat (0), clamp (1), mirror (2)."""
    rep = _mod(i, n)
    m2 = _mod(i, 2 * n)
    mir = tl.where(m2 < n, m2, 2 * n - 1 - m2)
    clamp = tl.minimum(tl.maximum(i, 0), n - 1)
    return tl.where(mode == 1, clamp, tl.where(mode == 2, mir, rep))


@_jit
def _texel(texels, lut, idx, lin, m):
    """One texel's RGBA in linear light (gbuffer._bilinear's bytes through the table)."""
    p = tl.load(texels + idx, mask=m, other=0)
    r = tl.load(lut + ((p & 255) + lin), mask=m, other=0.0)
    g = tl.load(lut + (((p >> 8) & 255) + lin), mask=m, other=0.0)
    b = tl.load(lut + (((p >> 16) & 255) + lin), mask=m, other=0.0)
    a = tl.load(lut + (((p >> 24) & 255) + 256), mask=m, other=0.0)
    return r, g, b, a


@_jit
def _bilinear(texels, lut, offset, size, wrap, t, lvl, u, v, lin, m, L, ALL_REPEAT: tl.constexpr):
    """gbuffer._bilinear of texture t at level lvl."""
    k = t * L + lvl
    w = tl.load(size + k * 2, mask=m, other=1)
    h = tl.load(size + k * 2 + 1, mask=m, other=1)
    x = u * w.to(tl.float32) - 0.5
    y = v * h.to(tl.float32) - 0.5
    x0, fx = _cell(x)
    y0, fy = _cell(y)
    if ALL_REPEAT:
        xa = _mod(x0, w)
        xb = _mod(x0 + 1, w)
        ya = _mod(y0, h)
        yb = _mod(y0 + 1, h)
    else:
        mu = tl.load(wrap + t * 2, mask=m, other=0)
        mv = tl.load(wrap + t * 2 + 1, mask=m, other=0)
        xa = _wrap(x0, w, mu)
        xb = _wrap(x0 + 1, w, mu)
        ya = _wrap(y0, h, mv)
        yb = _wrap(y0 + 1, h, mv)
    off = tl.load(offset + k, mask=m, other=0)
    r00, g00, b00, a00 = _texel(texels, lut, off + ya * w + xa, lin, m)
    r01, g01, b01, a01 = _texel(texels, lut, off + ya * w + xb, lin, m)
    r10, g10, b10, a10 = _texel(texels, lut, off + yb * w + xa, lin, m)
    r11, g11, b11, a11 = _texel(texels, lut, off + yb * w + xb, lin, m)
    r = (r00 * (1 - fx) + r01 * fx) * (1 - fy) + (r10 * (1 - fx) + r11 * fx) * fy
    g = (g00 * (1 - fx) + g01 * fx) * (1 - fy) + (g10 * (1 - fx) + g11 * fx) * fy
    b = (b00 * (1 - fx) + b01 * fx) * (1 - fy) + (b10 * (1 - fx) + b11 * fx) * fy
    a = (a00 * (1 - fx) + a01 * fx) * (1 - fy) + (a10 * (1 - fx) + a11 * fx) * fy
    return r, g, b, a


@_jit
def _sample(texels, lut, offset, size, levels, srgb, wrap, tex, u, v, dux, dvx, duy, dvy, m,
            L, ALL_REPEAT: tl.constexpr, HAS_TEX: tl.constexpr):
    """gbuffer.sample, trilinear (GL's LINEAR_MIPMAP_LINEAR): white where tex is -1."""
    one = tl.full(u.shape, 1.0, tl.float32)
    if HAS_TEX:
        has = tex >= 0
        t = tl.maximum(tex, 0)
        mt = m & has
        w0 = tl.load(size + t * L * 2, mask=mt, other=1).to(tl.float32)
        h0 = tl.load(size + t * L * 2 + 1, mask=mt, other=1).to(tl.float32)
        ax = dux * w0
        ay = dvx * h0
        bx = duy * w0
        by = dvy * h0
        rho = _mx(_sqrt(ax * ax + ay * ay), _sqrt(bx * bx + by * by))
        nlev = tl.load(levels + t, mask=mt, other=1)
        top = (nlev - 1).to(tl.float32)
        lod = tl.log2(_mx(rho, 1e-12))
        lod = tl.where(rho != rho, 0.0, lod)  # NaN derivatives (a degenerate triangle): 0
        lod = tl.minimum(tl.maximum(lod, 0.0), top)
        l0f = tl.floor(lod)
        f = lod - l0f
        l0 = l0f.to(tl.int64)
        l1 = tl.minimum(l0 + 1, nlev - 1)
        lin = tl.where(tl.load(srgb + t, mask=mt, other=0) != 0, 0, 256)
        ra, ga, ba, aa = _bilinear(texels, lut, offset, size, wrap, t, l0, u, v, lin, mt, L,
                                   ALL_REPEAT)
        rb, gb, bb, ab = _bilinear(texels, lut, offset, size, wrap, t, l1, u, v, lin, mt, L,
                                   ALL_REPEAT)
        r = tl.where(has, ra * (1 - f) + rb * f, one)
        g = tl.where(has, ga * (1 - f) + gb * f, one)
        b = tl.where(has, ba * (1 - f) + bb * f, one)
        a = tl.where(has, aa * (1 - f) + ab * f, one)
        return r, g, b, a
    else:
        return one, one, one, one


@_jit
def _corner(a, t, c, j, STRIDE: tl.constexpr, m):
    return tl.load(a + t * (3 * STRIDE) + c * STRIDE + j, mask=m, other=0.0)


@_jit
def _interp(a, t, b0, b1, b2, j, STRIDE: tl.constexpr, m):
    """gbuffer._interp of component j."""
    return (b0 * _corner(a, t, 0, j, STRIDE, m) + b1 * _corner(a, t, 1, j, STRIDE, m)
            + b2 * _corner(a, t, 2, j, STRIDE, m))


@_jit
def _clip(vp, pos, t, c, r, m):
    """Row r of view_proj applied to corner c (gbuffer.uv_derivatives' clip, float32)."""
    return (((tl.load(vp + r * 4, mask=m, other=0.0) * _corner(pos, t, c, 0, 3, m)
              + tl.load(vp + r * 4 + 1, mask=m, other=0.0) * _corner(pos, t, c, 1, 3, m))
             + tl.load(vp + r * 4 + 2, mask=m, other=0.0) * _corner(pos, t, c, 2, 3, m))
            + tl.load(vp + r * 4 + 3, mask=m, other=0.0))


@_jit
def _uv_at(X, Y, c00, c01, c02, c10, c11, c12, c20, c21, c22, u0, u1, u2, v0, v1, v2, W, H):
    """uv_derivatives' uv_at (float64): Minv's columns c0 = r1 x r2, c1 = r2 x r0,
    c2 = r0 x r1 (c{col}{row})."""
    p0 = X / W * 2 - 1
    p1 = Y / H * 2 - 1
    b0 = c00 * p0 + c10 * p1 + c20
    b1 = c01 * p0 + c11 * p1 + c21
    b2 = c02 * p0 + c12 * p1 + c22
    s = b0 + b1 + b2
    b0 = b0 / s
    b1 = b1 / s
    b2 = b2 / s
    return b0 * u0 + b1 * u1 + b2 * u2, b0 * v0 + b1 * v1 + b2 * v2


@_jit
def _half(x):
    return x.to(tl.float16).to(tl.float32)


@_jit
def _r11g11b10(x, BITS: tl.constexpr, MAX: tl.constexpr):
    """shade.quantize_r11g11b10 of one channel (BITS mantissa bits; truncation)."""
    x = tl.where(x != x, 0.0, x)
    x = tl.minimum(tl.maximum(x, 0.0), 65024.0)
    xc = tl.maximum(x, 2.0 ** -14)
    # frexp's exponent: x = m 2^e, m in [0.5, 1); from the float's bits (xc is normal). The
    # step 2^(e-1-BITS) and its inverse are built from their bits, so x / step is exact
    # (a GPU's exp2 and division are approximations)
    e = ((xc.to(tl.int32, bitcast=True) >> 23) & 255) - 126
    step = ((e + 126 - BITS) << 23).to(tl.float32, bitcast=True)
    inv = ((128 + BITS - e) << 23).to(tl.float32, bitcast=True)
    q = tl.floor(x * inv) * step
    return tl.minimum(tl.where(x > 0, q, 0.0), MAX)


@_jit
def _normalize3(x, y, z):
    """shade._normalize: a * rsqrt(a . a) (torch's rsqrt: 1 / sqrt)."""
    s = _div(1.0, _sqrt(x * x + y * y + z * z))
    return x * s, y * s, z * s


@_jit
def _sky(dx, dy, dz, sky, sun_dir, sun_rad, c):
    """shade.sky_radiance's channel c along unit direction d."""
    zen = tl.load(sky + c)
    hor = tl.load(sky + 3 + c)
    gnd = tl.load(sky + 6 + c)
    h = dz
    up_t = tl.exp2(0.45 * tl.log2(_clamp(h, 0.0, 1.0)))
    dn_t = tl.exp2(0.35 * tl.log2(_clamp(-h, 0.0, 1.0)))
    up = hor * (1.0 - up_t) + zen * up_t
    down = hor * (1.0 - dn_t) + gnd * dn_t
    col = tl.where(h >= 0.0, up, down)
    cs = _mx(-(dx * tl.load(sun_dir) + dy * tl.load(sun_dir + 1)
               + dz * tl.load(sun_dir + 2)), 0.0)
    lcs = tl.log2(cs)
    disc = tl.exp2(600.0 * lcs) * 40.0 + tl.exp2(8.0 * lcs) * 0.25
    return col + tl.load(sun_rad + c) * disc * tl.where(h + 0.02 >= 0.0, 1.0, 0.0)


@_jit
def _sh(nx, ny, nz, sh, c):
    """shade.irradiance_sh's channel c."""
    return (tl.load(sh + c) * 0.282095
            + tl.load(sh + 3 + c) * 0.488603 * ny + tl.load(sh + 6 + c) * 0.488603 * nz
            + tl.load(sh + 9 + c) * 0.488603 * nx
            + tl.load(sh + 12 + c) * 1.092548 * nx * ny
            + tl.load(sh + 15 + c) * 1.092548 * ny * nz
            + tl.load(sh + 18 + c) * 0.315392 * (3.0 * nz * nz - 1.0)
            + tl.load(sh + 21 + c) * 1.092548 * nx * nz
            + tl.load(sh + 24 + c) * 0.546274 * (nx * nx - ny * ny))


@_jit
def _shadow(smap, sun_vp, taps, px_, py_, pz_, SIZE, R, NTAPS: tl.constexpr, m):
    """gbuffer.shadow for sample 0 of 1 (every PCF tap)."""
    cx = ((tl.load(sun_vp) * px_ + tl.load(sun_vp + 1) * py_) + tl.load(sun_vp + 2) * pz_
          ) + tl.load(sun_vp + 3)
    cy = ((tl.load(sun_vp + 4) * px_ + tl.load(sun_vp + 5) * py_) + tl.load(sun_vp + 6) * pz_
          ) + tl.load(sun_vp + 7)
    cz = ((tl.load(sun_vp + 8) * px_ + tl.load(sun_vp + 9) * py_) + tl.load(sun_vp + 10) * pz_
          ) + tl.load(sun_vp + 11)
    cw = ((tl.load(sun_vp + 12) * px_ + tl.load(sun_vp + 13) * py_)
          + tl.load(sun_vp + 14) * pz_) + tl.load(sun_vp + 15)
    cx = _div(cx, cw) * 0.5 + 0.5
    cy = _div(cy, cw) * 0.5 + 0.5
    cz = _div(cz, cw) * 0.5 + 0.5
    r = R  # 2.5 / SIZE, from the host (torch: a Python float)
    z = cz - 0.0015  # gbuffer.SHADOW_BIAS
    s = tl.full(px_.shape, 0.0, tl.float32)
    for jj in tl.static_range(NTAPS):
        x = (cx + tl.load(taps + jj * 2) * r) * SIZE - 0.5
        y = (cy + tl.load(taps + jj * 2 + 1) * r) * SIZE - 0.5
        x0, fx = _cell(x)
        y0, fy = _cell(y)
        acc = tl.full(px_.shape, 0.0, tl.float32)
        for dy in tl.static_range(2):
            for dx in tl.static_range(2):
                ix = x0 + dx
                iy = y0 + dy
                inb = (ix >= 0) & (ix < SIZE) & (iy >= 0) & (iy < SIZE)
                d = tl.load(smap + tl.minimum(tl.maximum(iy, 0), SIZE - 1) * SIZE
                            + tl.minimum(tl.maximum(ix, 0), SIZE - 1), mask=m & inb, other=1.0)
                wx = fx if dx == 1 else 1 - fx
                wy = fy if dy == 1 else 1 - fy
                acc = acc + wx * wy * tl.where(z <= d, 1.0, 0.0)
        s = s + acc
    outside = (cx < 0) | (cx > 1) | (cy < 0) | (cy > 1) | (cz > 1)
    return tl.where(outside, 1.0, _div(s, NTAPS * 1.0))
