"""The compute path's per-frame scene step (posing, placing, cameras, sun, lights, exposure)
queues its work without waiting for the GPU (issue #30: py-spy on an H100 slot found it
blocked in the driver at a dozen read-backs and pageable copies a frame), and uploads a
uniform only when it changed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from stages.config import load_params
from stages.engine.compute.cameras import cameras_from_targets, sun_from_node
from stages.engine.compute.skinning import normal_matrices
from stages.engine.compute.upload import upload
from stages.engine.fixed_order_skin import _normal_matrices
from tests.conftest import make_trajectories
from tests.posed_frames import posed_frames


def test_normal_matrices_match_the_cpu_poser_without_reading_the_device():
    rng = np.random.default_rng(7)
    rot = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    m3 = np.stack([
        rot,                                   # unit rows: the matrix itself
        2.5 * rot,                             # uniform scale: divided out
        rot @ np.diag([1.0, 3.0, 0.5]),        # skewed: the inverse transpose
        np.zeros((3, 3)),                      # an empty blend: stays zero
        rng.normal(size=(3, 3)),               # a random (skewed) one
    ])
    want, want_skew = _normal_matrices(m3)
    got, skew = normal_matrices(torch.from_numpy(m3))
    assert skew.tolist() == want_skew.tolist() == [False, False, True, False, True]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    # a singular skewed blend (a joint scaled to nothing along one axis): the CPU path's
    # inverse raises; this one keeps the matrix, finite, instead of failing the frame
    flat = torch.from_numpy((rot @ np.diag([1.0, 2.0, 0.0]))[None])
    out, sk = normal_matrices(flat)
    assert bool(sk[0]) and torch.equal(out, flat)


def test_upload_keeps_values_and_dtype():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = upload(a, torch.device("cpu"), torch.float32)
    assert t.dtype == torch.float32 and t.tolist() == a.tolist()
    assert upload([1, 2], torch.device("cpu"), torch.int64).tolist() == [1, 2]
    # a tensor already there is handed back as it is: no copy (inside a compiled graph,
    # Lighting.to meets its own device tensors, and pinning there cannot be traced)
    assert upload(t, torch.device("cpu")) is t
    assert upload(t, torch.device("cpu"), torch.float32) is t


@pytest.fixture(scope="module")
def traj(sample_library, tmp_path_factory) -> Path:
    out = make_trajectories(sample_library, tmp_path_factory.mktemp("traj_step"), 1, 6)
    return out / "NatureValley__AlpineMeadow" / "traj_0000"


def _cfg():
    return load_params(overrides=[
        "render.width=96", "render.height=54", "render.spatial_samples=1",
        "render.mask_scale=1", "render.shadow_map_size=512", "render.backend=compute"]).render


def test_uniforms_are_uploaded_once_and_again_when_they_change(traj, tmp_path):
    with posed_frames(tmp_path, _cfg(), traj) as pf:
        a = pf.pose(2, 0.3)
        pf.ir.r.render([a], a, 0.0)
        t = pf.ir.r.targets
        lt, ex = t._lights(), t._exposure()
        assert t._lights() is lt and t._exposure() is ex  # nothing changed: nothing uploaded
        t.set_exposure(2.0)
        assert t._exposure() is not ex and float(t._exposure()) == 2.0
        light = t.lighting.lights[0]
        before = tuple(light.node().getColor())
        light.node().setColor((before[0] * 2, before[1], before[2], 1.0))
        lt2 = t._lights()
        assert lt2 is not lt
        assert float(lt2.light_color[0, 0]) == pytest.approx(2 * float(lt.light_color[0, 0]))
        light.node().setColor(before)
        assert torch.equal(t._lights().light_color, lt.light_color)


@pytest.mark.gpu
def test_the_scene_step_never_waits_for_the_gpu(traj, tmp_path):
    """Under torch's sync debug mode ("error"), a steady frame's scene step (skinning the
    character, placing pieces and props, cameras, sun, lights, exposure) raises at any
    read-back or copy that would stall the host."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    with posed_frames(tmp_path, _cfg(), traj) as pf:
        a, b = pf.pose(2, 0.3), pf.pose(3, 0.35)
        pf.ir.r.render([a], a, 0.0)
        pf.ir.r.render([b], b, 0.0)  # a steady frame: every piece and cache seen once
        t = pf.ir.r.targets
        assert t.device.type == "cuda"
        geo, level = t._geo, pf.ir.r.level
        assert geo is not None and geo._skins, "the character is skinned on the GPU"
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            fr = geo.frame()
            cameras_from_targets(t, t.device)
            sun_from_node(level.sun, t.scene, 512, 4, t.device)
            t._lights()
            t._exposure()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        assert fr.pos.shape[0] == geo.num_triangles and bool(torch.isfinite(fr.pos).all())


class _Joint:
    """A joint transform as FixedOrderSkin keeps them (``getMatrix`` fills an LMatrix4f)."""

    def __init__(self, m) -> None:  # noqa: ANN001
        self.m = m

    def getMatrix(self, out) -> None:  # noqa: ANN001, N802 - Panda3D's name
        for r in range(4):
            for c in range(4):
                out.setCell(r, c, float(self.m[r, c]))


def _skin(rng, joints: int, blends: int, width: int, verts: int, normals: bool):  # noqa: ANN001, ANN202
    from types import SimpleNamespace

    import numpy as np

    ms = []
    for _ in range(joints):
        m = np.eye(4)
        m[:3, :3] = rng.normal(size=(3, 3)) * 0.3 + np.eye(3) * rng.uniform(0.5, 2.0)
        m[3, :3] = rng.normal(size=3)  # row-vector translation, as Panda3D
        ms.append(_Joint(m))
    w = rng.uniform(0.1, 1.0, size=(blends, width))
    return SimpleNamespace(
        transforms=ms, idx=rng.integers(0, joints, size=(blends, width)),
        w=w / w.sum(1, keepdims=True), blend_index=rng.integers(0, blends, size=verts),
        rest_v=np.concatenate([rng.normal(size=(verts, 3)), np.ones((verts, 1))], 1),
        rest_n=rng.normal(size=(verts, 3)) if normals else None)


def test_a_skin_batch_is_each_skin_on_its_own():
    """SkinBatch poses skins of different widths (joints a blend), sizes and with or
    without normals as one: each skin's vertices and normals are TorchSkin's exactly (the
    narrower blends' zero-weight padding adds nothing); a skin without normals gets zero
    rows (its pieces keep their unposed normals)."""
    import numpy as np

    from stages.engine.compute.skinning import SkinBatch, TorchSkin

    rng = np.random.default_rng(7)
    skins = [_skin(rng, 9, 12, 3, 40, True), _skin(rng, 4, 5, 1, 17, False),
             _skin(rng, 6, 8, 2, 23, True)]
    batch = SkinBatch(skins, torch.device("cpu"))
    v, nv = batch.pose()
    assert batch.vertex_offset == [0, 40, 57] and v.shape == (80, 3)
    assert batch.normals == [True, False, True] and nv is not None
    for sk, off in zip(skins, batch.vertex_offset, strict=True):
        pv, pn = TorchSkin(sk, torch.device("cpu")).pose()
        n = len(pv)
        assert torch.equal(v[off:off + n], pv)
        if pn is None:
            assert not nv[off:off + n].any()
        else:
            assert torch.equal(nv[off:off + n], pn)
    rest = torch.as_tensor(skins[0].rest_v[:, :3])
    assert float((v[:40] - rest).abs().max()) > 0.1
