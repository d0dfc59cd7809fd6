"""A BVH and primary rays against it: the ray-casting side of issue #30's visibility
microbenchmark (``bench_raster_vs_bvh.py``). Benchmark code, not the product's renderer.

- :func:`build` makes a binary BVH over triangles on the host (NumPy): median splits along
  each node's widest centroid axis, made level by level (every node of a level sorted in one
  ``lexsort``), leaves of at most ``leaf`` triangles, children of an inner node adjacent.
  Median splits are what a GPU LBVH gives too; a SAH build would trace faster and build slower.
- :func:`cast` shoots one ray per (view-sample, pixel centre) of the inverse view-projections
  and returns each sample's closest source triangle (-1: none) and its ``t`` (0 at the near
  plane, 1 at the far plane), on a CUDA device through ``bvh_cast.cu`` built by nvcc, on the
  host through the same source built by a C++ compiler. Both are built once into a cache
  folder and loaded with ctypes.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SRC = Path(__file__).with_name("bvh_cast.cu")


@dataclass
class BVH:
    nodes: np.ndarray  # [n, 8] float32 (ints in columns 3 and 7, as their bits)
    tris: np.ndarray   # [F, 9] float32: v0, e1, e2 in leaf order
    ids: np.ndarray    # [F] int32: the source triangle of each row of ``tris``
    depth: int         # levels


def build(tris: np.ndarray, leaf: int = 4) -> BVH:
    """The BVH of ``tris`` [F, 3, 3] (world corners)."""
    tris = np.asarray(tris, np.float32)
    if tris.ndim != 3 or tris.shape[1:] != (3, 3) or len(tris) == 0:
        raise ValueError(f"bvh.build: tris has shape {tris.shape}; expected [F>0, 3, 3]")
    if int(leaf) < 1:  # a leaf of 0 would split one triangle into (0, 1) forever
        raise ValueError(f"bvh.build: leaf={leaf}; expected at least 1 triangle a leaf")
    F = len(tris)
    cen = tris.mean(1)
    lo_t, hi_t = tris.min(1), tris.max(1)
    order = np.arange(F)
    start, end, left = [0], [F], [-1]
    frontier = np.array([0])
    depth = 1
    while len(frontier):
        s = np.asarray(start)[frontier]
        e = np.asarray(end)[frontier]
        split = frontier[(e - s) > leaf]
        if not len(split):
            break
        s, e = np.asarray(start)[split], np.asarray(end)[split]
        counts = e - s
        label = np.repeat(np.arange(len(split)), counts)
        idx = np.repeat(s - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) \
            + np.arange(counts.sum())
        c = cen[order[idx]]
        seg = np.concatenate([[0], np.cumsum(counts)[:-1]])
        ext = np.maximum.reduceat(c, seg) - np.minimum.reduceat(c, seg)
        axis = ext.argmax(1)
        key = c[np.arange(len(idx)), axis[label]]
        perm = np.lexsort((key, label))
        order[idx] = order[idx][perm]
        children = []
        for node, a, b in zip(split.tolist(), s.tolist(), e.tolist(), strict=True):
            mid = (a + b) // 2
            left[node] = len(start)
            start += [a, mid]
            end += [mid, b]
            left += [-1, -1]
            children += [left[node], left[node] + 1]
        frontier = np.array(children)
        depth += 1
    n = len(start)
    start_a, end_a, left_a = np.asarray(start), np.asarray(end), np.asarray(left)
    lo = np.empty((n, 3), np.float32)
    hi = np.empty((n, 3), np.float32)
    is_leaf = left_a < 0
    leaves = np.nonzero(is_leaf)[0]
    lo_o, hi_o = lo_t[order], hi_t[order]
    srt = np.argsort(start_a[leaves], kind="stable")
    ls = leaves[srt]
    lo[ls] = np.minimum.reduceat(lo_o, start_a[ls])
    hi[ls] = np.maximum.reduceat(hi_o, start_a[ls])
    for i in range(n - 1, -1, -1):  # children come after their parent: bottom-up by index
        if not is_leaf[i]:
            lft = left_a[i]
            lo[i] = np.minimum(lo[lft], lo[lft + 1])
            hi[i] = np.maximum(hi[lft], hi[lft + 1])
    nodes = np.zeros((n, 8), np.float32)
    nodes[:, :3], nodes[:, 4:7] = lo, hi
    ints = nodes.view(np.int32)
    ints[:, 3] = np.where(is_leaf, start_a, left_a)
    ints[:, 7] = np.where(is_leaf, end_a - start_a, 0)
    t = tris[order]
    flat = np.concatenate([t[:, 0], t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]], 1)
    return BVH(nodes, np.ascontiguousarray(flat, np.float32), order.astype(np.int32), depth)


_libs: dict[str, Any] = {}


def _cache() -> Path:
    d = Path(os.environ.get("WMFORGE_BVH_CACHE", Path(tempfile.gettempdir()) / "wmforge-bvh"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def library(kind: str) -> Any:
    """The built ``bvh_cast.cu`` (``"cpu"``: a C++ compiler; ``"cuda"``: nvcc), loaded."""
    if kind in _libs:
        return _libs[kind]
    digest = hashlib.sha256(SRC.read_bytes()).hexdigest()[:16]
    out = _cache() / f"libbvh_{kind}_{digest}.so"
    if not out.exists():
        if kind == "cuda":
            nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
            cmd = [nvcc, "-O3", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC"]
        else:
            cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
            if cxx is None:
                raise RuntimeError("bvh: no C++ compiler (g++, c++ or clang++) on PATH")
            cmd = [cxx, "-O2", "-shared", "-fPIC", "-x", "c++"]
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([*cmd, str(SRC), "-o", str(tmp)], check=True)
        tmp.replace(out)
    lib = ctypes.CDLL(str(out))
    fn = lib.bvh_cast_cuda if kind == "cuda" else lib.bvh_cast_cpu
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p] * 2
    _libs[kind] = fn
    return fn


def cast(bvh: Any, inv_vp: Any, width: int, height: int) -> tuple[Any, Any]:
    """(source triangle [P, H, W] int32, -1 where nothing is hit; t [P, H, W] float32) for the
    P inverse view-projections ``inv_vp`` [P, 4, 4] (GL rows: row 0 at the bottom). ``bvh``:
    a :class:`BVH` (host, NumPy) or :func:`to_device`'s tuple of CUDA tensors, with
    ``inv_vp`` a CUDA tensor then."""
    if isinstance(bvh, BVH):
        inv = np.ascontiguousarray(inv_vp, np.float32).reshape(-1, 16)
        P = len(inv)
        tri = np.empty((P, height, width), np.int32)
        t = np.empty((P, height, width), np.float32)
        ptr = [a.ctypes.data for a in (bvh.nodes, bvh.tris, bvh.ids, inv)]
        rc = library("cpu")(*ptr, P, width, height, tri.ctypes.data, t.ctypes.data)
        if rc:
            raise RuntimeError(f"bvh_cast_cpu returned {rc}")
        return tri, t
    import torch

    nodes, tris, ids = bvh
    inv = inv_vp.to(torch.float32).reshape(-1, 16).contiguous()
    P = inv.shape[0]
    tri = torch.empty((P, height, width), dtype=torch.int32, device=inv.device)
    t = torch.empty((P, height, width), dtype=torch.float32, device=inv.device)
    rc = library("cuda")(nodes.data_ptr(), tris.data_ptr(), ids.data_ptr(), inv.data_ptr(), P,
                         width, height, tri.data_ptr(), t.data_ptr())
    if rc:
        raise RuntimeError(f"bvh_cast_cuda: CUDA error {rc}")
    return tri, t


def to_device(bvh: BVH, device: Any) -> tuple[Any, Any, Any]:
    """The BVH's arrays as tensors on ``device``."""
    import torch

    return tuple(torch.from_numpy(a).to(device) for a in (bvh.nodes, bvh.tris, bvh.ids))
