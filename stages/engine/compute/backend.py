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
MPS_PID_FILE = "nvidia-cuda-mps-control.pid"  # the daemon's pid, in that folder
_mps: list[bool] = []  # this process's answer, found once


def mps_serves() -> bool:
    """Whether an NVIDIA MPS control daemon serves this machine's CUDA clients, found once a
    process (a node's render keys, and a renderer's device check and renderer, all agree even
    if a daemon starts or stops later): its pipe folder (``CUDA_MPS_PIPE_DIRECTORY``, default
    ``MPS_PIPE_DEFAULT``) holds its ``control`` socket (a FIFO on older daemons) and its pid
    file names a live process. Nothing is sent to the daemon; no CUDA call, no torch import.
    A folder without the pid file counts as no MPS (the conservative side: GL)."""
    if not _mps:
        _mps.append(_mps_alive(Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
                                    or MPS_PIPE_DEFAULT)))
    return _mps[0]


def _mps_alive(folder: Path) -> bool:
    try:
        mode = (folder / "control").stat().st_mode
        pid = int((folder / MPS_PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return False
    if not (stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # alive, another user's
        return True
    except OSError:  # gone: a folder left by a daemon that died
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


def choose_backend(setting: str, ground_truth: Sequence[str] = ()) -> str:
    """``gl`` or ``compute`` for ``render.backend`` = ``setting`` (see the module docstring);
    a clear error for an unknown value or for compute with ground-truth layers. A node
    resolves ``auto`` per slot first (``node_backend``); a renderer started with ``auto``
    decides here, the same way at each call (``mps_serves`` is found once a process)."""
    if setting not in BACKENDS:
        raise ValueError(f"render.backend is {setting!r}; expected one of {', '.join(BACKENDS)}")
    if setting == "compute" and ground_truth:
        raise ValueError(f"render.backend=compute cannot write render.ground_truth "
                         f"{list(ground_truth)} yet (the layers are drawn by the GL pass): use "
                         "render.backend=gl, or render.ground_truth=[]")
    if setting == "auto":  # the measured rule (module docstring)
        return "compute" if not ground_truth and mps_serves() and cuda_visible() else "gl"
    return setting


def compute_device() -> str:
    """Where the compute backend runs: ``cuda`` when torch sees a GPU, else ``cpu``."""
    return "cuda" if cuda_visible() else "cpu"


__all__ = ["choose_backend", "compute_device", "cuda_visible", "mps_serves"]
