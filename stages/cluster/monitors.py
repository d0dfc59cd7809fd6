"""Node monitors (paper §8.4), separate from the runners: GPU access as a slot sees it, disk
pressure, and remediation under a file lock with a per-node cooldown.

GPU access reason codes (one per GPU, or one for the node when NVML does not start):

- ``ok``; ``no_gpu`` (no NVIDIA driver or no device: the node runs CPU slots);
- ``container_lost_gpu`` — NVML fails at init with an *unknown* error: the container lost its
  device nodes while the host still has the GPU (remedy: restart the container);
- ``gpu_lost`` — a device query says GpuIsLost or ResetRequired (remedy: reset / reboot);
- ``driver_mismatch`` — NVML's driver/library version mismatch (remedy: reboot after a driver
  update);
- ``egl_missing`` — NVML sees the GPU but no EGL device maps to it (renders would fall back).

Disk pressure (free space of ``monitor.disk_path``): ``warn``; ``drain`` (the allocator stops
leasing to the node); ``prune`` (verified outputs and old logs are deleted, and drain).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..config import MonitorConfig
from .uploader import TOMBSTONE

GPU_BAD = ("container_lost_gpu", "gpu_lost", "driver_mismatch", "egl_missing")


@dataclass
class GpuFinding:
    gpu: int | None  # None: the node as a whole
    reason: str
    detail: str = ""


class NvmlLike(Protocol):
    def init(self) -> None: ...

    def device_count(self) -> int: ...

    def query(self, index: int) -> None: ...  # raises on a lost device

    def egl_cuda_ids(self) -> list[int | None]: ...


def _classify(exc: Exception) -> str:
    """Reason code of an NVML error (pynvml's class names, or the stand-in's)."""
    name = type(exc).__name__ + " " + str(exc)
    if "GpuIsLost" in name or "ResetRequired" in name or "GPU is lost" in name:
        return "gpu_lost"
    if "LibRmVersionMismatch" in name or "version mismatch" in name.lower():
        return "driver_mismatch"
    if "Unknown" in name:
        return "container_lost_gpu"
    return "no_gpu"


class PynvmlProbe:
    """The real probe: pynvml (nvidia-ml-py) and the EGL device enumeration."""

    def __init__(self) -> None:
        import pynvml  # ImportError: no NVML binding, handled by gpu_access

        self.nv = pynvml

    def init(self) -> None:
        self.nv.nvmlInit()

    def device_count(self) -> int:
        return int(self.nv.nvmlDeviceGetCount())

    def query(self, index: int) -> None:
        h = self.nv.nvmlDeviceGetHandleByIndex(index)
        self.nv.nvmlDeviceGetMemoryInfo(h)
        self.nv.nvmlDeviceGetUUID(h)

    def egl_cuda_ids(self) -> list[int | None]:
        from ..engine.device import egl_devices

        return egl_devices()


class NvmlStandinError(Exception):
    """Raised by the stand-in with an NVML error's name (e.g. "NVMLError_GpuIsLost")."""


class NvmlStandin:
    """A stand-in for NVML, named as such (no GPU on CPU machines): a JSON file says what NVML
    would answer: {"init_error": "", "devices": [{"error": ""}], "egl": [0, 1]}. Re-read on
    every probe, so a test changes the condition between rounds."""

    def __init__(self, path: str):
        self.spec = json.loads(Path(path).read_text())

    def init(self) -> None:
        if self.spec.get("init_error"):
            raise NvmlStandinError(self.spec["init_error"])

    def device_count(self) -> int:
        return len(self.spec.get("devices", []))

    def query(self, index: int) -> None:
        err = self.spec["devices"][index].get("error")
        if err:
            raise NvmlStandinError(err)

    def egl_cuda_ids(self) -> list[int | None]:
        return list(self.spec.get("egl", range(self.device_count())))


def gpu_access(probe: str) -> list[GpuFinding]:
    try:
        nv: NvmlLike = (NvmlStandin(probe.split(":", 1)[1]) if probe.startswith("standin:")
                        else PynvmlProbe())
    except ImportError:
        return [GpuFinding(None, "no_gpu", "nvidia-ml-py is not installed")]
    try:
        nv.init()
    except Exception as exc:  # noqa: BLE001 - every NVML failure is a finding
        return [GpuFinding(None, _classify(exc), f"nvmlInit: {type(exc).__name__}: {exc}")]
    n = nv.device_count()
    if n == 0:
        return [GpuFinding(None, "no_gpu", "NVML reports no device")]
    egl = set(nv.egl_cuda_ids())
    out = []
    for i in range(n):
        try:
            nv.query(i)
        except Exception as exc:  # noqa: BLE001
            out.append(GpuFinding(i, _classify(exc), f"{type(exc).__name__}: {exc}"))
            continue
        out.append(GpuFinding(i, "ok" if i in egl else "egl_missing",
                              "" if i in egl else "no EGL device with this CUDA id"))
    return out


@dataclass
class DiskFinding:
    path: str
    free_mb: float
    level: str  # ok | warn | drain | prune


def disk_pressure(path: str, mcfg: MonitorConfig) -> DiskFinding:
    free = shutil.disk_usage(path).free / 2**20
    level = ("prune" if free < mcfg.prune_free_mb else "drain" if free < mcfg.drain_free_mb
             else "warn" if free < mcfg.warn_free_mb else "ok")
    return DiskFinding(path, round(free, 1), level)


