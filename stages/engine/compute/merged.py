"""Shading once per pixel and triangle (``render.compute_shading: pixel``, issue #30): the
compute renderer's fast path at many samples a pixel.

Visibility stays per sample: every (view, sample) is rasterized as before, so coverage and
edges are those of N jittered samples. Shading is not: within one output pixel, the samples
that see the same triangle share one evaluation of the material and the lighting, made at the
first of them (its *leader*: the lowest sample index with that triangle; the sky is one more
"triangle"). Each sample then holds its leader's radiance, and the resolve averages the N
samples as before. This is what MSAA does in hardware; at 8 samples a pixel it shades about
one fragment in 6-7 instead of every one.

What differs from shading every sample (``sample``): inside one triangle a pixel's texture,
normal map and specular are evaluated at one point instead of averaged over N; the sun's
shadow takes all of ``shadow_pcf_taps`` at the leader (per sample each takes its share of
them: the same taps over the pixel). Leaders are taken within each temporal sub-frame, so a
surface is shaded once per sub-frame and keeps its motion blur. At one sample a pixel the two
modes are the same computation.

Everything stays deterministic: leaders are found by fixed comparisons, each leader's
radiance is written to its own slot, and the samples are summed in sample order.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ..render_settings import leaders_mode
from . import leaders_triton
from .cameras import Cameras, Sun
from .compiled import Compiled
from .gbuffer import GBufferRenderer
from .lighting import Lighting
from .shade import quantize_r11g11b10, shade_points, sky_points, stored_planes


def leader_of(tri: torch.Tensor, spatial: int | None = None) -> torch.Tensor:
    """``tri`` [V, N, P] (each sample's source triangle, -1 the sky) → [V, N, P] int64: for
    each sample the lowest sample index of the same pixel that sees the same triangle (itself
    when it is the first). With ``spatial`` = S, the N = T x S samples are T sub-frames of S
    (sample k = t S + s) and leaders are taken within each sub-frame: a surface is shaded once
    per sub-frame, so textures keep their motion blur."""
    if tri.dim() != 3:
        raise ValueError(f"leader_of: tri has shape {tuple(tri.shape)}; expected [V, N, P]")
    V, N, P = tri.shape
    if spatial is not None and spatial != N:
        if spatial < 1 or N % spatial:
            raise ValueError(f"leader_of: {N} samples a pixel are not whole sub-frames of "
                             f"{spatial} spatial samples")
        T = N // spatial
        lead = leader_of(tri.reshape(V * T, spatial, P))
        first = torch.arange(T, device=tri.device).view(1, T, 1, 1) * spatial
        return (lead.view(V, T, spatial, P) + first).view(V, N, P)
    # one column per sample, no writes in place: under torch.compile the whole rule is one
    # elementwise kernel (each pixel's N triangles read once)
    cols = []
    for s in range(N):
        col = torch.full_like(tri[:, s], s, dtype=torch.int64)
        for p in range(s - 1, -1, -1):  # downwards: the last match taken is the lowest
            col = torch.where(tri[:, s] == tri[:, p], p, col)
        cols.append(col)
    return torch.stack(cols, 1)


class MergedShading:
    """Per (view, sample) linear radiance of one frame, shaded once per pixel and triangle
    (see the module docstring), from a :class:`GBufferRenderer`'s scene. The surface
    leaders' work (material, the atlas' storage, lighting, R11G11B10) is one compiled torch
    graph over chunks padded to one size, or on a GPU, where ``leaders_triton.choose`` says
    so for ``leaders`` (render.compute_leaders), one Triton kernel (``kernel``)."""

    def __init__(self, gbr: GBufferRenderer, spatial: int | None = None,
                 leaders: str = "auto"):
        self.gbr = gbr
        self.spatial = spatial  # samples of one sub-frame (leaders are taken within it)
        # the surface leaders' material and lighting: one Triton kernel (leaders_triton) on a
        # GPU with Triton, as leaders_triton.choose says for ``leaders``
        # (render.compute_leaders), else the torch graph below
        self.variant = leaders_triton.choose(gbr.geo.device, leaders)
        self.kernel = (leaders_triton.LeaderKernel(
            gbr.geo, gbr.lut, maxnreg=leaders_mode(self.variant)[1],
            strict=self.variant if leaders_mode(leaders)[0] == "triton" else None)
            if self.variant else None)
        self._chunk: Any = (torch.compile(self._leaders, dynamic=False) if gbr.compiled
                            else self._leaders)
        self._sky_chunk: Any = (Compiled(self._sky, "merged.sky", dynamic=False)
                                if gbr.compiled else self._sky)
        # the leaders' rule: one fused kernel on a GPU instead of ~3 launches per comparison
        self._leader_of: Any = (Compiled(leader_of, "merged.leader_of", dynamic=False)
                                if gbr.compiled else leader_of)
        self.last_leaders = 0  # leaders shaded in the last frame (a benchmark's figure)
        # seconds per step, summed over frames, when a benchmark sets a dict here (each step
        # then waits for the device: slower, so only for the split)
        self.phases: dict[str, float] | None = None
        self._t = 0.0

    @property
    def leaders_path(self) -> str:
        """The path that shaded the leaders (meta.json's compute_leaders): the kernel's
        variant, or torch (with the compile error where auto's kernel failed: then every
        frame from the failing one on took the graph)."""
        if self.kernel is None:
            return "torch"
        if self.kernel.failed is not None:
            return f"torch (the Triton kernel failed to compile: {self.kernel.failed})"
        return str(self.variant)

    def _mark(self, name: str, device: torch.device) -> None:
        if self.phases is None:
            return
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        now = time.perf_counter()
        if name:
            self.phases[name] = self.phases.get(name, 0.0) + now - self._t
        self._t = now

    def radiance(self, cams: Cameras, sun: Sun | None, lt: Lighting, gather: bool = True
                 ) -> Any:
        """[V, N, H, W, 3] float32 (views of ``cams`` in G-buffer order, GL rows: row 0 at
        the bottom): each sample's radiance as the atlas stores it (R11G11B10). With
        ``gather=False``: (the leaders' radiance in their own slots, other slots undefined;
        each sample's leader [V, N, H, W]), which :func:`from_leaders` turns into the
        former (the resolve does it inside its own compiled graph)."""
        gbr = self.gbr
        dev = gbr.geo.device
        self._mark("", dev)
        fr = gbr.geo.frame()
        gbr.frame_tris = fr
        self._mark("scene (skinning, placing)", dev)
        VN, H, W, N = cams.view_proj.shape[0], gbr.H, gbr.W, cams.nsamples
        V = VN // N
        vis = gbr.visibility(fr, cams)
        tri, depth = vis.triangles()
        self._mark("visibility", dev)
        lead = self._leader_of(tri.view(V, N, H * W), self.spatial)
        own = torch.arange(N, device=tri.device).view(1, N, 1)
        leads = (lead == own).reshape(-1)
        # surface leaders get the material and lighting; the sky's (about one leader in six
        # on the sample levels) only the sky along their ray
        flat = torch.nonzero(leads & (tri >= 0)).squeeze(1)
        sky = torch.nonzero(leads & (tri < 0)).squeeze(1)
        self.last_leaders = len(flat) + len(sky)
        ltri = tri.index_select(0, flat)
        bary = vis.barycentrics(flat)
        ldepth = depth.index_select(0, flat)
        self._mark("leaders and their barycentrics", dev)
        smap = gbr.shadow_map(fr, sun) if sun is not None else None
        self._mark("shadow map", dev)
        inv = cams.inverse()
        # only the leaders' rows are written, and only they are read (from_leaders)
        rad = torch.empty(VN * H * W, 3, dtype=torch.float32, device=tri.device)
        self.surface(rad, fr, cams, sun, smap, lt, inv, flat, ltri, bary, ldepth)
        step = max(1, gbr.budget // 4)
        for i in range(0, len(sky), step):
            (f,) = _padded(gbr.compiled, step, sky[i:i + step])
            k = min(step, len(sky) - i)
            rad[f[:k]] = self._sky_chunk(cams, lt, inv, f)[:k]
        self._mark("material and lighting", dev)
        if not gather:
            return rad.view(V, N, H, W, 3), lead.view(V, N, H, W)
        rad = from_leaders(rad.view(V, N, H, W, 3), lead.view(V, N, H, W))
        self._mark("samples from leaders", dev)
        return rad

    def surface(self, rad: torch.Tensor, fr: Any, cams: Cameras, sun: Sun | None,
                smap: torch.Tensor | None, lt: Lighting, inv: torch.Tensor, flat: torch.Tensor,
                tri: torch.Tensor, bary: torch.Tensor, depth: torch.Tensor) -> None:
        """Write the radiance of surface leaders ``flat`` (seeing ``tri`` at ``bary``, window
        ``depth``) into their rows of ``rad`` [V*N*H*W, 3]: the Triton kernel where there is
        one, else the torch graph in chunks."""
        gbr = self.gbr
        if self.kernel is not None and self.kernel(rad, flat, tri, bary, depth, gbr.H, gbr.W,
                                                   fr, cams, inv, sun, smap, lt):
            return
        # chunks of a quarter of the raster budget (1M leaders on a GPU): the last one is
        # padded to the same size (one compiled shape), so a smaller chunk wastes less on
        # padding (at most 1M rows a frame instead of 2M)
        step = max(1, gbr.budget // 4)
        for i in range(0, len(flat), step):
            f, t, b, d = _padded(gbr.compiled, step, flat[i:i + step], tri[i:i + step],
                                 bary[i:i + step], depth[i:i + step])
            k = min(step, len(flat) - i)
            rad[f[:k]] = self._chunk(fr, cams, sun, smap, lt, inv, f, t, b, d)[:k]

    def _where(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                  torch.Tensor, torch.Tensor]:
        """(view, pixel centre x, y (GL rows), NDC x, y) of samples ``flat``."""
        H, W = self.gbr.H, self.gbr.W
        view = torch.div(flat, H * W, rounding_mode="floor")
        pix = flat % (H * W)
        px = (pix % W).float() + 0.5
        py = torch.div(pix, W, rounding_mode="floor").float() + 0.5  # GL rows
        return view, px, py, px / float(W) * 2.0 - 1.0, py / float(H) * 2.0 - 1.0

    def _leaders(self, fr: Any, cams: Cameras, sun: Sun | None, smap: torch.Tensor | None,
                 lt: Lighting, inv: torch.Tensor, flat: torch.Tensor, tri: torch.Tensor,
                 bary: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
        """R11G11B10 radiance [n, 3] of leader samples ``flat`` (GL rows) that see triangle
        ``tri`` (each one a surface)."""
        view, px, py, nx, ny = self._where(flat)
        g = self.gbr.material(fr, cams, sun, smap, view, px, py, tri, bary,
                              torch.zeros_like(view), 1)
        planes = stored_planes(g["emission"], g["albedo"], g["metallic"], g["normal"],
                               g["roughness"], g.get("shadow", torch.ones_like(g["metallic"])))
        rad = shade_points(*planes, depth, nx, ny, inv.index_select(0, view),
                           cams.eye.index_select(0, view), lt)
        return quantize_r11g11b10(rad)

    def _sky(self, cams: Cameras, lt: Lighting, inv: torch.Tensor, flat: torch.Tensor
             ) -> torch.Tensor:
        """R11G11B10 radiance [n, 3] of leader samples ``flat`` that see the sky: the sky
        along their view ray, as :func:`shade_points` gives it at depth 1."""
        view, _, _, nx, ny = self._where(flat)
        return quantize_r11g11b10(sky_points(nx, ny, inv.index_select(0, view),
                                             cams.eye.index_select(0, view),
                                             lt.to(flat.device)))


def from_leaders(rad: torch.Tensor, lead: torch.Tensor) -> torch.Tensor:
    """Every sample's radiance from its leader's: ``rad`` [V, N, H, W, 3] (leaders' slots),
    ``lead`` [V, N, H, W] (each sample's leader) → [V, N, H, W, 3]."""
    return torch.gather(rad, 1, lead[..., None].expand(*lead.shape, 3))


def _padded(compiled: bool, step: int, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``xs`` (one chunk's rows) padded to ``step`` rows by repeating the last one, when a
    compiled graph takes them (one shape, one compile); as they are otherwise."""
    k = len(xs[0])
    if not compiled or k >= step:
        return xs
    return tuple(torch.cat([x, x[-1:].expand(step - k, *x.shape[1:])]) for x in xs)


__all__ = ["MergedShading", "from_leaders", "leader_of"]
