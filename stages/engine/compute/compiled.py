"""A step under ``torch.compile`` that falls back to running eagerly when compiling fails
(issue #30): the fused steps are speed, not function, so a graph Inductor or Triton cannot
build on some driver or version costs that step's speed, never the render. The first failure
is reported once (the step's name and the error) and the step runs eagerly from then on in
that process. Errors of the device itself (out of memory, a CUDA fault: what
``core.device_faults.classify`` names, in the error or what it was raised from) are not
compile failures and propagate as before. The fallback reruns the whole call, so a wrapped
step must have no side effects (every one here is a pure function of its inputs)."""

from __future__ import annotations

import logging
from typing import Any

import torch

from ...core.device_faults import classify

log = logging.getLogger(__name__)


def _is_compile_failure(e: BaseException) -> bool:
    from torch._dynamo.exc import TorchDynamoException

    # a device fault met while compiling (Triton loading a kernel, Inductor's benchmarks)
    # comes wrapped (BackendCompilerFailed, InductorError): the node runner's own reading of
    # the exception and its causes decides, as it will for what propagates
    if classify(e):
        return False
    return isinstance(e, TorchDynamoException) or type(e).__module__.startswith(
        ("triton", "torch._inductor"))


class Compiled:
    """``fn`` compiled with ``torch.compile(fn, **options)``; called like ``fn``."""

    def __init__(self, fn: Any, name: str, **options: Any):
        self.fn, self.name = fn, name
        self._compiled: Any = torch.compile(fn, **options)
        self.failed: str | None = None  # the compile error, once one happened

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.failed is None:
            try:
                return self._compiled(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - sorted below: only compile failures
                if not _is_compile_failure(e):
                    raise
                self.failed = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
                log.warning("compute: compiling %s failed (%s); it runs eagerly from now on",
                            self.name, self.failed)
        return self.fn(*args, **kwargs)


__all__ = ["Compiled"]