def prune_verified(renders: Path, work: Path, log_age_h: float) -> list[Path]:
    """Delete what is safe: files left in delivered trajectories' instances (engine logs,
    instance records; never a progress log) once every trajectory there has its tombstone, and
    logs under ``work`` older than ``log_age_h``. Nothing that is not verified in the store."""
    gone: list[Path] = []
    for prog in sorted(renders.glob("*/*/*/progress.log")):
        inst = prog.parent
        trajs = [d for d in inst.iterdir() if d.is_dir()]
        if not trajs or not all((d / TOMBSTONE).exists() for d in trajs):
            continue
        for f in inst.iterdir():
            if f.is_file() and f.suffix in (".log", ".json", ".jsonl") \
                    and f.name != "progress.log":
                f.unlink()
                gone.append(f)
    cutoff = time.time() - log_age_h * 3600
    for f in work.rglob("*.log") if work.is_dir() else []:
        try:
            if f.is_file() and f.stat().st_mtime < cutoff:
                f.unlink()
                gone.append(f)
        except FileNotFoundError:
            continue
    return gone


class Remediator:
    """Runs the configured command of a condition under a file lock (never twice at once,
    across processes) with a per-node cooldown; every run is logged."""

    def __init__(self, mcfg: MonitorConfig, node: str, folder: Path):
        self.cfg, self.node, self.folder = mcfg, node, folder
        folder.mkdir(parents=True, exist_ok=True)
        self.state = folder / "remediation.json"
        self.log = folder / "remediation.log"

    def _log(self, msg: str) -> None:
        with open(self.log, "a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.node} {msg}\n")

    def run(self, reason: str) -> str:
        """"ran (rc N)", "cooldown", "busy" or "no command"."""
        cmd = self.cfg.remediation.get(reason)
        if not cmd:
            return "no command"
        with open(self.folder / "remediation.lock", "a+") as lock:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._log(f"{reason}: skipped, a remediation is running")
                return "busy"
            last = json.loads(self.state.read_text()) if self.state.exists() else {}
            since = time.time() - float(last.get(reason, 0.0))
            if since < self.cfg.cooldown_s:
                self._log(f"{reason}: skipped, last run {since:.0f} s ago (cooldown "
                          f"{self.cfg.cooldown_s:.0f} s)")
                return "cooldown"
            last[reason] = time.time()
            self.state.write_text(json.dumps(last))
            self._log(f"{reason}: running {cmd!r}")
            env = {**os.environ, "WMFORGE_NODE": self.node, "WMFORGE_REASON": reason}
            rc = subprocess.call(cmd, shell=True, env=env)
            self._log(f"{reason}: exit {rc}")
            return f"ran (rc {rc})"


def monitor_once(node: str, mcfg: MonitorConfig, work: Path, renders: Path,
                 alloc: Any = None, call: Callable[[Any], Any] = lambda x: x) -> dict:
    """One round: probe, drain/undrain the node in the allocator, prune, remediate.
    ``alloc`` is an AllocatorService (or a Ray handle with ``call=ray.get`` over
    ``.remote``)."""

    def a(method: str, *args: Any) -> Any:
        if alloc is None:
            return None
        fn = getattr(alloc, method)
        return call(fn.remote(*args) if hasattr(fn, "remote") else fn(*args))

    gpus = gpu_access(mcfg.gpu_probe)
    disk = disk_pressure(mcfg.disk_path or str(work), mcfg)
    rem = Remediator(mcfg, node, work / "monitor")
    actions: list[str] = []
    pruned: list[Path] = []
    bad = [g for g in gpus if g.reason in GPU_BAD]
    if disk.level == "prune":
        pruned = prune_verified(renders, work, mcfg.prune_log_age_h)
        actions.append(f"pruned {len(pruned)} files")
    if bad:
        a("drain", node, bad[0].reason)
        actions.append(f"drained ({bad[0].reason})")
        for reason in sorted({g.reason for g in bad}):
            actions.append(f"{reason}: {rem.run(reason)}")
    elif disk.level in ("drain", "prune"):
        a("drain", node, "disk_pressure")
        actions.append("drained (disk_pressure)")
        actions.append(f"disk_pressure: {rem.run('disk_pressure')}")
    else:
        a("undrain", node, ("disk_pressure", *GPU_BAD))
    return {"node": node, "gpus": [g.__dict__ for g in gpus], "disk": disk.__dict__,
            "actions": actions, "pruned": [str(p) for p in pruned]}


def health_table(rows: list[dict]) -> str:
    head = f"{'node':<10}{'gpu':<6}{'reason':<20}{'disk free MiB':>14}  {'disk':<6} actions"
    out = [head, "-" * len(head)]
    for r in rows:
        for g in r["gpus"]:
            out.append(f"{r['node']:<10}{'-' if g['gpu'] is None else g['gpu']!s:<6}"
                       f"{g['reason']:<20}{r['disk']['free_mb']:>14.0f}  "
                       f"{r['disk']['level']:<6} {'; '.join(r['actions']) or '-'}")
    return "\n".join(out)
