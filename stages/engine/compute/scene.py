"""World-space triangles and glTF materials of a loaded Panda3D scene, as torch tensors.

What the GL path draws, read from the scene graph (no GL): every GeomNode under a root, its
vertex data (positions, normals, tangents with their sign, the first UV set, vertex colours),
its net render state (Panda3D's Material: base colour, metallic, roughness, emission; the
textures by stage mode as ``pbr`` binds them: modulate = base colour, selector =
metallic-roughness, normal, emission; colour scale; face culling) and its draw mask (which
camera bits see it). Textures stay 8-bit RGBA in one flat table (4 bytes a texel, rows
bottom-up as Panda3D stores them); sRGB ones are decoded to linear light when sampled, after
the texel fetch and before filtering, as GL does (``gbuffer.sample``).

Static geometry is transformed to world once; dynamic pieces (props on their pivots, the
character copies) keep their local vertices and are placed each frame from their net
transform (``SceneGeometry.frame``), in torch. Skinning: with the posers' skins handed in,
the character's vertices are skinned in torch from its joint matrices (``skinning``, the
same blend as ``fixed_order_skin.FixedOrderSkin``); geoms Panda3D skins itself (layouts with
tangents) and callers that pass no skins re-read the CPU-posed vertices each frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# TextureStage modes -> slot in Materials.tex (as pbr.py's samplers bind them)
SLOT_BASE, SLOT_MR, SLOT_NORMAL, SLOT_EMISSION = 0, 1, 2, 3
WRAP_REPEAT, WRAP_CLAMP, WRAP_MIRROR = 0, 1, 2


@dataclass
class TextureTable:
    """Every texture's RGBA8 texels and mipmaps in one flat tensor, rows bottom-up."""

    texels: torch.Tensor   # [sum over textures and levels of w*h, 4] uint8
    offset: torch.Tensor   # [T, L] int64: first texel of each texture's level (L: most levels)
    size: torch.Tensor     # [T, L, 2] int64: (width, height) of each level
    levels: torch.Tensor   # [T] int64: how many levels each texture has
    srgb: torch.Tensor     # [T] bool: colour channels are sRGB-encoded
    wrap: torch.Tensor     # [T, 2] int64: WRAP_* for u and v
    all_repeat: bool = False  # every texture repeats in u and v (sampling's fast path)


def _srgb_encode(c: np.ndarray) -> np.ndarray:
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.power(np.maximum(c, 0), 1 / 2.4)
                    - 0.055)


MIP_BAND_ROWS = 256  # output rows reduced at a time: bounds the float64 working set


def _linear_rows(img: np.ndarray, srgb: bool) -> np.ndarray:
    """uint8 RGBA rows as float64 in [0, 1], sRGB colour decoded to linear light: a table of
    the 256 codes indexed (the same values the formula gives each texel, far cheaper)."""
    lut = np.arange(256, dtype=np.float64) / 255.0
    out = lut[img]
    if srgb:
        dec = np.where(lut <= 0.04045, lut / 12.92, ((lut + 0.055) / 1.055) ** 2.4)
        out[..., :3] = dec[img[..., :3]]
    return out


