"""The G-buffer of every (view, sample) of a frame, from the scene's triangles, in torch: what
``deferred.GBUF_FRAG`` writes, evaluated at each pixel's visible fragment.

Per pixel: the nearest surface from ``raster`` (alpha below 0.5 cut out before the depth test,
so the next surface shows through, as GL's ``discard``); its material as ``pbr`` reads it —
base colour = factor x vertex colour x colour scale x texture, metallic = factor x texture.b,
roughness = clamp(factor x texture.g, 0.04, 1), the tangent-space normal map where the
triangle has tangents, the normal turned toward the camera, the emission (factor x texture)
where the factor is not black. Textures are sampled bilinearly from their full-resolution
image with their wrap modes; GL samples mipmaps (trilinear), so distant, minified textures
differ a little (no mip selection here yet). The sun's shadow: a shadow map rasterized by the
same ``raster`` from the sun's orthographic camera (draw-mask bit 0: the level and the first
temporal copy of the character), looked up with ``pbr.shadow_pcf``'s bias, Poisson taps and
per-sample tap split, each tap a 2x2 bilinear depth comparison as GL's ``sampler2DShadow``.
"""

from __future__ import annotations

import numpy as np
import torch

from .cameras import Cameras, Sun
from .gbuffer_types import GBuffer
from .raster import Visibility, rasterize, visibility
from .scene import (
    SLOT_BASE,
    SLOT_EMISSION,
    SLOT_MR,
    SLOT_NORMAL,
    WRAP_CLAMP,
    WRAP_MIRROR,
    TextureTable,
)
from .scene_geometry import Frame, SceneGeometry

SHADOW_BIAS = 0.0015  # level_render's shadow_bias
PCF_TAPS = ((-0.326, -0.406), (0.962, -0.195), (-0.203, 0.621), (0.473, -0.480),
            (-0.840, -0.074), (0.519, 0.767), (0.185, -0.893), (-0.696, 0.457))


def _srgb_lut(device: torch.device) -> torch.Tensor:
    """[512] float32: entry b is 8-bit sRGB b decoded to linear light, entry 256 + b is b/255
    (one table for both encodings: a texel byte's index says which)."""
    c = torch.arange(256, dtype=torch.float64) / 255.0
    lin = torch.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return torch.cat([lin, c]).float().to(device)


def _wrap(i: torch.Tensor, n: torch.Tensor, mode: torch.Tensor) -> torch.Tensor:
    rep = torch.remainder(i, n)
    m2 = torch.remainder(i, 2 * n)
    mir = torch.where(m2 < n, m2, 2 * n - 1 - m2)
    clamp = torch.minimum(i.clamp_min(0), n - 1)
    return torch.where(mode == WRAP_CLAMP, clamp, torch.where(mode == WRAP_MIRROR, mir, rep))


def _bilinear(tt: TextureTable, t: torch.Tensor, lvl: torch.Tensor, uv: torch.Tensor,
              lut: torch.Tensor) -> torch.Tensor:
    """Bilinear RGBA [n,4] (linear light) of textures t [n] at their level lvl [n]. Flat
    ``index_select`` gathers throughout (multi-dimensional indexing is several times slower
    on the CPU)."""
    n = len(t)
    k = t * tt.offset.shape[1] + lvl
    wh = tt.size.view(-1, 2).index_select(0, k)
    w, h = wh[:, 0], wh[:, 1]
    x = uv[:, 0] * w - 0.5
    y = uv[:, 1] * h - 0.5
    x0, y0 = torch.floor(x), torch.floor(y)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    x0, y0 = x0.long(), y0.long()
    if tt.all_repeat:  # the common case: one remainder instead of every mode's formula
        xs = torch.remainder(torch.stack([x0, x0 + 1], 1), w[:, None])
        ys = torch.remainder(torch.stack([y0, y0 + 1], 1), h[:, None])
    else:
        mu, mv = tt.wrap[:, 0].index_select(0, t), tt.wrap[:, 1].index_select(0, t)
        xs = torch.stack([_wrap(x0, w, mu), _wrap(x0 + 1, w, mu)], 1)
        ys = torch.stack([_wrap(y0, h, mv), _wrap(y0 + 1, h, mv)], 1)
    off = tt.offset.view(-1).index_select(0, k)
    idx = off[:, None, None] + ys[:, :, None] * w[:, None, None] + xs[:, None, :]
    # one 32-bit gather per texel (RGBA8 little-endian: R in the low byte), then its bytes,
    # each looked up in the decode table (sRGB colour: entries 0-255; else 256-511)
    packed = tt.texels.view(torch.int32).view(-1).index_select(0, idx.view(-1))
    shifts = torch.tensor([0, 8, 16, 24], dtype=torch.int32, device=packed.device)
    byte = ((packed[:, None] >> shifts) & 255).view(n, 4, 4)
    linear = (~tt.srgb.index_select(0, t)).to(torch.int32) * 256
    byte[:, :, :3] += linear[:, None, None]
    byte[:, :, 3] += 256
    val = lut.index_select(0, byte.view(-1)).view(n, 2, 2, 4)
    top = val[:, 0, 0] * (1 - fx) + val[:, 0, 1] * fx
    bot = val[:, 1, 0] * (1 - fx) + val[:, 1, 1] * fx
    return top * (1 - fy) + bot * fy


