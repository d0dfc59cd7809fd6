"""Procedural meshes (Z up, metres; UVs in world metres / tile so textures tile evenly) and
procedural textures (numpy, seeded)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

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


def lathe(profile: Sequence[tuple[float, float]], segments: int = 16, uv_scale: float = 1.0,
          center=(0.0, 0.0, 0.0), caps: bool = True) -> MeshData:
    """A surface of revolution about +Z through ``profile`` [(radius, z), ...] bottom to top
    (barrels, bins, jars, trunks, posts), smooth normals, closed with flat caps."""
    prof = np.asarray(profile, np.float64)
    r, z = prof[:, 0], prof[:, 1]
    a = np.linspace(0, 2 * math.pi, segments + 1)
    ca, sa = np.cos(a), np.sin(a)
    # profile normals: perpendicular to the (dr, dz) tangent, averaged at the joints
    dr = np.gradient(r)
    dz = np.gradient(z)
    ln = np.hypot(dr, dz) + 1e-12
    nr, nz = dz / ln, -dr / ln
    pos = np.stack([r[:, None] * ca[None], r[:, None] * sa[None],
                    np.repeat(z[:, None], segments + 1, 1)], -1)
    nrm = np.stack([nr[:, None] * ca[None], nr[:, None] * sa[None],
                    np.repeat(nz[:, None], segments + 1, 1)], -1)
    arc = np.concatenate([[0.0], np.cumsum(np.hypot(np.diff(r), np.diff(z)))])
    uv = np.stack([np.repeat((a * max(r.max(), 1e-3) / uv_scale)[None], len(r), 0),
                   np.repeat(arc[:, None] / uv_scale, segments + 1, 1)], -1)
    rows, cols = len(r), segments + 1
    i, j = np.meshgrid(np.arange(rows - 1), np.arange(segments), indexing="ij")
    v0 = (i * cols + j).ravel()
    idx = np.stack([v0, v0 + 1, v0 + cols + 1, v0, v0 + cols + 1, v0 + cols], -1).ravel()
    parts = [MeshData(pos.reshape(-1, 3).astype(np.float32), nrm.reshape(-1, 3).astype(np.float32),
                      uv.reshape(-1, 2).astype(np.float32), idx.astype(np.uint32))]
    if caps:
        for k, up in ((0, -1.0), (rows - 1, 1.0)):
            if r[k] < 1e-6:
                continue
            ring = np.stack([r[k] * ca[:-1], r[k] * sa[:-1], np.full(segments, z[k])], -1)
            cp = np.concatenate([[[0.0, 0.0, z[k]]], ring])
            cuv = np.concatenate([[[0.0, 0.0]], ring[:, :2] / uv_scale])
            fan = np.stack([np.zeros(segments, int), 1 + np.arange(segments),
                            1 + (np.arange(segments) + 1) % segments], -1)
            if up < 0:
                fan = fan[:, ::-1]
            parts.append(MeshData(cp.astype(np.float32),
                                  np.tile(np.array([0, 0, up], np.float32), (len(cp), 1)),
                                  cuv.astype(np.float32), fan.ravel().astype(np.uint32)))
    return MeshData.merge(parts).transformed(center)


def ellipsoid(rx: float, ry: float, rz: float, rings: int = 10, segments: int = 16,
              uv_scale: float = 1.0, center=(0.0, 0.0, 0.0), roughness: float = 0.0,
              seed: int = 0, flat_bottom: float | None = None) -> MeshData:
    """An ellipsoid (heads, tree crowns, bushes); ``roughness`` > 0 displaces it radially with
    smooth seeded noise (rocks, foliage clumps). ``flat_bottom`` clips z below that fraction
    of -rz (a boulder sitting on the ground)."""
    th = np.linspace(0, math.pi, rings + 1)[:, None]
    ph = np.linspace(0, 2 * math.pi, segments + 1)[None, :]
    d = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph),
                  np.cos(th) * np.ones_like(ph)], -1)
    scale = np.ones(d.shape[:2])
    if roughness > 0:
        rng = np.random.default_rng(seed)
        k = rng.normal(size=(6, 3))
        amp = rng.uniform(0.5, 1.0, 6) / np.arange(1, 7)
        bumps = sum(amp[n] * np.sin(d @ k[n] * (1.5 + n) + n) for n in range(6))
        scale = 1 + roughness * bumps / amp.sum()
        scale[:, -1] = scale[:, 0]  # seam
    p = d * scale[..., None] * np.array([rx, ry, rz])
    if flat_bottom is not None:
        p[..., 2] = np.maximum(p[..., 2], -flat_bottom * rz)
    # normals from the surface's own grid derivatives (also right after displacement)
    dth = np.gradient(p, axis=0)
    dph = np.gradient(p, axis=1)
    dph[:, 0] = dph[:, -1] = (p[:, 1] - p[:, -2]) / 2
    n = np.cross(dph, dth)
    fallback = d / np.array([rx, ry, rz]) ** 2
    ln = np.linalg.norm(n, axis=-1, keepdims=True)
    n = np.where(ln > 1e-9, n / np.maximum(ln, 1e-12), fallback / np.linalg.norm(
        fallback, axis=-1, keepdims=True))
    if (n * d).sum() < 0:
        n = -n
    uv = np.stack([np.repeat(ph, rings + 1, 0) * max(rx, ry) / uv_scale,
                   np.repeat(th, segments + 1, 1) * rz / uv_scale], -1)
    cols = segments + 1
    i, j = np.meshgrid(np.arange(rings), np.arange(segments), indexing="ij")
    v0 = (i * cols + j).ravel()
    idx = np.stack([v0, v0 + cols, v0 + cols + 1, v0, v0 + cols + 1, v0 + 1], -1).ravel()
    m = MeshData(p.reshape(-1, 3).astype(np.float32), n.reshape(-1, 3).astype(np.float32),
                 uv.reshape(-1, 2).astype(np.float32), idx.astype(np.uint32))
    return m.transformed(center)


def rounded_box(sx: float, sy: float, sz: float, bevel: float = 0.05, uv_scale: float = 1.0,
                center=(0.0, 0.0, 0.0), segments: int = 3) -> MeshData:
    """A box with rounded edges (``bevel`` radius); ``center`` is its bottom-face centre.
    Built as a superellipsoid-free clamp: a sphere grid pushed out to the box's core."""
    b = min(bevel, sx / 2, sy / 2, sz / 2)
    rings, segs = 4 * segments + 2, 8 * segments + 4
    sph = ellipsoid(1.0, 1.0, 1.0, rings, segs, uv_scale)
    d = sph.positions.astype(np.float64)
    core = np.array([sx / 2 - b, sy / 2 - b, sz / 2 - b])
    p = np.sign(d) * core + d * b
    p[np.abs(d) < 1e-7] = (d * b)[np.abs(d) < 1e-7]
    p[:, 2] += sz / 2
    # box-like UVs: project on the dominant normal axis
    n = sph.normals.astype(np.float64)
    ax = np.abs(n).argmax(1)
    uv = np.where(ax[:, None] == 2, p[:, [0, 1]], np.where(ax[:, None] == 1, p[:, [0, 2]],
                                                           p[:, [1, 2]])) / uv_scale
    return MeshData(p.astype(np.float32), sph.normals, uv.astype(np.float32),
                    sph.indices).transformed(center)


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


