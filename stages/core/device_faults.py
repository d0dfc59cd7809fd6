"""Device faults of an engine process, and the exit codes that tell the node runner about them.

An engine process that runs out of device memory, or whose GPU context is broken by a driver
or CUDA error, must not go on rendering trajectory after trajectory into failure rows: a
broken CUDA context fails every later call, and an out-of-memory scene may fit once fewer
slots share the GPU. So the process stops with one of these exit codes (keeping the
trajectories it finished), and the node runner (:mod:`stages.cluster.slot_limits`) decides:

- ``gpu_oom`` (the slot's GPU ran out of memory) and ``host_oom`` (host memory: a CPU slot's
  device, or the host side of a GPU slot): retried once fewer slots share that device, never
  counted against ``node.retries``; a step that ran alone on its device and still ran out is
  a failure row at once (fewer slots cannot help it);
- ``gpu_error`` (a driver or CUDA error: illegal address, device-side assert, launch
  failure, lost device): only that slot's process ends; the runner's retry and snapshot rules
  apply as for any engine error.

Standard library only (the runner and the engines both import it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

EXIT_GPU_OOM = 86
EXIT_HOST_OOM = 87
EXIT_GPU_ERROR = 88

EXIT_REASONS = {EXIT_GPU_OOM: "gpu_oom", EXIT_HOST_OOM: "host_oom", EXIT_GPU_ERROR: "gpu_error"}
EXIT_CODES = {v: k for k, v in EXIT_REASONS.items()}
OOM_REASONS = ("gpu_oom", "host_oom")

# lower-case fragments of the messages that the allocators and drivers raise
_GPU_OOM = ("cuda out of memory", "cuda error: out of memory", "cublas_status_alloc_failed",
            "out of video memory", "gl_out_of_memory", "error_out_of_device_memory",
            "cudaerrormemoryallocation")
_HOST_OOM = ("can't allocate memory", "cannot allocate memory", "not enough memory",
             "unable to allocate", "error_out_of_host_memory")
_GPU_ERROR = ("cuda error", "cuda driver error", "illegal memory access", "device-side assert",
              "unspecified launch failure", "illegal instruction was encountered",
              "gpu is lost", "error_device_lost", "cudaerror", "cuda_error_")


def classify(exc: BaseException) -> str:
    """``gpu_oom``, ``host_oom``, ``gpu_error`` or ``""`` (not a device fault) for an exception
    raised while rendering, by its type name and message (torch, numpy, PyAV and the GL
    wrappers raise plain ``RuntimeError`` / ``MemoryError`` subclasses)."""
    names = {c.__name__ for c in type(exc).__mro__}
    text = f"{exc}".lower()
    if "OutOfMemoryError" in names or any(s in text for s in _GPU_OOM):
        return "gpu_oom"
    if "MemoryError" in names or any(s in text for s in _HOST_OOM):
        return "host_oom"
    if "AcceleratorError" in names or any(s in text for s in _GPU_ERROR):
        return "gpu_error"
    return ""


def exit_on_device_fault(main: Callable[[], int], label: str) -> int:
    """Run an engine process's ``main``; a device fault ends the process at once with its exit
    code (``os._exit``: a broken CUDA context or a live encoder thread must not hang the
    interpreter's shutdown). Any other exception propagates as before."""
    try:
        return main()
    except Exception as exc:
        kind = classify(exc)
        if not kind:
            raise
        print(f"{label}: device fault {kind}: {type(exc).__name__}: {exc}", flush=True)
        sys.stderr.flush()
        os._exit(EXIT_CODES[kind])


__all__ = ["EXIT_CODES", "EXIT_GPU_ERROR", "EXIT_GPU_OOM", "EXIT_HOST_OOM", "EXIT_REASONS",
           "OOM_REASONS", "classify",
           "exit_on_device_fault"]
