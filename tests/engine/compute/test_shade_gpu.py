"""The torch lighting, resolve and YUV on CUDA against the same code on the CPU (the reference
that tests/engine/compute/test_shade.py checks against GL's bytes): ``-m gpu``, on the lent
H200. Not run on the CPU machine."""

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def _cuda():
    if not torch.cuda.is_available():
        pytest.fail("no CUDA device: run the gpu tests on a GPU machine")
    return "cuda"


@pytest.mark.parametrize("compiled", [False, True])
def test_cuda_chain_matches_the_cpu_reference(compiled):
    from bench_compute_shade import PLANES, lighting, make_planes, view_fn

    dev = _cuda()
    cpu = make_planes(320, 180, 2, "cpu", seed=3)
    gpu = {k: x.to(dev) for k, x in cpu.items()}
    fn = view_fn(lighting())
    on_gpu = view_fn(lighting().to(dev))
    run = torch.compile(on_gpu) if compiled else on_gpu
    for v in range(5):
        ref = fn(*(cpu[k][v] for k in PLANES))
        out = run(*(gpu[k][v] for k in PLANES))
        for a, b in zip(ref, out, strict=True):
            d = np.abs(a.numpy().astype(int) - b.cpu().numpy().astype(int))
            # float rounding (FMA contraction, pow/exp2 ulps) may move a byte by one
            assert d.max() <= 1 and d.mean() < 0.02, (v, compiled, d.max(), d.mean())


def test_cuda_chain_same_bytes_twice():
    from bench_compute_shade import PLANES, lighting, make_planes, view_fn

    dev = _cuda()
    p = make_planes(320, 180, 2, dev, seed=4)
    fn = torch.compile(view_fn(lighting().to(dev)))
    a = [x.cpu().numpy().tobytes() for x in fn(*(p[k][0] for k in PLANES))]
    b = [x.cpu().numpy().tobytes() for x in fn(*(p[k][0] for k in PLANES))]
    assert a == b
