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


def test_a_wrapped_fault_is_still_one_and_its_size_is_read():
    from stages.core.device_faults import beyond_device, requested_bytes

    try:
        try:
            torch.empty(2**50, dtype=torch.uint8)
        except RuntimeError as exc:  # as instance_render wraps frame-loop errors
            raise ValueError(f"encode_failed: {type(exc).__name__}") from None
    except ValueError as wrapped:
        assert classify(wrapped) == "host_oom"
        assert requested_bytes(wrapped) == 2**50
        # more than the machine has in all: a malformed request, not memory pressure
        assert "fewer slots cannot help" in beyond_device(wrapped, "host_oom")
    big = _raised(lambda: np.empty(2**50, np.uint8))
    assert requested_bytes(big) == 2**50 and beyond_device(big, "host_oom")
    cuda = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a "
                                  "total capacity of 79.19 GiB")
    assert requested_bytes(cuda) == int(1.5 * 2**30)
    small = RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                         "536870912 bytes. Error code 12")
    assert classify(small) == "host_oom" and beyond_device(small, "host_oom") == ""
    assert classify(RuntimeError("CUDA driver error: out of memory")) == "gpu_oom"


def _plans(n: int, gpu: int | None) -> list[SlotPlan]:
    from stages.cluster.gpus import GpuInfo

    g = GpuInfo(gpu, f"GPU-{gpu}", "H100", 80 * 1024) if gpu is not None else None
    return [SlotPlan(f"g{gpu}s{i}" if g else f"c{i}", g) for i in range(n)]


def test_the_limit_halves_on_a_shared_oom_and_a_lone_oom_is_final():
    four, two = _plans(4, 0), _plans(2, 1)
    lim = SlotLimits.of(four + two)
    assert lim.limit == {"gpu0": 4, "gpu1": 2, "host": 6}
    for p in four[:3]:
        assert lim.may_start(p)
        lim.started(p)
    peaks = lim.ended(four[0])  # three shared the GPU (and the host) while it ran
    assert peaks == {"gpu0": 3, "host": 3}
    line = lim.on_oom(four[0], "gpu_oom", peaks)
    assert line.startswith("gpu0: 3 processes") and "4 -> 1" in line
    assert lim.limit["gpu0"] == 1 and lim.limit["host"] == 6
    assert not lim.may_start(four[3])  # two still run: nobody new starts on gpu0
    assert lim.may_start(two[0])  # another GPU is not limited
    lim.ended(four[1]), lim.ended(four[2])
    assert lim.may_start(four[0])
    lim.started(four[0])
    assert not lim.may_start(four[1])
    peaks = lim.ended(four[0])
    assert peaks["gpu0"] == 1
    assert lim.on_oom(four[0], "gpu_oom", peaks) == ""  # alone and still out: final
    # host memory is every slot's: a host_oom lowers the node-wide limit
    for p in (four[0], two[0], two[1]):
        lim.started(p)
    peaks = lim.ended(two[0])
    assert "host: 3 processes" in lim.on_oom(two[0], "host_oom", peaks)
    assert lim.limit["host"] == 1 and lim.limit["gpu1"] == 2
    assert not lim.may_start(two[0])  # two others still run on the host
    # a runner built later with the same limits (the Ray service's next batch) keeps them
    lim.add(four + two)
    assert lim.limit == {"gpu0": 1, "gpu1": 2, "host": 1}
