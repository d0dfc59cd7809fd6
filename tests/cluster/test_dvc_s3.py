"""DVC on the same S3 store (dvc-s3, custom endpoint): the project's `s3` remote pushed to a real
SeaweedFS server, then pulled into a fresh clone; a wrong secret fails without showing it."""

from __future__ import annotations

import configparser
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import subprocess_env

REPO = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, text=True, capture_output=True, timeout=180)


def _dvc() -> str:
    return shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")


def test_dvc_push_to_s3_then_pull_into_a_fresh_clone(s3server, tmp_path):
    env = subprocess_env({**s3server.env(), "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t",
                          "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                          "GIT_COMMITTER_EMAIL": "t@t"})
    env.pop("AWS_ENDPOINT_URL_S3", None)  # the endpoint comes from the DVC remote's config
    s3server.client().create_bucket(Bucket="wmforge")
    proj = configparser.ConfigParser()
    proj.read(REPO / ".dvc" / "config")
    remote = proj['\'remote "s3"\'']
    assert remote["url"].startswith("s3://") and remote["endpointurl"].startswith("http")
    src = tmp_path / "src"
    src.mkdir()
    dvc = _dvc()
    for cmd in (["git", "init", "-q"], [dvc, "init", "-q"],
                [dvc, "remote", "add", "-d", "s3", remote["url"]],
                [dvc, "remote", "modify", "s3", "endpointurl", remote["endpointurl"]],
                # this test's server listens elsewhere: a local (uncommitted) override
                [dvc, "remote", "modify", "--local", "s3", "endpointurl", s3server.endpoint]):
        r = _run(cmd, src, env)
        assert r.returncode == 0, r.stderr
    data = src / "data"
    data.mkdir()
    payload = os.urandom(3 * 2**20)
    (data / "shard-000.tar").write_bytes(payload)
    (data / "index.json").write_text('{"n": 1}\n')
    for cmd in ([dvc, "add", "-q", "data"], ["git", "add", "-A"],
                ["git", "commit", "-qm", "data"], [dvc, "push", "-q"]):
        r = _run(cmd, src, env)
        assert r.returncode == 0, cmd + [r.stdout, r.stderr]
    stored = [o["Key"] for o in s3server.client().list_objects_v2(
        Bucket="wmforge", Prefix="dvc/").get("Contents", [])]
    md5 = hashlib.md5(payload).hexdigest()
    assert any(k.endswith(md5[2:]) for k in stored), stored  # content-addressed objects
    clone = tmp_path / "clone"
    r = _run(["git", "clone", "-q", str(src), str(clone)], tmp_path, env)
    assert r.returncode == 0, r.stderr
    (src / ".dvc" / "config.local").replace(clone / ".dvc" / "config.local")
    shutil.rmtree(src / ".dvc" / "cache")  # nothing local to fall back on
    r = _run([dvc, "pull", "-q"], clone, env)
    assert r.returncode == 0, r.stderr
    assert (clone / "data" / "shard-000.tar").read_bytes() == payload
    assert (clone / "data" / "index.json").read_text() == '{"n": 1}\n'
    # a wrong secret: DVC fails, and the secret appears nowhere in what it printed
    bad = {**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret-" + "x" * 12}
    shutil.rmtree(clone / ".dvc" / "cache")
    shutil.rmtree(clone / "data")
    r = _run([dvc, "pull"], clone, bad)
    assert r.returncode != 0
    assert "not-the-secret" not in r.stdout + r.stderr
    assert s3server.secret_key not in r.stdout + r.stderr
