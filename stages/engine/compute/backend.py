"""``render.backend`` made concrete for the machine a renderer runs on (gl or compute).

The rule for ``auto``, as measured: **gl on every machine measured so far**. On a lent H100
at 720p x 8 (tests/benchmarks/bench_render.py --backend gl,compute, 2026-12-06,
docs/bench/h100_bench_render_backends_720px8_2026-12-06.json) GL made 45.4 five-view minutes
per GPU-hour with 4 renderers and compute 7.8 (its G-buffer alone takes 137 ms a five-view
frame there, compiled; docs/compute-renderer.md). Shading once per pixel and triangle
(``render.compute_shading: pixel``, merged.py) doubled compute's steady rate, and GL stays
ahead: on a lent H100 at 720p x 8 with 4 renderers, steady (each renderer's own rate after
its first 10 frames, summed: an upper bound), GL made 78.7 five-view minutes per GPU-hour and
compute 35.0 (whole runs, start-up included: 62.3 and 18.0) (2026-12-06,
docs/bench/h100_bench_render_merged_720px8_2026-12-06.log). On this project's CPU machines GL
(llvmpipe) is faster too. ``auto`` will pick compute where a benchmark shows it ahead (a GPU,
size and sample count); ``render.backend=compute`` selects it explicitly.
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
    if setting == "auto":  # the measured rule (module docstring): GL is the faster everywhere
        return "gl"
    return setting


def compute_device() -> str:
    """Where the compute backend runs: ``cuda`` when torch sees a GPU, else ``cpu``."""
    return "cuda" if cuda_visible() else "cpu"


__all__ = ["choose_backend", "compute_device", "cuda_visible"]
