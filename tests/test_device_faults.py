"""Device faults: real allocator failures and CUDA messages classified, and the per-device
running limit that falls on out-of-memory (the node runner's rule; its end-to-end drill is in
tests/test_node_runner.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stages.cluster.gpus import SlotPlan
from stages.cluster.slot_limits import SlotLimits
from stages.core.device_faults import EXIT_CODES, EXIT_REASONS, classify


def _raised(fn) -> BaseException:
    with pytest.raises(BaseException) as ei:
        fn()
    return ei.value


def test_real_allocator_failures_are_host_oom():
    # the real allocators asked for 1 PiB: torch's CPU allocator and numpy
    assert classify(_raised(lambda: torch.empty(2**50, dtype=torch.uint8))) == "host_oom"
    assert classify(_raised(lambda: np.empty(2**50, np.uint8))) == "host_oom"


def test_cuda_messages_and_types_are_classified():
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; "
                                 "79.19 GiB total capacity)")
    assert classify(oom) == "gpu_oom"
    assert classify(RuntimeError("CUDA error: an illegal memory access was encountered")) \
        == "gpu_error"
    assert classify(RuntimeError("CUDA error: device-side assert triggered")) == "gpu_error"
    assert classify(RuntimeError("CUDA error: out of memory")) == "gpu_oom"
    # not device faults: they stay one trajectory's failure row
    assert classify(ValueError("compute yuv: 35x64 has an odd side")) == ""
    assert classify(FileNotFoundError("level.glb")) == ""
    assert {EXIT_REASONS[c] for c in EXIT_CODES.values()} == set(EXIT_CODES)
    assert all(c not in (0, 1, 2) for c in EXIT_REASONS)


def _plans(n: int, gpu: int | None) -> list[SlotPlan]:
    from stages.cluster.gpus import GpuInfo

    g = GpuInfo(gpu, f"GPU-{gpu}", "H100", 80 * 1024) if gpu is not None else None
    return [SlotPlan(f"g{gpu}s{i}" if g else f"c{i}", g) for i in range(n)]


def test_the_limit_halves_on_a_shared_oom_and_a_lone_oom_is_final():
    four, cpu = _plans(4, 0), _plans(2, None)
    lim = SlotLimits.of(four + cpu)
    assert lim.limit == {"gpu0": 4, "cpu": 2}
    for p in four[:3]:
        assert lim.may_start(p)
        lim.started(p)
    peak = lim.ended(four[0])  # three shared the GPU while it ran
    assert peak == 3
    line = lim.on_oom(four[0], peak)
    assert "3 processes" in line and "4 -> 1" in line
    assert lim.limit["gpu0"] == 1
    assert not lim.may_start(four[3])  # two still run: nobody new starts on gpu0
    assert lim.may_start(cpu[0])  # other devices are not limited
    lim.ended(four[1]), lim.ended(four[2])
    assert lim.may_start(four[0])
    lim.started(four[0])
    assert not lim.may_start(four[1])
    assert lim.ended(four[0]) == 1
    assert lim.on_oom(four[0], 1) == ""  # alone and still out of memory: final
    assert lim.limit["gpu0"] == 1
