"""A triangle rasterizer in plain torch ops (the same code on CPU and CUDA): world-space
triangles seen by many cameras at once -> per pixel the nearest triangle, its perspective-correct
barycentrics and its GL window depth.

Steps, as GL does them: clip space (column vectors, ``clip = view_proj @ [p, 1]``); clipping
against the near plane (z = -w; a triangle with one or two corners behind it becomes one or two
triangles whose corners carry barycentrics of the original); frustum and back-face culling;
pixel centres at (i + 0.5, j + 0.5); coverage by edge functions over each triangle's pixel
bounding box; depth = z_ndc / 2 + 1/2, interpolated linearly in screen space; attributes
perspective-correct. The depth test packs (float32 depth bits, triangle id) into one int64 and
keeps the minimum with ``scatter_reduce('amin')``: order-independent, so the same inputs give the
same bytes on any schedule (ties in depth go to the lower triangle id; GL gives them to the one
drawn first). Fragments are enumerated in chunks of at most ``budget`` candidate pixels, so
memory stays bounded whatever the triangle count and size.

A surface whose alpha is cut out (``cut_fn``) is dropped before the depth test, so the next
nearest fragment wins, as GL's ``discard``. Rows are GL's (row 0 at the bottom); ``flip_rows``
turns them top-down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from . import raster_triton
from .raster_fused import NO_HIT, _edges, fused

# the depth pass's implementation: "auto" (the Triton kernel on a CUDA device where Triton
# imports, torch ops elsewhere), "torch", or "interpret" (the Triton kernel under Triton's
# interpreter: the tests' check on a CPU that the kernel and the torch ops agree)
KERNEL = "auto"
CullNone, CullBack = 0, 1

# (clipped triangle's source triangle, its corners' barycentrics in the source, [n, 3] per
# fragment) -> True where the fragment is cut out (alpha < 0.5)
CutFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class RasterOut:
    """Per (view, row, column), GL rows (bottom-up)."""

    tri: torch.Tensor    # [V,H,W] int64: the source triangle, -1 where nothing was drawn
    bary: torch.Tensor   # [V,H,W,3] float32: perspective-correct barycentrics in it
    depth: torch.Tensor  # [V,H,W] float32: window depth, 1 where nothing was drawn

    def flip_rows(self) -> RasterOut:
        return RasterOut(self.tri.flip(1), self.bary.flip(1), self.depth.flip(1))


def _clip_near(clip: torch.Tensor, src: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clip [n,3,4] clip-space triangles against the near plane z = -w. Returns the clipped
    triangles [m,3,4] in source order, their source index [m] (into ``src``'s values) and
    each new corner's barycentrics in its source triangle [m,3,3]; winding is kept.

    Every triangle has two candidate places (all three corners in front: itself in the first;
    one: the corner and its two crossings in the first; two: the quad left in front, as two
    triangles); one compaction of the places that exist, then the arithmetic on those rows
    alone: a single read of the device whatever the mix, and memory in the output's size."""
    dev = clip.device
    d = clip[..., 2] + clip[..., 3]  # >= 0: in front of the near plane
    inside = d >= 0
    n_in = inside.sum(1)
    valid = torch.stack([n_in >= 1, n_in == 2], 1)  # [n,2]: which candidates exist
    keep = torch.nonzero(valid.reshape(-1)).squeeze(1)
    row = torch.div(keep, 2, rounding_mode="floor")
    second = (keep % 2 == 1)[:, None, None]  # the quad's second triangle
    clip, d, inside, n_in = clip[row], d[row], inside[row], n_in[row]
    ins8 = inside.to(torch.int8)
    # rotate the corners (keeping the winding) so that the odd one out comes first
    first = torch.where(n_in == 1, torch.argmax(ins8, 1),
                        torch.where(n_in == 2, torch.argmin(ins8, 1), torch.zeros_like(n_in)))
    ar = torch.arange(3, device=dev)
    order = (first[:, None] + ar[None, :]) % 3
    c = torch.gather(clip, 1, order[:, :, None].expand(-1, 3, 4))
    dd = torch.gather(d, 1, order)
    b = torch.eye(3, device=dev, dtype=clip.dtype)[order]  # corner barycentrics in the source
    A, B, C = c[:, 0], c[:, 1], c[:, 2]
    bA, bB, bC = b[:, 0], b[:, 1], b[:, 2]
    dA, dB, dC = dd[:, 0:1], dd[:, 1:2], dd[:, 2:3]
    one, two = (n_in == 1)[:, None, None], (n_in == 2)[:, None, None]
    # one corner in front, A: (A, A->B, A->C); where it does not apply the quotients are
    # never selected (a 0/0 there stays out of the result)
    tb, tc = dA / (dA - dB), dA / (dA - dC)
    c1 = torch.stack([A, A + (B - A) * tb, A + (C - A) * tc], 1)
    b1 = torch.stack([bA, bA + (bB - bA) * tb, bA + (bC - bA) * tc], 1)
    # A behind, B and C in front: the quad B, C, C->A, B->A as two triangles
    ub, uc = dB / (dB - dA), dC / (dC - dA)
    BA, CA = B + (A - B) * ub, C + (A - C) * uc
    bBA, bCA = bB + (bA - bB) * ub, bC + (bA - bC) * uc
    quad_c = torch.where(second, torch.stack([B, CA, BA], 1), torch.stack([B, C, CA], 1))
    quad_b = torch.where(second, torch.stack([bB, bCA, bBA], 1), torch.stack([bB, bC, bCA], 1))
    out_c = torch.where(one, c1, torch.where(two, quad_c, c))
    out_b = torch.where(one, b1, torch.where(two, quad_b, b))
    return out_c, src.index_select(0, row), out_b


