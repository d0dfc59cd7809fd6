"""Monitors: GPU access reason codes through a stand-in for NVML (named as such: no GPU here),
disk pressure on a real small filesystem (a 64 MiB tmpfs), remediation under lock + cooldown,
and the allocator draining and resuming the node."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import threading
from pathlib import Path

import pytest

from stages.cluster.allocator_actor import AllocatorService
from stages.cluster.monitors import gpu_access, monitor_once
from stages.cluster.uploader import TOMBSTONE
from stages.config import MonitorConfig
from stages.pools import build_pools

MB = 2**20


def _alloc(tmp: Path) -> AllocatorService:
    rows = build_pools([f"P/L{i}" for i in range(6)], ["n1", "n2"], 1, 0).to_dict("records")
    return AllocatorService(str(tmp / "alloc" / "state.json"), rows, 1, 0, 60.0)


def _standin(tmp: Path, **spec) -> str:
    p = tmp / "nvml_standin.json"
    p.write_text(json.dumps(spec))
    return f"standin:{p}"


@pytest.mark.parametrize("spec,want", [
    ({"init_error": "NVMLError_Unknown: Unknown Error", "devices": []}, ["container_lost_gpu"]),
    ({"devices": [{}, {"error": "NVMLError_GpuIsLost"}], "egl": [0, 1]}, ["ok", "gpu_lost"]),
    ({"devices": [{"error": "NVMLError_ResetRequired"}], "egl": [0]}, ["gpu_lost"]),
    ({"init_error": "NVMLError_LibRmVersionMismatch: Driver/library version mismatch"},
     ["driver_mismatch"]),
    ({"devices": [{}, {}], "egl": [1]}, ["egl_missing", "ok"]),
    ({"init_error": "NVMLError_DriverNotLoaded", "devices": []}, ["no_gpu"]),
])
def test_gpu_access_reason_codes_through_the_nvml_standin(tmp_path, spec, want):
    assert [g.reason for g in gpu_access(_standin(tmp_path, **spec))] == want


def test_this_machine_without_a_gpu_reports_no_gpu():
    assert [g.reason for g in gpu_access("nvml")] == ["no_gpu"]


def test_a_lost_gpu_drains_the_node_and_remediates_once_under_the_lock(tmp_path):
    alloc = _alloc(tmp_path)
    marker = tmp_path / "remediated"
    mcfg = MonitorConfig(gpu_probe=_standin(tmp_path, devices=[{}, {"error": "GpuIsLost"}],
                                            egl=[0, 1]),
                         remediation={"gpu_lost": f"echo $WMFORGE_NODE >> {marker}; sleep 1"},
                         cooldown_s=600.0, warn_free_mb=0, drain_free_mb=0, prune_free_mb=0)
    work, renders = tmp_path / "work", tmp_path / "renders"
    work.mkdir()
    renders.mkdir()
    out: list[dict] = []
    # two monitors of the node at once (threads, separate lock descriptors): one runs it
    ths = [threading.Thread(target=lambda: out.append(
        monitor_once("n1", mcfg, work, renders, alloc))) for _ in range(2)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    acts = sorted(a for r in out for a in r["actions"] if a.startswith("gpu_lost"))
    assert acts == ["gpu_lost: busy", "gpu_lost: ran (rc 0)"]
    assert marker.read_text() == "n1\n"
    assert alloc.lease("n1") is None  # drained
    assert alloc.state()["balance"]["n1"]["drained"] == "gpu_lost"
    assert alloc.lease("n2") is not None  # the other node keeps working
    again = monitor_once("n1", mcfg, work, renders, alloc)
    assert "gpu_lost: cooldown" in again["actions"] and marker.read_text() == "n1\n"
    log = (work / "monitor" / "remediation.log").read_text()
    assert log.count("running '") == 1 and "skipped, a remediation is running" in log
    assert "cooldown" in log and "exit 0" in log
    # the GPU comes back: the node is undrained and leases again
    healthy = dataclasses.replace(mcfg, gpu_probe=_standin(tmp_path, devices=[{}, {}],
                                                           egl=[0, 1]))
    monitor_once("n1", healthy, work, renders, alloc)
    assert alloc.lease("n1") is not None
    alloc._http.shutdown()


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a 64 MiB tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_disk_pressure_drains_prunes_only_verified_outputs_and_resumes(tmp_path, small_disk):
    alloc = _alloc(tmp_path)
    work, renders = small_disk / "work", small_disk / "renders"
    work.mkdir()
    # instance A: every trajectory delivered (tombstones) and a big engine log
    a = renders / "S" / "L" / "n1-A"
    (a / "traj_0000").mkdir(parents=True)
    (a / "traj_0000" / TOMBSTONE).write_text("{}")
    (a / "progress.log").write_text("DONE traj_0000 frames=000024 key=0123456789abcdef\n")
    (a / "renderer.log").write_bytes(b"x" * 12 * MB)
    # instance B: one trajectory delivered, one not: nothing of it may go
    b = renders / "S" / "L" / "n1-B"
    (b / "traj_0000").mkdir(parents=True)
    (b / "traj_0000" / TOMBSTONE).write_text("{}")
    (b / "traj_0001").mkdir()
    (b / "traj_0001" / "back.mp4").write_bytes(b"v" * 4 * MB)
    (b / "renderer.log").write_bytes(b"y" * MB)
    keep = {p: _sha(p) for p in b.rglob("*") if p.is_file()}
    mcfg = MonitorConfig(disk_path=str(small_disk), warn_free_mb=50, drain_free_mb=36,
                         prune_free_mb=28, gpu_probe=_standin(tmp_path, devices=[]),
                         remediation={"disk_pressure": "true"}, cooldown_s=0.0)
    r = monitor_once("n1", mcfg, work, renders, alloc)
    assert r["disk"]["level"] == "warn" and alloc.lease("n1") is not None  # 47 MiB free
    filler = small_disk / "filler"
    filler.write_bytes(b"f" * 10 * MB)  # ~37 MiB free: still warn
    filler2 = small_disk / "filler2"
    filler2.write_bytes(b"f" * 3 * MB)  # ~34: drain
    r = monitor_once("n1", mcfg, work, renders, alloc)
    assert r["disk"]["level"] == "drain" and not r["pruned"]
    assert alloc.lease("n1") is None and "drained (disk_pressure)" in r["actions"]
    filler2.write_bytes(b"f" * 12 * MB)  # below prune
    r = monitor_once("n1", mcfg, work, renders, alloc)
    assert r["disk"]["level"] == "prune"
    assert r["pruned"] == [str(a / "renderer.log")]  # only the fully delivered instance's log
    assert all(_sha(p) == h for p, h in keep.items())  # instance B untouched
    assert (a / "progress.log").exists() and alloc.lease("n1") is None
    filler.unlink()
    filler2.unlink()
    r = monitor_once("n1", mcfg, work, renders, alloc)  # space is back
    assert r["disk"]["level"] == "ok" and alloc.lease("n1") is not None
    alloc._http.shutdown()