# per kind: (dark, light) albedo; SURFACE: roughness (lo, hi), metalness, bump (the
# normal map's 95th-percentile slope, tan of the tilt)
PALETTES: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
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
    "denim": ((0.12, 0.16, 0.30), (0.24, 0.30, 0.48)),
    "skin": ((0.62, 0.44, 0.34), (0.78, 0.58, 0.46)),
    "hair": ((0.10, 0.07, 0.05), (0.24, 0.16, 0.10)),
    "leather": ((0.10, 0.08, 0.07), (0.26, 0.20, 0.16)),
}
SURFACE: dict[str, tuple[tuple[float, float], float, float]] = {
    "grass": ((0.80, 0.98), 0.0, 0.6), "rock": ((0.65, 0.92), 0.0, 0.9),
    "sand": ((0.85, 1.00), 0.0, 0.3), "dirt": ((0.80, 0.98), 0.0, 0.5),
    "concrete": ((0.70, 0.92), 0.0, 0.25), "asphalt": ((0.75, 0.95), 0.0, 0.3),
    "wood": ((0.45, 0.75), 0.0, 0.3), "metal": ((0.25, 0.55), 1.0, 0.12),
    "bark": ((0.80, 1.00), 0.0, 1.0), "leaves": ((0.55, 0.85), 0.0, 0.8),
    "plaster": ((0.75, 0.95), 0.0, 0.12), "tile": ((0.15, 0.45), 0.0, 0.6),
    "brick": ((0.70, 0.95), 0.0, 1.0), "stone": ((0.60, 0.90), 0.0, 0.9),
    "scifi": ((0.30, 0.60), 0.6, 0.5), "fabric": ((0.80, 1.00), 0.0, 0.35),
    "denim": ((0.80, 1.00), 0.0, 0.35), "skin": ((0.45, 0.65), 0.0, 0.05),
    "hair": ((0.40, 0.70), 0.0, 0.5), "leather": ((0.35, 0.60), 0.0, 0.15),
}


