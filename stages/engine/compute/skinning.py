"""Linear-blend skinning in torch (on the scene's device): the project's fixed-order CPU
skinning (``fixed_order_skin.FixedOrderSkin``) redone as tensor ops, so a skinned character's
vertices are posed on the GPU from its joint matrices alone.

Per frame only the joint matrices leave Panda3D (one 4x4 per joint, read from the posed
character); each blend's matrix is the weighted sum of its joints' in the same joint-name
order and float64 as the CPU path, vertices and normals are transformed as Panda3D's
``update_animated_vertices`` does (row vectors; normals through the blend's rotation, its
uniform scale divided out, or the inverse transpose when the scale is not uniform).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .upload import upload


class TorchSkin:
    """The torch twin of one ``FixedOrderSkin`` (one skinned Geom): a batch of one."""

    def __init__(self, skin: Any, device: torch.device):
        self.skin = skin
        self._batch = SkinBatch([skin], device)

    def joint_matrices(self) -> torch.Tensor:
        """[J,4,4] float64: each joint's current skinning matrix (Panda3D row-vector form)."""
        return self._batch.joint_matrices()

    def pose(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(positions [n,3], normals [n,3] or None) of the Geom's vertices, posed now."""
        return self._batch.pose()


def normal_matrices(m3: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``fixed_order_skin._normal_matrices`` in torch: the matrix itself when its rows are
    (near) unit length, without the scale when it is uniform, else the inverse transpose
    (renormalised). Without reading the device: every matrix's inverse is taken and the
    skewed ones keep theirs (a singular one keeps itself, where the CPU path would raise)."""
    ssq = (m3 ** 2).sum(2)
    uniform = ((ssq[:, 0] - ssq[:, 1]).abs() <= 2e-3) & ((ssq[:, 0] - ssq[:, 2]).abs() <= 2e-3)
    unit = uniform & ((ssq[:, 0] - 1).abs() <= 2e-3)
    scaled = uniform & ~unit & (ssq[:, 0] > 0)
    out = torch.where(scaled[:, None, None],
                      m3 / ssq[:, 0].clamp_min(1e-300).sqrt()[:, None, None], m3)
    skew = ~uniform
    inv, info = torch.linalg.inv_ex(m3)
    use = (skew & (info == 0))[:, None, None]
    return torch.where(use, inv.transpose(1, 2), out), skew


class SkinBatch:
    """Several ``FixedOrderSkin``s (a character's Geoms, every copy) posed as one: their joint
    matrices read and uploaded in one copy, their blends, vertices and normals transformed in
    one pass each. Each skin's result is :class:`TorchSkin`'s (the same fixed order of joints
    a blend; a blend with fewer joints than the widest gets zero-weight terms after its own,
    which add nothing). The host's cost of a frame's skinning stops growing with the number of
    Geoms (ten on the sample character's two copies: ~30 small ops each before)."""

    def __init__(self, skins: list[Any], device: torch.device):
        self.skins = list(skins)
        self.device = device
        f64 = torch.float64
        width = max((len(np.asarray(s.idx)[0]) if len(s.idx) else 1) for s in self.skins)
        idx, w, bi, rv = [], [], [], []
        rn: list[np.ndarray] = []
        self.vertex_offset: list[int] = []
        joints = blends = verts = 0
        # which skins have normals to pose (the others' rows are zeros: their pieces keep
        # their unposed normals, as with one skin at a time)
        self.normals = [s.rest_n is not None for s in self.skins]
        for s in self.skins:
            i = np.asarray(s.idx, np.int64).reshape(len(s.idx), -1)
            ww = np.asarray(s.w, np.float64).reshape(len(s.w), -1)
            pad = width - i.shape[1]
            idx.append(np.pad(i, ((0, 0), (0, pad))) + joints)  # (padded terms weigh 0)
            w.append(np.pad(ww, ((0, 0), (0, pad))))
            bi.append(np.asarray(s.blend_index, np.int64) + blends)
            v = np.asarray(s.rest_v, np.float64)  # [n,4]: w of 1 where the data has none
            rv.append(v)
            rn.append(np.zeros((len(v), 3)) if s.rest_n is None
                      else np.asarray(s.rest_n, np.float64))
            self.vertex_offset.append(verts)
            joints += len(s.transforms)
            blends += len(i)
            verts += len(v)
        self.idx = torch.as_tensor(np.concatenate(idx), device=device)
        self.w = torch.as_tensor(np.concatenate(w), dtype=f64, device=device)
        self.blend_index = torch.as_tensor(np.concatenate(bi), device=device)
        self.rest_v = torch.as_tensor(np.concatenate(rv), dtype=f64, device=device)
        self.rest_n = (torch.as_tensor(np.concatenate(rn), dtype=f64, device=device)
                       if any(self.normals) else None)
        self.transforms = [tr for s in self.skins for tr in s.transforms]

    def joint_matrices(self) -> torch.Tensor:
        """[J,4,4] float64: every skin's joints' current matrices, one upload."""
        from panda3d.core import LMatrix4f

        m = LMatrix4f()
        out = np.empty((len(self.transforms), 4, 4), np.float64)
        for i, tr in enumerate(self.transforms):
            tr.getMatrix(m)
            out[i] = [[m.getCell(r, c) for c in range(4)] for r in range(4)]
        return upload(out, self.device)

    def pose(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(positions [V,3], normals [V,3] or None) of every skin's vertices, posed now, the
        skins one after another (``vertex_offset``)."""
        mats = self.joint_matrices()
        blend = torch.zeros(len(self.idx), 4, 4, dtype=torch.float64, device=self.device)
        for j in range(self.idx.shape[1]):  # one fixed order, as the CPU path
            blend = blend + self.w[:, j, None, None] * mats[self.idx[:, j]]
        per_vertex = blend[self.blend_index]
        out = torch.einsum("ni,nij->nj", self.rest_v, per_vertex)
        pos = out[:, :3] / torch.where(out[:, 3:] == 0, 1.0, out[:, 3:])  # as TorchSkin
        if self.rest_n is None:
            return pos, None
        nm, renorm = normal_matrices(blend[:, :3, :3])
        nv = torch.einsum("ni,nij->nj", self.rest_n, nm[self.blend_index])
        rn = renorm[self.blend_index][:, None]
        nv = torch.where(rn, nv / nv.norm(dim=1, keepdim=True).clamp_min(1e-30), nv)
        return pos, nv