def sample(tt: TextureTable, tex: torch.Tensor, uv: torch.Tensor, lut: torch.Tensor,
           duv: torch.Tensor | None = None) -> torch.Tensor:
    """RGBA [n,4] (linear light) of textures ``tex`` [n] at ``uv`` [n,2]; white where
    ``tex`` is -1 (GL's default texture). With ``duv`` [n,2,2] (d uv / d pixel x and y) it
    is trilinear, GL's LINEAR_MIPMAP_LINEAR: the level of detail log2 of the longer texel
    footprint, the two nearest levels blended; without, bilinear from level 0. Every pixel
    is sampled (texture 0 stands in for -1, then white replaces it): no data-dependent
    shapes, so no host sync and one graph for torch.compile."""
    if tt.levels.numel() == 0:
        return torch.ones(len(tex), 4, device=uv.device)
    has = tex >= 0
    t = tex.clamp_min(0)
    if duv is None:
        val = _bilinear(tt, t, torch.zeros_like(t), uv, lut).float()
    else:
        size = tt.size[:, 0].index_select(0, t).to(uv.dtype)  # [n,2], level 0
        d = duv * size[:, None, :]  # texels per pixel along x and y
        rho = torch.maximum(d[:, 0].norm(dim=1), d[:, 1].norm(dim=1))
        nlev = tt.levels.index_select(0, t)
        top = (nlev - 1).to(uv.dtype)
        # a degenerate triangle's derivatives are NaN: level 0 then (finite values unchanged;
        # a NaN level would index far outside the texel table)
        lod = torch.nan_to_num(torch.log2(rho.clamp_min(1e-12)), nan=0.0).clamp(min=0.0)
        lod = torch.minimum(lod, top)
        l0 = torch.floor(lod)
        f = (lod - l0)[:, None]
        l0 = l0.long()
        l1 = torch.minimum(l0 + 1, nlev - 1)
        a = _bilinear(tt, t, l0, uv, lut)
        b = _bilinear(tt, t, l1, uv, lut)
        val = (a * (1 - f) + b * f).float()
    return torch.where(has[:, None], val, torch.ones_like(val))