def surface_metalness(kind: str) -> float:
    """The glTF metallicFactor of a surface kind (its metallic-roughness map's B is 1)."""
    return SURFACE[kind][1]


def _pattern(kind: str, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(albedo blend 0..1.4, height 0..1) of one kind, tileable."""
    n = _value_noise(rng, size)
    fine = _value_noise(rng, size, octaves=2) if size >= 8 else n
    yy, xx = np.mgrid[0:size, 0:size] / size
    t = n.copy()
    height = n.copy()
    if kind == "wood":
        t = 0.5 + 0.5 * np.sin((yy * 24 + n * 6) * math.pi)
        height = 0.6 * t + 0.4 * fine
    elif kind in ("brick", "tile", "scifi", "stone"):
        rows = {"brick": 8, "tile": 4, "scifi": 4, "stone": 6}[kind]
        cols = rows // 2 if kind == "brick" else rows
        shift = ((np.floor(yy * rows) % 2) * 0.5 / cols) if kind in ("brick", "stone") else 0
        fx = (xx + shift) * cols % 1
        fy = yy * rows % 1
        mortar = (fx < 0.06) | (fy < 0.08)
        # each brick/tile its own shade
        cell = (np.floor((xx + shift) * cols) * 7 + np.floor(yy * rows) * 13) % 5 / 5
        t = 0.2 + 0.55 * n + 0.25 * cell
        t = np.where(mortar, 0.05 if kind != "scifi" else 1.3, t)
        height = np.where(mortar, 0.0, 0.7 + 0.3 * fine)
    elif kind in ("grass", "leaves"):
        blades = np.clip(fine * 1.6 - 0.3, 0, 1)
        t = 0.55 * n + 0.45 * blades
        height = blades
    elif kind in ("fabric", "denim"):
        weave = 0.5 + 0.25 * (np.sin(xx * size * math.pi / 2) + np.sin(yy * size * math.pi / 2))
        t = 0.75 * n + 0.25 * weave
        height = weave
    elif kind == "hair":
        strands = 0.5 + 0.5 * np.sin((xx * 40 + n * 4) * math.pi)
        t = 0.6 * n + 0.4 * strands
        height = strands
    return t, height


def texture(kind: str, size: int, seed: int) -> np.ndarray:
    """A tileable (size, size, 3) uint8 albedo texture of the named kind."""
    return surface_maps(kind, size, seed)[0]


def surface_maps(kind: str, size: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tileable (albedo, metallic-roughness, normal) maps of one kind, each (size, size, 3)
    uint8: albedo in sRGB; metallic-roughness as glTF reads it (G roughness; B metalness 1,
    scaled by the material's metallicFactor ``surface_metalness(kind)``; R 255); a
    tangent-space normal map (+X right, +Y up, 128 = flat) from the kind's bump height."""
    rng = np.random.default_rng(seed)
    t, height = _pattern(kind, size, rng)
    lo, hi = (np.array(c) for c in PALETTES[kind])
    img = lo[None, None, :] + (hi - lo)[None, None, :] * np.clip(t, 0, 1.4)[..., None]
    img += (rng.random((size, size, 1)) - 0.5) * 0.04
    albedo = (np.clip(img, 0, 1) * 255).astype(np.uint8)
    (r_lo, r_hi), metal, bump = SURFACE[kind]
    rough = r_lo + (r_hi - r_lo) * np.clip(1 - height * 0.6 - 0.2 * t, 0, 1)
    # B (metalness) is 1: the material's metallicFactor carries it, so renderers that read
    # only the factors (fixed-function Panda3D derives its diffuse from them) agree with PBR ones
    del metal
    mr = np.stack([np.full_like(rough, 1.0), rough, np.full_like(rough, 1.0)], -1)
    mr_img = (np.clip(mr, 0, 1) * 255).round().astype(np.uint8)
    # normal from the height gradient (wrapping: the map tiles)
    dx = (np.roll(height, -1, axis=1) - np.roll(height, 1, axis=1)) / 2
    dy = (np.roll(height, -1, axis=0) - np.roll(height, 1, axis=0)) / 2
    steep = float(np.percentile(np.hypot(dx, dy), 95))
    gain = bump / steep if steep > 1e-9 else 0.0
    dx, dy = dx * gain, dy * gain
    nrm = np.stack([-dx, dy, np.ones_like(height)], -1)  # image rows grow downward: +Y up is -row
    nrm /= np.linalg.norm(nrm, axis=-1, keepdims=True)
    nrm_img = ((nrm * 0.5 + 0.5) * 255).round().astype(np.uint8)
    return albedo, mr_img, nrm_img
