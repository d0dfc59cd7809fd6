"""A real multi-node Ray cluster on 127.0.0.1 (a head with no work, three worker nodes with fake
GPUs and the wmforge node resource) and a real SeaweedFS S3 store: the executor end to end, and
a worker node removed mid-run (not gracefully)."""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from stages.cluster.ray_executor import NodeJob, node_paths, run_cluster
from stages.cluster.uploader import COMPLETION, TOMBSTONE, Uploader
from stages.config import load_params
from stages.pools import build_pools
from tests.fakes.engine_standin import STANDIN

from .conftest import upload_cfg

LEVELS = [f"Pack{i}/Level{i}" for i in range(6)]
NODES = ["n1", "n2", "n3"]
PER_LEVEL = 3


def _job(tmp: Path, s3server, bucket: str, **up) -> NodeJob:
    cfg = load_params(overrides=[
        f"trajectories.per_level={PER_LEVEL}", "node.cpu_slots=1", "cluster.lease_s=3.0",
        f"cluster.allocator_state={tmp}/alloc/state.json"])
    cfg = dataclasses.replace(cfg, upload=upload_cfg(s3server, bucket, **up))
    return NodeJob(cfg, str(tmp / "nodes"), STANDIN,
                   unit_options={"journal": str(tmp / "journal"), "frame_s": 0.03})


def _completions(s3server, bucket: str) -> list[dict]:
    c = s3server.client()
    out = []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            if o["Key"].endswith(COMPLETION):
                rec = json.loads(c.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
                out.append(rec)
    return out


def _check_objects(s3server, bucket: str, recs: list[dict]) -> None:
    """Every delivered video has the stand-in's exact bytes (seeded by its render key)."""
    c = s3server.client()
    for r in recs:
        key = (f"renders/{r['scene']}/{r['level']}/{r['instance']}/{r['trajectory']}/back.mp4")
        body = c.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert body == random.Random(r["render_key"]).randbytes(200_000), key


@pytest.mark.cluster_faults
def test_three_nodes_deliver_every_trajectory_once_a_removed_node_loses_only_its_disk(
        ray_cluster, s3server, tmp_path):
    cluster, nodes = ray_cluster
    job = _job(tmp_path, s3server, "cluster-b", quiet_s=1.0)
    rows = build_pools(LEVELS, NODES, 1, seed=3).to_dict("records")
    out: dict = {}
    th = threading.Thread(target=lambda: out.update(run_cluster(job, rows, log=lambda m: None)),
                          daemon=True)
    th.start()
    # remove n1 (kill -9 of its raylet and workers) once it has delivered at least one
    # trajectory and finished at least one more that is not delivered yet
    n1 = node_paths(job.work_root, "n1")["renders"]
    deadline = time.time() + 120
    while time.time() < deadline:
        delivered = list(n1.glob(f"*/*/*/*/{TOMBSTONE}"))
        finished = [p for p in n1.glob("*/*/*/traj_*/meta.json")]
        if delivered and finished:
            break
        time.sleep(0.02)
    assert delivered and finished, "n1 never reached the removal point"
    cluster.remove_node(nodes["n1"], allow_graceful=False)
    th.join(timeout=240)
    assert not th.is_alive(), "run_cluster did not finish"
    res = out["nodes"]
    assert res["n1"]["died"] and {"n2", "n3"} <= {n for n in res if "died" not in res[n]}
    lost = res["n1"]["lost"]
    assert lost, "n1 had finished trajectories that were not delivered"
    recs = _completions(s3server, "cluster-b")
    # every trajectory of every level is in the store exactly once, and verified
    made = Counter((r["scene"], r["level"], r["trajectory"]) for r in recs)
    want = {(lv.split("/")[0], lv.split("/")[1], f"traj_{i:04d}") for lv in LEVELS
            for i in range(PER_LEVEL)}
    assert set(made) == want and set(made.values()) == {1}
    assert all(r["verified"] for r in recs)
    _check_objects(s3server, "cluster-b", recs)
    # what n1 delivered stays (from n1's instances); what it lost was made again elsewhere
    by_n1 = [r for r in recs if r["node"] == "n1"]
    assert by_n1 and all(r["instance"].startswith("n1-") for r in by_n1)
    lost_keys = {(p.split("/")[0], p.split("/")[1], p.split("/")[3]) for p in lost}
    assert all(r["node"] != "n1" for r in recs
               if (r["scene"], r["level"], r["trajectory"]) in lost_keys)
    # nothing rendered twice except what was lost with n1's disk
    journal = Path(job.unit_options["journal"]).read_text().splitlines()
    times = Counter(tuple(line.split()[:2]) for line in journal)
    twice = {k for k, v in times.items() if v > 1}
    assert all(v <= 2 for v in times.values())
    assert {(f"{s}/{lv}", t) for s, lv, t in lost_keys} >= twice
    # the allocator counted it: n1 gone, its lost trajectories reported, every unit done
    st = out["allocator"]
    # the allocator lives on the head node: removing n1 never restarted it from its file
    import ray

    head = next(n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n["Resources"])
    assert st["ray_node"] == head and st["restored"] is False
    assert st["finished"] and "n1" not in st["nodes"]
    assert st["balance"]["n1"]["lost"] == len(lost)
    assert all(st["owner"][lv] in ("n2", "n3") for lv in LEVELS)
    # the survivors kept nothing but tombstones: deleted only after verification
    for n in ("n2", "n3"):
        left = [p for p in node_paths(job.work_root, n)["renders"].glob("*/*/*/traj_*/*")
                if p.name != TOMBSTONE]
        assert not left, left[:3]
    # n1's disk is found again (the next `cluster run` starts its uploader): what it lost was
    # made and delivered elsewhere meanwhile, so nothing of it is uploaded a second time
    n1_renders = node_paths(job.work_root, "n1")["renders"]
    before = {o["Key"] for o in s3server.client().list_objects_v2(
        Bucket="cluster-b", MaxKeys=10_000).get("Contents", [])}
    up = Uploader(job.cfg.upload, n1_renders, "n1", log=lambda m: None)
    up.scan_once()
    assert up.stats.duplicates == len(lost) and up.stats.files_written == 0
    after = {o["Key"] for o in s3server.client().list_objects_v2(
        Bucket="cluster-b", MaxKeys=10_000).get("Contents", [])}
    assert after == before
    assert len(_completions(s3server, "cluster-b")) == len(want)  # still one per trajectory
    left = [p for p in n1_renders.glob("*/*/*/traj_*/*") if p.name != TOMBSTONE]
    assert not left, left[:3]  # deleted, each after the winner's objects were checked
