"""The per-node uploader against a real SeaweedFS S3 server that checks signatures, with real
faults: kill -9 during a multipart upload, the server stopped and restarted, a wrong secret."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stages.cluster.s3_store import S3Store
from stages.cluster.uploader import COMPLETION, DELIVERED, TOMBSTONE, Uploader

from .conftest import finished_instance, overrides, subprocess_env, upload_cfg

MB = 2**20


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _local(inst: Path) -> dict[str, str]:
    """scene/level/instance/traj/file → sha256 of every trajectory file, before upload."""
    root = inst.parent.parent.parent
    return {p.relative_to(root).as_posix(): _sha(p.read_bytes())
            for p in sorted(inst.glob("*/*")) if p.is_file()}


def _stored(client, bucket: str, prefix: str = "renders/") -> dict[str, str]:
    """key → sha256 of every object under ``prefix`` but the delivery records (one per
    trajectory under <scene>/<level>/_delivered/, test_delivery checks them)."""
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            if f"/{DELIVERED}/" in o["Key"]:
                continue
            body = client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            out[o["Key"][len(prefix):]] = _sha(body)
    return out


def _uploader_proc(tmp: Path, renders: Path, ucfg, env: dict, *extra: str):
    log = open(tmp / f"uploader-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    p = subprocess.Popen([sys.executable, "-m", "stages.cluster.uploader", "--renders",
                          str(renders), "--snapshots", str(tmp / "snap"), "--node", "n1",
                          *overrides(ucfg), *extra], stdout=log, stderr=subprocess.STDOUT,
                         env=subprocess_env(env), start_new_session=True)
    p.log_path = Path(log.name)  # type: ignore[attr-defined]
    return p


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)


def test_upload_verifies_every_object_writes_completion_last_and_deletes_only_after(
        s3server, s3env, tmp_path):
    ucfg = upload_cfg(s3server, "verify-b", quiet_s=0.0)
    root = tmp_path / "renders"
    inst = finished_instance(root, "n1-A", {"traj_000": {"back.mp4": 20 * MB + 17,
                                                         "meta.json": 300},
                                            "traj_001": {"back.mp4": 4000, "meta.json": 200}})
    want = _local(inst)
    # an unfinished trajectory (no progress line) and one still being written are left alone
    (inst / "traj_002").mkdir()
    (inst / "traj_002" / "back.mp4").write_bytes(b"partial")
    snap = tmp_path / "snap" / "n1" / "n1-A"  # a failure snapshot: to its own prefix
    snap.mkdir(parents=True)
    (snap / "snapshot.json").write_text('{"reason": "stalled"}')
    up = Uploader(ucfg, root, "n1", snapshots=tmp_path / "snap", log=lambda m: None)
    assert up.scan_once() == 2
    c = s3server.client()
    body = c.get_object(Bucket="verify-b", Key="snapshots/n1/n1-A/snapshot.json")["Body"].read()
    assert body == b'{"reason": "stalled"}' and (snap / "snapshot.json").exists()
    stored = _stored(c, "verify-b")
    got = {k: v for k, v in stored.items() if not k.endswith(COMPLETION)}
    assert got == want  # every byte, exactly the files that were finished
    # the multipart object carries the composite checksum of its 5 MiB parts
    h = c.head_object(Bucket="verify-b", Key="renders/Scene/Level/n1-A/traj_000/back.mp4",
                      ChecksumMode="ENABLED")
    assert h["ChecksumSHA256"].endswith("-5") and h["ContentLength"] == 20 * MB + 17
    for t in ("traj_000", "traj_001"):
        rec = json.loads(c.get_object(Bucket="verify-b", Key=f"renders/Scene/Level/n1-A/{t}/"
                                      f"{COMPLETION}")["Body"].read())
        assert {f"Scene/Level/n1-A/{t}/{k}": v["sha256"] for k, v in rec["files"].items()} == {
            k: v for k, v in want.items() if f"/{t}/" in k}
        assert sorted(p.name for p in (inst / t).iterdir()) == [TOMBSTONE]
    assert (inst / "traj_002" / "back.mp4").read_bytes() == b"partial"
    assert not any(k.startswith("Scene/Level/n1-A/traj_002") for k in stored)
    # a second scan writes nothing; a quiet period holds back a fresh trajectory
    assert up.scan_once() == 0 and up.stats.files_written == 4
    finished_instance(root, "n1-B", {"traj_000": {"back.mp4": 100}}, seed=1)
    up.cfg.quiet_s = 30.0
    assert up.scan_once() == 0 and (root / "Scene/Level/n1-B/traj_000/back.mp4").exists()


def test_an_object_is_never_overwritten_and_a_mismatch_keeps_the_local_file(s3server, s3env,
                                                                            tmp_path):
    ucfg = upload_cfg(s3server, "conflict-b")
    root = tmp_path / "renders"
    inst = finished_instance(root, "n1-C", {"traj_000": {"back.mp4": 1000}})
    store = S3Store(ucfg)
    store.ensure_bucket()
    key = "renders/Scene/Level/n1-C/traj_000/back.mp4"
    s3server.client().put_object(Bucket="conflict-b", Key=key, Body=b"other bytes")
    up = Uploader(ucfg, root, "n1", log=lambda m: None, store=store)
    assert up.scan_once() == 0 and len(up.stats.conflicts) == 1
    assert (inst / "traj_000" / "back.mp4").stat().st_size == 1000  # kept
    body = s3server.client().get_object(Bucket="conflict-b", Key=key)["Body"].read()
    assert body == b"other bytes"  # never overwritten


@pytest.mark.cluster_faults
def test_uploader_killed_during_a_multipart_upload_completes_after_restart(
        s3server, s3env, tmp_path):
    ucfg = upload_cfg(s3server, "kill-b")
    root = tmp_path / "renders"
    inst = finished_instance(root, "n1-K", {"traj_000": {"big.mp4": 96 * MB, "meta.json": 64}})
    want = _local(inst)
    c = s3server.client()
    S3Store(ucfg).ensure_bucket()
    p = _uploader_proc(tmp_path, root, ucfg, s3env)
    key = "renders/Scene/Level/n1-K/traj_000/big.mp4"
    try:
        deadline = time.time() + 60
        parts = 0
        while time.time() < deadline and parts < 1:
            ups = c.list_multipart_uploads(Bucket="kill-b").get("Uploads", [])
            try:
                parts = len(c.list_parts(Bucket="kill-b", Key=key, UploadId=ups[0]["UploadId"])
                            .get("Parts", [])) if ups else 0
            except c.exceptions.NoSuchUpload:
                break  # completed before we looked: the assertion below says so
            time.sleep(0.01)
        assert parts >= 1, p.log_path.read_text()
        os.killpg(p.pid, signal.SIGKILL)  # mid-upload: some parts in, not completed
        p.wait(timeout=10)
    finally:
        _stop(p)
    assert c.list_multipart_uploads(Bucket="kill-b").get("Uploads")  # left unfinished
    listed = [o["Key"] for o in c.list_objects_v2(Bucket="kill-b").get("Contents", [])]
    assert key not in listed  # a partial upload is never an object
    assert (inst / "traj_000" / "big.mp4").stat().st_size == 96 * MB  # nothing deleted
    p2 = _uploader_proc(tmp_path, root, ucfg, s3env, "--once")
    try:
        assert p2.wait(timeout=180) == 0, p2.log_path.read_text()
    finally:
        _stop(p2)
    stored = _stored(c, "kill-b")
    assert {k: v for k, v in stored.items() if not k.endswith(COMPLETION)} == want
    assert not c.list_multipart_uploads(Bucket="kill-b").get("Uploads")  # the stale one aborted
    assert sorted(x.name for x in (inst / "traj_000").iterdir()) == [TOMBSTONE]


@pytest.mark.cluster_faults
def test_server_stopped_during_uploads_backs_off_keeps_local_copies_and_resumes(
        s3server, s3env, tmp_path):
    ucfg = upload_cfg(s3server, "outage-b")
    root = tmp_path / "renders"
    S3Store(ucfg).ensure_bucket()
    insts = [finished_instance(root, f"n1-O{i}", {f"traj_{j:03d}": {"back.mp4": 3 * MB}
                                                  for j in range(4)}, seed=i) for i in range(4)]
    want = {k: v for i in insts for k, v in _local(i).items()}
    c = s3server.client()
    p = _uploader_proc(tmp_path, root, ucfg, s3env)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not any(
                k.endswith(COMPLETION) for k in _keys(c, "outage-b")):
            time.sleep(0.05)
        s3server.stop(timeout_s=2)  # the store goes away mid-run
        time.sleep(4)
        log = p.log_path.read_text()
        assert "kept locally" in log and p.poll() is None, log
        # every trajectory without a completion object still has all its files here
        for t in sorted(root.glob("*/*/*/traj_*")):
            if not (t / TOMBSTONE).exists():
                assert (t / "back.mp4").stat().st_size == 3 * MB
        s3server.start()
        deadline = time.time() + 120
        while time.time() < deadline and len(list(root.glob(f"*/*/*/traj_*/{TOMBSTONE}"))) < 16:
            time.sleep(0.2)
        delivered = len(list(root.glob(f"*/*/*/traj_*/{TOMBSTONE}")))
        assert delivered == 16, p.log_path.read_text()
    finally:
        _stop(p)
    stored = _stored(c, "outage-b")
    assert {k: v for k, v in stored.items() if not k.endswith(COMPLETION)} == want
    assert sum(k.endswith(COMPLETION) for k in stored) == 16


def _keys(c, bucket: str) -> list[str]:
    try:
        return [o["Key"] for o in c.list_objects_v2(Bucket=bucket).get("Contents", [])]
    except Exception:  # noqa: BLE001 - the server is restarting
        return []


def test_a_wrong_secret_names_endpoint_and_key_id_never_the_secret(s3server, tmp_path):
    bad_secret = "WRONG-" + s3server.secret_key[::-1]
    ucfg = upload_cfg(s3server, "auth-b")
    root = tmp_path / "renders"
    inst = finished_instance(root, "n1-W", {"traj_000": {"back.mp4": 1000}})
    env = {**s3server.env(), "AWS_SECRET_ACCESS_KEY": bad_secret}
    p = _uploader_proc(tmp_path, root, ucfg, env, "--once")
    try:
        assert p.wait(timeout=60) == 3
    finally:
        _stop(p)
    out = p.log_path.read_text()
    assert s3server.endpoint in out and s3server.access_key in out and "secret key" in out, out
    assert (inst / "traj_000" / "back.mp4").stat().st_size == 1000
    # grep every log this test and the server wrote for the secret (and the right one)
    for f in [*tmp_path.rglob("*"), *s3server.root.rglob("*.log")]:
        if f.is_file():
            data = f.read_bytes()
            assert bad_secret.encode() not in data, f
            assert s3server.secret_key.encode() not in data, f


def test_without_verification_nothing_local_is_deleted_and_nothing_is_sent_twice(
        s3server, s3env, tmp_path):
    from stages.cluster.uploader import UNVERIFIED

    ucfg = upload_cfg(s3server, "noverify-b", verify=False)
    root = tmp_path / "renders"
    inst = finished_instance(root, "n1-V", {"traj_000": {"back.mp4": 5000}})
    want = _local(inst)
    up = Uploader(ucfg, root, "n1", log=lambda m: None)
    assert up.scan_once() == 1 and up.scan_once() == 0
    stored = _stored(s3server.client(), "noverify-b")
    assert {k: v for k, v in stored.items() if not k.endswith(COMPLETION)} == want
    assert (inst / "traj_000" / "back.mp4").stat().st_size == 5000  # kept
    assert (inst / "traj_000" / UNVERIFIED).exists() and up.stats.files_written == 1


@pytest.mark.cluster_faults
def test_after_a_long_outage_delivery_resumes_when_the_store_is_back_not_after_the_backoff(
        s3server, s3env, tmp_path):
    ucfg = upload_cfg(s3server, "resume-b", backoff_max_s=60.0)
    root = tmp_path / "renders"
    S3Store(ucfg).ensure_bucket()
    s3server.stop(timeout_s=2)  # down before anything is finished
    inst = finished_instance(root, "n1-R", {"traj_000": {"back.mp4": 2 * MB}})
    want = _local(inst)
    p = _uploader_proc(tmp_path, root, ucfg, s3env)
    try:
        # long enough for the back-off to double up to a wait of 16 s or more: the store then
        # comes back inside that wait
        deadline = time.time() + 60

        def step() -> int:
            return max(map(int, re.findall(r"retrying in (\d+) s", p.log_path.read_text())),
                       default=0)

        while time.time() < deadline and step() < 16:
            time.sleep(0.2)
        assert step() >= 16, p.log_path.read_text()
        s3server.start()
        back = time.time()
        tomb = inst / "traj_000" / TOMBSTONE
        while time.time() - back < 60 and not tomb.exists():
            time.sleep(0.1)
    finally:
        _stop(p)
    log = p.log_path.read_text()
    assert tomb.exists(), log
    # it woke on the probe that found the store back, not at the end of its back-off wait
    # (a fact from the uploader's own log, not a wall-clock bound that a loaded machine breaks)
    early = re.findall(r"the store answers again; resuming (\d+) s before the back-off ends", log)
    assert early and int(early[-1]) >= 1, log
    stored = _stored(s3server.client(), "resume-b")
    assert {k: v for k, v in stored.items() if not k.endswith(COMPLETION)} == want
