"""Host-to-device copies that do not stall the host.

A copy from pageable host memory to a GPU waits for everything queued before it; on the
compute path's per-frame uniforms (joint, piece and camera matrices, lights, exposure) that
was a dozen waits per frame, each taking the host out of the loop while the GPU drained
(py-spy on an H100 slot: about a third of its samples). These copies go through pinned memory
instead (torch's caching host allocator, which keeps a block until its copy has run), so the
host queues the next kernels while the copy is in flight.
"""

from __future__ import annotations

from typing import Any

import torch


def upload(x: Any, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``x`` (array, tensor, nested numbers) as a tensor on ``device``: asynchronously from
    pinned memory on a GPU, as a plain conversion elsewhere."""
    if isinstance(x, torch.Tensor) and x.device == device and dtype in (None, x.dtype):
        return x  # already there (also what a compiled graph sees: no copy to trace)
    t = torch.as_tensor(x, dtype=dtype)
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


__all__ = ["upload"]
