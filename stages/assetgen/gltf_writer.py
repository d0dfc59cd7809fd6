"""A small deterministic glTF 2.0 binary (.glb) writer for procedurally generated assets.

Callers work in the contract frame (Z up, metres); the writer converts to glTF's Y-up frame.
Output bytes depend only on the inputs: JSON keys sorted, fixed separators, 4-byte alignment.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FLOAT = 5126
UINT32 = 5125
UINT16 = 5123


def encode_png(rgb: np.ndarray) -> bytes:
    """Encode an (H, W, 3|4) uint8 array as PNG (zlib level 6, no timestamps)."""
    arr = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w, c = arr.shape
    color_type = {3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + arr[y].tobytes() for y in range(h))

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return (struct.pack(">I", len(payload)) + kind + payload
                + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 6))
            + chunk(b"IEND", b""))


def z_up_to_y_up(p: np.ndarray) -> np.ndarray:
    """(x, y, z) Z-up → glTF (x, z, -y)."""
    p = np.asarray(p, dtype=np.float32)
    return np.stack([p[..., 0], p[..., 2], -p[..., 1]], axis=-1)


def yaw_quat_y_up(yaw_deg: float) -> list[float]:
    """Rotation about world Z (contract yaw) expressed as a glTF (x, y, z, w) quaternion.

    World +Z is glTF +Y, so a yaw is a rotation about glTF's Y axis.
    """
    h = math.radians(yaw_deg) / 2
    return [0.0, math.sin(h), 0.0, math.cos(h)]


@dataclass
class MeshData:
    positions: np.ndarray  # (N, 3) float32, Z up
    normals: np.ndarray  # (N, 3) float32, Z up
    uvs: np.ndarray  # (N, 2) float32
    indices: np.ndarray  # (M,) uint32

    def transformed(self, offset=(0.0, 0.0, 0.0), yaw_deg: float = 0.0) -> MeshData:
        c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
        rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=np.float32)
        return MeshData(self.positions @ rot.T + np.asarray(offset, dtype=np.float32),
                        self.normals @ rot.T, self.uvs, self.indices)

    @staticmethod
    def merge(parts: list[MeshData]) -> MeshData:
        pos, nrm, uv, idx = [], [], [], []
        base = 0
        for p in parts:
            pos.append(p.positions)
            nrm.append(p.normals)
            uv.append(p.uvs)
            idx.append(p.indices + base)
            base += len(p.positions)
        return MeshData(np.concatenate(pos).astype(np.float32),
                        np.concatenate(nrm).astype(np.float32),
                        np.concatenate(uv).astype(np.float32),
                        np.concatenate(idx).astype(np.uint32))


def tangent_frame(m: MeshData) -> np.ndarray:
    """Per-vertex (N, 4) tangents (xyz, handedness w) from positions, normals and UVs: the
    per-triangle UV gradient accumulated per vertex, orthogonalised against the normal."""
    p, uv, tri = m.positions.astype(np.float64), m.uvs.astype(np.float64), m.indices.reshape(-1, 3)
    e1, e2 = p[tri[:, 1]] - p[tri[:, 0]], p[tri[:, 2]] - p[tri[:, 0]]
    d1, d2 = uv[tri[:, 1]] - uv[tri[:, 0]], uv[tri[:, 2]] - uv[tri[:, 0]]
    det = d1[:, 0] * d2[:, 1] - d2[:, 0] * d1[:, 1]
    r = np.where(np.abs(det) > 1e-12, 1.0 / np.where(det == 0, 1, det), 0.0)[:, None]
    t = (e1 * d2[:, 1:2] - e2 * d1[:, 1:2]) * r
    b = (e2 * d1[:, 0:1] - e1 * d2[:, 0:1]) * r
    tan = np.zeros_like(p)
    bit = np.zeros_like(p)
    for k in range(3):
        np.add.at(tan, tri[:, k], t)
        np.add.at(bit, tri[:, k], b)
    n = m.normals.astype(np.float64)
    tan -= n * (tan * n).sum(1, keepdims=True)
    ln = np.linalg.norm(tan, axis=1, keepdims=True)
    # degenerate UVs: any vector perpendicular to the normal
    alt = np.cross(n, np.where(np.abs(n[:, 2:3]) < 0.9, [[0.0, 0.0, 1.0]], [[1.0, 0.0, 0.0]]))
    tan = np.where(ln > 1e-9, tan / np.maximum(ln, 1e-12), alt / np.maximum(
        np.linalg.norm(alt, axis=1, keepdims=True), 1e-12))
    w = np.where((np.cross(n, tan) * bit).sum(1) < 0, -1.0, 1.0)
    return np.concatenate([tan, w[:, None]], axis=1).astype(np.float32)


@dataclass
class GlbBuilder:
    generator: str = "wmforge assetgen"
    _bin: bytearray = field(default_factory=bytearray)
    doc: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.doc = {
            "asset": {"version": "2.0", "generator": self.generator},
            "scene": 0,
            "scenes": [{"nodes": []}],
            "nodes": [], "meshes": [], "materials": [], "accessors": [], "bufferViews": [],
            "buffers": [], "images": [], "textures": [], "samplers": [],
        }

    # -- buffers
    def _view(self, data: bytes, target: int | None = None) -> int:
        while len(self._bin) % 4:
            self._bin.append(0)
        view: dict[str, Any] = {"buffer": 0, "byteOffset": len(self._bin), "byteLength": len(data)}
        if target:
            view["target"] = target
        self._bin.extend(data)
        self.doc["bufferViews"].append(view)
        return len(self.doc["bufferViews"]) - 1

    def _accessor(self, arr: np.ndarray, kind: str, comp: int, target: int | None,
                  minmax: bool = False) -> int:
        view = self._view(arr.tobytes(), target)
        acc: dict[str, Any] = {"bufferView": view, "componentType": comp, "count": int(len(arr)),
                               "type": kind}
        if minmax:
            acc["min"] = [float(v) for v in arr.min(axis=0)]
            acc["max"] = [float(v) for v in arr.max(axis=0)]
        self.doc["accessors"].append(acc)
        return len(self.doc["accessors"]) - 1

    # -- materials
    def texture(self, png: bytes, name: str) -> int:
        if not self.doc["samplers"]:
            self.doc["samplers"].append({"magFilter": 9729, "minFilter": 9987, "wrapS": 10497,
                                         "wrapT": 10497})
        view = self._view(png)
        self.doc["images"].append({"bufferView": view, "mimeType": "image/png", "name": name})
        self.doc["textures"].append({"sampler": 0, "source": len(self.doc["images"]) - 1})
        return len(self.doc["textures"]) - 1

    def material(self, name: str, color=(1.0, 1.0, 1.0), texture: int | None = None,
                 roughness: float = 0.8, metallic: float = 0.0, emissive=None,
                 metallic_roughness: int | None = None, normal: int | None = None,
                 normal_scale: float = 1.0) -> int:
        """A glTF 2.0 metallic-roughness material. ``metallic_roughness`` is a texture whose
        G channel is roughness and B channel metalness (multiplied by the factors);
        ``normal`` a tangent-space normal map."""
        pbr: dict[str, Any] = {"baseColorFactor": [float(c) for c in color] + [1.0],
                               "roughnessFactor": roughness, "metallicFactor": metallic}
        if texture is not None:
            pbr["baseColorTexture"] = {"index": texture}
        if metallic_roughness is not None:
            pbr["metallicRoughnessTexture"] = {"index": metallic_roughness}
        mat: dict[str, Any] = {"name": name, "pbrMetallicRoughness": pbr}
        if normal is not None:
            mat["normalTexture"] = {"index": normal, "scale": float(normal_scale)}
        if emissive is not None:
            mat["emissiveFactor"] = [float(c) for c in emissive]
        self.doc["materials"].append(mat)
        return len(self.doc["materials"]) - 1

    # -- geometry
    def primitive(self, data: MeshData, material: int, tangents: bool = False,
                  joints: np.ndarray | None = None, weights: np.ndarray | None = None) -> dict:
        """One triangle primitive. ``tangents`` adds TANGENT (for normal maps); ``joints``
        (N, 4) and ``weights`` (N, 4) make it skinned (JOINTS_0 / WEIGHTS_0)."""
        pos = z_up_to_y_up(data.positions)
        nrm = z_up_to_y_up(data.normals)
        attrs = {
            "POSITION": self._accessor(pos, "VEC3", FLOAT, 34962, minmax=True),
            "NORMAL": self._accessor(nrm, "VEC3", FLOAT, 34962),
            "TEXCOORD_0": self._accessor(data.uvs.astype(np.float32), "VEC2", FLOAT, 34962),
        }
        if tangents:
            tan = tangent_frame(data)
            tan_y = np.concatenate([z_up_to_y_up(tan[:, :3]), tan[:, 3:]], axis=1)
            attrs["TANGENT"] = self._accessor(tan_y.astype(np.float32), "VEC4", FLOAT, 34962)
        if joints is not None and weights is not None:
            attrs["JOINTS_0"] = self._accessor(np.asarray(joints, np.uint16), "VEC4", UINT16,
                                               34962)
            attrs["WEIGHTS_0"] = self._accessor(np.asarray(weights, np.float32), "VEC4", FLOAT,
                                                34962)
        return {"attributes": attrs, "material": material,
                "indices": self._accessor(data.indices.astype(np.uint32), "SCALAR", UINT32,
                                          34963)}

    def mesh(self, name: str, data: MeshData, material: int, tangents: bool = False) -> int:
        return self.mesh_of(name, [self.primitive(data, material, tangents)])

    def mesh_of(self, name: str, primitives: list[dict]) -> int:
        self.doc["meshes"].append({"name": name, "primitives": primitives})
        return len(self.doc["meshes"]) - 1

    def skin(self, joints: list[int], inverse_bind: np.ndarray, skeleton: int) -> int:
        """A skin over ``joints`` (node indices); ``inverse_bind`` (J, 4, 4) row-major, Y up."""
        ibm = np.asarray(inverse_bind, np.float32).transpose(0, 2, 1).reshape(-1, 16)
        self.doc.setdefault("skins", []).append({
            "joints": list(joints), "skeleton": skeleton,
            "inverseBindMatrices": self._accessor(np.ascontiguousarray(ibm), "MAT4", FLOAT,
                                                  None)})
        return len(self.doc["skins"]) - 1

    def node(self, name: str, mesh: int | None = None, translation=(0.0, 0.0, 0.0),
             yaw_deg: float = 0.0, scale: float = 1.0, extras: dict | None = None,
             parent: int | None = None, rotation: list[float] | None = None) -> int:
        node: dict[str, Any] = {"name": name}
        if mesh is not None:
            node["mesh"] = mesh
        t = z_up_to_y_up(np.asarray(translation, dtype=np.float64))
        if any(abs(v) > 0 for v in t):
            node["translation"] = [round(float(v), 6) for v in t]
        rot = rotation if rotation is not None else (yaw_quat_y_up(yaw_deg) if yaw_deg else None)
        if rot is not None:
            node["rotation"] = [round(float(v), 9) for v in rot]
        if scale != 1.0:
            node["scale"] = [scale, scale, scale]
        if extras:
            node["extras"] = extras
        self.doc["nodes"].append(node)
        idx = len(self.doc["nodes"]) - 1
        if parent is None:
            self.doc["scenes"][0]["nodes"].append(idx)
        else:
            self.doc["nodes"][parent].setdefault("children", []).append(idx)
        return idx

    def light(self, name: str, kind: str, color, intensity: float, translation=(0, 0, 0),
              rotation: list[float] | None = None, range_m: float | None = None,
              cone_deg: tuple[float, float] | None = None) -> int:
        """A KHR_lights_punctual light (``kind``: directional, point or spot; a spot shines
        along its node's -Z, ``cone_deg`` = inner and outer cone half-angles)."""
        ext = self.doc.setdefault("extensions", {}).setdefault("KHR_lights_punctual",
                                                                {"lights": []})
        light: dict[str, Any] = {"name": name, "type": kind, "color": [float(c) for c in color],
                                 "intensity": float(intensity)}
        if range_m:
            light["range"] = float(range_m)
        if kind == "spot":
            inner, outer = cone_deg or (0.0, 45.0)
            light["spot"] = {"innerConeAngle": math.radians(inner),
                             "outerConeAngle": math.radians(outer)}
        ext["lights"].append(light)
        used = self.doc.setdefault("extensionsUsed", [])
        if "KHR_lights_punctual" not in used:
            used.append("KHR_lights_punctual")
        n = self.node(name, translation=translation, rotation=rotation)
        light_ref = {"light": len(ext["lights"]) - 1}
        self.doc["nodes"][n]["extensions"] = {"KHR_lights_punctual": light_ref}
        return n

    def animation(self, name: str, channels: list[tuple], extras: dict | None = None) -> None:
        """Add a clip: channels of (node, times (K,), rotations (K, 4) glTF xyzw) or
        (node, times, values, path) with path ``rotation`` | ``translation`` (glTF Y up)."""
        samplers, chans = [], []
        for ch in channels:
            node, times, vals = ch[:3]
            path = ch[3] if len(ch) > 3 else "rotation"
            t = self._accessor(np.asarray(times, np.float32).reshape(-1, 1), "SCALAR", FLOAT,
                               None, minmax=True)
            r = self._accessor(np.asarray(vals, np.float32),
                               "VEC4" if path == "rotation" else "VEC3", FLOAT, None)
            samplers.append({"input": t, "output": r, "interpolation": "LINEAR"})
            chans.append({"sampler": len(samplers) - 1,
                          "target": {"node": node, "path": path}})
        anim: dict[str, Any] = {"name": name, "samplers": samplers, "channels": chans}
        if extras:
            anim["extras"] = extras
        self.doc.setdefault("animations", []).append(anim)

    def scene_extras(self, extras: dict) -> None:
        self.doc["scenes"][0]["extras"] = extras

    def to_glb(self) -> bytes:
        doc = {k: v for k, v in self.doc.items() if v != [] or k in ("nodes", "scenes")}
        while len(self._bin) % 4:
            self._bin.append(0)
        doc["buffers"] = [{"byteLength": len(self._bin)}]
        js = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")
        js += b" " * ((4 - len(js) % 4) % 4)
        total = 12 + 8 + len(js) + 8 + len(self._bin)
        return (struct.pack("<4sII", b"glTF", 2, total) + struct.pack("<I4s", len(js), b"JSON")
                + js + struct.pack("<I4s", len(self._bin), b"BIN\x00") + bytes(self._bin))
