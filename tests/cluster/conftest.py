"""Fixtures of the cluster tests: a real SeaweedFS S3 server on 127.0.0.1 with an identities
file (signatures checked), always stopped, and finished render instances to deliver."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from stages.cluster.seaweed_server import SeaweedServer
from stages.config import UploadConfig
from stages.core.progress import COMPLETE, append_progress
from stages.engine.process_tree import is_running
from tests.conftest import gone_within


@pytest.fixture(scope="session")
def s3server_session(tmp_path_factory):
    """One server for the whole session (its start and stop cost ~8 s; buckets are per test).
    A test that stops it starts it again on the same ports and data folder."""
    srv = SeaweedServer(tmp_path_factory.mktemp("seaweed"), "WMFORGETESTKEY",
                        "sk-" + secrets.token_hex(12))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def s3server(s3server_session):
    """The session's server, checked before each test that uses it. One that a test stopped
    on purpose and, failing, never started again (``stop()`` leaves no process) is started
    again on its ports and data folder. One whose process died without a ``stop()`` (an
    earlier test in this process killed it: under pytest-xdist any module may run before this
    one) fails here, naming what happened, not as a connection error inside the test."""
    srv = s3server_session
    if srv.proc is None:
        srv.start()
    try:
        socket.create_connection(("127.0.0.1", srv.ports["s3"]), timeout=5).close()
    except OSError as e:
        try:
            code: object = srv.proc.wait(timeout=2) if srv.proc is not None else None
        except subprocess.TimeoutExpired:
            code = "none: still running"
        pytest.fail(f"the session's SeaweedFS server does not answer on {srv.endpoint} ({e}; "
                    f"exit status {code}): an earlier test in this process killed it; see "
                    f"{srv.root / 'weed.log'}", pytrace=False)
    return srv


@pytest.fixture
def s3env(s3server, monkeypatch):
    """The standard AWS chain of this process points at the test server."""
    for k, v in s3server.env().items():
        monkeypatch.setenv(k, v)
    return s3server.env()


def upload_cfg(srv: SeaweedServer, bucket: str, **kw) -> UploadConfig:
    return dataclasses.replace(UploadConfig(endpoint_url=srv.endpoint, bucket=bucket,
                                            quiet_s=0.0, part_mb=5, multipart_mb=8,
                                            poll_s=0.2, backoff_max_s=1.0), **kw)


def overrides(ucfg: UploadConfig) -> list[str]:
    """-S arguments giving a subprocess this upload config."""
    out = []
    for f in dataclasses.fields(ucfg):
        out += ["-S", f"upload.{f.name}={getattr(ucfg, f.name)}"]
    return out


def finished_instance(root: Path, inst: str, trajs: dict[str, dict[str, int]],
                      level: str = "Scene/Level", seed: int = 0) -> Path:
    """A closed render instance written as a renderer writes one: per trajectory its files
    (random bytes of the given sizes), then its progress line; COMPLETE last."""
    d = root / level / inst
    d.mkdir(parents=True)
    rng = __import__("random").Random(seed)
    for t, files in trajs.items():
        (d / t).mkdir()
        for name, size in files.items():
            (d / t / name).write_bytes(rng.randbytes(size))
        append_progress(d / "progress.log", t, 24, f"{rng.getrandbits(64):016x}")
    (d / COMPLETE).write_text("")
    return d


def subprocess_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(extra)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def kill_owner_drill(script: str, arg: str, check: Callable[[int], None], what: str) -> None:
    """Run ``script`` (``python -c``, given ``arg``; it prints ``{"pid": <its child>}``),
    ``check`` the child, kill -9 the owner: the child must be gone within 15 s."""
    owner = subprocess.Popen([sys.executable, "-c", script, arg], stdout=subprocess.PIPE,
                             text=True, env=subprocess_env({}))
    child = 0
    try:
        child = int(json.loads(owner.stdout.readline())["pid"])  # type: ignore[union-attr]
        check(child)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        assert gone_within(child, 15), f"{what} {child} outlived its owner's kill -9"
    finally:
        owner.kill()
        owner.wait()
        if child and is_running(child):
            os.kill(child, signal.SIGKILL)


@pytest.fixture
def ray_cluster(s3server):
    """A real multi-node Ray cluster on 127.0.0.1: a head with no work and three worker nodes
    (n1..n3) with fake GPUs and the wmforge node resource; always shut down."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from stages.cluster.ray_executor import node_resource
    from tests.fakes.engine_standin import CHECKOUT

    tmp = tempfile.mkdtemp(prefix="cluster-ray-", dir="/tmp")  # AF_UNIX paths: keep it short
    with pytest.MonkeyPatch.context() as mp:
        for k, v in s3server.env().items():  # the AWS chain every node's processes inherit
            mp.setenv(k, v)
        mp.setenv("RAY_AUTH_MODE", "disabled")  # loopback only; writes no token to ~/.ray
        mp.setenv("RAY_TMPDIR", tmp)  # Ray's session files and address file stay in here
        # every worker imports the stand-in renderer (tests/fakes/) by its path: this checkout
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(CHECKOUT),
                                                              os.environ.get("PYTHONPATH")])))
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "include_dashboard": False,
            "_system_config": {"health_check_period_ms": 500,
                               "health_check_failure_threshold": 4,
                               "health_check_initial_delay_ms": 0}})
        nodes = {n: cluster.add_node(num_cpus=1, num_gpus=2, resources={node_resource(n): 1})
                 for n in ("n1", "n2", "n3")}
        try:
            ray.init(address=cluster.address, namespace="wmforge-test", log_to_driver=False)
            cluster.wait_for_nodes()
            yield cluster, nodes
        finally:
            ray.shutdown()
            cluster.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)
