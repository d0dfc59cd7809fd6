"""Device faults of an engine process, and the exit codes that tell the node runner about them.

An engine process that runs out of device memory, or whose GPU context is broken by a driver
or CUDA error, must not go on rendering trajectory after trajectory into failure rows: a
broken CUDA context fails every later call, and an out-of-memory scene may fit once fewer
slots share the GPU. So the process stops with one of these exit codes (keeping the
trajectories it finished), and the node runner (:mod:`stages.cluster.slot_limits`) decides:

- ``gpu_oom`` (the slot's GPU ran out of memory) and ``host_oom`` (host memory, which every
  slot shares): retried once fewer processes share that memory, never counted against
  ``node.retries``; a step that ran alone on it and still ran out is a failure row at once
  (fewer slots cannot help it). One allocation larger than its device's whole memory
  (:func:`beyond_device`) is a malformed request, not pressure: that trajectory's row only;
- ``gpu_error`` (a driver or CUDA error: illegal address, device-side assert, launch
  failure, lost device): only that slot's process ends; the runner's retry and snapshot rules
  apply as for any engine error.

Standard library only (the runner and the engines both import it).
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Callable

EXIT_GPU_OOM = 86
EXIT_HOST_OOM = 87
EXIT_GPU_ERROR = 88

EXIT_REASONS = {EXIT_GPU_OOM: "gpu_oom", EXIT_HOST_OOM: "host_oom", EXIT_GPU_ERROR: "gpu_error"}
EXIT_CODES = {v: k for k, v in EXIT_REASONS.items()}
OOM_REASONS = ("gpu_oom", "host_oom")

# lower-case fragments of the messages that the allocators and drivers raise
_GPU_OOM = ("cuda out of memory", "cuda error: out of memory", "cuda driver error: out of memory",
            "cuda_error_out_of_memory", "cublas_status_alloc_failed", "out of video memory",
            "gl_out_of_memory", "error_out_of_device_memory", "cudaerrormemoryallocation")
_HOST_OOM = ("can't allocate memory", "cannot allocate memory", "not enough memory",
             "unable to allocate", "error_out_of_host_memory")
_GPU_ERROR = ("cuda error", "cuda driver error", "illegal memory access", "device-side assert",
              "unspecified launch failure", "illegal instruction was encountered",
              "gpu is lost", "error_device_lost", "cudaerror", "cuda_error_")
_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "pib": 1 << 50, "eib": 1 << 60}


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it was raised from or during (``raise … from None`` hides
    ``__context__`` from tracebacks, not from here): a wrapped device fault is still one."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not e for e in out):
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _one(exc: BaseException) -> str:
    names = {c.__name__ for c in type(exc).__mro__}
    text = f"{exc}".lower()
    if "OutOfMemoryError" in names or any(s in text for s in _GPU_OOM):
        return "gpu_oom"
    if "MemoryError" in names or any(s in text for s in _HOST_OOM):
        return "host_oom"
    if "AcceleratorError" in names or any(s in text for s in _GPU_ERROR):
        return "gpu_error"
    return ""


def classify(exc: BaseException) -> str:
    """``gpu_oom``, ``host_oom``, ``gpu_error`` or ``""`` (not a device fault) for an exception
    raised while rendering — or any exception it was raised from — by type name and message
    (torch, numpy, PyAV and the GL wrappers raise plain ``RuntimeError`` / ``MemoryError``
    subclasses)."""
    for e in _chain(exc):
        kind = _one(e)
        if kind:
            return kind
    return ""


def requested_bytes(exc: BaseException) -> int | None:
    """The size of the allocation that failed, where the message or the exception says it
    (torch's "tried to allocate N bytes" / "Tried to allocate 1.50 GiB", numpy's
    ``_total_size``); None when unknown."""
    for e in _chain(exc):
        size = getattr(e, "_total_size", None)
        if isinstance(size, int):
            return size
        m = re.search(r"tried to allocate (\d+) bytes", f"{e}", re.I)
        if m:
            return int(m.group(1))
        m = re.search(r"tried to allocate ([\d.]+) ?([kmgtpe]?i?b)\b", f"{e}", re.I)
        if m and m.group(2).lower() in _UNITS:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    return None


def device_total_bytes(kind: str) -> int | None:
    """The memory the failed allocation's device has in all: the host's RAM for
    ``host_oom``, the current CUDA device's for ``gpu_oom`` (when torch is loaded)."""
    if kind == "host_oom":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return None
    torch = sys.modules.get("torch")
    if kind == "gpu_oom" and torch is not None:
        try:
            return int(torch.cuda.get_device_properties(torch.cuda.current_device())
                       .total_memory)
        except Exception:  # noqa: BLE001 - no CUDA context to ask: unknown
            return None
    return None


def beyond_device(exc: BaseException, kind: str) -> str:
    """A line saying why fewer slots cannot help when one allocation alone asked for more
    than its device has in all (a malformed input or a bug, not memory pressure); ``""``
    otherwise (or when unknown)."""
    if kind not in OOM_REASONS:
        return ""
    want, total = requested_bytes(exc), device_total_bytes(kind)
    if want is None or total is None or want <= total:
        return ""
    return (f"one allocation asked for {want / 2**30:,.1f} GiB, more than the "
            f"{'host' if kind == 'host_oom' else 'GPU'}'s {total / 2**30:,.1f} GiB in all: "
            "fewer slots cannot help")


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
        # the traceback first, then one summary line last: the runner's failure detail is the
        # log's tail, and CUDA's messages end in several lines of advice
        traceback.print_exc(file=sys.stdout)
        cause = next(e for e in _chain(exc) if _one(e))  # the fault itself, not a wrapper
        first = next((ln for ln in f"{cause}".splitlines() if ln.strip()), "")
        print(f"{label}: device fault {kind}: {type(cause).__name__}: {first}", flush=True)
        sys.stderr.flush()
        os._exit(EXIT_CODES[kind])


__all__ = ["EXIT_CODES", "EXIT_GPU_ERROR", "EXIT_GPU_OOM", "EXIT_HOST_OOM", "EXIT_REASONS",
           "OOM_REASONS", "beyond_device", "classify", "device_total_bytes",
           "exit_on_device_fault", "requested_bytes"]
