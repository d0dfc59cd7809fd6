"""The triangles of a Panda3D scene in world space, each frame: static ones placed once,
dynamic ones (props, character copies) placed from their node's net transform in torch.

Skinned character pieces are posed in torch from their joint matrices (``skinning``) when
the posers' skins are passed in; otherwise their CPU-posed vertices are re-read each frame.

Per triangle corner it keeps what ``pbr.PBR_VERT`` hands to the fragment shader, in world
space instead of view space (the same vectors rotated): the position, the normal through the
normal matrix and normalised, the tangent through the normal matrix and made orthogonal to the
normal with the bitangent's sign, the first UV set and the colour. See ``scene`` for the
materials and how skinning is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .raster import CullBack, CullNone
from .scene import Materials, Piece, TextureTable, _column, _mat4, _MaterialTable, _triangles
from .upload import upload

NUM_BITS = 32
_CORNERS = ("pos", "nrm", "tan")  # a Frame's columns that move
_CONST = ("uv", "col", "mat", "cull", "bits", "cut")  # and those that never change


@dataclass
class Frame:
    """One frame's triangles (F of them), world space, on the scene's device. Read-only:
    every frame shares the constant columns (uv to cut), and the static triangles' pos, nrm
    and tan where nothing moves, with the scene (``SceneGeometry.frame``)."""

    pos: torch.Tensor    # [F,3,3]
    nrm: torch.Tensor    # [F,3,3] unit per corner
    tan: torch.Tensor    # [F,3,4] tangent (xyz, orthogonal to the normal or 0) and sign
    uv: torch.Tensor     # [F,3,2]
    col: torch.Tensor    # [F,3,4]
    mat: torch.Tensor    # [F] int64 material
    cull: torch.Tensor   # [F] int64 raster.CullBack / CullNone
    bits: torch.Tensor   # [F] int64 camera bits that see the triangle
    cut: torch.Tensor    # [F] bool: alpha cut-out must be evaluated


def normal_matrix(m: torch.Tensor) -> torch.Tensor:
    """The normal matrix of column matrix ``m`` (its upper 3x3's inverse transpose, or the
    3x3 itself when singular). Reads the determinant: call it on the host."""
    m3 = m[:3, :3]
    return torch.linalg.inv(m3).T if abs(float(torch.linalg.det(m3))) > 1e-30 else m3


def _corner_frame(pos: torch.Tensor, nrm: torch.Tensor, tan: torch.Tensor, m: torch.Tensor,
                  nm: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Corners to world by column matrix ``m`` (torch, any device): positions, unit normals,
    tangents (as PBR_VERT: through the normal matrix ``nm``, by default ``normal_matrix(m)``,
    orthogonalised, zero when degenerate). ``m`` [4,4] for every triangle, or [F,4,4] (and
    ``nm`` [F,3,3]) one a triangle."""
    if m.dim() == 3:  # one matrix a triangle: batched products
        assert nm is not None
        p = pos @ m[:, :3, :3].transpose(1, 2) + m[:, None, :3, 3]
        nmt = nm.transpose(1, 2)
    else:
        if nm is None:
            nm = normal_matrix(m)
        p = pos @ m[:3, :3].T + m[:3, 3]
        nmt = nm.T
    n = nrm @ nmt
    n = n / n.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    t = tan[..., :3] @ nmt
    ok = t.norm(dim=-1, keepdim=True) > 1e-6
    t = t - n * (n * t).sum(-1, keepdim=True)
    t = torch.where(ok, t / t.norm(dim=-1, keepdim=True).clamp_min(1e-30), 0.0)
    sign = torch.where(tan[..., 3:4] == 0.0, 1.0, tan[..., 3:4])
    return p, n, torch.cat([t, sign], -1)


def _texcoord_name(vd: Any) -> str:
    """The UV set p3d_MultiTexCoord0 reads: ``texcoord``, else the first texcoord column
    (panda3d-gltf names glTF's TEXCOORD_0 ``texcoord.0``)."""
    from panda3d.core import GeomEnums

    fmt = vd.getFormat()
    if fmt.hasColumn("texcoord"):
        return "texcoord"
    for a in range(fmt.getNumArrays()):
        arr = fmt.getArray(a)
        for j in range(arr.getNumColumns()):
            c = arr.getColumn(j)
            if c.getContents() == GeomEnums.C_texcoord:
                return str(c.getName().getName())
    return "texcoord"