def _halve(rows: Any, h: int, w: int, srgb: bool, band: int) -> tuple[np.ndarray, np.ndarray]:
    """One mip reduction of an ``h`` x ``w`` level whose linear rows ``rows(lo, hi)`` gives:
    (the next level in linear float64, its uint8 codes), ``band`` output rows at a time."""
    h2, w2 = max(1, h // 2), max(1, w // 2)
    fy, fx = (2 if h > 1 else 1), (2 if w > 1 else 1)
    lin = np.empty((h2, w2, 4), np.float64)
    codes = np.empty((h2, w2, 4), np.uint8)
    for r in range(0, h2, band):
        n = min(band, h2 - r)
        a = rows(r * fy, (r + n) * fy)[:, : w2 * fx].reshape(n, fy, w2, fx, 4).mean(axis=(1, 3))
        lin[r:r + n] = a
        enc = a.copy()
        if srgb:
            enc[..., :3] = _srgb_encode(a[..., :3])
        codes[r:r + n] = np.clip(np.rint(enc * 255.0), 0, 255).astype(np.uint8)
    return lin, codes


def mip_chain(img: np.ndarray, srgb: bool, band: int = MIP_BAND_ROWS) -> list[np.ndarray]:
    """Level 0 and its 2x2 box-filtered reductions down to 1x1 ([h, w, 4] uint8 each), in
    linear light for sRGB colour (as GL generates sRGB mipmaps); an odd row or column is
    dropped (GL leaves non-power-of-two reductions to the driver). Reduced in bands of rows
    from level 0's codes, the same bytes as reducing whole levels: an 8192x8192 sRGB texture
    took 24 s and 7.8 GB peak RSS held whole in float64, 13 s and 1.8 GB so (2-core CPU box;
    tests/engine/compute/test_mip_chain.py checks the bytes against the whole-level form)."""
    out = [img]
    h, w = img.shape[:2]
    if h == 1 and w == 1:
        return out
    lin, codes = _halve(lambda lo, hi: _linear_rows(img[lo:hi], srgb), h, w, srgb, band)
    out.append(codes)
    while lin.shape[0] > 1 or lin.shape[1] > 1:
        h, w = lin.shape[:2]
        lin, codes = _halve(lambda lo, hi, p=lin: p[lo:hi], h, w, srgb, band)
        out.append(codes)
    return out


@dataclass
class Materials:
    base_color: torch.Tensor   # [M,4] Material base colour x colour scale (linear)
    metallic: torch.Tensor     # [M]
    roughness: torch.Tensor    # [M]
    emission: torch.Tensor     # [M,3]
    tex: torch.Tensor          # [M,4] int64: texture per SLOT_* (-1: none, GL's default)
    may_cut: torch.Tensor      # [M] bool: alpha can fall below 0.5 (cut-out is evaluated)


@dataclass
class Piece:
    """One Geom: its triangles' corners in the node's local frame."""

    np_: Any                   # the GeomNode's NodePath
    geom_index: int
    pos: np.ndarray            # [F,3,3] float32
    nrm: np.ndarray            # [F,3,3]
    tan: np.ndarray            # [F,3,4] (w: bitangent sign; zeros: no tangents)
    uv: np.ndarray             # [F,3,2]
    col: np.ndarray            # [F,3,4] vertex colour (or the flat colour)
    material: int
    cull: int                  # raster.CullBack or CullNone
    bits: int                  # camera bits (0..31) that see it
    reread: bool               # posed vertices change every frame (a skinned character)
    corners: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))


def _mat4(m: Any) -> np.ndarray:
    """Panda3D's row-vector LMatrix4 as a column-vector numpy matrix (p' = M @ p)."""
    return np.array([[m.getCell(r, c) for c in range(4)] for r in range(4)], np.float64).T


def _column(vd: Any, name: str) -> np.ndarray | None:
    """A vertex column as float64 [n, k] (normalised integers scaled to [0, 1])."""
    from panda3d.core import GeomEnums, GeomVertexReader

    fmt = vd.getFormat()
    ai = fmt.getArrayWith(name)
    if ai < 0:
        return None
    arr = fmt.getArray(ai)
    col = arr.getColumn(name)
    n, k = vd.getNumRows(), col.getNumComponents()
    types = {GeomEnums.NT_float32: np.float32, GeomEnums.NT_float64: np.float64,
             GeomEnums.NT_uint8: np.uint8, GeomEnums.NT_uint16: np.uint16}
    dt = types.get(col.getNumericType())
    if dt is not None and n:
        stride = arr.getStride()
        raw = np.frombuffer(vd.getArray(ai).getHandle().getData(), np.uint8)[: n * stride]
        sz = np.dtype(dt).itemsize
        start = col.getStart()
        vals = np.ascontiguousarray(raw.reshape(n, stride)[:, start:start + k * sz])
        out = vals.view(dt).reshape(n, k).astype(np.float64)
        if dt in (np.uint8, np.uint16) and col.getContents() == GeomEnums.C_color:
            out /= 255.0 if dt is np.uint8 else 65535.0
        return out
    r = GeomVertexReader(vd, name)  # packed or unusual layouts: Panda3D's reader
    return np.array([list(r.getData4())[:k] for _ in range(n)], np.float64).reshape(n, k)


