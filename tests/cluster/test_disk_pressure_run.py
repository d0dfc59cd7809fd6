"""Disk pressure through a real run: a node whose work folder is a small filesystem (a 24 MiB
tmpfs mounted for the test) on a real three-node Ray cluster, with the real SeaweedFS store
stopped mid-run so that finished trajectories pile up on that disk. The node's monitor drains it
(no new leases) before the disk fills; the store comes back, the uploader delivers and deletes,
the monitor lifts the drain, the node leases again and the run ends with every trajectory in the
bucket once, its bytes right, and nothing left on the disk."""

from __future__ import annotations

import dataclasses
import random
import shutil
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from stages.cluster.ray_executor import NodeJob, node_paths, run_cluster
from stages.cluster.uploader import TOMBSTONE
from stages.config import load_params
from tests.fakes.engine_standin import STANDIN

from .conftest import upload_cfg
from .test_ray_cluster import _completions

pytestmark = pytest.mark.cluster_faults

MB = 2**20
NBYTES = 1_500_000  # one stand-in "video" per trajectory: a unit of 3 is ~4.3 MiB
PER_LEVEL = 3
N1_LEVELS = [f"Big{i}/Level{i}" for i in range(7)]  # n1's pool: 7 units
OTHER = {"n2": ["Small0/Level0"], "n3": ["Small1/Level1"]}


def _rows() -> list[dict]:
    pools = {"n1": N1_LEVELS, **OTHER}
    return [{"level_id": lv, "node": n, "pass": 0, "position": i}
            for n, lvs in pools.items() for i, lv in enumerate(lvs)]


@pytest.fixture
def n1_small_disk(tmp_path):
    """n1's folder (<work_root>/n1: renders, work, logs) on a 24 MiB tmpfs of its own."""
    mnt = tmp_path / "nodes" / "n1"
    mnt.mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a 24 MiB tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _alloc_state() -> dict:
    import ray

    a = ray.get_actor("wmforge-allocator", namespace="wmforge")
    return ray.get(a.state.remote(), timeout=30)


def test_disk_pressure_stops_leases_before_the_disk_fills_and_uploads_resume_them(
        ray_cluster, s3server, tmp_path, n1_small_disk):
    cfg = load_params(overrides=[
        f"trajectories.per_level={PER_LEVEL}", "node.cpu_slots=1", "cluster.lease_s=5.0",
        f"cluster.allocator_state={tmp_path}/alloc/state.json",
        # free MiB: warn below 18, no new leases below 14, prune below 3; rounds every 0.3 s
        "monitor.warn_free_mb=18", "monitor.drain_free_mb=14", "monitor.prune_free_mb=3",
        "monitor.interval_s=0.3"])
    cfg = dataclasses.replace(cfg, upload=upload_cfg(s3server, "disk-b", quiet_s=0.3))
    job = NodeJob(cfg, str(tmp_path / "nodes"), STANDIN,
                  unit_options={"journal": str(tmp_path / "journal"), "frame_s": 0.03,
                                "nbytes": NBYTES})
    out: dict = {}

    def go() -> None:
        try:
            out.update(run_cluster(job, _rows(), log=lambda m: None))
        except Exception as exc:  # noqa: BLE001 - asserted below
            out["error"] = exc

    th = threading.Thread(target=go, daemon=True)
    th.start()
    renders = node_paths(job.work_root, "n1")["renders"]
    free_min = [float(shutil.disk_usage(n1_small_disk).free)]

    def sample() -> float:
        free = float(shutil.disk_usage(n1_small_disk).free)
        free_min[0] = min(free_min[0], free)
        return free

    deadline = time.time() + 120
    while time.time() < deadline and not list(renders.glob(f"*/*/*/*/{TOMBSTONE}")):
        sample()
        time.sleep(0.05)
    assert list(renders.glob(f"*/*/*/*/{TOMBSTONE}")), "n1 never delivered a trajectory"
    s3server.stop(timeout_s=2)  # the store goes away: n1's finished work stays on its disk
    stopped = True
    try:
        deadline, st = time.time() + 120, {}
        while time.time() < deadline and "error" not in out:
            sample()
            st = _alloc_state()
            if st["balance"]["n1"]["drained"] == "disk_pressure":
                break
            time.sleep(0.1)
        assert "error" not in out, out.get("error")
        b = st["balance"]["n1"]
        assert b["drained"] == "disk_pressure", b
        assert b["left"] > 0, b  # drained with work of its own still to lease
        given = b["leases_given"]
        # drained and the store still down: nothing frees space, n1 takes no new lease
        for _ in range(30):
            sample()
            time.sleep(0.1)
        later = _alloc_state()["balance"]["n1"]
        assert later["leases_given"] == given and later["drained"] == "disk_pressure", later
        undelivered = [p for p in renders.glob("*/*/*/traj_*") if not (p / TOMBSTONE).exists()]
        assert len(undelivered) >= 6, undelivered  # the disk holds what waits for the store
        s3server.start()  # the store is back: uploads free the space
        stopped = False
    finally:
        if stopped:
            s3server.start()
    while th.is_alive() and time.time() < deadline + 240:
        sample()
        th.join(timeout=0.1)
    assert not th.is_alive(), "run_cluster did not finish"
    assert "error" not in out, out.get("error")
    res, st = out["nodes"], out["allocator"]
    assert all(not ({"died", "failed"} & set(r)) for r in res.values()), res
    assert out["undelivered"] == {} and st["finished"]
    n1 = st["balance"]["n1"]
    # resumed: n1 leased again after the drain and made its whole pool itself, drain lifted
    assert n1["leases_given"] > given and n1["done"] == n1["pool"] == len(N1_LEVELS), n1
    assert n1["drained"] == "" and all(st["owner"][lv] == "n1" for lv in N1_LEVELS)
    # the disk never filled: the least free space seen stayed far from zero
    assert free_min[0] > 2 * MB, free_min[0] / MB
    # every trajectory in the bucket once, with its exact bytes, made once
    recs = _completions(s3server, "disk-b")
    made = Counter((f"{r['scene']}/{r['level']}", r["trajectory"]) for r in recs)
    levels = N1_LEVELS + [lv for lvs in OTHER.values() for lv in lvs]
    assert set(made) == {(lv, f"traj_{i:04d}") for lv in levels for i in range(PER_LEVEL)}
    assert set(made.values()) == {1} and all(r["verified"] for r in recs)
    c = s3server.client()
    for r in recs:
        key = f"renders/{r['scene']}/{r['level']}/{r['instance']}/{r['trajectory']}/back.mp4"
        body = c.get_object(Bucket="disk-b", Key=key)["Body"].read()
        assert body == random.Random(r["render_key"]).randbytes(NBYTES), key
    assert all(r["node"] == "n1" for r in recs if f"{r['scene']}/{r['level']}" in N1_LEVELS)
    journal = Path(job.unit_options["journal"]).read_text().splitlines()
    assert set(Counter(tuple(ln.split()[:2]) for ln in journal).values()) == {1}
    left = [p for p in renders.glob("*/*/*/traj_*/*") if p.name != TOMBSTONE]
    assert not left, left[:3]  # each local copy deleted after its verification
