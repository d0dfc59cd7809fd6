"""The rasterizer's depth pass as one Triton kernel (issue #30): the GPU path of
``raster._depth_pass``, the same arithmetic, so the same depth buffer bit for bit.

Each (triangle, 8x8 tile of its pixel bounding box) pair is one program of 64 lanes, one lane
a pixel: the coverage and window depth from the triangle's plane equations, exactly as
``raster._Setup.coverage`` computes them (multiplies and adds rounded one by one: no fused
multiply-add), then ``atomic_min`` of the packed (depth bits, triangle id) key into the depth
buffer. ``atomic_min`` is order-independent, so any schedule gives the same bytes. The pairs
are enumerated in torch (a prefix sum over tiles per triangle), so a triangle that fills a
view becomes many programs and a pixel-sized one a single program.

Triangles whose fragments may be cut out by alpha stay on the torch path (the cut-out samples
textures), with the same key, into the same buffer. On a CPU the kernel runs only under
Triton's interpreter (the tests, at small sizes); the torch path is the CPU renderer.
"""

from __future__ import annotations

from typing import Any

import torch

TILE = 8
# under the interpreter each program costs the same whatever its lanes: larger tiles, fewer
# programs (the lanes' arithmetic, hence the result, does not depend on the tile)
INTERPRET_TILE = 32
_kernels: dict[bool, Any] = {}


def available(device: torch.device) -> bool:
    """Whether the kernel can run on ``device`` (CUDA with Triton importable)."""
    if device.type != "cuda":
        return False
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - no Triton, or a broken install: the torch path
        return False
    return True


def _kernel_source() -> Any:
    import triton.language as tl

    def depth_tiles(zbuf, plane, x0, y0, bw, bh, view, pair_tri, pair_tile, W, H, base,
                    TILE: tl.constexpr):  # noqa: ANN001, ANN202, N803 - a Triton kernel
        p = tl.program_id(0)
        t = tl.load(pair_tri + p)
        k = tl.load(pair_tile + p)
        w = tl.load(bw + t)
        h = tl.load(bh + t)
        tiles_x = (w + TILE - 1) // TILE
        offs = tl.arange(0, TILE * TILE)
        lx = (k % tiles_x) * TILE + offs % TILE
        ly = (k // tiles_x) * TILE + offs // TILE
        m = (lx < w) & (ly < h)
        px = tl.load(x0 + t) + lx
        py = tl.load(y0 + t) + ly
        g = plane + t * 11
        dx = (px.to(tl.float32) + 0.5) - tl.load(g)
        dy = (py.to(tl.float32) + 0.5) - tl.load(g + 1)
        l0 = (tl.load(g + 2) * dx + tl.load(g + 5) * dy) + 1.0
        l1 = tl.load(g + 3) * dx + tl.load(g + 6) * dy
        l2 = tl.load(g + 4) * dx + tl.load(g + 7) * dy
        depth = ((tl.load(g + 8) + tl.load(g + 9) * dx) + tl.load(g + 10) * dy) * 0.5 + 0.5
        inside = m & (l0 >= 0) & (l1 >= 0) & (l2 >= 0) & (depth >= 0) & (depth <= 1)
        v = tl.load(view + t)
        pix = (v * H + py.to(tl.int64)) * W + px.to(tl.int64)
        key = (depth.to(tl.int32, bitcast=True).to(tl.int64) << 32) | (t.to(tl.int64) + base)
        tl.atomic_min(zbuf + pix, key, mask=inside)

    return depth_tiles


def _kernel(interpret: bool) -> Any:
    if interpret not in _kernels:
        import triton
        from triton.runtime.interpreter import InterpretedFunction

        src = _kernel_source()
        _kernels[interpret] = InterpretedFunction(src) if interpret else triton.jit(src)
    return _kernels[interpret]


def depth_pass(st: Any, zbuf: torch.Tensor, W: int, H: int, base: int,
               skip: torch.Tensor | None = None, interpret: bool = False) -> int:
    """Draw ``st``'s triangles (a ``raster._Setup``) into ``zbuf``, except where ``skip`` [n]
    is True. ``interpret``: Triton's interpreter (CPU tensors). Returns the programs run."""
    n = len(st.src)
    if n == 0:
        return 0
    dev = zbuf.device
    T = INTERPRET_TILE if interpret else TILE
    tiles = ((st.bw + T - 1) // T) * ((st.bh + T - 1) // T)
    if skip is not None:
        tiles = torch.where(skip, torch.zeros_like(tiles), tiles)
    total = int(tiles.sum())
    if total == 0:
        return 0
    tri = torch.arange(n, device=dev, dtype=torch.int32)
    pair_tri = torch.repeat_interleave(tri, tiles, output_size=total)
    first = (torch.cumsum(tiles, 0) - tiles).index_select(0, pair_tri.long())
    pair_tile = (torch.arange(total, device=dev, dtype=torch.int64) - first).int()
    i32 = torch.int32
    args = (zbuf, st.plane.contiguous(), st.x0.to(i32), st.y0.to(i32), st.bw.to(i32),
            st.bh.to(i32), st.view.to(torch.int64).contiguous(), pair_tri, pair_tile,
            int(W), int(H), int(base))
    k = _kernel(interpret)
    if interpret:
        k[(total,)](*args, TILE=T)
    else:  # no fused multiply-add: the torch path's rounding, so the same bits
        k[(total,)](*args, TILE=T, enable_fp_fusion=False)
    return total


__all__ = ["TILE", "available", "depth_pass"]
