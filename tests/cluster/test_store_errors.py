"""Bucket names by S3's full rules, and every S3 error as one line naming the endpoint, the
bucket, the key and the operation: against the real SeaweedFS server, no traceback, no secret."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stages.cluster.s3_store import S3Store, StoreError
from stages.cluster.uploader import Uploader
from stages.config import ConfigError, load_params
from stages.config.validation import bucket_name_problem

from .conftest import finished_instance, subprocess_env, upload_cfg


@pytest.mark.parametrize("name,why", [
    ("my..bucket", "two adjacent dots"), ("192.168.5.4", "IP address"),
    ("xn--bucket", "'xn--'"), ("sthree-bucket", "'sthree-'"), ("amzn-s3-demo-b", "reserved"),
    ("bucket-s3alias", "'-s3alias'"), ("bucket--ol-s3", "'--ol-s3'"), ("b.mrap", "'.mrap'"),
    ("b--x-s3", "'--x-s3'"), ("b--table-s3", "'--table-s3'"), ("ab", "2 characters"),
    ("a" * 64, "64 characters"), ("Bucket", "lowercase"), ("-bucket", "begin and end"),
    ("bucket.", "begin and end"), ("my_bucket", "lowercase"),
])
def test_bucket_names_that_s3_refuses_are_refused_with_the_rule(name, why):
    assert why in bucket_name_problem(name)
    with pytest.raises(ConfigError, match=r"upload\.bucket"):
        load_params(overrides=[f"upload.bucket={name}"])


@pytest.mark.parametrize("name", ["wmforge", "my.bucket", "a-b.c-d", "abc", "a" * 63,
                                  "1bucket9", "192.168.5.4x", "xn-bucket", "my-.bucket"])
def test_bucket_names_s3_accepts_pass(name):
    assert bucket_name_problem(name) == ""


def test_the_cluster_upload_command_takes_options_before_it_and_names_a_bad_bucket(tmp_path):
    # `wmforge cluster -S … upload` like every other sub-command; the bad name in one line
    r = subprocess.run([sys.executable, "-m", "stages.cli", "cluster", "-S",
                        "upload.bucket=my..bucket", "upload", "--renders", str(tmp_path),
                        "--once"], env=subprocess_env({}), text=True, capture_output=True,
                       timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "upload.bucket 'my..bucket'" in lines[0], r.stderr
    assert "two adjacent dots" in lines[0] and "Traceback" not in r.stderr


def test_an_s3_error_reaches_the_user_as_one_line_naming_endpoint_bucket_key_operation(
        s3server, s3env, tmp_path):
    # a name that got past an older check (the config is not loaded here): the server refuses it
    ucfg = upload_cfg(s3server, "my..bucket")
    root = tmp_path / "renders"
    inst = finished_instance(root, "n1-E", {"traj_000": {"back.mp4": 1000}})
    store = S3Store(ucfg)
    with pytest.raises(StoreError) as e:
        store.ensure_bucket()
    msg = str(e.value)
    assert "\n" not in msg and s3server.endpoint in msg and "s3://my..bucket/" in msg
    assert "create_bucket" in msg and "InvalidBucketName" in msg, msg
    # a key-level error names the key and the operation
    good = S3Store(upload_cfg(s3server, "errors-b"))
    good.ensure_bucket()
    with pytest.raises(StoreError) as e3:
        good.get_bytes("no/such/key.json")
    line = str(e3.value)
    assert "get_object s3://errors-b/no/such/key.json" in line and "\n" not in line, line
    # the uploader: exit 4 with that one line, the files kept, the secret nowhere
    lines: list[str] = []
    up = Uploader(ucfg, root, "n1", log=lines.append)
    assert up.run(once=True) == 4
    assert len(lines) == 1 and lines[0].startswith("upload: error: S3 at "), lines
    assert "my..bucket" in lines[0] and "create_bucket" in lines[0]
    assert s3server.secret_key not in lines[0]
    assert (inst / "traj_000" / "back.mp4").stat().st_size == 1000


@pytest.mark.cluster_faults
def test_upload_once_gives_up_on_a_store_that_does_not_answer_and_keeps_everything(tmp_path):
    from stages.cluster.seaweed_server import free_port

    port = free_port()  # nothing listens there: connection refused, for real
    root = tmp_path / "renders"
    inst = finished_instance(root, "n1-U", {"traj_000": {"back.mp4": 1000}})
    env = subprocess_env({"AWS_ACCESS_KEY_ID": "K", "AWS_SECRET_ACCESS_KEY": "never-shown"})
    r = subprocess.run([sys.executable, "-m", "stages.cli", "cluster", "-S",
                        f"upload.endpoint_url=http://127.0.0.1:{port}", "-S",
                        "upload.poll_s=0.2", "-S", "upload.backoff_max_s=0.5", "upload",
                        "--renders", str(root), "--once"], env=env, text=True,
                       capture_output=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith(f"upload: error: S3 at http://127.0.0.1:{port}: head_bucket") and \
        "gave up after 2 s; 1 finished trajectories kept locally" in last, last
    assert "never-shown" not in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert (inst / "traj_000" / "back.mp4").stat().st_size == 1000
