"""A node's end of run with an uploader that cannot deliver (the real uploader process, a
setting it refuses): the runner never raises, lists what is still local and why, keeps the
files, and the command it prints delivers them once the setting is fixed (real SeaweedFS)."""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess

from omegaconf import OmegaConf

from stages.cluster.ray_executor import NodeJob, NodeRunnerService
from stages.cluster.uploader import COMPLETION, TOMBSTONE
from stages.config import load_params
from tests.fakes.engine_standin import CHECKOUT, STANDIN

from .conftest import finished_instance, upload_cfg


def test_a_node_whose_uploader_gave_up_lists_what_is_local_and_how_to_deliver_it(
        s3server, s3env, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(CHECKOUT))
    cfg = load_params(overrides=["node.cpu_slots=1"])
    # a bucket name S3 refuses (written past validation, as an older check let it through)
    cfg = dataclasses.replace(cfg, upload=upload_cfg(s3server, "my..bucket"))
    svc = NodeRunnerService("n1", NodeJob(cfg, str(tmp_path / "nodes"), STANDIN))
    renders = svc.paths["renders"]
    inst = finished_instance(renders, "n1-Z", {"traj_0000": {"back.mp4": 5000}})
    svc._start_uploader()
    out = svc._finish_uploads(timeout_s=60)  # never raises
    assert out["uploader"]["status"] == "failed", out
    assert out["undelivered"] == ["Scene/Level/n1-Z/traj_0000"]
    assert "bad configuration" in out["why"] and "upload.bucket 'my..bucket'" in out["why"]
    assert (inst / "traj_0000" / "back.mp4").stat().st_size == 5000  # kept
    # the operator fixes the bucket; the printed command delivers what was left
    good = dataclasses.replace(cfg, upload=upload_cfg(s3server, "left-b"))
    svc.params.write_text(OmegaConf.to_yaml(OmegaConf.structured(good)))
    r = subprocess.run(shlex.split(out["deliver_with"]), env=dict(os.environ),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    keys = [o["Key"] for o in s3server.client().list_objects_v2(Bucket="left-b")["Contents"]]
    assert "renders/Scene/Level/n1-Z/traj_0000/back.mp4" in keys
    assert "renders/Scene/Level/n1-Z/traj_0000/" + COMPLETION in keys
    assert sorted(p.name for p in (inst / "traj_0000").iterdir()) == [TOMBSTONE]


def test_the_uploader_limits_come_from_the_config(tmp_path, monkeypatch):
    """upload.end_wait_s bounds a node's wait for its uploads at the end of a run, and
    upload.poison_after is how many kill -9s in a row the real uploader process survives."""
    import signal
    import time

    from stages.cluster.seaweed_server import free_port

    monkeypatch.setenv("PYTHONPATH", str(CHECKOUT))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "NOSTOREKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "sk-none")
    cfg = load_params(overrides=["node.cpu_slots=1", "upload.end_wait_s=2",
                                 "upload.poison_after=2", "upload.restart_backoff_s=0.1"])
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens: the store never answers
    cfg = dataclasses.replace(cfg, upload=dataclasses.replace(
        cfg.upload, endpoint_url=down, quiet_s=0.0, poll_s=0.2, backoff_max_s=1.0))
    svc = NodeRunnerService("n1", NodeJob(cfg, str(tmp_path / "nodes"), STANDIN))
    inst = finished_instance(svc.paths["renders"], "n1-Z", {"traj_0000": {"back.mp4": 5000}})
    svc._start_uploader()
    out = svc._finish_uploads()  # the store is down: it waits upload.end_wait_s, not 600 s
    assert out["undelivered"] == ["Scene/Level/n1-Z/traj_0000"], out
    assert out["why"].startswith("not delivered within 2 s"), out["why"]
    svc._start_uploader()
    for _ in range(2):  # kill -9 of the uploader twice in a row
        pid = svc.uploader.proc.pid
        os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not svc.uploader.gave_up and (
                svc.uploader.proc.pid == pid or not svc.uploader.alive()):
            time.sleep(0.05)
    st = svc.uploader.state()
    assert st["status"] == "poisoned" and st["crashes_in_a_row"] == 2, st
    assert st["restarts"] == 1 and "2 crashes in a row (signal 9)" in st["error"], st
    out = svc._finish_uploads()
    assert out["why"].startswith("uploader poisoned: 2 crashes in a row"), out["why"]
    assert (inst / "traj_0000" / "back.mp4").stat().st_size == 5000  # kept
