"""The ray-casting side of the raster-against-BVH microbenchmark (issue #30): its BVH holds
every triangle once inside boxes that contain them, and its rays (the same C++/CUDA source,
built here by the host's C++ compiler) name the triangle the rasterizer names at each sample."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from stages.engine.compute.raster import visibility

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "bvh"))
import bvh as B  # noqa: E402

needs_cxx = pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")),
                               reason="no C++ compiler on PATH")


def _scene(F: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.uniform([-5, -5, -20], [5, 5, -3], (F, 1, 3))
    return (c + rng.normal(0, 0.6, (F, 3, 3))).astype(np.float32)


def _cameras(n: int) -> torch.Tensor:
    t = 1 / np.tan(np.radians(30))
    near, far, aspect = 0.1, 100.0, 4 / 3
    P = np.array([[t / aspect, 0, 0, 0], [0, t, 0, 0],
                  [0, 0, (far + near) / (near - far), 2 * far * near / (near - far)],
                  [0, 0, -1, 0]], np.float32)
    out = []
    for j in range(n):
        V = np.eye(4, dtype=np.float32)
        V[:3, 3] = [0.3 * j, -0.2 * j, 0.5 * j]  # one camera ends up among the triangles
        out.append(P @ V)
    return torch.tensor(np.stack(out))


def test_every_triangle_sits_in_one_leaf_inside_every_box_above_it() -> None:
    tris = _scene(5000, 1)
    bv = B.build(tris, leaf=4)
    ints = bv.nodes.view(np.int32)
    leaf = ints[:, 7] > 0
    assert ints[leaf, 7].max() <= 4
    seen = np.zeros(len(tris), int)
    for first, n in zip(ints[leaf, 3], ints[leaf, 7], strict=True):
        seen[first:first + n] += 1
    assert (seen == 1).all()
    assert sorted(bv.ids.tolist()) == list(range(len(tris)))
    # rows of bv.tris are the source triangles in leaf order (v0, e1, e2)
    src = tris[bv.ids]
    assert np.array_equal(bv.tris[:, :3], src[:, 0])
    # each node's box holds its children's boxes and its leaf's triangles
    lo, hi = bv.nodes[:, :3], bv.nodes[:, 4:7]
    for i in np.nonzero(~leaf)[0]:
        c = ints[i, 3]
        for k in (c, c + 1):
            assert (lo[i] <= lo[k]).all() and (hi[k] <= hi[i]).all()
    for i in np.nonzero(leaf)[0]:
        t = src[ints[i, 3]:ints[i, 3] + ints[i, 7]].reshape(-1, 3)
        assert (lo[i] <= t.min(0)).all() and (t.max(0) <= hi[i]).all()


def test_bad_triangles_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"expected \[F>0, 3, 3\]"):
        B.build(np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match="leaf=0; expected at least 1"):  # it looped forever
        B.build(_scene(10, 0), leaf=0)


@needs_cxx
def test_rays_name_the_triangle_the_rasterizer_names(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("WMFORGE_BVH_CACHE", str(tmp_path))
    tris = _scene(4000, 2)
    vp = _cameras(4)
    W, H = 80, 60
    bv = B.build(tris)
    tri_b, t_b = B.cast(bv, torch.linalg.inv(vp.double()).float().numpy(), W, H)
    tri_r, _ = visibility(torch.from_numpy(tris), vp, W, H).triangles()
    tri_r = tri_r.view(4, H, W).numpy()
    hit = tri_r >= 0
    assert 0.5 < hit.mean() < 1.0  # both sky and surfaces in view
    assert ((tri_b >= 0) == hit).mean() > 0.998
    assert (tri_b == tri_r).mean() > 0.995  # differences: samples on shared edges only
    assert ((t_b >= 0) & (t_b <= 1))[tri_b >= 0].all()
    assert (t_b[tri_b < 0] == 1.0).all()


@needs_cxx
def test_identical_centroids_degenerate_triangles_and_axis_rays(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """Review cases: triangles sharing one centroid (the median split must still halve them:
    the traversal's stack holds 64 nodes and drops what does not fit), zero-area triangles
    (never named) and odd sizes (a pixel centre at NDC 0: rays parallel to the axes)."""
    monkeypatch.setenv("WMFORGE_BVH_CACHE", str(tmp_path))
    rng = np.random.default_rng(3)
    base = _scene(3000, 4)
    c = base.mean(1, keepdims=True)
    # 2000 triangles with one centroid: each a scaled copy of one shape about (0, 0, -8)
    shape = rng.normal(0, 1, (1, 3, 3)).astype(np.float32)
    shape -= shape.mean(1, keepdims=True)
    same = (np.array([0, 0, -8], np.float32) + shape * rng.uniform(0.1, 2, (2000, 1, 1))
            ).astype(np.float32)
    flat = np.repeat(c, 3, 1)[:500].copy()  # zero-area: three corners at one point
    tris = np.concatenate([base, same, flat]).astype(np.float32)
    bv = B.build(tris)
    assert bv.depth <= int(np.ceil(np.log2(len(tris) / 4))) + 2 < 64
    vp = _cameras(3)
    W, H = 81, 61
    tri_b, _ = B.cast(bv, torch.linalg.inv(vp.double()).float().numpy(), W, H)
    tri_r, _ = visibility(torch.from_numpy(tris), vp, W, H).triangles()
    tri_r = tri_r.view(3, H, W).numpy()
    assert not np.isin(tri_b, np.arange(5000, 5500)).any()  # no zero-area triangle named
    assert (tri_b == tri_r).mean() > 0.99
    assert (tri_b[:, :, W // 2] == tri_r[:, :, W // 2]).mean() > 0.98  # x = 0: d.x = 0 rays
    assert (tri_b[:, H // 2] == tri_r[:, H // 2]).mean() > 0.98
    print("agree", (tri_b == tri_r).mean(), "hit", (tri_r >= 0).mean(), "depth", bv.depth)
