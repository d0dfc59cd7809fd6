"""Panda3D's CPU skinning redone with one summation order, so a skinned character's vertices
(and the pixels drawn from them) do not follow the process's heap layout.
"""

from __future__ import annotations

from typing import Any


def skinned_geoms(model: Any) -> list[tuple[Any, int]]:
    """(GeomNode, index) of every CPU-skinned geom under ``model`` whose vertex layout
    FixedOrderSkin handles (float32 vertex [and normal] columns in array 0)."""
    out = []
    for gn in model.findAllMatches("**/+GeomNode"):
        for i in range(gn.node().getNumGeoms()):
            vd = gn.node().getGeom(i).getVertexData()
            if vd.getTransformBlendTable() is not None and FixedOrderSkin.layout(vd):
                out.append((gn.node(), i))
    return out


class FixedOrderSkin:
    """Panda3D's CPU skinning, redone with one summation order.

    Panda3D sums a vertex blend's joint matrices in the order of the transforms' addresses
    (``TransformBlend`` entries sort by pointer), so for blends of three or more joints the
    rounding of the skinned vertices, and now and then a rendered pixel, followed the heap
    layout of the process: one trajectory rendered in fresh processes gave two different
    videos. Here each blend is summed in float64 in joint-name order, vertices and normals
    are transformed as Panda3D's ``update_animated_vertices`` does, and the result goes into
    a static copy of the vertex data, which the geom draws instead.
    """

    def __init__(self, geom_ref: tuple[Any, int]) -> None:
        import numpy as np
        from panda3d.core import GeomVertexData

        gnode, idx = geom_ref
        geom = gnode.modifyGeom(idx)
        vd = geom.getVertexData()
        lay = self.layout(vd)
        assert lay is not None  # skinned_geoms keeps only these
        self.vcol, self.vlen, self.ncol = lay
        n = vd.getNumRows()
        self.buf = np.frombuffer(bytearray(vd.getArray(0).getHandle().getData()),
                                 np.float32).reshape(n, -1)
        self.rest_v = self.buf[:, self.vcol:self.vcol + self.vlen].astype(np.float64)
        if self.vlen == 3:
            self.rest_v = np.concatenate([self.rest_v, np.ones((n, 1))], axis=1)
        self.rest_n = (None if self.ncol is None else
                       self.buf[:, self.ncol:self.ncol + 3].astype(np.float64))
        table = vd.getTransformBlendTable()
        # the transform_blend column, wherever it sits (egg: packed uint16; panda3d-gltf: a
        # uint16 column in its own array, padded to a 4-byte stride)
        ai = vd.getFormat().getArrayWith("transform_blend")
        afmt = vd.getFormat().getArray(ai)
        col = afmt.getColumn("transform_blend")
        raw = np.frombuffer(vd.getArray(ai).getHandle().getData(), np.uint8)
        rows_raw = raw[: n * afmt.getStride()].reshape(n, afmt.getStride())
        comp = col.getComponentBytes()
        self.blend_index = np.frombuffer(
            rows_raw[:, col.getStart(): col.getStart() + comp].tobytes(),
            {1: np.uint8, 2: np.uint16, 4: np.uint32}[comp]).astype(np.int64)
        # a key per distinct transform: its joint's name (numbered if names repeat, in the
        # order the table's blends first use them); ``this`` (the C++ pointer) only tells
        # transforms apart, it never orders anything
        keys: dict[int, str] = {}
        transforms: dict[str, Any] = {}
        per_name: dict[str, int] = {}
        rows = []
        for b in range(table.getNumBlends()):
            blend = table.getBlend(b)
            entries = []
            for k in range(blend.getNumTransforms()):
                tr = blend.getTransform(k)
                if tr.this not in keys:
                    name = tr.getJoint().getName() if hasattr(tr, "getJoint") else "?"
                    per_name[name] = per_name.get(name, -1) + 1
                    keys[tr.this] = f"{name}#{per_name[name]}"
                    transforms[keys[tr.this]] = tr
                entries.append((keys[tr.this], blend.getWeight(k)))
            rows.append(sorted(entries))
        self.keys = sorted(transforms)
        self.transforms = [transforms[k] for k in self.keys]
        width = max(1, max((len(r) for r in rows), default=1))
        self.idx = np.zeros((len(rows), width), np.int64)
        self.w = np.zeros((len(rows), width), np.float64)
        pos = {k: i for i, k in enumerate(self.keys)}
        for b, r in enumerate(rows):
            for j, (key, wt) in enumerate(r):
                self.idx[b, j], self.w[b, j] = pos[key], wt
        self.static = GeomVertexData(vd)
        self.static.clearTransformBlendTable()
        geom.setVertexData(self.static)

    @staticmethod
    def layout(vd: Any) -> tuple[int, int, int | None] | None:
        """(vertex column, its 3 or 4 floats, normal column or None), in floats, of array 0;
        None for layouts this does not handle (Panda3D then skins them itself)."""
        from panda3d.core import GeomEnums

        fmt = vd.getFormat()
        if fmt.getArrayWith("transform_blend") < 0 or vd.getSliderTable() is not None:
            return None
        arr = fmt.getArray(0)
        cols = {arr.getColumn(j).getName().getName(): arr.getColumn(j)
                for j in range(arr.getNumColumns())}
        v = cols.get("vertex")
        if (v is None or v.getNumericType() != GeomEnums.NT_float32 or arr.getStride() % 4
                or v.getStart() % 4 or v.getNumComponents() not in (3, 4)):
            return None
        others = [c for name, c in cols.items() if name not in ("vertex", "normal", "texcoord")
                  and c.getContents() in (GeomEnums.C_point, GeomEnums.C_vector,
                                          GeomEnums.C_normal)]
        if others:  # tangents, binormals, other points: leave the whole geom to Panda3D
            return None
        nrm = cols.get("normal")
        ncol = (nrm.getStart() // 4 if nrm is not None and nrm.getStart() % 4 == 0
                and nrm.getNumericType() == GeomEnums.NT_float32 else None)
        if nrm is not None and ncol is None:
            return None
        return v.getStart() // 4, v.getNumComponents(), ncol

    def apply(self) -> None:
        import numpy as np
        from panda3d.core import LMatrix4f

        mats = np.empty((len(self.transforms), 4, 4), np.float64)
        m = LMatrix4f()
        for i, tr in enumerate(self.transforms):
            tr.getMatrix(m)
            mats[i] = [[m.getCell(r, c) for c in range(4)] for r in range(4)]
        # per blend: sum over its joints in one fixed order (zero-weight padding adds 0.0)
        blend = np.zeros((len(self.idx), 4, 4), np.float64)
        for j in range(self.idx.shape[1]):
            blend += self.w[:, j, None, None] * mats[self.idx[:, j]]
        per_vertex = blend[self.blend_index]
        # row vectors, as Panda3D: v' = v M
        out = np.einsum("ni,nij->nj", self.rest_v, per_vertex[:, :self.rest_v.shape[1]])
        self.buf[:, self.vcol:self.vcol + self.vlen] = out[:, :self.vlen]
        if self.rest_n is not None and self.ncol is not None:
            nm, norm = _normal_matrices(blend[:, :3, :3])
            nv = np.einsum("ni,nij->nj", self.rest_n, nm[self.blend_index])
            renorm = norm[self.blend_index]
            nv[renorm] /= np.maximum(np.linalg.norm(nv[renorm], axis=1, keepdims=True), 1e-30)
            self.buf[:, self.ncol:self.ncol + 3] = nv
        self.static.modifyArrayHandle(0).setData(self.buf.tobytes())


def _normal_matrices(m3: Any) -> tuple[Any, Any]:
    """Panda3D's normal transform for blended matrices (``do_transform_vector_column``):
    the matrix itself when its rows are (near) unit length; without the scale when the
    scale is uniform; the inverse transpose, then renormalised, when it is not."""
    import numpy as np

    ssq = (m3 ** 2).sum(axis=2)
    uniform = ((np.abs(ssq[:, 0] - ssq[:, 1]) <= 2e-3)
               & (np.abs(ssq[:, 0] - ssq[:, 2]) <= 2e-3))
    unit = uniform & (np.abs(ssq[:, 0] - 1) <= 2e-3)
    out = m3.copy()
    scaled = uniform & ~unit
    scaled &= ssq[:, 0] > 0  # an empty blend stays the zero matrix
    out[scaled] = m3[scaled] / np.sqrt(ssq[scaled, 0])[:, None, None]
    skew = ~uniform
    if skew.any():
        out[skew] = np.linalg.inv(m3[skew]).transpose(0, 2, 1)
    return out, skew
