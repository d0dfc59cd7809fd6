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
from .fixed_order_skin import FixedOrderSkin, skinned_geoms


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
    joint order (``fixed_order_skin.FixedOrderSkin``), as egg characters are.
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
        self.skins = ([FixedOrderSkin(g) for g in skinned_geoms(model)]
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
        self.skins = [FixedOrderSkin(g) for g in skinned_geoms(model)]

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