def _piece(gnp: Any, i: int, table: _MaterialTable, reread: bool) -> Piece | None:
    from panda3d.core import BitMask32, CullFaceAttrib, Thread

    node = gnp.node()
    geom = node.getGeom(i)
    vd = geom.getVertexData()
    if vd.getTransformBlendTable() is not None or vd.getSliderTable() is not None:
        vd = vd.animateVertices(True, Thread.getCurrentThread())  # Panda3D's CPU skinning
    idx = _triangles(geom)
    if len(idx) == 0:
        return None
    state = gnp.getNetState().compose(node.getGeomState(i))
    mat, flat = table.add(state)
    cfa = state.getAttrib(CullFaceAttrib)
    mode = cfa.getEffectiveMode() if cfa is not None else CullFaceAttrib.M_cull_clockwise
    if mode == CullFaceAttrib.M_cull_counter_clockwise:
        idx = idx[:, [0, 2, 1]]  # culling the other winding: the same as these turned over
    cull = CullNone if mode == CullFaceAttrib.M_cull_none else CullBack
    bits = sum(1 << b for b in range(NUM_BITS) if not gnp.isHidden(BitMask32.bit(b)))
    v = _column(vd, "vertex")
    assert v is not None  # every drawable Geom has positions
    if v.shape[1] == 4:
        v = v[:, :3] / np.where(v[:, 3:] == 0, 1.0, v[:, 3:])
    n = vd.getNumRows()
    nrm = _column(vd, "normal")
    nrm = nrm[:, :3] if nrm is not None else np.tile([0.0, 0.0, 1.0], (n, 1))
    tan = _column(vd, "tangent")
    if tan is None:
        tan = np.zeros((n, 4))
    elif tan.shape[1] == 3:
        tan = np.concatenate([tan, np.ones((n, 1))], 1)  # GL's default w
    uv = _column(vd, _texcoord_name(vd))
    uv = uv[:, :2] if uv is not None else np.zeros((n, 2))
    col = _column(vd, "color") if flat is None else None
    if flat is not None:
        col = np.tile(np.asarray(flat, np.float64), (n, 1))
    elif col is None:
        col = np.ones((n, 4))
    elif col.shape[1] == 3:
        col = np.concatenate([col, np.ones((n, 1))], 1)
    f32 = np.float32
    return Piece(gnp, i, v[idx].astype(f32), nrm[idx].astype(f32), tan[idx].astype(f32),
                 uv[idx].astype(f32), col[idx].astype(f32), mat, cull, bits, reread, idx)


def _selected(gnp: Any) -> bool:
    """Whether every switch or sequence above the node shows the child on its path (a held
    flip-book draws one frame; ``level_render`` poses them at frame 0)."""
    from panda3d.core import SelectiveChildNode

    p = gnp
    while not p.getParent().isEmpty():
        parent = p.getParent()
        node = parent.node()
        if (node.isOfType(SelectiveChildNode.getClassType())
                and hasattr(node, "getVisibleChild")
                and node.findChild(p.node()) != node.getVisibleChild()):
            return False
        p = parent
    return True


