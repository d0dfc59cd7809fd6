"""The Triton source of ``leaders_triton``: one lane per leader sample, from its triangle and
barycentrics to its stored radiance (R11G11B10), in registers. Each function mirrors the
torch function named in its docstring (``gbuffer``, ``shade``), float32 throughout and the
texture derivatives in float64, as there.

Imported only where Triton is (``leaders_triton`` loads it). The module is loaded twice at
most: compiled (``triton.jit``), and under Triton's interpreter for the CPU tests, as a
second module whose ``_INTERPRET`` is set before it runs (the interpreter resolves helper
calls through the module's globals, so each mode needs its own).
"""
# ruff: noqa: ANN001, ANN202, N803, N806, PLR0913, E741 - Triton kernels: untyped lanes
# mypy: ignore-errors

import importlib

import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

_INTERPRET = globals().get("_INTERPRET", False)
_jit = InterpretedFunction if _INTERPRET else triton.jit
# the helpers, compiled or (the interpreter's copy, handed over as _LIB) interpreted: the
# kernel finds them among its module's globals, as both modes look them up
_lib = globals().get("_LIB") or importlib.import_module(f"{__package__}.leaders_kernel_lib")
_mx = _lib._mx
_mn = _lib._mn
_clamp = _lib._clamp
_div = _lib._div
_sqrt = _lib._sqrt
_sample = _lib._sample
_corner = _lib._corner
_interp = _lib._interp
_clip = _lib._clip
_uv_at = _lib._uv_at
_half = _lib._half
_r11g11b10 = _lib._r11g11b10
_normalize3 = _lib._normalize3
_sky = _lib._sky
_sh = _lib._sh
_shadow = _lib._shadow


# the leader count ``n`` changes every frame: Triton would specialize the kernel on it (n % 16,
# n == 1) and compile another ~1-minute binary whenever a frame's count fell in another class
# (seen on a lent H100: eight renderers under MPS all compiling again mid-run); not specialized
_kernel = (_jit if _INTERPRET else triton.jit(do_not_specialize=["n"]))


