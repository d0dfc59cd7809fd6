"""Procedural meshes (Z up, metres; UVs in world metres / tile so textures tile evenly) and
procedural textures (numpy, seeded)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .gltf_writer import MeshData


def _quad(p0, p1, p2, p3, normal, uv_scale: float) -> MeshData:
    pts = np.array([p0, p1, p2, p3], dtype=np.float32)
    e1 = pts[1] - pts[0]
    e2 = pts[3] - pts[0]
    u = np.array([0, np.linalg.norm(e1), np.linalg.norm(e1), 0], dtype=np.float32) / uv_scale
    v = np.array([0, 0, np.linalg.norm(e2), np.linalg.norm(e2)], dtype=np.float32) / uv_scale
    n = np.tile(np.asarray(normal, np.float32), (4, 1))
    return MeshData(pts, n, np.stack([u, v], 1), np.array([0, 1, 2, 0, 2, 3], np.uint32))


def box(sx: float, sy: float, sz: float, uv_scale: float = 1.0, center=(0.0, 0.0, 0.0),
        bottom: bool = True) -> MeshData:
    """Axis-aligned box; ``center`` is the centre of its bottom face when ``bottom``."""
    x, y = sx / 2, sy / 2
    cx, cy, cz = center
    z0 = cz if bottom else cz - sz / 2
    z1 = z0 + sz
    x0, x1, y0, y1 = cx - x, cx + x, cy - y, cy + y
    faces = [
        _quad((x0, y0, z1), (x1, y0, z1), (x1, y1, z1), (x0, y1, z1), (0, 0, 1), uv_scale),
        _quad((x0, y1, z0), (x1, y1, z0), (x1, y0, z0), (x0, y0, z0), (0, 0, -1), uv_scale),
        _quad((x0, y0, z0), (x1, y0, z0), (x1, y0, z1), (x0, y0, z1), (0, -1, 0), uv_scale),
        _quad((x1, y1, z0), (x0, y1, z0), (x0, y1, z1), (x1, y1, z1), (0, 1, 0), uv_scale),
        _quad((x1, y0, z0), (x1, y1, z0), (x1, y1, z1), (x1, y0, z1), (1, 0, 0), uv_scale),
        _quad((x0, y1, z0), (x0, y0, z0), (x0, y0, z1), (x0, y1, z1), (-1, 0, 0), uv_scale),
    ]
    return MeshData.merge(faces)


def ramp(length: float, width: float, angle_deg: float, uv_scale: float = 1.0,
         start=(0.0, 0.0, 0.0), yaw_deg: float = 0.0) -> MeshData:
    """A solid wedge rising along +x at ``angle_deg`` from ``start`` (bottom-front centre)."""
    h = length * math.tan(math.radians(angle_deg))
    w = width / 2
    s = math.sin(math.radians(angle_deg))
    c = math.cos(math.radians(angle_deg))
    parts = [
        _quad((0, -w, 0), (length, -w, h), (length, w, h), (0, w, 0), (-s, 0, c), uv_scale),
        _quad((0, w, 0), (length, w, 0), (length, -w, 0), (0, -w, 0), (0, 0, -1), uv_scale),
        _quad((length, -w, 0), (length, w, 0), (length, w, h), (length, -w, h), (1, 0, 0),
              uv_scale),
    ]
    # side triangles as degenerate quads
    for sign, ny in ((-1, -1.0), (1, 1.0)):
        yy = sign * w
        tri = MeshData(np.array([(0, yy, 0), (length, yy, 0), (length, yy, h)], np.float32),
                       np.tile(np.array([0, ny, 0], np.float32), (3, 1)),
                       np.array([(0, 0), (length / uv_scale, 0), (length / uv_scale,
                                                                   h / uv_scale)], np.float32),
                       np.array([0, 2, 1] if sign < 0 else [0, 1, 2], np.uint32))
        parts.append(tri)
    return MeshData.merge(parts).transformed(start, yaw_deg)


def stairs(steps: int, step_h: float, step_d: float, width: float, uv_scale: float = 1.0,
           start=(0.0, 0.0, 0.0), yaw_deg: float = 0.0) -> MeshData:
    """A solid flight rising along +x, each step a box from the ground up."""
    parts = [box(step_d, width, step_h * (i + 1), uv_scale, center=(step_d * (i + 0.5), 0, 0))
             for i in range(steps)]
    return MeshData.merge(parts).transformed(start, yaw_deg)


def cylinder(radius: float, height: float, segments: int = 12, uv_scale: float = 1.0,
             top_radius: float | None = None, center=(0.0, 0.0, 0.0)) -> MeshData:
    tr = radius if top_radius is None else top_radius
    pos, nrm, uv, idx = [], [], [], []
    for i in range(segments + 1):
        a = 2 * math.pi * i / segments
        ca, sa = math.cos(a), math.sin(a)
        pos += [(radius * ca, radius * sa, 0.0), (tr * ca, tr * sa, height)]
        nrm += [(ca, sa, 0.0), (ca, sa, 0.0)]
        u = a * radius / uv_scale
        uv += [(u, 0.0), (u, height / uv_scale)]
    for i in range(segments):
        b = 2 * i
        idx += [b, b + 2, b + 3, b, b + 3, b + 1]
    # caps
    base = len(pos)
    pos += [(0.0, 0.0, height)]
    nrm += [(0.0, 0.0, 1.0)]
    uv += [(0.0, 0.0)]
    for i in range(segments):
        a = 2 * math.pi * i / segments
        pos.append((tr * math.cos(a), tr * math.sin(a), height))
        nrm.append((0.0, 0.0, 1.0))
        uv.append((math.cos(a), math.sin(a)))
    for i in range(segments):
        idx += [base, base + 1 + i, base + 1 + (i + 1) % segments]
    m = MeshData(np.array(pos, np.float32), np.array(nrm, np.float32), np.array(uv, np.float32),
                 np.array(idx, np.uint32))
    return m.transformed(center)


def heightfield(size_x: float, size_y: float, cells: int, height: Callable, uv_scale: float = 2.0,
                center=(0.0, 0.0)) -> MeshData:
    """Grid terrain; ``height(x, y)`` takes and returns numpy arrays (world x, y)."""
    xs = np.linspace(-size_x / 2, size_x / 2, cells + 1) + center[0]
    ys = np.linspace(-size_y / 2, size_y / 2, cells + 1) + center[1]
    gx, gy = np.meshgrid(xs, ys, indexing="xy")
    gz = height(gx, gy)
    dzdx = np.gradient(gz, xs, axis=1)
    dzdy = np.gradient(gz, ys, axis=0)
    n = np.stack([-dzdx, -dzdy, np.ones_like(gz)], -1)
    n /= np.linalg.norm(n, axis=-1, keepdims=True)
    pos = np.stack([gx, gy, gz], -1).reshape(-1, 3)
    uv = np.stack([gx / uv_scale, gy / uv_scale], -1).reshape(-1, 2)
    i = np.arange(cells)
    a = (i[None, :] + (cells + 1) * i[:, None]).reshape(-1)
    b, c, d = a + 1, a + cells + 2, a + cells + 1
    idx = np.stack([a, b, c, a, c, d], -1).reshape(-1)
    return MeshData(pos.astype(np.float32), n.reshape(-1, 3).astype(np.float32),
                    uv.astype(np.float32), idx.astype(np.uint32))


# ---------------------------------------------------------------- textures


def _value_noise(rng: np.random.Generator, size: int, octaves: int = 4) -> np.ndarray:
    out = np.zeros((size, size), np.float64)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        cells = 4 * 2**o
        grid = rng.random((cells + 1, cells + 1))
        grid[-1, :] = grid[0, :]
        grid[:, -1] = grid[:, 0]  # tileable
        t = np.linspace(0, cells, size, endpoint=False)
        i0 = t.astype(int)
        f = t - i0
        f = f * f * (3 - 2 * f)
        a = grid[i0][:, i0]
        b = grid[i0][:, i0 + 1]
        c = grid[i0 + 1][:, i0]
        d = grid[i0 + 1][:, i0 + 1]
        fx = f[None, :]
        fy = f[:, None]
        out += amp * ((a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy)
        total += amp
        amp *= 0.5
    return out / total


def texture(kind: str, size: int, seed: int) -> np.ndarray:
    """A tileable (size, size, 3) uint8 texture of the named kind."""
    rng = np.random.default_rng(seed)
    n = _value_noise(rng, size)
    yy, xx = np.mgrid[0:size, 0:size] / size
    palettes = {
        "grass": ((0.20, 0.42, 0.12), (0.42, 0.62, 0.22)),
        "rock": ((0.36, 0.34, 0.32), (0.62, 0.60, 0.56)),
        "sand": ((0.70, 0.58, 0.38), (0.88, 0.78, 0.56)),
        "dirt": ((0.36, 0.26, 0.16), (0.54, 0.42, 0.28)),
        "concrete": ((0.50, 0.50, 0.50), (0.68, 0.68, 0.66)),
        "asphalt": ((0.12, 0.12, 0.13), (0.28, 0.28, 0.30)),
        "wood": ((0.40, 0.25, 0.12), (0.62, 0.44, 0.24)),
        "metal": ((0.42, 0.46, 0.50), (0.66, 0.70, 0.74)),
        "bark": ((0.22, 0.15, 0.09), (0.38, 0.27, 0.16)),
        "leaves": ((0.10, 0.30, 0.10), (0.25, 0.50, 0.18)),
        "plaster": ((0.76, 0.72, 0.64), (0.90, 0.88, 0.82)),
        "tile": ((0.55, 0.50, 0.46), (0.80, 0.78, 0.74)),
        "brick": ((0.48, 0.20, 0.14), (0.70, 0.34, 0.24)),
        "stone": ((0.46, 0.44, 0.40), (0.70, 0.68, 0.62)),
        "scifi": ((0.20, 0.24, 0.30), (0.46, 0.52, 0.60)),
        "fabric": ((0.20, 0.24, 0.46), (0.36, 0.42, 0.70)),
    }
    lo, hi = (np.array(c) for c in palettes[kind])
    t = n.copy()
    if kind == "wood":
        t = 0.5 + 0.5 * np.sin((yy * 24 + n * 6) * math.pi)
    elif kind in ("brick", "tile", "scifi", "stone"):
        rows = {"brick": 8, "tile": 4, "scifi": 4, "stone": 6}[kind]
        cols = rows // 2 if kind == "brick" else rows
        shift = ((np.floor(yy * rows) % 2) * 0.5 / cols) if kind in ("brick", "stone") else 0
        fx = (xx + shift) * cols % 1
        fy = yy * rows % 1
        mortar = (fx < 0.06) | (fy < 0.08)
        t = 0.3 + 0.7 * n
        t = np.where(mortar, 0.05 if kind != "scifi" else 1.3, t)
    img = lo[None, None, :] + (hi - lo)[None, None, :] * np.clip(t, 0, 1.4)[..., None]
    img += (rng.random((size, size, 1)) - 0.5) * 0.04
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)
