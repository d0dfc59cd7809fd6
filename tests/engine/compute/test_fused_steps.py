"""The GPU's fused per-sample steps after the depth pass (``raster_fused``: the samples'
triangle ids and depth, the leaders' barycentrics; issue #30): compiled with dynamic shapes,
they give what the eager steps give, and frames of other sizes reuse the one graph. Run here
through Inductor's CPU back end (the same graph; the GPU compiles it for Triton)."""

from __future__ import annotations

import numpy as np
import torch

from stages.engine.compute import raster, raster_fused
from stages.engine.compute.raster import visibility


def _scene(F: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    c = rng.uniform([-5, -5, -20], [5, 5, -3], (F, 1, 3))
    tris = torch.tensor((c + rng.normal(0, 0.6, (F, 3, 3))).astype(np.float32))
    t = 1 / np.tan(np.radians(30))
    near, far = 0.1, 100.0
    P = np.array([[t * 0.75, 0, 0, 0], [0, t, 0, 0],
                  [0, 0, (far + near) / (near - far), 2 * far * near / (near - far)],
                  [0, 0, -1, 0]], np.float32)
    V = np.eye(4, dtype=np.float32)
    V[:3, 3] = [0.2 * seed, 0.0, 0.3]
    return tris, torch.tensor(np.stack([P, P @ V]))


def test_fused_steps_match_the_eager_ones_and_compile_once() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    for seed, (F, W, H) in enumerate([(900, 48, 36), (1500, 40, 30), (700, 56, 20)]):
        tris, vp = _scene(F, seed)
        vis = visibility(tris, vp, W, H)
        assert len(vis.setups) == 1
        st, base = vis.setups[0], vis.offsets[0]
        tri_e, depth_e = vis.triangles()  # a CPU tensor: the eager path
        tri_f, depth_f = raster._fused("triangles")(vis.key, st.src, base)
        assert torch.equal(tri_f, tri_e) and torch.equal(depth_f, depth_e)
        flat = torch.nonzero(tri_e >= 0).squeeze(1)
        assert len(flat) > 100
        bary_e = vis.barycentrics(flat)
        gid = (vis.key.index_select(0, flat) & 0xFFFFFFFF) - base
        pix = flat % (H * W)
        px = (pix % W).float() + 0.5
        py = torch.div(pix, W, rounding_mode="floor").float() + 0.5
        bary_f = raster._fused("barycentrics")(gid, px, py, st.sx, st.sy, st.area, st.inv_w,
                                               st.bary)
        assert torch.allclose(bary_f, bary_e, rtol=0, atol=2e-6)
        assert torch.allclose(bary_f.sum(1), torch.ones(len(flat)), atol=1e-5)
    # three frames of other sizes, two functions: each compiled once, with dynamic shapes
    assert counters["stats"]["unique_graphs"] == 2


def test_compiled_yuv_planes_match_the_eager_conversion() -> None:
    """The yuv420p planes the GPU makes under torch.compile (``targets._packed``) against the
    eager conversion (itself within ±1 of swscale): within one code, for views and preview
    shapes, each compiled once."""
    from torch._dynamo.utils import counters

    from stages.engine.compute.yuv import packed_planes

    torch._dynamo.reset()
    counters.clear()
    fn = torch.compile(packed_planes, dynamic=False)
    rng = np.random.default_rng(3)
    for shape in [(5, 36, 64, 3), (36, 96, 3), (5, 36, 64, 3)]:
        img = torch.from_numpy(rng.integers(0, 256, shape, dtype=np.uint8))
        a, b = fn(img), packed_planes(img)
        assert a.shape == b.shape and a.dtype == torch.uint8
        assert (a.int() - b.int()).abs().max() <= 1
    assert counters["stats"]["unique_graphs"] == 2


def test_a_step_that_fails_to_compile_runs_eagerly_and_device_errors_propagate() -> None:
    """``compiled.Compiled``: a compile failure costs the step its speed, not the frame (one
    warning naming the step); an error of the step itself (as a CUDA fault would be) is
    raised as before."""
    import logging

    import pytest

    from stages.engine.compute.compiled import Compiled

    def no_kernels(gm, example_inputs):  # noqa: ANN001, ANN202 - a torch.compile backend
        raise RuntimeError("no kernel for this graph")

    class Keep(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.records: list[logging.LogRecord] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.records.append(record)

    keep = Keep()
    logger = logging.getLogger("stages.engine.compute.compiled")
    logger.addHandler(keep)
    try:
        torch._dynamo.reset()
        step = Compiled(lambda x: x * 2 + 1, "test.double", backend=no_kernels)
        assert torch.equal(step(torch.ones(4)), torch.full((4,), 3.0))
        assert torch.equal(step(torch.zeros(2)), torch.ones(2))
    finally:
        logger.removeHandler(keep)
    assert step.failed is not None and "no kernel for this graph" in step.failed
    assert sum("test.double" in r.getMessage() for r in keep.records) == 1

    def faulty(x):  # noqa: ANN001, ANN202
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    torch._dynamo.reset()
    bad = Compiled(faulty, "test.faulty", backend="eager")
    with pytest.raises(RuntimeError, match="illegal memory access"):
        bad(torch.ones(2))
    assert bad.failed is None


def test_a_frame_that_draws_nothing_and_one_without_leaders_on_the_fused_steps() -> None:
    """Review of 04ac0f5..8864e2d: every triangle behind the cameras leaves the one set-up
    with no clipped triangles (``src`` empty). The eager step skips such a set-up; the fused
    one indexed ``src`` at -1: its graph failed to lower (so ``Compiled`` made it eager for
    the rest of the process) and the eager rerun raised IndexError (on a GPU: the frame
    failed). Such a frame gives nothing drawn, and a frame with no surface leaders no
    barycentrics, both without giving up the compiled graphs."""
    raster_fused._FUSED.clear()
    torch._dynamo.reset()
    try:
        tris, vp = _scene(300, 0)
        behind = tris.clone()
        behind[..., 2] = -behind[..., 2]  # z > 0: behind every camera (they look down -z)
        for t in (tris, behind, tris[:200]):
            vis = visibility(t, vp, 40, 30)
            st, base = vis.setups[0], vis.offsets[0]
            tri_e, depth_e = vis.triangles()  # the eager step
            tri_f, depth_f = raster._fused("triangles")(vis.key, st.src, base)
            assert torch.equal(tri_f, tri_e) and torch.equal(depth_f, depth_e)
            flat = torch.nonzero(tri_e >= 0).squeeze(1)
            gid = (vis.key.index_select(0, flat) & 0xFFFFFFFF) - base
            pix = flat % (30 * 40)
            px, py = (pix % 40).float() + 0.5, torch.div(pix, 40, rounding_mode="floor").float()
            bary = raster._fused("barycentrics")(gid, px, py + 0.5, st.sx, st.sy, st.area,
                                                 st.inv_w, st.bary)
            assert bary.shape == (len(flat), 3)
        assert len(visibility(behind, vp, 40, 30).setups[0].src) == 0  # the case in question
        assert raster._fused("triangles").failed is None  # type: ignore[attr-defined]
        assert raster._fused("barycentrics").failed is None  # type: ignore[attr-defined]
    finally:
        raster_fused._FUSED.clear()


def test_a_device_fault_raised_while_compiling_is_not_a_compile_failure() -> None:
    """Review: Dynamo wraps what a backend raises (``BackendCompilerFailed``, a
    ``TorchDynamoException``), so an out-of-memory or CUDA error met while compiling (Triton
    loading its kernels, Inductor's benchmarks) was taken for a compile failure: the step went
    eager for good and the node runner never saw ``gpu_oom``. It must propagate, and the
    runner's classification must still read it."""
    import pytest

    from stages.core.device_faults import classify
    from stages.engine.compute.compiled import Compiled

    for fault, kind in ((torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 "
                                                 "GiB"), "gpu_oom"),
                        (RuntimeError("CUDA error: an illegal memory access was encountered"),
                         "gpu_error")):
        def backend(gm, example_inputs, fault=fault):  # noqa: ANN001, ANN202
            raise fault

        torch._dynamo.reset()
        step = Compiled(lambda x: x + 1, "test.fault", backend=backend)
        with pytest.raises(Exception) as got:  # noqa: PT011 - classified below
            step(torch.ones(2))
        assert classify(got.value) == kind, got.value
        assert step.failed is None
