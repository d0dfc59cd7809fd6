"""Fault injection for the node runner's tests — named as such, off unless asked for.

``WMFORGE_FAULT_INJECTION`` holds a JSON object; an engine process calls :func:`at` at its
checkpoints and, when an entry matches, really does the fault:

- ``{"crash": {"stage": "render", "level": "Pack/Level"}}``: the process kills itself with
  SIGSEGV when it starts that level (every attempt: a level that crashes every time);
- ``{"stall": {"stage": "stage1", "level": "Pack/Level", "after": 1}}``: after ``after``
  finished trajectories the process stays alive but stops advancing (sleeps), so only the
  runner's stall timeout can end it.

- ``{"oom": {"stage": "render", "level": "Pack/Level", "times": 1, "count_file": "…"}}``:
  when the process starts that level an allocator really fails under a real cap (``_oom``):
  torch's CUDA allocator where it sees a GPU (``torch.OutOfMemoryError``: ``gpu_oom``), else
  the CPU allocator under an address-space limit ("can't allocate memory": ``host_oom``); the
  sizes are plausible (below the device's total), so it reads as memory pressure, not as a
  malformed request. With ``"frame": N`` it fires inside the frame loop instead, before frame
  N is drawn (:func:`at_frame`). With ``times`` and ``count_file``, only
  the first ``times`` starts of that level do (counted in the file); else every start
  (a list of such entries for several levels);
- ``{"gpu_error": {"stage": "render", "level": "…"}}``: on a CUDA machine a real
  device-side assert (a kernel indexes out of range; the context is broken after it); on a
  machine without CUDA a stand-in, named ``gpu_error_standin`` in its message, that raises
  the CUDA runtime's message for it (no GPU here can fail).

- ``{"hog": {"stage": "stage1", "level": "…", "mb": 1024, "hold_s": 3}}``: when the process
  starts that level it really takes ``mb`` MiB of RAM (every page written) and holds it for
  ``hold_s`` seconds, then goes on: memory pressure for the kernel's OOM killer to act on
  (the drills cap the engines' memory cgroup: ``node.memory_gb``, ``node.slot_memory_gb``).

``stage`` is ``stage1`` or ``render``; ``level`` may be ``"*"``.
"""

from __future__ import annotations

import json
import os
import signal
import time


def _entries() -> dict:
    raw = os.environ.get("WMFORGE_FAULT_INJECTION", "")
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"WMFORGE_FAULT_INJECTION: not JSON: {exc}") from None
    return doc if isinstance(doc, dict) else {}


def _matches(entry: dict, stage: str, level: str) -> bool:
    return entry.get("stage") == stage and entry.get("level") in ("*", level)


def at(stage: str, level: str, finished: int = 0) -> None:
    """A checkpoint: the process starts ``level`` (finished=0) or has finished ``finished``
    trajectories of it."""
    doc = _entries()
    crash = doc.get("crash")
    if isinstance(crash, dict) and _matches(crash, stage, level) and finished == 0:
        print(f"fault injection: crashing on {level} ({stage})", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    if finished == 0:
        _device_faults(doc, stage, level, None)
        hogs = doc.get("hog")
        for entry in hogs if isinstance(hogs, list) else [hogs]:
            if isinstance(entry, dict) and _matches(entry, stage, level):
                _hog(int(entry.get("mb", 1024)), float(entry.get("hold_s", 3.0)))
    stall = doc.get("stall")
    if (isinstance(stall, dict) and _matches(stall, stage, level)
            and finished >= int(stall.get("after", 0))):
        print(f"fault injection: stalling on {level} ({stage}) after {finished}", flush=True)
        while True:
            time.sleep(3600)


def active() -> bool:
    """Whether any fault is asked for (so a per-frame checkpoint costs nothing otherwise)."""
    return bool(os.environ.get("WMFORGE_FAULT_INJECTION", ""))


def at_frame(stage: str, level: str, frame: int) -> None:
    """A checkpoint inside the frame loop, before frame ``frame`` is drawn: the ``oom`` and
    ``gpu_error`` entries with ``"frame": N`` fire here, in the middle of a trajectory, where
    the renderer's own error handling wraps what is raised."""
    _device_faults(_entries(), stage, level, frame)


def _device_faults(doc: dict, stage: str, level: str, frame: int | None) -> None:
    for kind, fault in (("oom", _oom), ("gpu_error", _gpu_error)):
        entries = doc.get(kind)
        for entry in entries if isinstance(entries, list) else [entries]:
            if (isinstance(entry, dict) and _matches(entry, stage, level)
                    and entry.get("frame") == frame and _counted(entry)):
                where = f" at frame {frame}" if frame is not None else ""
                print(f"fault injection: {kind} on {level} ({stage}){where}", flush=True)
                fault()


def _counted(entry: dict) -> bool:
    """Whether this start is one of the entry's first ``times`` (every start without it)."""
    if "times" not in entry:
        return True
    f = entry["count_file"]
    try:
        with open(f) as fh:
            n = len(fh.read().split())
    except FileNotFoundError:
        n = 0
    if n >= int(entry["times"]):
        return False
    with open(f, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return True


def _oom() -> None:
    """A real allocation failure of a plausible size under a real cap: on a GPU, torch's CUDA
    allocator capped at a thousandth of the card asked for 1 GiB; on the host, this process's
    address space capped at 64 MiB above what it maps now, then 512 MiB asked of torch's CPU
    allocator (the process ends right after, so the cap dies with it)."""
    import resource

    import torch

    if torch.cuda.is_available():
        torch.cuda.set_per_process_memory_fraction(0.001)
        torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        return
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (mapped + (64 << 20), resource.RLIM_INFINITY))
    torch.empty(512 << 20, dtype=torch.uint8)


def _gpu_error() -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA error: an illegal memory access was encountered "
                           "[gpu_error_standin: fault injection on a machine without CUDA]")
    x = torch.zeros(4, device="cuda")
    x[torch.tensor([1 << 20], device="cuda")] = 1.0  # out of range inside the kernel
    torch.cuda.synchronize()


_HELD: list = []


def _hog(mb: int, hold_s: float) -> None:
    import numpy as np

    print(f"fault injection: taking {mb} MiB for {hold_s:g} s", flush=True)
    _HELD.append(np.ones(mb << 20, np.uint8))  # every page written: resident, not reserved
    time.sleep(hold_s)
    _HELD.clear()
