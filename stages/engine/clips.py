"""Character clips posed by frame number, never by wall clock (paper §7.2).

Two sources:
- glTF/glb node animations (translation/rotation/scale channels on named nodes). panda3d-gltf
  does not import node animations, so they are read here straight from the file and applied to
  the nodes of the loaded model (or, for a skinned model, to the joints of its Character);
  values are converted from glTF's Y-up to the contract's Z-up the way panda3d-gltf converts
  the node transforms themselves. Poses are sampled at the exact clip time, never resampled
  to a frame rate.
- Panda3D egg/bam skeletal clips (a separate animation file per clip), bound with ``auto_bind``
  and posed with ``AnimControl.pose(frame)``.
"""

from __future__ import annotations

import bisect
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.gltf import read_accessor, read_gltf
from ..core.replay import slerp


@dataclass
class Channel:
    node: str
    path: str  # translation | rotation | scale
    times: list[float]
    values: list[tuple[float, ...]]  # already in Z-up; rotations as (w, x, y, z)

    def sample(self, t: float) -> tuple[float, ...]:
        i = bisect.bisect_right(self.times, t)
        if i <= 0:
            return self.values[0]
        if i >= len(self.times):
            return self.values[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        a, b = self.values[i - 1], self.values[i]
        u = 0.0 if t1 <= t0 else (t - t0) / (t1 - t0)
        if self.path == "rotation":
            return slerp(a, b, u)
        return tuple(x + (y - x) * u for x, y in zip(a, b, strict=True))


@dataclass
class Clip:
    name: str
    duration: float
    channels: list[Channel]


def _to_z_up(path: str, v: tuple[float, ...]) -> tuple[float, ...]:
    if path == "translation":
        return (v[0], -v[2], v[1])
    if path == "scale":
        return (v[0], v[2], v[1])
    x, y, z, w = v  # glTF quaternions are xyzw
    return (w, x, -z, y)


def in_place(clip: Clip) -> Clip:
    """The clip with its root motion removed: a translation channel whose net travel from the
    first key to the last dominates its motion (more than twice its largest deviation from a
    straight line) loses that linear travel, so a walk with root motion plays in place and
    Stage I's controller, which moves the capsule, is the only thing that moves the character
    (the inventory records such clips in ``root_motion_json``, handling ``in_place``)."""
    out = []
    for ch in clip.channels:
        if ch.path != "translation" or len(ch.times) < 2 or ch.times[-1] <= ch.times[0]:
            out.append(ch)
            continue
        t0, t1 = ch.times[0], ch.times[-1]
        drift = [b - a for a, b in zip(ch.values[0], ch.values[-1], strict=True)]
        ramp = [[a + d * (t - t0) / (t1 - t0) for a, d in zip(ch.values[0], drift, strict=True)]
                for t in ch.times]
        dev = max(math.dist(v, r) for v, r in zip(ch.values, ramp, strict=True))
        if math.hypot(*drift) <= max(2 * dev, 1e-6):
            out.append(ch)
            continue
        vals = [tuple(c - d * (t - t0) / (t1 - t0) for c, d in zip(v, drift, strict=True))
                for t, v in zip(ch.times, ch.values, strict=True)]
        out.append(Channel(ch.node, ch.path, ch.times, vals))
    return Clip(clip.name, clip.duration, out)


def read_gltf_clips(path: str | Path, problems: list[str] | None = None) -> dict[str, Clip]:
    """All node-animation clips of a glTF/glb file, keyed by name. Channels that point at a
    missing node or accessor are skipped and described in ``problems``."""
    p = Path(path)
    doc, binary = read_gltf(p)
    nodes = doc.get("nodes", [])
    clips = {}
    for k, anim in enumerate(doc.get("animations", [])):
        chans = []
        for ch in anim.get("channels", []):
            tgt = ch.get("target", {})
            if "node" not in tgt or tgt.get("path") not in ("translation", "rotation", "scale"):
                continue
            try:
                smp = anim["samplers"][ch["sampler"]]
                times = [t[0] for t in read_accessor(doc, binary, smp["input"])]
                vals = [_to_z_up(tgt["path"], v)
                        for v in read_accessor(doc, binary, smp["output"])]
                name = nodes[tgt["node"]].get("name", f"node{tgt['node']}")
            except (IndexError, KeyError, struct.error) as exc:
                if problems is not None:
                    problems.append(f"{p.name}: animation {anim.get('name', k)!r} channel to "
                                    f"node {tgt.get('node')}: {type(exc).__name__} {exc}")
                continue
            if not times or len(times) != len(vals):
                continue
            chans.append(Channel(name, tgt["path"], times, vals))
        if chans:
            name = anim.get("name", f"clip{k}")
            clips[name] = Clip(name, max(c.times[-1] for c in chans), chans)
    return clips


class GltfPoser:
    """Poses the named nodes of one model copy from a clip at a time in seconds.

    A skinned glTF (panda3d-gltf makes its skin a ``Character``: the joints are parts of the
    character's bundle, not scene nodes) is posed through its joints: each animated joint is
    put under the control of a node (``PartBundle.control_joint``) that the clip's values are
    written to; the character is then updated for this pose and its geometry skinned in a fixed
    joint order (``_FixedOrderSkin``), as egg characters are.
    """

    def __init__(self, model: Any, clips: dict[str, Clip]):
        self.clips = clips
        self.nodes: dict[str, Any] = {}
        self.rest: dict[str, tuple[Any, Any, Any]] = {}
        names = {ch.node for clip in clips.values() for ch in clip.channels}
        self.characters = list(model.findAllMatches("**/+Character"))
        if not model.isEmpty() and model.node().isOfType(_character_type()):
            self.characters.insert(0, model)
        joints = _joint_controls(self.characters, names)
        for clip in clips.values():
            for ch in clip.channels:
                if ch.node not in self.nodes:
                    np_ = joints.get(ch.node)
                    if np_ is None:
                        np_ = model.find(f"**/{ch.node}")
                    if not np_.isEmpty():
                        self.nodes[ch.node] = np_
                        self.rest[ch.node] = (np_.getPos(), np_.getQuat(), np_.getScale())
        self.skins = ([_FixedOrderSkin(g) for g in _skinned_geoms(model)]
                      if self.characters else [])

    def pose(self, clip_name: str | None, t: float) -> None:
        from panda3d.core import LQuaternionf

        for name, np_ in self.nodes.items():
            pos, quat, scale = self.rest[name]
            np_.setPosQuatScale(pos, quat, scale)
        clip = self.clips.get(clip_name or "")
        if clip is not None:
            tt = math.fmod(t, clip.duration) if clip.duration > 0 else 0.0
            for ch in clip.channels:
                np_ = self.nodes.get(ch.node)
                if np_ is None:
                    continue
                v = ch.sample(tt)
                if ch.path == "rotation":
                    np_.setQuat(LQuaternionf(*v))
                elif ch.path == "translation":
                    np_.setPos(*v)
                else:
                    np_.setScale(*v)
        if self.characters:
            # the joints for this pose now (update() skips when the clock has not ticked)
            for c in self.characters:
                c.node().forceUpdate()
            for skin in self.skins:
                skin.apply()


def _character_type() -> Any:
    from panda3d.core import Character

    return Character.getClassType()


def _joint_controls(characters: list[Any], names: set[str]) -> dict[str, Any]:
    """A control node per named joint of the characters' bundles, holding the joint's rest
    transform (what Actor.controlJoint does)."""
    if not characters:
        return {}
    from panda3d.core import ModelNode, NodePath, TransformState

    out: dict[str, Any] = {}
    for c in characters:
        for b in range(c.node().getNumBundles()):
            bundle = c.node().getBundle(b)
            for name in sorted(names):
                part = bundle.findChild(name)
                if name in out or part is None or not hasattr(part, "getDefaultValue"):
                    continue
                node = ModelNode(name)
                node.setTransform(TransformState.makeMat(part.getDefaultValue()))
                if bundle.controlJoint(name, node):
                    out[name] = NodePath(node)
    return out


class EggPoser:
    """Skeletal clips of an egg/bam character, one animation file per clip."""

    def __init__(self, model: Any, clip_files: dict[str, str]):
        from panda3d.core import (
            AnimControlCollection,
            Filename,
            Loader,
            LoaderOptions,
            PartGroup,
            autoBind,
        )

        self.controls: dict[str, Any] = {}
        self.frame_rates: dict[str, float] = {}
        for name, file in clip_files.items():
            node = Loader.getGlobalPtr().loadSync(Filename.fromOsSpecific(file),
                                                  LoaderOptions(LoaderOptions.LF_no_cache))
            if node is None:
                raise OSError(f"{file}: Panda3D could not load this animation")
            anim_np = model.attachNewNode(node)
            coll = AnimControlCollection()
            autoBind(model.node(), coll, PartGroup.HMF_ok_part_extra | PartGroup.HMF_ok_anim_extra
                     | PartGroup.HMF_ok_wrong_root_name)
            anim_np.detachNode()
            if coll.getNumAnims():
                ctrl = coll.getAnim(0)
                self.controls[name] = ctrl
                self.frame_rates[name] = ctrl.getFrameRate()

        self.model = model
        self.skins = [_FixedOrderSkin(g) for g in _skinned_geoms(model)]

    def pose(self, clip_name: str | None, t: float) -> None:
        ctrl = self.controls.get(clip_name or "")
        if ctrl is None:
            for c in self.controls.values():
                c.pose(0)  # rest: first frame of any clip
                break
        else:
            n = ctrl.getNumFrames()
            ctrl.pose(int(round(t * self.frame_rates[clip_name or ""])) % max(n, 1))
        if self.skins:
            # the joints for this pose now (update() skips when the clock has not ticked)
            for ch in self.model.findAllMatches("**/+Character"):
                ch.node().forceUpdate()
            for skin in self.skins:
                skin.apply()


def _skinned_geoms(model: Any) -> list[tuple[Any, int]]:
    """(GeomNode, index) of every CPU-skinned geom under ``model`` whose vertex layout
    _FixedOrderSkin handles (float32 vertex [and normal] columns in array 0)."""
    out = []
    for gn in model.findAllMatches("**/+GeomNode"):
        for i in range(gn.node().getNumGeoms()):
            vd = gn.node().getGeom(i).getVertexData()
            if vd.getTransformBlendTable() is not None and _FixedOrderSkin.layout(vd):
                out.append((gn.node(), i))
    return out


class _FixedOrderSkin:
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
        assert lay is not None  # _skinned_geoms keeps only these
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
