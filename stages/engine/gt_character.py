"""The character as the ground-truth pass draws it (issue #33): a posed copy, never drawn,
read back each frame into static meshes with the same local vertices and node transforms as the
alignment gate's mask copy, plus every vertex's world position at the previous and the next
frame (vertex columns ``prev_pos`` / ``next_pos``) for the flow."""

from __future__ import annotations

from typing import Any

import numpy as np


def mat_np(m: Any) -> np.ndarray:
    return np.array([[m.getCell(r, c) for c in range(4)] for r in range(4)], np.float64)


def mat_panda(a: np.ndarray) -> Any:
    from panda3d.core import LMatrix4f

    return LMatrix4f(*[float(x) for x in a.reshape(-1)])


def _read_column(vd: Any, name: str) -> np.ndarray | None:
    """One vertex column as (rows, 3) float64, or None when the data has no such column."""
    from panda3d.core import GeomEnums, GeomVertexReader

    fmt = vd.getFormat()
    ai = fmt.getArrayWith(name)
    if ai < 0:
        return None
    afmt = fmt.getArray(ai)
    col = afmt.getColumn(name)
    n = vd.getNumRows()
    if col.getNumericType() == GeomEnums.NT_float32 and col.getStart() % 4 == 0 \
            and afmt.getStride() % 4 == 0:
        raw = np.frombuffer(vd.getArray(ai).getHandle().getData(), np.float32)
        rows = raw[: n * afmt.getStride() // 4].reshape(n, afmt.getStride() // 4)
        k = col.getStart() // 4
        out = rows[:, k:k + min(3, col.getNumComponents())].astype(np.float64)
    else:  # rare layouts: the slow reader
        rd = GeomVertexReader(vd, name)
        out = np.array([tuple(rd.getData3()) for _ in range(n)], np.float64)
    if out.shape[1] < 3:
        out = np.concatenate([out, np.zeros((n, 3 - out.shape[1]))], axis=1)
    return out


class CharacterBake:
    """A posed copy (never drawn) read back into
    static meshes with the same local vertices and node transforms as the gate's mask copy,
    plus each vertex's world position at the previous and next frame."""

    def __init__(self, holder: Any, gt_root: Any, shader: Any, char_id: int, show_bit: int):
        from panda3d.core import (
            BitMask32,
            CullFaceAttrib,
            Geom,
            GeomNode,
            GeomVertexArrayFormat,
            GeomVertexData,
            GeomVertexFormat,
            InternalName,
            RenderState,
        )

        self.holder = holder
        self.root = gt_root.attachNewNode("gt_character")
        self.root.setShader(shader, 10)
        self.root.setShaderInput("gt_id", float(char_id))
        self.root.setShaderInput("cut_alpha", 0.0)  # as the gate's mask: every triangle counts
        self.root.hide(BitMask32.allOn())
        self.root.show(BitMask32.bit(show_bit))
        arr = GeomVertexArrayFormat()
        for nm in ("vertex", "normal", "prev_pos", "next_pos"):
            arr.addColumn(InternalName.make(nm), 3, Geom.NT_float32,
                          Geom.C_point if nm != "normal" else Geom.C_normal)
        fmt = GeomVertexFormat.registerFormat(GeomVertexFormat(arr))
        self.parts: list[tuple[Any, int, Any, Any]] = []  # (source np, geom index, vdata, node)
        for gnp in holder.findAllMatches("**/+GeomNode"):
            gn = gnp.node()
            for i in range(gn.getNumGeoms()):
                src = gn.getGeom(i)
                vd = GeomVertexData("gt", fmt, Geom.UH_stream)
                vd.setNumRows(src.getVertexData().getNumRows())
                g = Geom(vd)
                for k in range(src.getNumPrimitives()):
                    g.addPrimitive(src.getPrimitive(k))
                cull = gnp.getNetState().compose(gn.getGeomState(i)).getAttrib(
                    CullFaceAttrib.getClassSlot())
                node = GeomNode(f"gt_{gnp.getName()}_{i}")
                node.addGeom(g, RenderState.make(cull) if cull is not None
                             else RenderState.makeEmpty())
                self.parts.append((gnp, i, vd, self.root.attachNewNode(node)))
        self.cache: dict[int, tuple[list[np.ndarray], list[np.ndarray], list[Any], list[Any]]] = {}

    def read(self) -> tuple[list[np.ndarray], list[np.ndarray], list[Any], list[Any]]:
        """As posed now: per part its local vertices, local normals, the node's transform
        relative to the world (panda matrix) and as float64 (for the world positions)."""
        from panda3d.core import LMatrix4f, Thread

        verts, norms, mats, worlds = [], [], [], []
        scene_root = self.holder.getTop()
        for gnp, i, _, _ in self.parts:
            vd = gnp.node().getGeom(i).getVertexData()
            if vd.getTransformBlendTable() is not None or vd.getSliderTable() is not None:
                vd = vd.animateVertices(True, Thread.getCurrentThread())
            v = _read_column(vd, "vertex")
            assert v is not None
            n = _read_column(vd, "normal")
            m = LMatrix4f(gnp.getMat(scene_root))
            verts.append(v)
            norms.append(n if n is not None else np.zeros_like(v))
            mats.append(m)
            worlds.append(mat_np(m))
        return verts, norms, mats, worlds

    def pose_at(self, f: int, place: Any) -> tuple[list[np.ndarray], list[np.ndarray],
                                                   list[Any], list[Any]]:
        """The read-back of frame ``f`` (``place(f)`` poses the copy); the last three kept."""
        if f not in self.cache:
            place(f)
            self.cache[f] = self.read()
            for k in sorted(self.cache)[:-3]:
                del self.cache[k]
        return self.cache[f]

    def update(self, now: tuple, prev: tuple, nxt: tuple) -> None:
        """Write this frame's meshes: local vertices and transforms of ``now``, world
        positions of ``prev`` / ``nxt``."""
        def world(v: np.ndarray, m: np.ndarray) -> np.ndarray:
            return v @ m[:3, :3] + m[3, :3]  # Panda3D: row vectors, v' = v M

        for k, (_, _, vd, node) in enumerate(self.parts):
            block = np.empty((len(now[0][k]), 12), np.float32)
            block[:, 0:3] = now[0][k]
            block[:, 3:6] = now[1][k]
            block[:, 6:9] = world(prev[0][k], prev[3][k])
            block[:, 9:12] = world(nxt[0][k], nxt[3][k])
            vd.modifyArrayHandle(0).setData(block.tobytes())
            node.setMat(now[2][k])

    def remove(self) -> None:
        self.root.removeNode()
