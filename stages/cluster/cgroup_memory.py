"""One memory cgroup per slot, so that an engine the kernel's OOM killer takes is known as such.

When the host runs out of memory the kernel kills a process with SIGKILL; to the runner that
looked like any ``engine_crashed``, retried at the same concurrency (and killed again). Each
engine process is moved into ``<this process's memory cgroup>/wmforge-<pid>/<slot>/`` right
after it starts; the cgroup's ``oom_kill`` counter (cgroup v1 ``memory.oom_control``, v2
``memory.events``) says whether the kernel killed something in it. An engine that died by a
SIGKILL the runner did not send while that counter rose is ``host_oom`` (the node runner then
lowers the host's running limit, :mod:`.slot_limits`).

``node.slot_memory_gb`` > 0 also caps each slot's cgroup (v1 ``memory.limit_in_bytes``, v2
``memory.max``): a runaway engine is killed in its own slot instead of taking the host down; a
kill at that cap is final (fewer slots cannot help; raise the cap). ``node.memory_gb`` > 0 caps
all of this runner's engines together (the ``wmforge-<pid>`` cgroup): a kill there is memory
pressure, retried at fewer slots like any ``host_oom``.

Best effort: where no memory cgroup can be created (no controller, read-only, v2 without the
controller delegated), the runner goes on without it and says so once.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

CGROUP_ROOT = Path("/sys/fs/cgroup")


def own_memory_cgroup(proc_cgroup: str | None = None) -> tuple[Path, int] | None:
    """(folder, version) of this process's memory cgroup, or None."""
    text = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text()
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            d = CGROUP_ROOT / "memory" / parts[2].lstrip("/")
            return (d, 1) if (d / "memory.oom_control").exists() else None
    for line in text.splitlines():
        if line.startswith("0::"):
            d = CGROUP_ROOT / line[3:].lstrip("/")
            return (d, 2) if (d / "memory.events").exists() else None
    return None


class SlotCgroups:
    """Per-slot memory cgroups under this runner's own; ``available`` False where none could
    be made (``why`` says why)."""

    def __init__(self, slots: list[str], limit_bytes: int = 0, node_limit_bytes: int = 0):
        self.limit = limit_bytes
        self.dirs: dict[str, Path] = {}
        self.why = ""
        self.version = 0
        self.base: Path | None = None
        own = None
        try:
            own = own_memory_cgroup()
        except OSError as exc:
            self.why = f"/proc/self/cgroup: {exc}"
        if own is None:
            self.why = self.why or "no memory cgroup of this process to nest slots in"
            return
        base, self.version = own
        _remove_stale(base)
        self.base = base / f"wmforge-{os.getpid()}"
        try:
            self.base.mkdir(exist_ok=True)
            if node_limit_bytes > 0:  # every engine of this runner together
                self._cap(self.base, node_limit_bytes)
            for s in slots:
                d = self.base / s
                d.mkdir(exist_ok=True)
                if limit_bytes > 0:
                    self._cap(d, limit_bytes)
                self.dirs[s] = d
        except OSError as exc:
            self.why = f"{self.base}: {exc}"
            self.close()

    def _cap(self, d: Path, limit: int) -> None:
        name = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        (d / name).write_text(f"{limit}\n")

    @property
    def available(self) -> bool:
        return bool(self.dirs)

    def enter(self, slot: str, pid: int) -> bool:
        """Move ``pid`` (a just-started engine) into the slot's cgroup; False if it could not."""
        d = self.dirs.get(slot)
        if d is None:
            return False
        try:
            (d / "cgroup.procs").write_text(f"{pid}\n")
        except OSError:
            return False
        return True

    def counters(self, slot: str) -> tuple[int, int]:
        """(processes the kernel's OOM killer killed in the slot's cgroup, times the slot hit
        its own cap): compare a step's values at its start and its end."""
        d = self.dirs.get(slot)
        if d is None:
            return (0, 0)
        try:
            if self.version == 1:
                m = re.search(r"^oom_kill (\d+)$", (d / "memory.oom_control").read_text(), re.M)
                cap = int((d / "memory.failcnt").read_text().strip() or 0)
            else:
                ev = (d / "memory.events").read_text()
                m = re.search(r"^oom_kill (\d+)$", ev, re.M)
                mx = re.search(r"^max (\d+)$", ev, re.M)
                cap = int(mx.group(1)) if mx else 0
        except (OSError, ValueError):
            return (0, 0)
        return (int(m.group(1)) if m else 0, cap)

    def close(self) -> None:
        """Remove the cgroups (the kernel refuses while a process is still in one)."""
        for d in list(self.dirs.values()):
            with contextlib.suppress(OSError):
                d.rmdir()
        self.dirs = {}
        if self.base is not None:
            with contextlib.suppress(OSError):
                self.base.rmdir()


AT_SLOT_CAP = "at its slot's cap"


def _remove_stale(base: Path) -> None:
    """The cgroups of runners that died without closing theirs (kill -9): removed once empty
    (a live runner's, or one still holding a process, stays)."""
    for d in base.glob("wmforge-*"):
        try:
            pid = int(d.name.split("-", 1)[1])
            os.kill(pid, 0)
            continue  # its runner lives
        except ProcessLookupError:
            pass
        except (ValueError, PermissionError):
            continue
        for child in d.iterdir():
            if child.is_dir():
                with contextlib.suppress(OSError):
                    child.rmdir()
        with contextlib.suppress(OSError):
            d.rmdir()


def oom_kill_reason(cg: SlotCgroups, slot: str, at_start: tuple[int, int], sig_name: str,
                    node: Any) -> str:
    """Why an engine that died by a SIGKILL the runner did not send was taken by the kernel's
    OOM killer (its slot's cgroup counted a kill since ``at_start``), or ``""``. ``node`` is
    the ``node.*`` config (its caps are named in the line)."""
    if sig_name != "SIGKILL":
        return ""
    kills, caps = cg.counters(slot)
    if kills <= at_start[0]:
        return ""
    if cg.limit and caps > at_start[1]:
        return (f"killed by the kernel's OOM killer {AT_SLOT_CAP}, node.slot_memory_gb "
                f"{node.slot_memory_gb:g}: raise it")
    cap = f" (node.memory_gb {node.memory_gb:g})" if node.memory_gb else ""
    return f"killed by the kernel's OOM killer: the host's memory ran out{cap}"


__all__ = ["AT_SLOT_CAP", "SlotCgroups", "oom_kill_reason", "own_memory_cgroup"]
