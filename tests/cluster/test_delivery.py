"""Delivery exactly once, on the real SeaweedFS server: a trajectory is keyed in the bucket by
scene/level/trajectory/render key whatever instance made it; a copy made again elsewhere and
then found on the first node's disk is never uploaded; two instances racing leave one copy."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from stages.cluster.s3_store import S3Store
from stages.cluster.uploader import COMPLETION, DELIVERED, TOMBSTONE, Uploader, delivery_key
from stages.core.progress import read_progress

from .conftest import finished_instance, upload_cfg


def _objects(client, bucket: str) -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            out[o["Key"]] = client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
    return out


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_a_copy_found_after_another_instance_delivered_it_is_never_uploaded(
        s3server, s3env, tmp_path):
    ucfg = upload_cfg(s3server, "once-b")
    trajs = {"traj_000": {"back.mp4": 3000, "meta.json": 100},
             "traj_001": {"back.mp4": 2000, "meta.json": 90}}
    # n2 made the level again (n1 had been counted lost) and delivered it first
    n2 = finished_instance(tmp_path / "n2", "n2-B", {"traj_000": trajs["traj_000"]}, seed=5)
    # n1 comes back with its disk: the same trajectory (same render key), and one n2 lacks
    n1 = finished_instance(tmp_path / "n1", "n1-A", trajs, seed=5)
    assert read_progress(n1)["traj_000"] == read_progress(n2)["traj_000"]
    n1_bytes = {p.name: _sha(p.read_bytes()) for p in (n1 / "traj_000").iterdir()}
    assert Uploader(ucfg, tmp_path / "n2", "n2", log=lambda m: None).scan_once() == 1
    up1 = Uploader(ucfg, tmp_path / "n1", "n1", log=lambda m: None)
    assert up1.scan_once() == 2 and up1.stats.duplicates == 1
    objs = _objects(s3server.client(), "once-b")
    key0 = read_progress(n1)["traj_000"][1]
    rec = json.loads(objs[delivery_key("renders", "Scene", "Level", "traj_000", key0)])
    assert rec["instance"] == "n2-B" and rec["node"] == "n2"  # the record names the winner
    # nothing of n1's copy of traj_000 was written; traj_001 (only n1 had it) was delivered
    assert not [k for k in objs if k.startswith("renders/Scene/Level/n1-A/traj_000/")]
    completions = sorted(k for k in objs if k.endswith(COMPLETION))
    assert completions == ["renders/Scene/Level/n1-A/traj_001/_COMPLETE.json",
                           "renders/Scene/Level/n2-B/traj_000/_COMPLETE.json"]
    records = [k for k in objs if f"/{DELIVERED}/" in k]
    assert len(records) == 2  # one per trajectory
    # the winner's objects are n1's bytes exactly (checked before n1's copy was deleted)
    assert {n: _sha(objs[f"renders/Scene/Level/n2-B/traj_000/{n}"]) for n in n1_bytes} == \
        n1_bytes
    # deleted locally only after that check; the tombstone says who delivered it
    assert sorted(p.name for p in (n1 / "traj_000").iterdir()) == [TOMBSTONE]
    tomb = json.loads((n1 / "traj_000" / TOMBSTONE).read_text())
    assert tomb["duplicate_of"] == "n2-B"
    # a third scan (the next `cluster run`) writes nothing
    assert up1.scan_once() == 0
    assert _objects(s3server.client(), "once-b").keys() == objs.keys()


def test_two_instances_racing_for_one_trajectory_leave_one_copy(s3server, s3env, tmp_path):
    ucfg = upload_cfg(s3server, "race-b")
    a = finished_instance(tmp_path / "a", "na-A", {"traj_000": {"back.mp4": 4000}}, seed=9)
    finished_instance(tmp_path / "b", "nb-B", {"traj_000": {"back.mp4": 4000}}, seed=9)
    up_b = Uploader(ucfg, tmp_path / "b", "nb", log=lambda m: None)

    class SecondToWrite(S3Store):
        """The interleaving of a race, forced: after this uploader checked (no record) and
        wrote its objects, the other instance delivers for real; then this one writes."""

        def create(self, data: bytes, key: str) -> bool:
            if f"/{DELIVERED}/" in key:
                assert up_b.scan_once() == 1
            return super().create(data, key)

    up_a = Uploader(ucfg, tmp_path / "a", "na", log=lambda m: None,
                    store=SecondToWrite(ucfg))
    assert up_a.scan_once() == 1 and up_a.stats.duplicates == 1
    objs = _objects(s3server.client(), "race-b")
    assert sorted(objs) == sorted([
        "renders/Scene/Level/nb-B/traj_000/back.mp4",
        "renders/Scene/Level/nb-B/traj_000/_COMPLETE.json",
        delivery_key("renders", "Scene", "Level", "traj_000", read_progress(a)["traj_000"][1])])
    assert json.loads(objs[[k for k in objs if DELIVERED in k][0]])["instance"] == "nb-B"
    assert sorted(p.name for p in (a / "traj_000").iterdir()) == [TOMBSTONE]
    assert not any(Path(tmp_path / "b").rglob("back.mp4"))
