"""``render.backend`` made concrete for the machine a renderer runs on (gl or compute).

The rule for ``auto``, as measured: **compute on a CUDA GPU whose renderers share it through
NVIDIA MPS, gl everywhere else** (and gl whenever ground-truth layers are asked for: only the
GL pass draws them).

- Without MPS, GL is ahead. On a lent H100 at 720p x 8 with 4 renderers, steady (each
  renderer's own rate after its first 10 frames, summed), GL made 78.7 five-view minutes per
  GPU-hour and compute 35.0 (2026-12-06, docs/bench/h100_bench_render_merged_720px8_2026-12-06.log;
  compute's renderers each hold their own CUDA context, and the GPU time-slices between them).
- Under MPS, compute is ahead. On one lent H100 host (2026-12-06, ``gpu_run.sh mpsgl``),
  GL with 8 renderers made 79.0 and compute with 8 under MPS 96.7, steady; since then the
  leaders' Triton kernel and the batched scene step took compute to 168.7 steady with 8
  renderers under MPS and warm compile caches (2026-12-08, one H100 host; on another H100
  host that day GL made 66.3 with 8, and the torch graph under MPS ran 9.23 frames/s a
  renderer against GL's 4.15), docs/compute-renderer.md ("The figure set on one H100 host").
- On this project's CPU machines GL (llvmpipe) is faster, and no MPS runs there.

MPS is an operator's choice (one GPU fault reaches every client of its daemon), so auto
follows it rather than starting it. ``render.backend=compute`` or ``gl`` selects either
explicitly.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..render_settings import BACKENDS


def cuda_visible() -> bool:
    """Whether torch is importable and sees a CUDA device (False on any import error)."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - no torch, or a broken CUDA install: no compute GPU
        return False
    return bool(torch.cuda.is_available())


MPS_PIPE_DEFAULT = "/tmp/nvidia-mps"  # the MPS control daemon's pipe folder by default


def mps_serves() -> bool:
    """Whether an NVIDIA MPS control daemon serves this machine's CUDA clients: its pipe folder
    (``CUDA_MPS_PIPE_DIRECTORY``, default ``MPS_PIPE_DEFAULT``) holds the daemon's ``control``
    FIFO with a reader on it (a FIFO left by a daemon that died has none: opening it to write
    without blocking then fails with ENXIO). No CUDA call, no torch import, nothing written."""
    pipe = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_PIPE_DEFAULT) / "control"
    try:
        if not stat.S_ISFIFO(pipe.stat().st_mode):
            return False
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # missing, no reader (ENXIO), no permission
        return False
    return True


def node_backend(setting: str, gpu_slot: bool, ground_truth: Sequence[str] = ()) -> str:
    """``render.backend`` resolved on the node for one slot, before the render key is made, so
    the key names the renderer that draws (``auto`` never reaches a key): the measured rule
    with the slot's GPU standing for CUDA (the renderer's device check then holds it to that;
    ``gpu_slot`` is False for a CPU slot and for an engine other than the embedded one)."""
    if setting != "auto":
        return choose_backend(setting, ground_truth)
    return "compute" if gpu_slot and not ground_truth and mps_serves() else "gl"


_auto: list[str] = []  # a renderer process's own choice for auto, made once


def choose_backend(setting: str, ground_truth: Sequence[str] = ()) -> str:
    """``gl`` or ``compute`` for ``render.backend`` = ``setting`` (see the module docstring);
    a clear error for an unknown value or for compute with ground-truth layers. ``auto`` is
    decided once a process (its device check and its renderer ask in turn, and must agree
    even if a daemon starts or stops between); a node resolves it per slot first
    (``node_backend``)."""
    if setting not in BACKENDS:
        raise ValueError(f"render.backend is {setting!r}; expected one of {', '.join(BACKENDS)}")
    if setting == "compute" and ground_truth:
        raise ValueError(f"render.backend=compute cannot write render.ground_truth "
                         f"{list(ground_truth)} yet (the layers are drawn by the GL pass): use "
                         "render.backend=gl, or render.ground_truth=[]")
    if setting == "auto":  # the measured rule (module docstring)
        if ground_truth:
            return "gl"
        if not _auto:
            _auto.append("compute" if mps_serves() and cuda_visible() else "gl")
        return _auto[0]
    return setting


def compute_device() -> str:
    """Where the compute backend runs: ``cuda`` when torch sees a GPU, else ``cpu``."""
    return "cuda" if cuda_visible() else "cpu"


__all__ = ["choose_backend", "compute_device", "cuda_visible", "mps_serves"]
