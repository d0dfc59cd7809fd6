"""Levels heavy on texture size or triangles, for the render.limits tests and benchmark
(issue #30, "Bad input and faults"): a ground quad with one large texture, a ground grid of
millions of triangles, and a recorded trajectory pointed at such a level."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from .rigs import _Glb


def write_textured_level(path: Path, side: int) -> Path:
    """A GLB level: a 100 m ground quad (UVs repeating 10 times) with a ``side`` x ``side`` PNG
    base-colour texture beside it (two flat halves: cheap to write, decode and compress; an
    8192x8192 one is under 1 MB)."""
    from PIL import Image

    img = np.zeros((side, side, 3), np.uint8)
    img[..., 1] = 170
    img[:, : side // 2, 0] = 200
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(path.parent / "ground.png", compress_level=1)
    g = _Glb()
    v = np.array([[-50, 0, -50], [50, 0, -50], [50, 0, 50], [-50, 0, 50]], np.float32)
    uv = np.array([[0, 0], [10, 0], [10, 10], [0, 10]], np.float32)
    prim = {"attributes": {"POSITION": g.acc(v, 5126, "VEC3", True),
                           "NORMAL": g.acc(np.array([[0, 1, 0]] * 4, np.float32), 5126, "VEC3"),
                           "TEXCOORD_0": g.acc(uv, 5126, "VEC2")},
            "indices": g.acc(np.array([0, 2, 1, 0, 3, 2], np.uint16), 5123, "SCALAR"),
            "material": 0}
    g.doc.update(nodes=[{"name": "Ground", "mesh": 0}], meshes=[{"primitives": [prim]}],
                 scenes=[{"nodes": [0]}], scene=0, images=[{"uri": "ground.png"}],
                 samplers=[{"magFilter": 9729, "minFilter": 9987}],  # trilinear, mipmapped
                 textures=[{"source": 0, "sampler": 0}],
                 materials=[{"pbrMetallicRoughness": {"baseColorTexture": {"index": 0},
                                                      "metallicFactor": 0.0}}])
    return g.write(path)


def write_grid_level(path: Path, cells: int, size_m: float = 100.0) -> Path:
    """A GLB level: one ground grid of ``cells`` x ``cells`` quads (2 cells² triangles) over
    ``size_m``, gently waved so no triangle is degenerate, untextured."""
    g = _Glb()
    n = cells + 1
    xs = np.linspace(-size_m / 2, size_m / 2, n, dtype=np.float32)
    x, z = np.meshgrid(xs, xs)
    y = 0.05 * np.sin(x) * np.cos(z)
    v = np.stack([x, y, z], -1).reshape(-1, 3).astype(np.float32)
    i = np.arange(n * n, dtype=np.uint32).reshape(n, n)
    a, b, c, d = i[:-1, :-1], i[:-1, 1:], i[1:, :-1], i[1:, 1:]
    f = np.stack([a, c, b, b, c, d], -1).reshape(-1)
    prim = {"attributes": {"POSITION": g.acc(v, 5126, "VEC3", True)},
            "indices": g.acc(f, 5125, "SCALAR")}
    g.doc.update(nodes=[{"name": "Grid", "mesh": 0}], meshes=[{"primitives": [prim]}],
                 scenes=[{"nodes": [0]}], scene=0)
    return g.write(path)


def replay_on(traj: Path, dst: Path, level: Path) -> Path:
    """A copy of the trajectory folder ``traj`` whose meta.json names ``level`` (scale 1, the
    file's own up axis) and that records no props: its cameras and character replayed there."""
    shutil.copytree(traj, dst)
    meta = json.loads((dst / "meta.json").read_text())
    meta["level"].update(path=str(level), scale=1.0)
    meta["level"].pop("up_axis", None)
    (dst / "meta.json").write_text(json.dumps(meta, indent=1))
    props = pd.read_parquet(dst / "props.parquet")
    props.iloc[0:0].to_parquet(dst / "props.parquet")
    return dst