def _triangles(geom: Any) -> np.ndarray:
    """[F,3] vertex indices of every triangle of a Geom."""
    from panda3d.core import GeomEnums

    out = []
    for i in range(geom.getNumPrimitives()):
        prim = geom.getPrimitive(i)
        if prim.getPrimitiveType() != GeomEnums.PT_polygons:
            continue  # lines and points: the PBR pass draws them, but they hold no area
        prim = prim.decompose()
        n = prim.getNumVertices()
        if prim.isIndexed():
            dt = {GeomEnums.NT_uint8: np.uint8, GeomEnums.NT_uint16: np.uint16,
                  GeomEnums.NT_uint32: np.uint32}[prim.getIndexType()]
            idx = np.frombuffer(prim.getVertices().getHandle().getData(), dt)[:n]
        else:
            idx = np.arange(prim.getFirstVertex(), prim.getFirstVertex() + n)
        out.append(idx.astype(np.int64).reshape(-1, 3))
    return np.concatenate(out) if out else np.zeros((0, 3), np.int64)


class _MaterialTable:
    """Unique (material, textures, colour scale) states, and the textures they use."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.index: dict[tuple, int] = {}
        self.textures: list[Any] = []
        self.tex_index: dict[int, int] = {}

    def _texture(self, tex: Any) -> int:
        key = id(tex)
        if key not in self.tex_index:
            self.tex_index[key] = len(self.textures)
            self.textures.append(tex)
        return self.tex_index[key]

    def add(self, state: Any) -> tuple[int, Any]:
        """(material index, flat colour or None) of a net render state."""
        from panda3d.core import (
            ColorAttrib,
            ColorScaleAttrib,
            MaterialAttrib,
            TextureAttrib,
            TextureStage,
        )

        ma = state.getAttrib(MaterialAttrib)
        mat = ma.getMaterial() if ma is not None and not ma.isOff() else None
        if mat is None:  # level_render's fallback material on the scene root
            base, metal, rough, emis = (1.0, 1.0, 1.0, 1.0), 0.0, 0.8, (0.0, 0.0, 0.0)
        else:
            bc, em = mat.getBaseColor(), mat.getEmission()
            base, metal, rough = tuple(bc), float(mat.getMetallic()), float(mat.getRoughness())
            emis = (em[0], em[1], em[2])
        csa = state.getAttrib(ColorScaleAttrib)
        scale = tuple(csa.getScale()) if csa is not None else (1.0, 1.0, 1.0, 1.0)
        slots = [-1, -1, -1, -1]
        ta = state.getAttrib(TextureAttrib)
        if ta is not None:
            modes = {TextureStage.M_modulate: SLOT_BASE, TextureStage.M_selector: SLOT_MR,
                     TextureStage.M_normal: SLOT_NORMAL, TextureStage.M_normal_gloss: SLOT_NORMAL,
                     TextureStage.M_emission: SLOT_EMISSION}
            for i in range(ta.getNumOnStages()):
                st = ta.getOnStage(i)
                slot = modes.get(st.getMode())
                if slot is not None and slots[slot] < 0:
                    slots[slot] = self._texture(ta.getOnTexture(st))
        ca = state.getAttrib(ColorAttrib)
        flat = None
        if ca is not None and ca.getColorType() == ColorAttrib.T_flat:
            flat = tuple(ca.getColor())
        elif ca is not None and ca.getColorType() == ColorAttrib.T_off:
            flat = (1.0, 1.0, 1.0, 1.0)
        key = (tuple(round(float(b) * float(s), 7) for b, s in zip(base, scale, strict=True)),
               round(metal, 7), round(rough, 7), tuple(round(float(e), 7) for e in emis),
               tuple(slots))
        if key not in self.index:
            self.index[key] = len(self.rows)
            self.rows.append(key)
        return self.index[key], flat

    def build(self, device: torch.device) -> tuple[Materials, TextureTable]:
        from panda3d.core import SamplerState, Texture

        srgb_formats = {Texture.F_srgb, Texture.F_srgb_alpha, Texture.F_sluminance,
                        Texture.F_sluminance_alpha}
        wrap_of = {SamplerState.WM_repeat: WRAP_REPEAT, SamplerState.WM_mirror: WRAP_MIRROR}
        texels: list[np.ndarray] = []
        offs: list[list[int]] = []
        sizes: list[list[tuple[int, int]]] = []
        srgb, wraps, min_alpha = [], [], []
        off = 0
        for tex in self.textures:
            if not tex.hasRamImage():
                raise ValueError(f"compute scene: texture {tex.getName()!r} "
                                 f"({tex.getFullpath()}) has no image in RAM to read")
            w, h = tex.getXSize(), tex.getYSize()
            img = np.frombuffer(memoryview(tex.getRamImageAs("RGBA")), np.uint8)
            if img.size != w * h * 4:
                raise ValueError(f"compute scene: texture {tex.getName()!r} is {img.size} "
                                 f"bytes as RGBA, expected {w}x{h}x4 (a 3-D or cube texture?)")
            is_srgb = tex.getFormat() in srgb_formats
            chain = mip_chain(img.reshape(h, w, 4), is_srgb) if tex.usesMipmaps() else [
                img.reshape(h, w, 4)]
            offs.append([])
            sizes.append([])
            for lvl in chain:
                texels.append(lvl.reshape(-1, 4))
                offs[-1].append(off)
                sizes[-1].append((lvl.shape[1], lvl.shape[0]))
                off += lvl.shape[0] * lvl.shape[1]
            srgb.append(is_srgb)
            wraps.append((wrap_of.get(tex.getWrapU(), WRAP_CLAMP),
                          wrap_of.get(tex.getWrapV(), WRAP_CLAMP)))
            min_alpha.append(int(img[3::4].min()) if img.size else 255)
        L = max((len(o) for o in offs), default=1)
        nlev = [len(o) for o in offs]
        offs = [o + [o[-1]] * (L - len(o)) for o in offs]
        sizes = [z + [z[-1]] * (L - len(z)) for z in sizes]
        rows = self.rows or [((1.0,) * 4, 0.0, 0.8, (0.0,) * 3, (-1,) * 4)]
        tex = torch.tensor([r[4] for r in rows], dtype=torch.int64)
        base = torch.tensor([r[0] for r in rows], dtype=torch.float32)
        # cut-out is possible where the factor or a base texture's alpha can fall below 0.5
        # (vertex colours' alpha is checked per piece: see SceneGeometry)
        tex_alpha = torch.tensor([min_alpha[t] / 255.0 if t >= 0 else 1.0 for t in tex[:, 0]])
        mats = Materials(base.to(device), torch.tensor([r[1] for r in rows]).to(device),
                         torch.tensor([r[2] for r in rows]).to(device),
                         torch.tensor([r[3] for r in rows], dtype=torch.float32).to(device),
                         tex.to(device), (base[:, 3] * tex_alpha < 0.5).to(device))
        flat = (torch.from_numpy(np.concatenate(texels)) if texels
                else torch.zeros(1, 4, dtype=torch.uint8))
        table = TextureTable(flat.to(device),
                             torch.tensor(offs, dtype=torch.int64).reshape(-1, L).to(device),
                             torch.tensor(sizes, dtype=torch.int64).reshape(-1, L, 2).to(device),
                             torch.tensor(nlev, dtype=torch.int64).to(device),
                             torch.tensor(srgb, dtype=torch.bool).to(device),
                             torch.tensor(wraps, dtype=torch.int64).reshape(-1, 2).to(device),
                             all(w == (WRAP_REPEAT, WRAP_REPEAT) for w in wraps))
        return mats, table