def uv_derivatives(fr_pos: torch.Tensor, fr_uv: torch.Tensor, tri: torch.Tensor,
                   view_proj: torch.Tensor, px: torch.Tensor, py: torch.Tensor, W: int, H: int
                   ) -> torch.Tensor:
    """d uv / d pixel [n,2,2] (along x, along y) of the source triangles ``tri`` at GL pixel
    centres (px, py) (py from the bottom), from the triangle's plane in homogeneous 2-D
    (valid whatever the corners' w): the derivative GL takes across a 2x2 pixel quad."""
    pos = fr_pos.index_select(0, tri)
    hom = torch.cat([pos, torch.ones_like(pos[..., :1])], -1)  # [n,3,4]
    # per-pixel 4x4 products as broadcast multiply-adds: einsum makes them batched gemv
    # launches, half of a 720p x 8 frame's GPU time (torch.profiler, H100)
    clip = (view_proj[:, None, :, :] * hom[:, :, None, :]).sum(-1)  # [n,3(corner),4]
    # M: rows x, y, w over the corners; the barycentrics at a pixel are proportional to
    # M^-1 @ (x_ndc, y_ndc, 1), and M^-1's columns are r1 x r2, r2 x r0, r0 x r1 (M's rows
    # r0, r1, r2) over det(M), which cancels when they are normalised: no inverse needed
    r0, r1, r2 = (clip[..., c].double() for c in (0, 1, 3))
    Minv = torch.stack([torch.cross(r1, r2, dim=1), torch.cross(r2, r0, dim=1),
                        torch.cross(r0, r1, dim=1)], 2)
    uvs = fr_uv.index_select(0, tri).double()  # [n,3,2]

    def uv_at(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        p = torch.stack([x / W * 2 - 1, y / H * 2 - 1, torch.ones_like(x)], 1).double()
        b = (Minv * p[:, None, :]).sum(-1)
        b = b / b.sum(1, keepdim=True)
        return (b[:, :, None] * uvs).sum(1)

    x, y = px.double(), py.double()
    u0 = uv_at(x, y)
    return torch.stack([uv_at(x + 1, y) - u0, uv_at(x, y + 1) - u0], 1).float()


def _interp(a: torch.Tensor, tri: torch.Tensor, bary: torch.Tensor) -> torch.Tensor:
    return (bary[:, :, None] * a.index_select(0, tri)).sum(1)


class GBufferRenderer:
    """The compute G-buffer of one scene at ``width`` x ``height`` per (view, sample)."""

    def __init__(self, geometry: SceneGeometry, width: int, height: int,
                 budget: int | None = None, compile_pixels: bool | None = None):
        self.geo = geometry
        self.W, self.H = int(width), int(height)
        # candidate fragments per raster chunk: large on a GPU (fewer launches), small on a
        # CPU (the chunk's temporaries stay in cache)
        self.budget = budget or (1 << 22 if geometry.device.type == "cuda" else 1 << 18)
        self.lut = _srgb_lut(geometry.device)
        self.frame_tris: Frame | None = None
        # the per-pixel material pass compiled by torch.compile (Inductor fuses its gathers
        # and arithmetic into a few kernels): on a GPU by default. Chunks are padded to one
        # size, so it compiles once.
        if compile_pixels is None:
            compile_pixels = geometry.device.type == "cuda"
        self.compiled = bool(compile_pixels)
        self._pixels = (torch.compile(self._shade, dynamic=False) if self.compiled
                        else self._shade)

    def _base(self, fr: Frame, tri: torch.Tensor, bary: torch.Tensor,
              duv: torch.Tensor | None = None) -> torch.Tensor:
        m = self.geo.materials
        mat = fr.mat[tri]
        uv = _interp(fr.uv, tri, bary)
        tex = sample(self.geo.textures, m.tex[mat, SLOT_BASE], uv, self.lut, duv)
        return m.base_color[mat] * _interp(fr.col, tri, bary) * tex

    def _cut(self, fr: Frame):  # noqa: ANN202 - a raster.CutFn
        def cut(tri: torch.Tensor, bary: torch.Tensor) -> torch.Tensor:
            return self._base(fr, tri, bary)[:, 3] < 0.5
        return cut

    def shadow_map(self, fr: Frame, sun: Sun) -> torch.Tensor:
        """[size, size] window depth seen by the sun (GL rows: row 0 at v = 0)."""
        vis = ((fr.bits >> sun.bit) & 1).bool()[None]
        r = rasterize(fr.pos, sun.view_proj[None], sun.size, sun.size, visible=vis,
                      cull=fr.cull, cut_tris=fr.cut, cut_fn=self._cut(fr), budget=self.budget,
                      depth_only=True)
        return r.depth[0]

    def shadow(self, smap: torch.Tensor, sun: Sun, pos: torch.Tensor, k: torch.Tensor,
               nsamples: int) -> torch.Tensor:
        """pbr.shadow_pcf at world positions ``pos`` [n,3] for samples ``k`` [n]."""
        c4 = torch.cat([pos, torch.ones_like(pos[:, :1])], 1) @ sun.view_proj.T
        c = c4[:, :3] / c4[:, 3:4] * 0.5 + 0.5
        n = sun.pcf_taps
        per = max(1, int(np.ceil(n / nsamples - 1e-4)))
        taps = torch.tensor(PCF_TAPS, device=pos.device)
        size = sun.size
        r = 2.5 / size
        z = c[:, 2] - SHADOW_BIAS
        s = torch.zeros_like(z)
        for jj in range(per):
            tap = taps[(k * per + jj) & (n - 1)]
            x = (c[:, 0] + tap[:, 0] * r) * size - 0.5
            y = (c[:, 1] + tap[:, 1] * r) * size - 0.5
            x0, y0 = torch.floor(x), torch.floor(y)
            fx, fy = x - x0, y - y0
            acc = torch.zeros_like(z)
            for dy, wy in ((0, 1 - fy), (1, fy)):
                for dx, wx in ((0, 1 - fx), (1, fx)):
                    ix, iy = x0.long() + dx, y0.long() + dy
                    inb = (ix >= 0) & (ix < size) & (iy >= 0) & (iy < size)
                    d = torch.where(inb, smap[iy.clamp(0, size - 1), ix.clamp(0, size - 1)],
                                    torch.ones_like(z))
                    acc = acc + wx * wy * (z <= d).float()
            s = s + acc
        outside = (c[:, 0] < 0) | (c[:, 0] > 1) | (c[:, 1] < 0) | (c[:, 1] > 1) | (c[:, 2] > 1)
        return torch.where(outside, torch.ones_like(s), s / per)

    def visibility(self, fr: Frame, cams: Cameras) -> Visibility:
        """The depth pass of every camera over this frame's triangles (each camera draws
        those its draw-mask bit shows; alpha below 0.5 cut out before the depth test)."""
        vis = ((fr.bits[None, :] >> cams.bit[:, None]) & 1).bool()
        return visibility(fr.pos, cams.view_proj, self.W, self.H, visible=vis, cull=fr.cull,
                          cut_tris=fr.cut, cut_fn=self._cut(fr), budget=self.budget)

    def render(self, cams: Cameras, sun: Sun | None = None) -> GBuffer:
        """This frame's G-buffer: the scene as its nodes stand now, seen by ``cams``. Pixels
        are shaded in chunks of ``budget`` (bounded memory at 720p x 8 samples)."""
        fr = self.geo.frame()
        self.frame_tris = fr
        V, H, W = cams.view_proj.shape[0], self.H, self.W
        ras = self.visibility(fr, cams).resolve().flip_rows()
        dev = fr.pos.device
        n = V * H * W
        planes = {"emission": torch.zeros(n, 3, device=dev),
                  "albedo": torch.zeros(n, 3, device=dev), "metallic": torch.zeros(n, device=dev),
                  "normal": torch.zeros(n, 3, device=dev), "roughness": torch.zeros(n, device=dev),
                  "shadow": torch.ones(n, device=dev)}
        smap = self.shadow_map(fr, sun) if sun is not None else None
        hits = torch.nonzero(ras.tri.reshape(-1) >= 0).squeeze(1)
        tris, barys = ras.tri.reshape(-1), ras.bary.reshape(-1, 3)
        step = max(1, self.budget // 2)
        for i in range(0, len(hits), step):
            hit = hits[i:i + step]
            k = len(hit)
            if self.compiled and k < step:  # one shape for the compiled pass
                hit = torch.cat([hit, hit[-1:].expand(step - k)])
            for name, vals in self._pixels(fr, cams, sun, smap, hit, tris[hit],
                                           barys[hit]).items():
                planes[name][hit[:k]] = vals[:k].float()
        shp = {k: (V, H, W, 3) if v.ndim == 2 else (V, H, W) for k, v in planes.items()}
        return GBuffer(**{k: v.reshape(shp[k]) for k, v in planes.items()},
                       depth=ras.depth.contiguous(),
                       inv_view_proj=cams.inverse(), eye=cams.eye)

    def _shade(self, fr: Frame, cams: Cameras, sun: Sun | None, smap: torch.Tensor | None,
               hit: torch.Tensor, tri: torch.Tensor, bary: torch.Tensor
               ) -> dict[str, torch.Tensor]:
        """GBUF_FRAG at the pixels ``hit`` (flat [V*H*W] indices, rows top-down) whose
        visible fragment is triangle ``tri`` at barycentrics ``bary``."""
        H, W = self.H, self.W
        view = torch.div(hit, H * W, rounding_mode="floor")
        pix = hit % (H * W)
        px = (pix % W).float() + 0.5
        py = (H - 1 - torch.div(pix, W, rounding_mode="floor")).float() + 0.5  # GL rows
        return self.material(fr, cams, sun, smap, view, px, py, tri, bary, cams.sample[view],
                             cams.nsamples)

    def material(self, fr: Frame, cams: Cameras, sun: Sun | None, smap: torch.Tensor | None,
                 view: torch.Tensor, px: torch.Tensor, py: torch.Tensor, tri: torch.Tensor,
                 bary: torch.Tensor, k: torch.Tensor, nsamples: int
                 ) -> dict[str, torch.Tensor]:
        """GBUF_FRAG's planes for fragments of triangles ``tri`` at ``bary``, seen by cameras
        ``view`` at GL pixel centres (``px``, ``py``: rows from the bottom). The sun's shadow
        takes sample ``k``'s share of the PCF taps among ``nsamples`` (1: every tap)."""
        H, W = self.H, self.W
        m = self.geo.materials
        mat = fr.mat[tri]
        uv = _interp(fr.uv, tri, bary)
        duv = uv_derivatives(fr.pos, fr.uv, tri, cams.view_proj[view], px, py, W, H)
        base = self._base(fr, tri, bary, duv)
        mr = sample(self.geo.textures, m.tex[mat, SLOT_MR], uv, self.lut, duv)
        metallic = (m.metallic[mat] * mr[:, 2]).clamp(0, 1)
        rough = (m.roughness[mat] * mr[:, 1]).clamp(0.04, 1)
        pos = _interp(fr.pos, tri, bary)
        n_i = _interp(fr.nrm, tri, bary)
        t_i = _interp(fr.tan[..., :3], tri, bary)
        tan = fr.tan.index_select(0, tri)
        b_i = (bary[:, :, None] * torch.cross(fr.nrm.index_select(0, tri), tan[:, :, :3], dim=-1)
               * tan[:, :, 3:4]).sum(1)
        n = n_i / n_i.norm(dim=1, keepdim=True).clamp_min(1e-30)
        ntex = m.tex[mat, SLOT_NORMAL]
        nm = sample(self.geo.textures, ntex, uv, self.lut, duv)[:, :3]
        use = (ntex >= 0) & ((t_i * t_i).sum(1) > 0.5) & (nm != 1.0).any(1)
        xy = nm[:, :2] * 2 - 1
        tz = (1 - (xy * xy).sum(1)).clamp(0, 1).sqrt()
        mapped = t_i * xy[:, :1] + b_i * xy[:, 1:] + n_i * tz[:, None]
        mapped = mapped / mapped.norm(dim=1, keepdim=True).clamp_min(1e-30)
        n = torch.where(use[:, None], mapped, n)
        toward = ((cams.eye[view] - pos) * n).sum(1) < 0
        n = torch.where(toward[:, None], -n, n)
        emis_f = m.emission[mat]
        lit = emis_f.sum(1) > 0
        etex = sample(self.geo.textures, m.tex[mat, SLOT_EMISSION], uv, self.lut, duv)[:, :3]
        out = {"emission": torch.where(lit[:, None], emis_f * etex, torch.zeros_like(emis_f)),
               "albedo": base[:, :3], "metallic": metallic, "normal": n, "roughness": rough}
        if sun is not None and smap is not None:
            out["shadow"] = self.shadow(smap, sun, pos, k, nsamples)
        return out
