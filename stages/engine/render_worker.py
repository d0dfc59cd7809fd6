"""The Stage II engine process (paper §7, §8.2): renders the trajectories of one instance —
one level, loaded once — into ``<instance>/<traj>/``, five views and a tiled preview each.

Run by a node-runner slot as ``python -m stages.engine.render_worker <instance>``. It reads
``instance.json`` (settings, jobs, asset path map), holds ``owner.lock`` for its whole life (so
no other run recovers or deletes the instance under it), opens the slot's GPU (checked,
:mod:`stages.engine.device`), appends one progress line per finished trajectory and writes
``COMPLETE`` only after a normal shutdown. A trajectory that cannot be rendered is a line in
``failures.jsonl`` with a reason; the instance goes on. A device fault (out of GPU or host
memory, a driver or CUDA error) ends the process with its own exit code instead, keeping the
finished trajectories, for the node runner to retry (:mod:`stages.core.device_faults`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ..core.device_faults import beyond_device, classify, exit_on_device_fault
from ..core.progress import COMPLETE, append_progress, read_progress
from ..core.trajectory import VIEWS
from .instance_render import STEADY_SKIP, InstanceRenderer
from .stage2 import Stage2Failure

OWNER_LOCK = "owner.lock"
# set by benchmarks (tests/benchmarks/bench_render.py): the worker writes every kept frame's
# wall-clock time to <instance>/frame_times.json, so renderers side by side can be counted
# over the window they all ran steadily
FRAME_TIMES_ENV = "WMFORGE_BENCH_FRAME_TIMES"


def _steady(times: list[float]) -> str:
    """The log's steady rate: frames after the first STEADY_SKIP (start-up, compiling and
    caches behind) over the time they took."""
    k = min(STEADY_SKIP, len(times) // 2)
    if len(times) - 1 - k < 1 or times[-1] <= times[k]:
        return ""
    n = len(times) - 1 - k
    return f", steady {n / (times[-1] - times[k]):.2f} frames/s over its last {n}"


def take_owner_lock(inst: Path) -> Any:
    """Hold ``owner.lock`` for this process's life (released by the kernel when it dies), so
    recovery never touches an instance a live process owns."""
    inherited = os.environ.get("WMFORGE_OWNER_LOCK_FD", "")
    if inherited:  # the node runner locked it for us before instance.json existed
        return os.fdopen(int(inherited), "a+")
    f = open(inst / OWNER_LOCK, "a+")  # noqa: SIM115 - held until the process exits
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"render worker: {inst} is owned by another live process") from None
    f.truncate(0)
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def _open_device(ir: InstanceRenderer, spec: dict) -> dict:
    """Bind the slot's GPU before the graphics pipe opens, then check what was opened."""
    from .compute.backend import choose_backend
    from .device import SlotDevice, bind_display, check_device, gl_device_uuid, nvml_gpu_of_pid

    dev = SlotDevice.from_env()
    if choose_backend(ir.s.backend, ir.s.ground_truth) == "compute":
        # no GL context and no EGL device to bind (a compute-only container has none):
        # torch's device is checked instead
        return _open_compute_device(ir, dev, ir._renderer())
    idx = bind_display(dev)
    r = ir._renderer()
    r.warmup(1)  # one frame: opens the GL context on the bound device
    gsg = r.gsg
    rec = check_device(dev, idx, str(gsg.getDriverRenderer()), str(gsg.getDriverVendor()),
                       nvml_gpu_of_pid() if dev.gpu is not None else None, gl_device_uuid())
    rec["slot"] = os.environ.get("WMFORGE_SLOT", "")
    (ir.inst / "device.json").write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    print(f"render: device: GPU {dev.gpu if dev.gpu is not None else '-'} EGL device {idx}: "
          f"{rec['gl_renderer']} ({rec['gl_vendor']})", flush=True)
    return rec


