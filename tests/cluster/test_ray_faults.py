"""Faults done for real on a real multi-node Ray cluster (three worker nodes on 127.0.0.1) with
the real SeaweedFS store: kill -9 of a node's uploader mid-run, kill -9 of a runner's Ray
worker process (its node stays), and a second run with other pools / another allocator state.
The assertions are on the bucket (every trajectory once, bytes right) and on local disk."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from stages.cluster.allocator_actor import OtherRunError
from stages.cluster.ray_executor import node_paths, run_cluster
from stages.cluster.uploader import TOMBSTONE
from stages.pools import build_pools

from .test_ray_cluster import LEVELS, NODES, PER_LEVEL, _check_objects, _completions, _job

pytestmark = pytest.mark.cluster_faults


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _uploader_pid(renders: Path) -> int | None:
    """The uploader process of one node (found by its command line: `--renders <folder>`)."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            cmd = _cmdline(d.name)
            if "stages.cluster.uploader" in cmd and f"--renders {renders} " in cmd + " ":
                return int(d.name)
    return None


def _ppid(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return int(raw[raw.rindex(")") + 2:].split()[1])


def _start(job, rows) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def go() -> None:
        try:
            out.update(run_cluster(job, rows, log=lambda m: None))
        except Exception as exc:  # noqa: BLE001 - the test asserts on it
            out["error"] = exc

    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th, out


def _every_trajectory_once(s3server, bucket: str, levels: list[str]) -> list[dict]:
    recs = _completions(s3server, bucket)
    made = Counter((r["scene"], r["level"], r["trajectory"]) for r in recs)
    want = {(lv.split("/")[0], lv.split("/")[1], f"traj_{i:04d}") for lv in levels
            for i in range(PER_LEVEL)}
    assert set(made) == want and set(made.values()) == {1}, made
    assert all(r["verified"] for r in recs)
    _check_objects(s3server, bucket, recs)  # every delivered video's exact bytes
    return recs


def _nothing_left(job, nodes=NODES) -> None:
    for n in nodes:
        left = [p for p in node_paths(job.work_root, n)["renders"].glob("*/*/*/traj_*/*")
                if p.name != TOMBSTONE]
        assert not left, left[:3]


def test_uploader_killed_mid_run_is_restarted_and_the_run_delivers_everything(
        ray_cluster, s3server, tmp_path):
    job = _job(tmp_path, s3server, "upkill-b", quiet_s=0.5)
    rows = build_pools(LEVELS, NODES, 1, seed=3).to_dict("records")
    th, out = _start(job, rows)
    renders = node_paths(job.work_root, "n1")["renders"].resolve()
    deadline, pid = time.time() + 120, None
    while time.time() < deadline:
        pid = _uploader_pid(renders)
        if pid and list(renders.glob(f"*/*/*/*/{TOMBSTONE}")):
            break
        time.sleep(0.05)
    assert pid, "n1's uploader never delivered anything"
    os.killpg(pid, signal.SIGKILL)  # kill -9 of n1's uploader (its own process group)
    th.join(timeout=300)
    assert not th.is_alive(), "run_cluster did not finish"
    assert "error" not in out, out.get("error")
    res = out["nodes"]
    assert all(not ({"died", "failed"} & set(r)) for r in res.values()), res
    assert out["undelivered"] == {}
    st = json.loads((renders.parent / "uploader.json").read_text())
    assert st["restarts"] >= 1 and st["status"] == "stopped", st  # it came back
    _every_trajectory_once(s3server, "upkill-b", LEVELS)
    _nothing_left(job)  # every local copy deleted, each after its verification
    assert out["allocator"]["finished"]


def test_a_runner_worker_killed_keeps_its_node_its_levels_and_delivers_once(
        ray_cluster, s3server, tmp_path):
    import ray

    job = _job(tmp_path, s3server, "wkill-b", quiet_s=0.5)
    rows = build_pools(LEVELS, NODES, 1, seed=3).to_dict("records")
    owner = {str(r["level_id"]): str(r["node"]) for r in rows}
    th, out = _start(job, rows)
    renders = node_paths(job.work_root, "n1")["renders"].resolve()
    deadline, runner = time.time() + 120, None
    while time.time() < deadline:
        up = _uploader_pid(renders)
        busy = list(renders.glob("*/*/*/instance.json"))
        if up and busy and list(renders.glob("*/*/*/progress.log")):
            runner = _ppid(up)  # the uploader is a child of n1's runner worker process
            break
        time.sleep(0.05)
    assert runner and "NodeRunnerService" in Path(f"/proc/{runner}/comm").read_text() + \
        _cmdline(str(runner)), _cmdline(str(runner))
    os.kill(runner, signal.SIGKILL)  # kill -9 of the Ray worker process; the raylet lives
    th.join(timeout=300)
    assert not th.is_alive(), "run_cluster did not finish"
    assert "error" not in out, out.get("error")
    res = out["nodes"]
    assert "died" not in res["n1"] and res["n1"]["crashes"] == 1, res["n1"]
    st = out["allocator"]
    assert "n1" in st["nodes"] and st["owner"] == owner  # no level moved
    assert st["balance"]["n1"]["lost"] == 0 and st["finished"]
    # the node is still a Ray node, and its runner came back as a new process there
    assert any(n["Alive"] and "wmforge_node_n1" in n["Resources"] for n in ray.nodes())
    assert json.loads((renders.parent / "runner.json").read_text())["starts"] == 2
    recs = _every_trajectory_once(s3server, "wkill-b", LEVELS)
    # n1's levels were delivered by n1 alone (before and after the crash)
    assert all(r["node"] == owner[f"{r['scene']}/{r['level']}"] for r in recs)
    _nothing_left(job)


def test_a_second_run_with_other_pools_or_state_runs_or_names_the_other_run(
        ray_cluster, s3server, tmp_path):
    first, second = LEVELS[:3], LEVELS[3:]
    job1 = _job(tmp_path / "r1", s3server, "second-b", quiet_s=0.2)
    rows1 = build_pools(first, NODES, 1, seed=3).to_dict("records")
    out1 = run_cluster(job1, rows1, log=lambda m: None)
    assert out1["allocator"]["finished"] and out1["this_run"]["units"] == 3
    # another run: other pools, another allocator state file; the first allocator is idle
    job2 = _job(tmp_path / "r2", s3server, "second-b", quiet_s=0.2)
    rows2 = build_pools(second, NODES, 1, seed=3).to_dict("records")
    out2 = run_cluster(job2, rows2, log=lambda m: None)
    assert out2["this_run"]["units"] == 3 and out2["allocator"]["finished"]
    assert sorted(out2["allocator"]["owner"]) == sorted(second)
    _every_trajectory_once(s3server, "second-b", LEVELS)  # both runs' levels, each once
    journal = Path(job2.unit_options["journal"]).read_text().splitlines()
    assert sorted({ln.split()[0] for ln in journal}) == sorted(second)
    # the same state file with other pools: refused, naming the file and what differs
    rows3 = build_pools(first, NODES, 1, seed=3).to_dict("records")
    with pytest.raises(OtherRunError) as e:
        run_cluster(job2, rows3, log=lambda m: None)
    msg = str(e.value)
    assert str(tmp_path / "r2" / "alloc" / "state.json") in msg and "pools" in msg, msg
    assert "\n" not in msg
    # the same run again: resumes a finished allocator and says it did nothing
    out4 = run_cluster(job2, rows2, log=lambda m: None)
    assert out4["this_run"] == {"units": 0, "trajectories": 0, "units_done_before": 3,
                                "finished_before": True}
    assert Path(job2.unit_options["journal"]).read_text().splitlines() == journal


def test_the_allocator_killed_mid_run_resumes_from_its_state_without_double_work(
        ray_cluster, s3server, tmp_path):
    import ray

    job = _job(tmp_path, s3server, "akill-b", quiet_s=0.5)
    rows = build_pools(LEVELS, NODES, 1, seed=3).to_dict("records")
    th, out = _start(job, rows)
    journal = Path(job.unit_options["journal"])
    deadline = time.time() + 120
    while time.time() < deadline and (not journal.exists()
                                      or len(journal.read_text().splitlines()) < 3):
        time.sleep(0.05)
    alloc = ray.get_actor("wmforge-allocator", namespace="wmforge")
    pid = ray.get(alloc.ping.remote())
    os.kill(pid, signal.SIGKILL)  # kill -9 of the allocator's process mid-run
    th.join(timeout=300)
    assert not th.is_alive(), "run_cluster did not finish"
    assert "error" not in out, out.get("error")
    st = out["allocator"]
    assert st["restored"] is True and st["pid"] != pid and st["finished"]
    _every_trajectory_once(s3server, "akill-b", LEVELS)
    made = Counter(tuple(ln.split()[:2]) for ln in journal.read_text().splitlines())
    assert set(made.values()) == {1}, [k for k, v in made.items() if v > 1]  # none twice
    _nothing_left(job)