class SceneGeometry:
    """The triangles and materials under ``root`` (the scene NodePath). ``dynamic``: nodes
    whose subtrees move as a whole every frame (the props' pivots); ``animated``: subtrees
    whose vertices are also re-posed every frame (the character copies)."""

    def __init__(self, root: Any, dynamic: list[Any] = (), animated: list[Any] = (),  # type: ignore[assignment]
                 device: str | torch.device = "cpu", skip: tuple[str, ...] = ("sky_dome",),
                 skins: list[Any] = ()):  # type: ignore[assignment]
        self.root = root
        self.device = torch.device(device)
        table = _MaterialTable()
        movers = {m.node().this: m for m in list(dynamic) + list(animated)}
        anim = {m.node().this for m in animated}
        self.static: list[Piece] = []
        self.moving: list[Piece] = []
        for gnp in root.findAllMatches("**/+GeomNode"):
            if gnp.getName() in skip or not _selected(gnp):
                continue
            owner = None
            p = gnp
            while not p.isEmpty():
                if p.node().this in movers:
                    owner = p.node().this
                    break
                p = p.getParent()
            for i in range(gnp.node().getNumGeoms()):
                pc = _piece(gnp, i, table, owner in anim if owner is not None else False)
                if pc is None:
                    continue
                (self.static if owner is None else self.moving).append(pc)
        self.materials: Materials
        self.textures: TextureTable
        self.materials, self.textures = table.build(self.device)
        self._may_cut = [bool(x) for x in self.materials.may_cut.cpu()]
        self._local: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        # GPU skinning: the posers' fixed-order skins, matched to pieces by their vertex data,
        # posed as one batch (SkinBatch); each skinned piece's corners index its vertices
        from .skinning import SkinBatch

        by_data = {sk.static.this: sk for sk in skins}
        used: dict[int, Any] = {}  # each skin once, in the order pieces first use it
        matched = []
        for pc in self.moving:
            vd = pc.np_.node().getGeom(pc.geom_index).getVertexData()
            sk = by_data.get(vd.this)
            if pc.reread and sk is not None:
                used.setdefault(id(sk), sk)
                matched.append((pc, sk))
        self._batch = SkinBatch(list(used.values()), self.device) if used else None
        offset = {i: (self._batch.vertex_offset[k] if self._batch else 0)
                  for k, i in enumerate(used)}
        # id(piece) -> its corners' rows among the batch's posed vertices
        self._skins: dict[int, torch.Tensor] = {}
        # a skinned piece's unposed normals (used when it has none posed) and tangents: fixed
        self._skin_rest: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # whether a skinned piece's skin poses normals (else it keeps its unposed ones)
        self._skin_normals: dict[int, bool] = {}
        for pc, sk in matched:
            self._skins[id(pc)] = torch.from_numpy(pc.corners + offset[id(sk)]).to(self.device)
            self._skin_normals[id(pc)] = sk.rest_n is not None
            self._skin_rest[id(pc)] = (torch.from_numpy(pc.nrm).to(self.device),
                                       torch.from_numpy(pc.tan).to(self.device))
        skinned = [pc for pc in self.moving if id(pc) in self._skins]
        # all skinned corners in one gather a frame, then split back by piece
        self._skin_rows = (torch.cat([self._skins[id(pc)].reshape(-1) for pc in skinned])
                           if skinned else None)
        self._skin_sizes = [len(pc.pos) for pc in skinned]
        self._skinned = skinned
        self._static = self._stack([self._tensors(pc) for pc in self.static], _CORNERS + _CONST)
        # the moving pieces as one batch: each triangle's piece (its row of the frame's
        # matrices), and every triangle's constant columns (static and moving) stacked once
        self._piece_of: torch.Tensor | None = None
        self._frame_const: dict[str, torch.Tensor] | None = None

    def _consts(self, pc: Piece) -> dict[str, torch.Tensor]:
        """What never changes of a piece's triangles, on the device (stacked once)."""
        F = len(pc.pos)
        cut = self._may_cut[pc.material] or bool((pc.col[..., 3] < 0.5).any())
        d = self.device
        return {"uv": torch.from_numpy(pc.uv).to(d), "col": torch.from_numpy(pc.col).to(d),
                "mat": torch.full((F,), pc.material, dtype=torch.int64, device=d),
                "cull": torch.full((F,), pc.cull, dtype=torch.int64, device=d),
                "bits": torch.full((F,), pc.bits, dtype=torch.int64, device=d),
                "cut": torch.full((F,), cut, dtype=torch.bool, device=d)}

    def _tensors(self, pc: Piece) -> dict[str, torch.Tensor]:
        """A static piece's corners in world space (float64 on the CPU, placed once) and its
        constant columns."""
        m = torch.from_numpy(_mat4(pc.np_.getMat(self.root)))
        p, n, t = _corner_frame(torch.from_numpy(pc.pos).double(),
                                torch.from_numpy(pc.nrm).double(),
                                torch.from_numpy(pc.tan).double(), m)
        return {"pos": p.float(), "nrm": n.float(), "tan": t.float(), **self._consts(pc)}

    def _moving_matrices(self, pieces: list[Piece]) -> torch.Tensor:
        """[P,2,4,4] on the device: each of ``pieces``' matrix (float32, as placed now) and,
        in the upper 3x3 of the second, its normal matrix, worked out on the host (no read of
        the device) and uploaded in one copy."""
        out = np.zeros((len(pieces), 2, 4, 4), np.float32)
        for i, pc in enumerate(pieces):
            out[i, 0] = _mat4(pc.np_.getMat(self.root))
        # every piece's normal matrix at once (numpy, float32 as normal_matrix on the host:
        # a singular 3x3 keeps itself)
        m3 = out[:, 0, :3, :3]
        ok = np.abs(np.linalg.det(m3)) > 1e-30
        inv = np.linalg.inv(np.where(ok[:, None, None], m3, np.eye(3, dtype=np.float32)))
        out[:, 1, :3, :3] = np.where(ok[:, None, None], inv.transpose(0, 2, 1), m3)
        return upload(out, self.device)

    def _stack(self, parts: list[dict[str, torch.Tensor]], keys: tuple[str, ...]
               ) -> dict[str, torch.Tensor]:
        """``keys`` of ``parts`` (one dict a piece) concatenated on the device."""
        shapes = {"pos": (3, 3), "nrm": (3, 3), "tan": (3, 4), "uv": (3, 2), "col": (3, 4)}
        out = {}
        for k in keys:
            if parts:
                out[k] = torch.cat([p[k].to(self.device) for p in parts])
            else:
                dt = torch.float32 if k in shapes else (torch.bool if k == "cut" else torch.int64)
                out[k] = torch.zeros((0, *shapes.get(k, ())), dtype=dt, device=self.device)
        return out

    def _reread(self, pc: Piece) -> None:
        """The posed vertices of a skinned piece, as the CPU poser left them this frame."""
        from panda3d.core import Thread

        vd = pc.np_.node().getGeom(pc.geom_index).getVertexData()
        if vd.getTransformBlendTable() is not None or vd.getSliderTable() is not None:
            vd = vd.animateVertices(True, Thread.getCurrentThread())
        v = _column(vd, "vertex")
        assert v is not None
        pc.pos = v[:, :3][pc.corners].astype(np.float32)
        nrm = _column(vd, "normal")
        if nrm is not None:
            pc.nrm = nrm[:, :3][pc.corners].astype(np.float32)

    def frame(self) -> Frame:
        """This frame's triangles: the static ones and every moving piece where the scene
        graph holds it now (re-posed vertices for animated pieces). The moving pieces go
        through as one batch (a few dozen small ops a frame, however many pieces: on this
        project's 2-core machine the step took 21-36 ms a frame with one pass per piece on
        the sample character and props)."""
        if self._batch is not None and self._skin_rows is not None:
            v, nv = self._batch.pose()
            rows = self._skin_rows
            vs = v[rows].float().view(-1, 3, 3).split(self._skin_sizes)
            ns = (nv[rows].float().view(-1, 3, 3).split(self._skin_sizes)
                  if nv is not None else None)
            for k, pc in enumerate(self._skinned):
                rest_nrm, tan = self._skin_rest[id(pc)]
                nrm = (ns[k] if ns is not None and self._skin_normals[id(pc)]
                       else rest_nrm)
                self._local[id(pc)] = (vs[k], nrm, tan)
        for pc in self.moving:
            if pc.reread and id(pc) not in self._skins:
                self._reread(pc)
                self._local.pop(id(pc), None)
        if self._frame_const is None:
            dyn = self._stack([self._consts(pc) for pc in self.moving], _CONST)
            self._frame_const = {k: torch.cat([self._static[k], dyn[k]]) for k in _CONST}
            counts = torch.tensor([len(pc.pos) for pc in self.moving], dtype=torch.int64)
            self._piece_of = torch.repeat_interleave(
                torch.arange(len(self.moving)), counts).to(self.device)
            # the static triangles' constant columns live on in _frame_const only
            self._static = {k: self._static[k] for k in _CORNERS}
        s = self._static
        if self.moving:
            assert self._piece_of is not None
            mats = self._moving_matrices(self.moving)[self._piece_of]  # [Fm,2,4,4]
            local = [self._local_of(pc) for pc in self.moving]
            p, n, t = _corner_frame(torch.cat([x[0] for x in local]),
                                    torch.cat([x[1] for x in local]),
                                    torch.cat([x[2] for x in local]),
                                    mats[:, 0], mats[:, 1, :3, :3])
            moved = {"pos": torch.cat([s["pos"], p.float()]),
                     "nrm": torch.cat([s["nrm"], n.float()]),
                     "tan": torch.cat([s["tan"], t.float()])}
        else:
            moved = {k: s[k] for k in _CORNERS}
        return Frame(**moved, **self._frame_const)

    def _local_of(self, pc: Piece) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A moving piece's corners in its own space, on the device (posed this frame for a
        skinned piece; re-read from the CPU poser's vertices for a re-read one; else kept)."""
        if id(pc) not in self._local:
            d = self.device
            self._local[id(pc)] = (torch.from_numpy(pc.pos).to(d), torch.from_numpy(pc.nrm).to(d),
                                   torch.from_numpy(pc.tan).to(d))
        return self._local[id(pc)]

    @property
    def num_triangles(self) -> int:
        return int(self._static["pos"].shape[0]) + sum(len(p.pos) for p in self.moving)
