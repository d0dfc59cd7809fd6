"""Fixtures of the cluster tests: a real SeaweedFS S3 server on 127.0.0.1 with an identities
file (signatures checked), always stopped, and finished render instances to deliver."""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path

import pytest

from stages.cluster.seaweed_server import SeaweedServer
from stages.config import UploadConfig
from stages.core.progress import COMPLETE, append_progress


@pytest.fixture(scope="module")
def s3server(tmp_path_factory):
    srv = SeaweedServer(tmp_path_factory.mktemp("seaweed"), "WMFORGETESTKEY",
                        "sk-" + secrets.token_hex(12))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


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
