"""One level under construction, written as a .glb: named parts with shared PBR materials,
dynamic props, markers, a lighting preset (the sample library's level recipes build on it)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .gltf_writer import GlbBuilder, MeshData, encode_png
from .primitives import ellipsoid, lathe, rounded_box, surface_maps, surface_metalness

LIGHTING: dict[str, dict] = {
    "day": {"sun_dir": [-0.4, -0.3, -0.85], "sun_color": [1.0, 0.96, 0.88], "sun_lux": 3.0,
            "ambient": [0.42, 0.45, 0.52], "sky": [0.52, 0.70, 0.92], "exposure": 0.0},
    "dusk": {"sun_dir": [-0.9, 0.2, -0.25], "sun_color": [1.0, 0.62, 0.38], "sun_lux": 1.6,
             "ambient": [0.22, 0.20, 0.28], "sky": [0.62, 0.40, 0.36], "exposure": 0.5},
    "interior": {"sun_dir": [0.0, 0.0, -1.0], "sun_color": [0.9, 0.9, 1.0], "sun_lux": 0.3,
                 "ambient": [0.30, 0.28, 0.26], "sky": [0.10, 0.10, 0.12], "exposure": 0.7},
    "night": {"sun_dir": [0.3, 0.5, -0.8], "sun_color": [0.5, 0.6, 0.9], "sun_lux": 0.4,
              "ambient": [0.10, 0.12, 0.18], "sky": [0.04, 0.05, 0.10], "exposure": 1.0},
}


class LevelBuilder:
    """Adds named parts with shared materials; writes one .glb."""

    def __init__(self, name: str, lighting: str, tex_size: int, seed: int):
        self.g = GlbBuilder(generator=f"wmforge assetgen: {name}")
        self.name = name
        self.tex_size = tex_size
        self.seed = seed
        self._mats: dict[str, int] = {}
        self.lighting = lighting
        self._count = 0

    def mat(self, kind: str, emissive=None) -> int:
        """The level's PBR material of one kind: albedo, metallic-roughness and normal maps
        (roughness from the map, metalness from the factor)."""
        key = f"{kind}{'_glow' if emissive else ''}"
        if key not in self._mats:
            albedo, mr, nrm = surface_maps(kind, self.tex_size, self.seed + len(self._mats))
            self._mats[key] = self.g.material(
                key, texture=self.g.texture(encode_png(albedo), kind), emissive=emissive,
                metallic=surface_metalness(kind), roughness=1.0,
                metallic_roughness=self.g.texture(encode_png(mr), f"{kind}_metal_rough"),
                normal=self.g.texture(encode_png(nrm), f"{kind}_normal"))
        return self._mats[key]

    def part(self, name: str, mesh: MeshData, kind: str, translation=(0.0, 0.0, 0.0),
             yaw_deg: float = 0.0, extras: dict | None = None, emissive=None) -> int:
        self._count += 1
        m = self.g.mesh(f"{name}_mesh", mesh, self.mat(kind, emissive), tangents=True)
        return self.g.node(name, mesh=m, translation=translation, yaw_deg=yaw_deg, extras=extras)

    def prop(self, name: str, size, kind: str, pos, mass: float, yaw_deg: float = 0.0,
             shape: str = "crate") -> int:
        """A dynamic prop (pushable) filling the box ``size``; ``pos`` is the centre of its
        bottom face. ``shape``: crate, barrel, bin, jar or chair (see ``prop_mesh``)."""
        return self.part(name, prop_mesh(shape, size), kind, translation=pos, yaw_deg=yaw_deg,
                         extras={"dynamic": True, "mass": mass})

    def tree(self, name: str, pos, height: float, rng: np.random.Generator) -> None:
        """A trunk (``<name>_trunk``, bark) and a crown of three noisy leaf clumps
        (``<name>_crown``)."""
        trunk = lathe([(0.32, 0.0), (0.24, 0.4), (0.2, 0.55 * height), (0.08, 0.8 * height)], 8,
                      1.0)
        self.part(f"{name}_trunk", trunk, "bark", pos)
        seed = int(rng.integers(1 << 30))
        clumps = []
        for k, (dx, dy, dz, r) in enumerate([(0, 0, 0.62, 0.34), (0.22, 0.1, 0.5, 0.26),
                                             (-0.16, -0.18, 0.78, 0.24)]):
            rr = r * height
            clumps.append(ellipsoid(rr, rr * 0.95, rr * 0.85, 6, 10, 1.0,
                                    (dx * height, dy * height, dz * height), 0.25, seed + k))
        x, y, z = pos
        self.part(f"{name}_crown", MeshData.merge(clumps), "leaves", (x, y, z + 0.0))

    def rock(self, name: str, dims, pos, yaw_deg: float, kind: str, seed: int) -> int:
        """A rounded, lumpy boulder about ``dims`` (x, y, z) big, flat where it sits."""
        sx, sy, sz = dims
        m = ellipsoid(sx / 2, sy / 2, sz / 2, 8, 14, 1.0, (0, 0, sz * 0.3), 0.3, seed,
                      flat_bottom=0.6)
        return self.part(name, m, kind, pos, yaw_deg=yaw_deg)

    def marker(self, role: str, name: str, pos, yaw_deg: float = 0.0) -> int:
        return self.g.node(name, translation=pos, yaw_deg=yaw_deg, extras={"role": role})

    def lights(self, points: Sequence[Sequence[float]] = ()) -> None:
        preset = LIGHTING[self.lighting]
        d = np.asarray(preset["sun_dir"], float)
        d /= np.linalg.norm(d)
        # glTF directional lights shine along their local -Z; build a quaternion taking -Z to d
        d_y = np.array([d[0], d[2], -d[1]])  # Z-up → Y-up
        src = np.array([0.0, 0.0, -1.0])
        axis = np.cross(src, d_y)
        s = np.linalg.norm(axis)
        ang = math.atan2(s, float(src @ d_y))
        q = [0.0, 0.0, 0.0, 1.0] if s < 1e-9 else [*(axis / s * math.sin(ang / 2)),
                                                     math.cos(ang / 2)]
        self.g.light("Sun", "directional", preset["sun_color"], float(preset["sun_lux"]),
                     (0, 0, 30),
                     rotation=[float(v) for v in q])
        for i, p in enumerate(points):
            self.g.light(f"Lamp_{i:02d}", "point", (1.0, 0.85, 0.6), 60.0, p, range_m=14.0)
        self.g.scene_extras({"wmforge": {"lighting": self.lighting, **preset}})

    def to_glb(self) -> bytes:
        return self.g.to_glb()


def prop_mesh(shape: str, size) -> MeshData:
    """A prop mesh filling the box ``size`` (x, y, z) from its bottom-face centre (the engine
    gives dynamic props a box collider of their bounds): a bevelled crate, a barrel, a bin, a
    jar or a chair."""
    sx, sy, sz = (float(v) for v in size)
    r = min(sx, sy) / 2
    if shape == "crate":
        return rounded_box(sx, sy, sz, 0.04 * min(sx, sy, sz) / 0.5, 0.5)
    if shape == "barrel":
        return lathe([(r * 0.86, 0.0), (r * 0.94, 0.12 * sz), (r, 0.5 * sz), (r * 0.94, 0.88 * sz),
                      (r * 0.86, sz)], 16, 0.5)
    if shape == "bin":
        return MeshData.merge([lathe([(r * 0.84, 0.0), (r * 0.96, 0.9 * sz), (r, 0.9 * sz)],
                                     14, 0.5),
                               lathe([(r, 0.9 * sz), (r * 0.9, 0.97 * sz), (r * 0.3, sz)], 14,
                                     0.5)])
    if shape == "jar":
        return lathe([(r * 0.55, 0.0), (r * 0.95, 0.3 * sz), (r, 0.5 * sz), (r * 0.6, 0.82 * sz),
                      (r * 0.42, 0.9 * sz), (r * 0.5, sz)], 14, 0.5)
    if shape == "chair":
        seat_h, leg = 0.5 * sz, 0.05 * min(sx, sy) / 0.5
        parts = [rounded_box(sx, sy, 0.06 * sz, 0.015, 0.5, (0, 0, seat_h - 0.06 * sz)),
                 rounded_box(0.06 * sx, sy, sz - seat_h, 0.015, 0.5, (-sx / 2 + 0.03 * sx, 0,
                                                                      seat_h))]
        for lx in (-1, 1):
            for ly in (-1, 1):
                parts.append(lathe([(leg / 2, 0.0), (leg / 2, seat_h - 0.06 * sz)], 6, 0.5,
                                   (lx * (sx / 2 - leg), ly * (sy / 2 - leg), 0.0)))
        return MeshData.merge(parts)
    raise ValueError(f"prop_mesh: unknown shape {shape!r}; expected crate, barrel, bin, jar "
                     "or chair")


def table_mesh(sx: float, sy: float, sz: float) -> MeshData:
    """A table: a bevelled top on four turned legs."""
    leg = 0.07
    parts = [rounded_box(sx, sy, 0.05, 0.015, 0.5, (0, 0, sz - 0.05))]
    for lx in (-1, 1):
        for ly in (-1, 1):
            parts.append(lathe([(leg / 2, 0.0), (leg * 0.35, 0.4 * sz), (leg / 2, sz - 0.05)],
                               8, 0.5, (lx * (sx / 2 - leg), ly * (sy / 2 - leg), 0.0)))
    return MeshData.merge(parts)