def _open_compute_device(ir: InstanceRenderer, dev: Any, r: Any) -> dict:
    """The compute backend's device record: torch's device (the slot's GPU through
    ``CUDA_VISIBLE_DEVICES``, or the CPU), checked against what the slot asked for."""
    from .device import check_compute_device

    device = str(getattr(r.targets, "device", "cpu"))
    name, uuid = "cpu", None
    if device.startswith("cuda"):
        import torch

        props = torch.cuda.get_device_properties(torch.device(device))
        name, uuid = str(props.name), f"GPU-{props.uuid}"
    rec = check_compute_device(dev, device, name, uuid)
    rec["slot"] = os.environ.get("WMFORGE_SLOT", "")
    cache = getattr(r.targets, "compile_cache", None)
    rec["compile_cache"] = None if cache is None else str(cache)
    (ir.inst / "device.json").write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    print(f"render: device: GPU {dev.gpu if dev.gpu is not None else '-'}: compute backend on "
          f"{device} ({name})", flush=True)
    return rec


def worker(inst: Path) -> int:
    """The rendering process: the jobs of ``instance.json``, one progress line each."""
    from . import fault_injection

    lock = take_owner_lock(inst)
    spec = json.loads((inst / "instance.json").read_text())
    base = Path(spec.get("base", "."))
    level_id = str(spec.get("level_id", ""))
    fault_injection.at("render", level_id)
    ir = InstanceRenderer(inst, spec["settings"], spec.get("display", "p3headlessgl"), base,
                          path_map=spec.get("path_map"), lineage=spec.get("lineage"),
                          readback=str(spec.get("readback", "sync")),
                          compile_cache=spec.get("compile_cache"),
                          level_digests=spec.get("level_digests"))
    _open_device(ir, spec)
    done = read_progress(inst)
    finished = 0
    times: dict[str, list[float]] = {}
    for job in spec["jobs"]:
        name = job["name"]
        if name in done:
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            rmeta = ir.render(Path(job["traj_dir"]), name, job["key"])
        except Exception as exc:  # noqa: BLE001 - one bad trajectory never stops the instance
            kind = classify(exc)
            beyond = beyond_device(exc, kind)
            if kind and not beyond:  # ... but a device fault stops the process (device_faults)
                shutil.rmtree(inst / name, ignore_errors=True)
                raise
            reason, detail = ((kind, f"{type(exc).__name__}: {exc}; {beyond}") if kind else
                              (exc.reason, exc.detail) if isinstance(exc, Stage2Failure) else
                              ("render_error", f"{type(exc).__name__}: {exc}"))
            shutil.rmtree(inst / name, ignore_errors=True)
            with open(inst / "failures.jsonl", "a") as f:
                f.write(json.dumps({"trajectory": name, "reason": reason,
                                    "detail": detail}) + "\n")
            print(f"render: {name}: {reason}: {detail}", flush=True)
            continue
        append_progress(inst / "progress.log", name, rmeta["frame_count"], job["key"])
        finished += 1
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        enc = ir.encoder
        busy = " ".join(f"{k}={v:.1f}" for k, v in (enc.busy_s.items() if enc else ()))
        steady = _steady(ir.frame_times)
        if os.environ.get(FRAME_TIMES_ENV):  # a benchmark's: every frame's wall-clock time
            times[name] = ir.frame_times
            (inst / "frame_times.json").write_text(json.dumps(times))
        print(f"render: {name}: {rmeta['frame_count']} frames x {len(VIEWS)} views in "
              f"{dt:.1f} s ({rmeta['frame_count'] / dt:.1f} frames/s{steady}, {cpu:.1f} CPU s), "
              f"aligned "
              f"{rmeta['alignment']['aligned_fraction']:.3f}, render thread waited "
              f"{enc.wait_s if enc else 0:.1f} s on encoders, encoder busy s: {busy}",
              flush=True)
        fault_injection.at("render", level_id, finished)
    ir.close()
    (inst / COMPLETE).write_text(json.dumps({"jobs": len(spec["jobs"])}) + "\n")
    lock.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m stages.engine.render_worker <instance folder>")
    sys.exit(exit_on_device_fault(lambda: worker(Path(sys.argv[1])), "render"))
