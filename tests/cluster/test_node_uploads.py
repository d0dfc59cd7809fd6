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
