"""The rasterizer's Triton depth kernel (issue #30) against its torch ops, on the CPU under
Triton's interpreter: the same triangle ids, barycentrics and depth bit for bit, on a random
triangle soup seen by several perspective views (near-plane clipping, back faces, triangles
larger than the view and smaller than a pixel), with alpha cut-out triangles mixed in (they
stay on the torch path) and in a shadow map (depth only)."""

from __future__ import annotations

import math

import pytest
import torch

from stages.engine.compute import raster, raster_triton
from stages.engine.compute.raster import CullBack, CullNone, rasterize

pytest.importorskip("triton")


def _look(eye, target, fov_deg, aspect, near=0.1, far=80.0):
    eye, target = torch.tensor(eye, dtype=torch.float32), torch.tensor(target, dtype=torch.float32)
    f = target - eye
    f = f / f.norm()
    r = torch.linalg.cross(f, torch.tensor([0.0, 0.0, 1.0]))
    r = r / r.norm()
    u = torch.linalg.cross(r, f)
    view = torch.eye(4)
    view[0, :3], view[1, :3], view[2, :3] = r, u, -f
    view[:3, 3] = -view[:3, :3] @ eye
    g = 1 / math.tan(math.radians(fov_deg) / 2)
    proj = torch.tensor([[g / aspect, 0, 0, 0], [0, g, 0, 0],
                         [0, 0, (far + near) / (near - far), 2 * far * near / (near - far)],
                         [0, 0, -1, 0]])
    return proj @ view


def _soup(seed: int = 3):
    gen = torch.Generator().manual_seed(seed)
    lift = torch.tensor([1.0, 1.0, 0.25])  # above the ground, in front of the cameras
    small = (torch.rand(60, 1, 3, generator=gen) * 16 - 8) * lift + 2.2 * lift \
        + torch.rand(60, 3, 3, generator=gen)
    big = torch.tensor([[[-60.0, -60.0, 0.0], [60.0, -60.0, 0.0], [0.0, 60.0, 0.0]],
                        [[-3.0, 5.0, -1.0], [3.0, 5.0, -1.0], [0.0, 5.0, 6.0]]])
    tiny = torch.rand(20, 1, 3, generator=gen) * 10 - 5 + torch.rand(20, 3, 3, generator=gen) * 0.01
    return torch.cat([big, small, tiny]).float()


@pytest.fixture
def views():
    W, H = 48, 28
    vp = torch.stack([_look((0, -12, 3), (0, 0, 0.5), 70, W / H),
                      _look((9, 2, 1.5), (0, 0, 0.5), 90, W / H),
                      _look((0.5, 0.3, 0.2), (2, 8, 0.0), 100, W / H)])  # ground near-clipped
    return vp, W, H


def _both(monkeypatch, *args, **kw):
    outs = []
    for kernel in ("torch", "interpret"):
        monkeypatch.setattr(raster, "KERNEL", kernel)
        outs.append(rasterize(*args, **kw))
    return outs


def test_the_kernel_draws_the_torch_paths_bits(monkeypatch, views):
    vp, W, H = views
    tris = _soup()
    cull = torch.where(torch.arange(len(tris)) % 3 == 0, CullBack, CullNone)
    ref, ker = _both(monkeypatch, tris, vp, W, H, cull=cull)
    assert torch.equal(ref.tri, ker.tri)
    assert torch.equal(ref.bary, ker.bary)
    assert torch.equal(ref.depth, ker.depth)
    drawn = set(ref.tri.unique().tolist()) - {-1}
    assert 0 in drawn and len(drawn) > 12  # the ground and many small ones in sight
    assert (ref.tri == -1).any()


def test_cut_out_triangles_stay_on_the_torch_path_and_agree(monkeypatch, views):
    vp, W, H = views
    tris = _soup(5)
    cut_tris = torch.arange(len(tris)) % 2 == 1

    def cut(src, bary):  # cut the left part of every odd triangle
        x = torch.einsum("nk,nk->n", bary, tris[src][..., 0])
        return (src % 2 == 1) & (x < tris[src][:, :, 0].mean(1))
    ref, ker = _both(monkeypatch, tris, vp, W, H, cut_tris=cut_tris, cut_fn=cut)
    assert torch.equal(ref.tri, ker.tri) and torch.equal(ref.depth, ker.depth)
    odd = ref.tri[(ref.tri >= 0)] % 2 == 1
    assert odd.any() and (~odd).any()


def test_a_shadow_map_is_the_same_depth(monkeypatch):
    sun = torch.tensor([[0.05, 0, 0, 0], [0, 0.05, 0, 0], [0, 0, -0.05, 0], [0, 0, 0, 1.0]])
    ref, ker = _both(monkeypatch, _soup(7), sun[None], 40, 40, depth_only=True)
    assert torch.equal(ref.depth, ker.depth)
    assert (ref.depth < 1).float().mean() > 0.5


def test_the_kernel_runs_only_where_it_can():
    assert not raster_triton.available(torch.device("cpu"))