@_kernel
def leaders(out, flat, tri, bary, depth, n, H, W,
            f_pos, f_nrm, f_tan, f_uv, f_col, f_mat,
            m_base, m_metal, m_rough, m_emis, m_tex,
            texels, lut, t_offset, t_size, t_levels, t_srgb, t_wrap, L,
            vp, inv, eye,
            sun_vp, smap, taps, SUN_SIZE, SUN_R,
            l_vec, l_col, l_att, l_spot, l_range, l_edge,
            sky, sun_dir, sun_rad, sh, ibl_strength, sky_strength,
            NTAPS: tl.constexpr, FLAGS: tl.constexpr, SHADOW_LIGHT: tl.constexpr,
            HAS_SUN: tl.constexpr,
            HAS_TEX: tl.constexpr, ALL_REPEAT: tl.constexpr, BLOCK: tl.constexpr):
    """merged.MergedShading._leaders: R11G11B10 radiance of leader samples ``flat`` (each
    sees triangle ``tri`` at ``bary``, window depth ``depth``), written to out[flat]. FLAGS:
    4 bits a light (lit, positional, ranged, spot), as ``Lighting.light_flags``."""
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    f = tl.load(flat + o, mask=m, other=0)
    t = tl.load(tri + o, mask=m, other=0)
    b0 = tl.load(bary + o * 3, mask=m, other=0.0)
    b1 = tl.load(bary + o * 3 + 1, mask=m, other=0.0)
    b2 = tl.load(bary + o * 3 + 2, mask=m, other=0.0)
    dep = tl.load(depth + o, mask=m, other=0.0)
    view = f // (H * W)
    pix = f % (H * W)
    pxf = (pix % W).to(tl.float32) + 0.5
    pyf = (pix // W).to(tl.float32) + 0.5
    nx = _div(pxf, W * 1.0) * 2.0 - 1.0
    ny = _div(pyf, H * 1.0) * 2.0 - 1.0
    # ---- the material (gbuffer.material, sample 0 of 1)
    mat = tl.load(f_mat + t, mask=m, other=0)
    u = _interp(f_uv, t, b0, b1, b2, 0, 2, m)
    v = _interp(f_uv, t, b0, b1, b2, 1, 2, m)
    vpv = vp + view * 16
    cx0 = _clip(vpv, f_pos, t, 0, 0, m).to(tl.float64)
    cx1 = _clip(vpv, f_pos, t, 1, 0, m).to(tl.float64)
    cx2 = _clip(vpv, f_pos, t, 2, 0, m).to(tl.float64)
    cy0 = _clip(vpv, f_pos, t, 0, 1, m).to(tl.float64)
    cy1 = _clip(vpv, f_pos, t, 1, 1, m).to(tl.float64)
    cy2 = _clip(vpv, f_pos, t, 2, 1, m).to(tl.float64)
    cw0 = _clip(vpv, f_pos, t, 0, 3, m).to(tl.float64)
    cw1 = _clip(vpv, f_pos, t, 1, 3, m).to(tl.float64)
    cw2 = _clip(vpv, f_pos, t, 2, 3, m).to(tl.float64)
    # r0 = (cx0, cx1, cx2), r1 = (cy.), r2 = (cw.); columns r1 x r2, r2 x r0, r0 x r1
    c00 = cy1 * cw2 - cy2 * cw1
    c01 = cy2 * cw0 - cy0 * cw2
    c02 = cy0 * cw1 - cy1 * cw0
    c10 = cw1 * cx2 - cw2 * cx1
    c11 = cw2 * cx0 - cw0 * cx2
    c12 = cw0 * cx1 - cw1 * cx0
    c20 = cx1 * cy2 - cx2 * cy1
    c21 = cx2 * cy0 - cx0 * cy2
    c22 = cx0 * cy1 - cx1 * cy0
    u0 = _corner(f_uv, t, 0, 0, 2, m).to(tl.float64)
    u1 = _corner(f_uv, t, 1, 0, 2, m).to(tl.float64)
    u2 = _corner(f_uv, t, 2, 0, 2, m).to(tl.float64)
    v0 = _corner(f_uv, t, 0, 1, 2, m).to(tl.float64)
    v1 = _corner(f_uv, t, 1, 1, 2, m).to(tl.float64)
    v2 = _corner(f_uv, t, 2, 1, 2, m).to(tl.float64)
    X = pxf.to(tl.float64)
    Y = pyf.to(tl.float64)
    ua, va = _uv_at(X, Y, c00, c01, c02, c10, c11, c12, c20, c21, c22, u0, u1, u2, v0, v1, v2,
                    W, H)
    ub, vb = _uv_at(X + 1, Y, c00, c01, c02, c10, c11, c12, c20, c21, c22, u0, u1, u2, v0, v1,
                    v2, W, H)
    uc, vc = _uv_at(X, Y + 1, c00, c01, c02, c10, c11, c12, c20, c21, c22, u0, u1, u2, v0, v1,
                    v2, W, H)
    dux = (ub - ua).to(tl.float32)
    dvx = (vb - va).to(tl.float32)
    duy = (uc - ua).to(tl.float32)
    dvy = (vc - va).to(tl.float32)
    tex_b = tl.load(m_tex + mat * 4, mask=m, other=-1)
    tex_mr = tl.load(m_tex + mat * 4 + 1, mask=m, other=-1)
    tex_n = tl.load(m_tex + mat * 4 + 2, mask=m, other=-1)
    tex_e = tl.load(m_tex + mat * 4 + 3, mask=m, other=-1)
    sr, sg, sb, sa = _sample(texels, lut, t_offset, t_size, t_levels, t_srgb, t_wrap, tex_b, u,
                             v, dux, dvx, duy, dvy, m, L, ALL_REPEAT, HAS_TEX)
    alb_r = tl.load(m_base + mat * 4, mask=m, other=0.0) * _interp(f_col, t, b0, b1, b2, 0, 4,
                                                                    m) * sr
    alb_g = tl.load(m_base + mat * 4 + 1, mask=m, other=0.0) * _interp(f_col, t, b0, b1, b2, 1,
                                                                        4, m) * sg
    alb_b = tl.load(m_base + mat * 4 + 2, mask=m, other=0.0) * _interp(f_col, t, b0, b1, b2, 2,
                                                                        4, m) * sb
    _, mg, mb, _ = _sample(texels, lut, t_offset, t_size, t_levels, t_srgb, t_wrap, tex_mr, u,
                           v, dux, dvx, duy, dvy, m, L, ALL_REPEAT, HAS_TEX)
    metallic = _clamp(tl.load(m_metal + mat, mask=m, other=0.0) * mb, 0.0, 1.0)
    rough = _clamp(tl.load(m_rough + mat, mask=m, other=1.0) * mg, 0.04, 1.0)
    px_ = _interp(f_pos, t, b0, b1, b2, 0, 3, m)
    py_ = _interp(f_pos, t, b0, b1, b2, 1, 3, m)
    pz_ = _interp(f_pos, t, b0, b1, b2, 2, 3, m)
    nix = _interp(f_nrm, t, b0, b1, b2, 0, 3, m)
    niy = _interp(f_nrm, t, b0, b1, b2, 1, 3, m)
    niz = _interp(f_nrm, t, b0, b1, b2, 2, 3, m)
    tix = _interp(f_tan, t, b0, b1, b2, 0, 4, m)
    tiy = _interp(f_tan, t, b0, b1, b2, 1, 4, m)
    tiz = _interp(f_tan, t, b0, b1, b2, 2, 4, m)
    bix = tl.full(u.shape, 0.0, tl.float32)
    biy = tl.full(u.shape, 0.0, tl.float32)
    biz = tl.full(u.shape, 0.0, tl.float32)
    for c in tl.static_range(3):
        bc = b0 if c == 0 else (b1 if c == 1 else b2)
        nx_c = _corner(f_nrm, t, c, 0, 3, m)
        ny_c = _corner(f_nrm, t, c, 1, 3, m)
        nz_c = _corner(f_nrm, t, c, 2, 3, m)
        tx_c = _corner(f_tan, t, c, 0, 4, m)
        ty_c = _corner(f_tan, t, c, 1, 4, m)
        tz_c = _corner(f_tan, t, c, 2, 4, m)
        sw = _corner(f_tan, t, c, 3, 4, m)
        bix += bc * ((ny_c * tz_c - nz_c * ty_c) * sw)
        biy += bc * ((nz_c * tx_c - nx_c * tz_c) * sw)
        biz += bc * ((nx_c * ty_c - ny_c * tx_c) * sw)
    inorm = _mx(_sqrt(nix * nix + niy * niy + niz * niz), 1e-30)
    nrx = _div(nix, inorm)
    nry = _div(niy, inorm)
    nrz = _div(niz, inorm)
    nmr, nmg, nmb, _ = _sample(texels, lut, t_offset, t_size, t_levels, t_srgb, t_wrap, tex_n,
                               u, v, dux, dvx, duy, dvy, m, L, ALL_REPEAT, HAS_TEX)
    use = ((tex_n >= 0) & (tix * tix + tiy * tiy + tiz * tiz > 0.5)
           & ((nmr != 1.0) | (nmg != 1.0) | (nmb != 1.0)))
    qx = nmr * 2 - 1
    qy = nmg * 2 - 1
    tz = _sqrt(_clamp(1 - (qx * qx + qy * qy), 0.0, 1.0))
    mx = tix * qx + bix * qy + nix * tz
    my = tiy * qx + biy * qy + niy * tz
    mz = tiz * qx + biz * qy + niz * tz
    minorm = _mx(_sqrt(mx * mx + my * my + mz * mz), 1e-30)
    nrx = tl.where(use, _div(mx, minorm), nrx)
    nry = tl.where(use, _div(my, minorm), nry)
    nrz = tl.where(use, _div(mz, minorm), nrz)
    ex = tl.load(eye + view * 3, mask=m, other=0.0)
    ey = tl.load(eye + view * 3 + 1, mask=m, other=0.0)
    ez = tl.load(eye + view * 3 + 2, mask=m, other=0.0)
    away = (ex - px_) * nrx + (ey - py_) * nry + (ez - pz_) * nrz < 0
    nrx = tl.where(away, -nrx, nrx)
    nry = tl.where(away, -nry, nry)
    nrz = tl.where(away, -nrz, nrz)
    er_f = tl.load(m_emis + mat * 3, mask=m, other=0.0)
    eg_f = tl.load(m_emis + mat * 3 + 1, mask=m, other=0.0)
    eb_f = tl.load(m_emis + mat * 3 + 2, mask=m, other=0.0)
    lit = er_f + eg_f + eb_f > 0
    etr, etg, etb, _ = _sample(texels, lut, t_offset, t_size, t_levels, t_srgb, t_wrap, tex_e, u,
                               v, dux, dvx, duy, dvy, m, L, ALL_REPEAT, HAS_TEX)
    if HAS_SUN:
        shadow = _shadow(smap, sun_vp, taps, px_, py_, pz_, SUN_SIZE, SUN_R, NTAPS, m)
    else:
        shadow = tl.full(u.shape, 1.0, tl.float32)
    # ---- the planes as the atlas stores them (shade.stored_planes)
    col_r = _r11g11b10(tl.where(lit, er_f * etr, 0.0), 6, 65024.0)
    col_g = _r11g11b10(tl.where(lit, eg_f * etg, 0.0), 6, 65024.0)
    col_b = _r11g11b10(tl.where(lit, eb_f * etb, 0.0), 5, 64512.0)
    base_r = _half(alb_r)
    base_g = _half(alb_g)
    base_b = _half(alb_b)
    met = _half(metallic)
    rgh = _half(rough)
    sun_shadow = _half(shadow)
    s1 = tl.abs(nrx) + tl.abs(nry) + tl.abs(nrz)
    ox = _div(nrx, s1)
    oy = _div(nry, s1)
    oz = _div(nrz, s1)
    sx = tl.where(ox >= 0.0, 1.0, -1.0)
    sy = tl.where(oy >= 0.0, 1.0, -1.0)
    e0 = _half(tl.where(oz < 0.0, (1.0 - tl.abs(oy)) * sx, ox))
    e1 = _half(tl.where(oz < 0.0, (1.0 - tl.abs(ox)) * sy, oy))
    dz = 1.0 - tl.abs(e0) - tl.abs(e1)
    dsx = tl.where(e0 >= 0.0, 1.0, -1.0)
    dsy = tl.where(e1 >= 0.0, 1.0, -1.0)
    wx_ = tl.where(dz < 0.0, (1.0 - tl.abs(e1)) * dsx, e0)
    wy_ = tl.where(dz < 0.0, (1.0 - tl.abs(e0)) * dsy, e1)
    wnx, wny, wnz = _normalize3(wx_, wy_, dz)
    # ---- the lighting (shade.shade_points)
    ivp = inv + view * 16
    zc = dep * 2.0 - 1.0
    qx4 = tl.load(ivp, mask=m, other=0.0) * nx + tl.load(ivp + 1, mask=m, other=0.0) * ny + \
        tl.load(ivp + 2, mask=m, other=0.0) * zc + tl.load(ivp + 3, mask=m, other=0.0)
    qy4 = tl.load(ivp + 4, mask=m, other=0.0) * nx + tl.load(ivp + 5, mask=m, other=0.0) * ny + \
        tl.load(ivp + 6, mask=m, other=0.0) * zc + tl.load(ivp + 7, mask=m, other=0.0)
    qz4 = tl.load(ivp + 8, mask=m, other=0.0) * nx + tl.load(ivp + 9, mask=m, other=0.0) * ny + \
        tl.load(ivp + 10, mask=m, other=0.0) * zc + tl.load(ivp + 11, mask=m, other=0.0)
    qw4 = tl.load(ivp + 12, mask=m, other=1.0) * nx + tl.load(ivp + 13, mask=m, other=0.0) * ny \
        + tl.load(ivp + 14, mask=m, other=0.0) * zc + tl.load(ivp + 15, mask=m, other=0.0)
    wpx = _div(qx4, qw4)
    wpy = _div(qy4, qw4)
    wpz = _div(qz4, qw4)
    a = rgh * rgh
    dif_r = base_r * (1.0 - met) * 0.96
    dif_g = base_g * (1.0 - met) * 0.96
    dif_b = base_b * (1.0 - met) * 0.96
    f0r = 0.04 * (1.0 - met) + base_r * met
    f0g = 0.04 * (1.0 - met) + base_g * met
    f0b = 0.04 * (1.0 - met) + base_b * met
    vx, vy, vz = _normalize3(ex - wpx, ey - wpy, ez - wpz)
    nv = _clamp(wnx * vx + wny * vy + wnz * vz, 1e-4, 1.0)
    a2 = a * a
    for i in tl.static_range(4):
        if (FLAGS >> (4 * i)) & 1:
            lw = tl.load(l_vec + i * 4 + 3)
            lpx = tl.load(l_vec + i * 4) - wpx * lw
            lpy = tl.load(l_vec + i * 4 + 1) - wpy * lw
            lpz = tl.load(l_vec + i * 4 + 2) - wpz * lw
            dist = _sqrt(lpx * lpx + lpy * lpy + lpz * lpz)
            dcl = _mx(dist, 1e-6)
            lx = _div(lpx, dcl)
            ly = _div(lpy, dcl)
            lz = _div(lpz, dcl)
            if (FLAGS >> (4 * i + 1)) & 1:
                atten = _div(1.0, _mx(tl.load(l_att + i * 3) + tl.load(l_att + i * 3 + 1) * dist
                                      + tl.load(l_att + i * 3 + 2) * dist * dist, 1e-4))
            else:
                atten = tl.full(u.shape, 1.0, tl.float32)
            rng = tl.load(l_range + i)
            if (FLAGS >> (4 * i + 2)) & 1:
                q = _div(dist, rng)
                rw = _clamp(1.0 - q * q * q * q, 0.0, 1.0)
                atten = atten * (rw * rw)
            if (FLAGS >> (4 * i + 3)) & 1:
                # shade._smoothstep(cut - 0.02, cut + 0.02, .): its edge and width as torch
                # takes them (float64 from the flags, then float32): l_edge
                cd = -(tl.load(l_spot + i * 4) * lx + tl.load(l_spot + i * 4 + 1) * ly
                       + tl.load(l_spot + i * 4 + 2) * lz)
                st = _clamp(_div(cd - tl.load(l_edge + i * 2), tl.load(l_edge + i * 2 + 1)),
                            0.0, 1.0)
                atten = atten * (st * st * (3.0 - 2.0 * st))
            if i == SHADOW_LIGHT:
                atten = atten * sun_shadow
            hx, hy, hz = _normalize3(lx + vx, ly + vy, lz + vz)
            nl = _clamp(wnx * lx + wny * ly + wnz * lz, 0.0, 1.0)
            nh = _clamp(wnx * hx + wny * hy + wnz * hz, 0.0, 1.0)
            vh = _clamp(vx * hx + vy * hy + vz * hz, 0.0, 1.0)
            fr5 = (1.0 - vh) * (1.0 - vh)
            fr5 = fr5 * fr5 * (1.0 - vh)
            dd = nh * nh * (a2 - 1.0) + 1.0
            D = _div(a2, 3.141592653589793 * dd * dd)
            gv = nl * _sqrt(nv * nv * (1.0 - a2) + a2)
            gl = nv * _sqrt(nl * nl * (1.0 - a2) + a2)
            sg = gv + gl
            V = tl.where(sg > 0.0, _div(0.5, tl.where(sg > 0.0, sg, 1.0)), 0.0)
            Fr = f0r + (1.0 - f0r) * fr5
            Fg = f0g + (1.0 - f0g) * fr5
            Fb = f0b + (1.0 - f0b) * fr5
            # nl * lc * atten * brdf, in torch's order
            tr = nl * tl.load(l_col + i * 3) * atten * (
                _div((1.0 - Fr) * dif_r, 3.141592653589793) + Fr * D * V)
            tg = nl * tl.load(l_col + i * 3 + 1) * atten * (
                _div((1.0 - Fg) * dif_g, 3.141592653589793) + Fg * D * V)
            tb = nl * tl.load(l_col + i * 3 + 2) * atten * (
                _div((1.0 - Fb) * dif_b, 3.141592653589793) + Fb * D * V)
            if (FLAGS >> (4 * i + 2)) & 1:
                far = dist >= rng
                tr = tl.where(far, 0.0, tr)
                tg = tl.where(far, 0.0, tg)
                tb = tl.where(far, 0.0, tb)
            col_r += tr
            col_g += tg
            col_b += tb
    # the sky's image-based light (shade.sky_light)
    dnv = -(wnx * -vx + wny * -vy + wnz * -vz)
    rx, ry, rz = _normalize3(-vx + 2.0 * dnv * wnx, -vy + 2.0 * dnv * wny, -vz + 2.0 * dnv * wnz)
    r4x = rgh * -1.0 + 1.0
    r4y = rgh * -0.0275 + 0.0425
    r4z = rgh * -0.572 + 1.04
    r4w = rgh * 0.022 - 0.04
    a004 = _mn(r4x * r4x, tl.exp2(-9.28 * nv)) * r4x + r4y
    abx = -1.04 * a004 + r4z
    aby = 1.04 * a004 + r4w
    for c in tl.static_range(3):
        irr = _mx(_sh(wnx, wny, wnz, sh, c), 0.0)
        ipi = _div(irr, 3.141592653589793)
        senv = tl.where(rgh > 0.75, ipi,
                        _sky(rx, ry, rz, sky, sun_dir, sun_rad, c) * (1.0 - rgh) + ipi * rgh)
        dif = dif_r if c == 0 else (dif_g if c == 1 else dif_b)
        f0 = f0r if c == 0 else (f0g if c == 1 else f0b)
        ibl = _div(dif * irr, 3.141592653589793) + senv * (f0 * abx + aby)
        if c == 0:
            col_r += ibl_strength * ibl
        elif c == 1:
            col_g += ibl_strength * ibl
        else:
            col_b += ibl_strength * ibl
    # the sky where the depth is 1 (shade.sky_points)
    is_sky = dep >= 1.0
    fx4 = tl.load(ivp, mask=m, other=0.0) * nx + tl.load(ivp + 1, mask=m, other=0.0) * ny + \
        tl.load(ivp + 2, mask=m, other=0.0) + tl.load(ivp + 3, mask=m, other=0.0)
    fy4 = tl.load(ivp + 4, mask=m, other=0.0) * nx + tl.load(ivp + 5, mask=m, other=0.0) * ny + \
        tl.load(ivp + 6, mask=m, other=0.0) + tl.load(ivp + 7, mask=m, other=0.0)
    fz4 = tl.load(ivp + 8, mask=m, other=0.0) * nx + tl.load(ivp + 9, mask=m, other=0.0) * ny + \
        tl.load(ivp + 10, mask=m, other=0.0) + tl.load(ivp + 11, mask=m, other=0.0)
    fw4 = tl.load(ivp + 12, mask=m, other=1.0) * nx + tl.load(ivp + 13, mask=m, other=0.0) * ny \
        + tl.load(ivp + 14, mask=m, other=0.0) + tl.load(ivp + 15, mask=m, other=0.0)
    kx, ky, kz = _normalize3(_div(fx4, fw4) - ex, _div(fy4, fw4) - ey, _div(fz4, fw4) - ez)
    col_r = tl.where(is_sky, sky_strength * _sky(kx, ky, kz, sky, sun_dir, sun_rad, 0), col_r)
    col_g = tl.where(is_sky, sky_strength * _sky(kx, ky, kz, sky, sun_dir, sun_rad, 1), col_g)
    col_b = tl.where(is_sky, sky_strength * _sky(kx, ky, kz, sky, sun_dir, sun_rad, 2), col_b)
    tl.store(out + f * 3, _r11g11b10(col_r, 6, 65024.0), mask=m)
    tl.store(out + f * 3 + 1, _r11g11b10(col_g, 6, 65024.0), mask=m)
    tl.store(out + f * 3 + 2, _r11g11b10(col_b, 5, 64512.0), mask=m)
