"""``render.backend`` made concrete for the machine a renderer runs on (gl or compute).

The rule for ``auto``: compute where torch is installed and sees a CUDA device, and no
ground-truth layers are asked for (the layers are drawn by the GL pass); gl otherwise. It is
a stated rule, not yet a measured one: issue #30's H200 benchmark decides whether compute is
the faster backend there (and from which resolution and sample count); on a CPU machine the
GL path (llvmpipe) is the faster (tests/benchmarks/bench_render.py --backend).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..render_settings import BACKENDS


def cuda_visible() -> bool:
    """Whether torch is importable and sees a CUDA device (False on any import error)."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - no torch, or a broken CUDA install: no compute GPU
        return False
    return bool(torch.cuda.is_available())


def choose_backend(setting: str, ground_truth: Sequence[str] = ()) -> str:
    """``gl`` or ``compute`` for ``render.backend`` = ``setting`` (see the module docstring);
    a clear error for an unknown value or for compute with ground-truth layers."""
    if setting not in BACKENDS:
        raise ValueError(f"render.backend is {setting!r}; expected one of {', '.join(BACKENDS)}")
    if setting == "compute" and ground_truth:
        raise ValueError(f"render.backend=compute cannot write render.ground_truth "
                         f"{list(ground_truth)} yet (the layers are drawn by the GL pass): use "
                         "render.backend=gl, or render.ground_truth=[]")
    if setting == "auto":
        return "compute" if not ground_truth and cuda_visible() else "gl"
    return setting


def compute_device() -> str:
    """Where the compute backend runs: ``cuda`` when torch sees a GPU, else ``cpu``."""
    return "cuda" if cuda_visible() else "cpu"


__all__ = ["choose_backend", "compute_device", "cuda_visible"]