class _Setup:
    """Screen-space triangles of one batch of views, ready for coverage."""

    def __init__(self, clip: torch.Tensor, view: torch.Tensor, src: torch.Tensor,
                 bary: torch.Tensor, cull: torch.Tensor | None, W: int, H: int):
        w = clip[..., 3]
        inv_w = 1.0 / w
        sx = (clip[..., 0] * inv_w * 0.5 + 0.5) * W
        sy = (clip[..., 1] * inv_w * 0.5 + 0.5) * H
        zn = clip[..., 2] * inv_w
        area = ((sx[:, 1] - sx[:, 0]) * (sy[:, 2] - sy[:, 0])
                - (sx[:, 2] - sx[:, 0]) * (sy[:, 1] - sy[:, 0]))
        ok = area != 0
        if cull is not None:  # counter-clockwise (window space, y up) is the front
            ok &= (area > 0) | (cull[src] == CullNone)
        x0 = torch.ceil(sx.amin(1) - 0.5).clamp(0, W)
        x1 = torch.floor(sx.amax(1) - 0.5).clamp(-1, W - 1)
        y0 = torch.ceil(sy.amin(1) - 0.5).clamp(0, H)
        y1 = torch.floor(sy.amax(1) - 0.5).clamp(-1, H - 1)
        bw, bh = (x1 - x0 + 1).clamp(min=0), (y1 - y0 + 1).clamp(min=0)
        ok &= (bw > 0) & (bh > 0) & torch.isfinite(area)
        ok &= zn.amin(1) <= 1.0  # not wholly beyond the far plane
        idx = torch.nonzero(ok).squeeze(1)
        self.sx, self.sy, self.zn, self.inv_w = sx[idx], sy[idx], zn[idx], inv_w[idx]
        self.area, self.view, self.src, self.bary = area[idx], view[idx], src[idx], bary[idx]
        self.x0, self.y0 = x0[idx].long(), y0[idx].long()
        self.bw, self.bh = bw[idx].long(), bh[idx].long()
        self.x032, self.y032, self.bw32 = self.x0.int(), self.y0.int(), self.bw.int()
        # plane equations relative to corner 0, one row per triangle (a single gather per
        # fragment): lam_i = a_i dx + b_i dy + [1, 0, 0]_i, z = z_0 + dz/dx dx + dz/dy dy
        sx, sy, zn, area = self.sx, self.sy, self.zn, self.area
        nx, ny = sx.roll(-1, 1), sy.roll(-1, 1)  # corner i+1
        px_, py_ = sx.roll(-2, 1), sy.roll(-2, 1)  # corner i+2
        a = -(py_ - ny) / area[:, None]
        b = (px_ - nx) / area[:, None]
        self.plane = torch.cat([sx[:, :1], sy[:, :1], a, b, zn[:, :1],
                                (a * zn).sum(1, keepdim=True), (b * zn).sum(1, keepdim=True)],
                               1)

    def fragment(self, t: torch.Tensor, px: torch.Tensor, py: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(inside, screen barycentrics [n,3], window depth) of pixel centres for triangles t."""
        e = _edges(self.sx[t], self.sy[t], px, py)
        a = self.area[t]
        lam = e / a[:, None]  # the area's sign makes back faces' barycentrics positive too
        inside = (lam >= 0).all(1)
        depth = (lam * self.zn[t]).sum(1) * 0.5 + 0.5
        return inside, lam, depth

    def coverage(self, t: torch.Tensor, px: torch.Tensor, py: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``fragment`` from the triangles' plane equations (the depth pass's fast path)."""
        g = self.plane.index_select(0, t)
        dx, dy = px - g[:, 0], py - g[:, 1]
        lam = g[:, 2:5] * dx[:, None] + g[:, 5:8] * dy[:, None]
        lam[:, 0] += 1.0
        inside = (lam >= 0).all(1)
        depth = (g[:, 8] + g[:, 9] * dx + g[:, 10] * dy) * 0.5 + 0.5
        return inside, lam, depth

    def perspective(self, t: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
        """Perspective-correct barycentrics in the *source* triangle [n,3]."""
        q = lam * self.inv_w[t]
        q = q / q.sum(1, keepdim=True)
        return (q[:, :, None] * self.bary[t]).sum(1)


@dataclass
class Visibility:
    """The depth pass's result before any barycentrics are computed: per (view, GL row,
    column) the packed (depth bits, clipped-triangle id) key. Callers that need barycentrics
    at only some samples (shading once per pixel and triangle) ask for those alone."""

    key: torch.Tensor  # [V*H*W] int64, NO_HIT where nothing was drawn
    setups: list[_Setup]
    offsets: list[int]
    V: int
    H: int
    W: int

    def triangles(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(source triangle [V*H*W] int64, -1 where nothing was drawn; window depth
        [V*H*W] float32, 1 there)."""
        if self.key.is_cuda and len(self.setups) == 1:  # one fused kernel (_fused)
            return _fused("triangles")(self.key, self.setups[0].src, self.offsets[0])
        hit = self.key != NO_HIT
        depth = torch.where(hit, (self.key >> 32).to(torch.int32).view(torch.float32), 1.0)
        gid = torch.where(hit, self.key & 0xFFFFFFFF, -1)
        tri = torch.full_like(gid, -1)
        for st, base in zip(self.setups, self.offsets, strict=True):
            if len(st.src) == 0:
                continue
            m = (gid >= base) & (gid < base + len(st.src))
            t = (gid - base).clamp(0, len(st.src) - 1)
            tri = torch.where(m, st.src.index_select(0, t), tri)
        return tri, depth

    def barycentrics(self, flat: torch.Tensor) -> torch.Tensor:
        """Perspective-correct barycentrics [n,3] in the source triangle at the samples
        ``flat`` (indices into [V*H*W], GL rows; each one drawn)."""
        gid = self.key.index_select(0, flat) & 0xFFFFFFFF
        pix = flat % (self.H * self.W)
        px = (pix % self.W).float() + 0.5
        py = torch.div(pix, self.W, rounding_mode="floor").float() + 0.5

        def at(st: _Setup, t: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return st.perspective(t, st.fragment(t, x, y)[1])

        if len(self.setups) == 1:  # the usual case: every sample is the one setup's
            st = self.setups[0]
            if flat.is_cuda:  # one fused kernel (_fused)
                return _fused("barycentrics")(gid - self.offsets[0], px, py, st.sx, st.sy,
                                              st.area, st.inv_w, st.bary)
            return at(st, gid - self.offsets[0], px, py)
        out = torch.zeros(len(flat), 3, dtype=torch.float32, device=flat.device)
        for st, base in zip(self.setups, self.offsets, strict=True):
            j = torch.nonzero((gid >= base) & (gid < base + len(st.src))).squeeze(1)
            if len(j):
                out[j] = at(st, gid[j] - base, px[j], py[j])
        return out

    def resolve(self, depth_only: bool = False) -> RasterOut:
        """Per sample the nearest source triangle, its barycentrics and depth
        (``depth_only``: the depth alone, a shadow map)."""
        return _resolve(self, depth_only)


def _fused(name: str) -> Callable[..., Any]:
    """The GPU's compiled form of a per-sample step after the depth pass (``raster_fused``)."""
    return fused(name)


def rasterize(tris: torch.Tensor, view_proj: torch.Tensor, width: int, height: int, *,
              visible: torch.Tensor | None = None, cull: torch.Tensor | None = None,
              cut_tris: torch.Tensor | None = None, cut_fn: CutFn | None = None,
              budget: int = 1 << 22, max_instances: int = 1 << 22,
              depth_only: bool = False) -> RasterOut:
    """:func:`visibility`, resolved: per sample the nearest source triangle, its
    barycentrics and depth (``depth_only``: the depth alone, a shadow map)."""
    return visibility(tris, view_proj, width, height, visible=visible, cull=cull,
                      cut_tris=cut_tris, cut_fn=cut_fn, budget=budget,
                      max_instances=max_instances).resolve(depth_only)


def visibility(tris: torch.Tensor, view_proj: torch.Tensor, width: int, height: int, *,
               visible: torch.Tensor | None = None, cull: torch.Tensor | None = None,
               cut_tris: torch.Tensor | None = None, cut_fn: CutFn | None = None,
               budget: int = 1 << 22, max_instances: int = 1 << 22) -> Visibility:
    """Rasterize world triangles ``tris`` [F,3,3] into V views (``view_proj`` [V,4,4]) of
    ``width`` x ``height``. ``visible`` [V,F] bool: which triangles each view draws (draw
    masks); ``cull`` [F] int (CullBack / CullNone); ``cut_tris`` [F] bool: triangles whose
    fragments ``cut_fn`` may cut out. ``budget``: candidate pixels per chunk;
    ``max_instances``: (view, triangle) pairs clipped at once."""
    if tris.ndim != 3 or tris.shape[1:] != (3, 3):
        raise ValueError(f"rasterize: tris has shape {tuple(tris.shape)}; expected [F,3,3]")
    V, F = view_proj.shape[0], tris.shape[0]
    dev = tris.device
    H, W = int(height), int(width)
    zbuf = torch.full((V * H * W,), NO_HIT, dtype=torch.int64, device=dev)
    hom = torch.cat([tris, torch.ones_like(tris[..., :1])], -1)  # [F,3,4]
    per = max(1, max_instances // max(F, 1))
    setups: list[_Setup] = []
    offsets: list[int] = []
    base = 0
    for v0 in range(0, V, per):
        v1 = min(V, v0 + per)
        clip = torch.einsum("vij,fkj->vfki", view_proj[v0:v1], hom)  # [v,F,3,4]
        view = torch.arange(v0, v1, device=dev)[:, None].expand(-1, F)
        src = torch.arange(F, device=dev)[None, :].expand(v1 - v0, -1)
        sel = torch.ones(v1 - v0, F, dtype=torch.bool, device=dev) if visible is None \
            else visible[v0:v1].clone()
        # frustum culling: every corner beyond one side plane (x, y) or the far plane
        x, y, z, w = clip.unbind(-1)
        for out in (x > w, x < -w, y > w, y < -w, z > w):
            sel &= ~out.all(-1)
        i = torch.nonzero(sel.reshape(-1)).squeeze(1)
        c, s = clip.reshape(-1, 3, 4)[i], src.reshape(-1)[i]
        vv = view.reshape(-1)[i]
        # _clip_near returns indices into i: carry the view along through src
        c, k, b = _clip_near(c, torch.arange(len(i), device=dev))
        st = _Setup(c, vv[k], s[k], b, cull, W, H)
        if base + len(st.src) > 0xFFFFFFFF:  # ids share an int64 key with 32 depth bits
            raise ValueError(f"rasterize: {base + len(st.src)} (view, triangle) pairs after "
                             f"clipping in one call; at most {0xFFFFFFFF} (2^32 - 1): render "
                             "fewer views per call or a coarser level")
        _depth_pass(st, zbuf, W, H, cut_tris, cut_fn, budget, base)
        setups.append(st)
        offsets.append(base)
        base += len(st.src)
    return Visibility(zbuf, setups, offsets, V, H, W)


def _depth_pass(st: _Setup, zbuf: torch.Tensor, W: int, H: int, cut_tris: torch.Tensor | None,
                cut_fn: CutFn | None, budget: int, base: int) -> None:
    n = len(st.src)
    if n == 0:
        return
    dev = zbuf.device
    counts = st.bw * st.bh
    kernel = KERNEL
    if kernel == "auto":
        kernel = "triton" if raster_triton.available(dev) else "torch"
    if kernel != "torch":
        # the kernel draws every triangle that nothing cuts out; the torch loop below the rest
        maybe_cut = (cut_tris[st.src] if cut_fn is not None and cut_tris is not None
                     else torch.zeros(n, dtype=torch.bool, device=dev))
        raster_triton.depth_pass(st, zbuf, W, H, base, skip=maybe_cut,
                                 interpret=kernel == "interpret")
        if not bool(maybe_cut.any()):
            return
        counts = torch.where(maybe_cut, counts, torch.zeros_like(counts))
    cum = torch.cumsum(counts, 0)
    cum_cpu = cum.cpu()
    start = 0
    while start < n:
        before = int(cum_cpu[start - 1]) if start else 0
        end = int(torch.searchsorted(cum_cpu, before + budget, right=True))
        end = max(end, start + 1)
        tri = torch.arange(start, end, device=dev)
        cnt = counts[start:end]
        t = torch.repeat_interleave(tri, cnt)
        # int32 for the pixel arithmetic (a chunk and a view stay far below 2^31; int64
        # division is several times slower on CPUs)
        local = torch.arange(int(cum_cpu[end - 1]) - before, device=dev,
                             dtype=torch.int32) - (cum[start:end] - cnt - before).int(
                             ).repeat_interleave(cnt)
        bw = st.bw32.index_select(0, t)
        q = torch.div(local, bw, rounding_mode="floor")
        px = st.x032.index_select(0, t) + (local - q * bw)
        py = st.y032.index_select(0, t) + q
        inside, lam, depth = st.coverage(t, px.float() + 0.5, py.float() + 0.5)
        inside &= (depth >= 0) & (depth <= 1)
        if cut_fn is not None and cut_tris is not None:
            maybe = inside & cut_tris[st.src[t]]
            if maybe.any():
                j = torch.nonzero(maybe).squeeze(1)
                cut = cut_fn(st.src[t[j]], st.perspective(t[j], lam[j]))
                inside[j[cut]] = False
        j = torch.nonzero(inside).squeeze(1)
        pix = (st.view[t[j]] * H + py[j].long()) * W + px[j].long()
        key = (depth[j].contiguous().view(torch.int32).to(torch.int64) << 32) | (t[j] + base)
        zbuf.scatter_reduce_(0, pix, key, reduce="amin")
        start = end


def _resolve(vis: Visibility, depth_only: bool = False) -> RasterOut:
    V, H, W = vis.V, vis.H, vis.W
    zbuf = vis.key
    if depth_only:
        hit_d = zbuf != NO_HIT
        depth_d = torch.where(hit_d, (zbuf >> 32).to(torch.int32).view(torch.float32), 1.0)
        return RasterOut(zbuf.new_zeros(0), zbuf.new_zeros(0, dtype=torch.float32),
                         depth_d.view(V, H, W))
    tri, depth = vis.triangles()
    bary = torch.zeros(V * H * W, 3, dtype=torch.float32, device=zbuf.device)
    hit = torch.nonzero(tri >= 0).squeeze(1)
    bary[hit] = vis.barycentrics(hit)
    return RasterOut(tri.view(V, H, W), bary.view(V, H, W, 3), depth.view(V, H, W))
