"""The rasterizer's per-sample steps after the depth pass as GPU graphs (issue #30): each
sample's triangle id and depth (``Visibility.triangles``) and the leaders' barycentrics
(``Visibility.barycentrics``), written as plain functions of the set-up's arrays so that
``torch.compile`` makes each one kernel instead of ~10 launches over every sample. ``raster``
calls them on CUDA tensors with one set-up; the CPU keeps its eager steps (same bytes as
before). The empty-key constant and the edge functions live here, shared by both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .compiled import Compiled

NO_HIT = torch.iinfo(torch.int64).max  # the depth buffer's key where nothing was drawn


def _edges(sx: torch.Tensor, sy: torch.Tensor, px: torch.Tensor, py: torch.Tensor
           ) -> torch.Tensor:
    """Edge functions [n,3] of points (px, py) against triangles with corners (sx, sy) [n,3]:
    e_i is the signed doubled area opposite corner i (so e / area are barycentrics)."""
    x0, x1, x2 = sx.unbind(1)
    y0, y1, y2 = sy.unbind(1)
    e0 = (x2 - x1) * (py - y1) - (y2 - y1) * (px - x1)
    e1 = (x0 - x2) * (py - y2) - (y0 - y2) * (px - x2)
    e2 = (x1 - x0) * (py - y0) - (y1 - y0) * (px - x0)
    return torch.stack([e0, e1, e2], 1)


def triangles_one(key: torch.Tensor, src: torch.Tensor, base: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """:meth:`Visibility.triangles` for one set-up: the same integer and bit operations."""
    hit = key != NO_HIT
    depth = torch.where(hit, (key >> 32).to(torch.int32).view(torch.float32), 1.0)
    if src.shape[0] == 0:  # nothing survived clipping: nothing drawn (and nothing to index)
        return torch.full_like(key, -1), depth
    gid = torch.where(hit, key & 0xFFFFFFFF, -1)
    m = (gid >= base) & (gid < base + src.shape[0])
    t = (gid - base).clamp(0, src.shape[0] - 1)
    return torch.where(m, src.index_select(0, t), -1), depth


def barycentrics_one(t: torch.Tensor, px: torch.Tensor, py: torch.Tensor, sx: torch.Tensor,
                      sy: torch.Tensor, area: torch.Tensor, inv_w: torch.Tensor,
                      bary: torch.Tensor) -> torch.Tensor:
    """``_Setup.perspective(t, _Setup.fragment(t, px, py)[1])`` from the set-up's arrays."""
    lam = _edges(sx[t], sy[t], px, py) / area[t][:, None]
    q = lam * inv_w[t]
    q = q / q.sum(1, keepdim=True)
    return (q[:, :, None] * bary[t]).sum(1)


_FUSED: dict[str, Callable[..., Any]] = {}


def fused(name: str) -> Callable[..., Any]:
    """On a GPU, the per-sample steps after the depth pass as torch.compile graphs (each one
    kernel instead of ~10 launches over every sample). Their sizes change every frame (the
    clipped triangles, the leaders), so they are compiled with dynamic shapes: one graph for
    all frames. A graph that fails to compile runs eagerly (``compiled.Compiled``)."""
    if name not in _FUSED:
        fn: Any = {"triangles": triangles_one, "barycentrics": barycentrics_one}[name]
        _FUSED[name] = Compiled(fn, f"raster.{name}", dynamic=True)
    return _FUSED[name]


__all__ = ["barycentrics_one", "fused", "triangles_one"]
