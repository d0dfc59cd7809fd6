"""The compute renderer's cameras and sun as matrices: from Panda3D camera nodes (the GL
path's own, for comparison) or straight from the replayed poses, with the same lens and
placement arithmetic as ``render_targets`` / ``replay_render`` (Panda3D's matrix math only,
no GL), and the sun's orthographic shadow camera as ``level_render.fit_sun`` places it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...core.trajectory import VIEWS
from ..replay_poses import SamplePose, cv_to_panda_mat, jitter_offsets
from ..scene_targets import FP_BIT_BASE
from .scene import _mat4
from .upload import upload


@dataclass
class Cameras:
    """V cameras in G-buffer order (view * nsamples + sample)."""

    view_proj: torch.Tensor  # [V,4,4] world -> clip (column vectors)
    eye: torch.Tensor        # [V,3]
    bit: torch.Tensor        # [V] int64: the camera's draw-mask bit
    sample: torch.Tensor     # [V] int64: its sample index within its view
    nsamples: int
    # [V,4,4] clip -> world: view_proj's inverse, worked out on the host (float64, of the
    # float32 matrices) and uploaded with them; None: inverse() takes it on the device
    inv_view_proj: torch.Tensor | None = None

    def inverse(self) -> torch.Tensor:
        """[V,4,4] float32 clip -> world (column vectors)."""
        if self.inv_view_proj is not None:
            return self.inv_view_proj
        return torch.linalg.inv_ex(self.view_proj)[0]  # inv_ex: no read-back of its check


@dataclass
class Sun:
    view_proj: torch.Tensor  # [4,4] world -> clip of the sun's orthographic shadow camera
    size: int                # shadow map side, px
    pcf_taps: int            # 1, 2, 4 or 8
    bit: int = 0             # the draw-mask bit its camera sees


def _camera_matrix(np_: Any, root: Any) -> tuple[np.ndarray, np.ndarray]:
    """(view_proj, eye) of a Panda3D camera NodePath: its lens' projection (film offset
    jitter included) after the inverse of its net transform."""
    lens = np_.node().getLens()
    world = _mat4(np_.getMat(root))
    return _mat4(lens.getProjectionMat()) @ np.linalg.inv(world), world[:3, 3]


def _pack(vps: list, eyes: list, bits: list, nsamples: int, device: Any) -> Cameras:
    """The frame's cameras on ``device``: the matrices, their inverses and the eyes in one
    float32 upload, the bits and sample indices in one int64 upload (two small copies a
    frame, no inverse taken on the device: batched 4x4 inverses there cost the host about
    0.2 ms a call on an H100)."""
    V = len(vps)
    dev = torch.device(device)
    vp = np.stack(vps).astype(np.float32)
    inv = np.linalg.inv(vp.astype(np.float64)).astype(np.float32)
    eye = np.zeros((V, 4, 4), np.float32)
    eye[:, 0, :3] = np.stack(eyes)
    f = upload(np.stack([vp, inv, eye]), dev)
    ints = upload(np.stack([np.asarray(bits, np.int64), np.arange(V) % nsamples]), dev)
    return Cameras(f[0], f[2, :, 0, :3], ints[0], ints[1], nsamples, inv_view_proj=f[1])


def cameras_from_nodes(nodes: list[Any], root: Any, nsamples: int,
                       device: str | torch.device = "cpu") -> Cameras:
    """Cameras from Panda3D camera NodePaths listed in G-buffer order."""
    vps, eyes, bits = [], [], []
    for np_ in nodes:
        vp, eye = _camera_matrix(np_, root)
        vps.append(vp)
        eyes.append(eye)
        bits.append(int(np_.node().getCameraMask().getLowestOnBit()))
    return _pack(vps, eyes, bits, nsamples, device)


def cameras_from_targets(targets: Any, device: str | torch.device = "cpu") -> Cameras:
    """The colour cameras of a RenderTargets as placed now (the GL path's own cameras)."""
    nodes = [targets.cams[(v, t, s)] for v in VIEWS for t in range(targets.T)
             for s in range(targets.S)]
    return cameras_from_nodes(nodes, targets.scene, targets.N, device)


def cameras_from_poses(samples: list[SamplePose], width: int, height: int, spatial: int,
                       near: float = 0.05, far: float = 4000.0,
                       device: str | torch.device = "cpu") -> Cameras:
    """The colour cameras of one frame from its T temporal sample poses: the lens and
    placement of ``RenderTargets._lens`` and ``ReplayRenderer._place_camera`` (focal length
    from the view's fov, Halton film-offset jitter per spatial sample)."""
    from panda3d.core import LMatrix3f, LMatrix4f, LVecBase3f, PerspectiveLens

    jit = jitter_offsets(spatial)
    T = len(samples)
    vps, eyes, bits = [], [], []
    for view in VIEWS:
        for t, sp in enumerate(samples):
            vp_ = sp.views[view]
            r = cv_to_panda_mat(vp_.quat)
            world = _mat4(LMatrix4f(LMatrix3f(*r[0], *r[1], *r[2]), LVecBase3f(*vp_.pos)))
            inv = np.linalg.inv(world)
            for s in range(spatial):
                lens = PerspectiveLens()
                lens.setFilmSize(width, height)
                lens.setNearFar(near, far)
                lens.setFocalLength((width / 2) / math.tan(math.radians(vp_.fov_deg) / 2))
                lens.setFilmOffset(*jit[s])
                vps.append(_mat4(lens.getProjectionMat()) @ inv)
                eyes.append(world[:3, 3])
                bits.append(FP_BIT_BASE + t if view == "fp" else t)
    return _pack(vps, eyes, bits, spatial * T, device)


def sun_from_node(sun_np: Any, root: Any, size: int, pcf_taps: int,
                  device: str | torch.device = "cpu") -> Sun:
    """The sun's shadow camera (level_render's, after ``fit_sun``)."""
    vp, _ = _camera_matrix(sun_np, root)
    return Sun(upload(vp, torch.device(device), torch.float32), int(size), int(pcf_taps))


def sun_for_target(sun_dir: tuple[float, float, float], target: tuple[float, float, float],
                   extent_m: float, size: int, pcf_taps: int,
                   device: str | torch.device = "cpu") -> Sun:
    """The sun's shadow camera centred on ``target`` (the character), as ``fit_sun`` places
    it: looking along ``sun_dir`` (the direction the light travels), an orthographic film
    2 x ``extent_m`` wide, near 1 m, far 4 x extent + 200 m."""
    from panda3d.core import NodePath, OrthographicLens, Point3, Vec3

    d = sun_dir
    back = 2 * float(extent_m) + 100.0
    np_ = NodePath("sun")
    np_.setPos(target[0] - d[0] * back, target[1] - d[1] * back, target[2] - d[2] * back)
    up = Vec3(0, 1, 0) if abs(d[2]) > 0.99 else Vec3(0, 0, 1)
    np_.lookAt(Point3(*target), up)
    lens = OrthographicLens()
    lens.setFilmSize(2 * extent_m, 2 * extent_m)
    lens.setNearFar(1.0, 4 * extent_m + 200.0)
    vp = _mat4(lens.getProjectionMat()) @ np.linalg.inv(_mat4(np_.getMat()))
    return Sun(torch.tensor(vp, dtype=torch.float32, device=device), int(size), int(pcf_taps))
