"""Character clips posed by frame number, never by wall clock (paper §7.2).

Two sources:
- glTF/glb node animations (translation/rotation/scale channels on named nodes). panda3d-gltf
  does not import node animations, so they are read here straight from the file and applied to
  the nodes of the loaded model; values are converted from glTF's Y-up to the contract's Z-up
  the way panda3d-gltf converts the node transforms themselves.
- Panda3D egg/bam skeletal clips (a separate animation file per clip), bound with ``auto_bind``
  and posed with ``AnimControl.pose(frame)``.
"""

from __future__ import annotations

import bisect
import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.replay import slerp

_COMPONENTS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4}
_FMT = {5126: ("f", 4), 5123: ("H", 2), 5125: ("I", 4), 5121: ("B", 1)}


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


def _read_gltf(path: Path) -> tuple[dict, bytes]:
    data = path.read_bytes()
    if path.suffix.lower() == ".glb":
        if data[:4] != b"glTF":
            raise ValueError(f"{path}: not a glb file")
        off, doc, binary = 12, None, b""
        while off < len(data):
            length, kind = struct.unpack_from("<II", data, off)
            chunk = data[off + 8: off + 8 + length]
            if kind == 0x4E4F534A:
                doc = json.loads(chunk)
            elif kind == 0x004E4942:
                binary = chunk
            off += 8 + length
        if doc is None:
            raise ValueError(f"{path}: glb without a JSON chunk")
        return doc, binary
    doc = json.loads(data)
    buf = doc.get("buffers", [{}])[0].get("uri")
    return doc, (path.parent / buf).read_bytes() if buf else b""


def _accessor(doc: dict, binary: bytes, i: int) -> list[tuple[float, ...]]:
    acc = doc["accessors"][i]
    view = doc["bufferViews"][acc["bufferView"]]
    fmt, size = _FMT[acc["componentType"]]
    n = _COMPONENTS[acc["type"]]
    stride = view.get("byteStride") or size * n
    base = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
    return [struct.unpack_from("<" + fmt * n, binary, base + k * stride)
            for k in range(acc["count"])]


def _to_z_up(path: str, v: tuple[float, ...]) -> tuple[float, ...]:
    if path == "translation":
        return (v[0], -v[2], v[1])
    if path == "scale":
        return (v[0], v[2], v[1])
    x, y, z, w = v  # glTF quaternions are xyzw
    return (w, x, -z, y)


def read_gltf_clips(path: str | Path, problems: list[str] | None = None) -> dict[str, Clip]:
    """All node-animation clips of a glTF/glb file, keyed by name. Channels that point at a
    missing node or accessor are skipped and described in ``problems``."""
    p = Path(path)
    doc, binary = _read_gltf(p)
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
                times = [t[0] for t in _accessor(doc, binary, smp["input"])]
                vals = [_to_z_up(tgt["path"], v) for v in _accessor(doc, binary, smp["output"])]
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
    """Poses the named nodes of one model copy from a clip at a time in seconds."""

    def __init__(self, model: Any, clips: dict[str, Clip]):
        self.clips = clips
        self.nodes: dict[str, Any] = {}
        self.rest: dict[str, tuple[Any, Any, Any]] = {}
        for clip in clips.values():
            for ch in clip.channels:
                if ch.node not in self.nodes:
                    np_ = model.find(f"**/{ch.node}")
                    if not np_.isEmpty():
                        self.nodes[ch.node] = np_
                        self.rest[ch.node] = (np_.getPos(), np_.getQuat(), np_.getScale())

    def pose(self, clip_name: str | None, t: float) -> None:
        from panda3d.core import LQuaternionf

        for name, np_ in self.nodes.items():
            pos, quat, scale = self.rest[name]
            np_.setPosQuatScale(pos, quat, scale)
        clip = self.clips.get(clip_name or "")
        if clip is None:
            return
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

    def pose(self, clip_name: str | None, t: float) -> None:
        ctrl = self.controls.get(clip_name or "")
        if ctrl is None:
            for c in self.controls.values():
                c.pose(0)  # rest: first frame of any clip
                return
            return
        n = ctrl.getNumFrames()
        ctrl.pose(int(round(t * self.frame_rates[clip_name or ""])) % max(n, 1))
