"""The local S3 store dies with its owner: a process that started it, killed with kill -9,
leaves no ``weed server`` behind (the tests' session store, ``wmforge cluster s3-local``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import subprocess_env

OWNER = """
import json, sys, time
from pathlib import Path
from stages.cluster.seaweed_server import SeaweedServer
srv = SeaweedServer(Path(sys.argv[1]), "OWNERKEY", "sk-owner-test").start()
print(json.dumps({"pid": srv.proc.pid, "port": srv.ports["s3"]}), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_store_whose_owner_is_killed_goes_with_it(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path / "s3")],
                             stdout=subprocess.PIPE, text=True, env=subprocess_env({}))
    weed = 0
    try:
        info = json.loads(owner.stdout.readline())  # type: ignore[union-attr]
        weed = int(info["pid"])
        assert _alive(weed) and b"weed" in Path(f"/proc/{weed}/cmdline").read_bytes()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        deadline = time.monotonic() + 15
        while _alive(weed) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(weed), f"weed server {weed} outlived its owner"
    finally:
        owner.kill()
        owner.wait()
        if weed and _alive(weed):
            os.kill(weed, signal.SIGKILL)
