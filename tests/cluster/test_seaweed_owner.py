"""The local S3 store dies with its owner: a process that started it, killed with kill -9,
leaves no ``weed server`` behind (the tests' session store, ``wmforge cluster s3-local``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from stages.engine.process_tree import is_running
from tests.conftest import gone_within

from .conftest import subprocess_env

OWNER = """
import json, sys, time
from pathlib import Path
from stages.cluster.seaweed_server import SeaweedServer
srv = SeaweedServer(Path(sys.argv[1]), "OWNERKEY", "sk-owner-test").start()
print(json.dumps({"pid": srv.proc.pid, "port": srv.ports["s3"]}), flush=True)
time.sleep(600)
"""


def test_a_store_whose_owner_is_killed_goes_with_it(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path / "s3")],
                             stdout=subprocess.PIPE, text=True, env=subprocess_env({}))
    weed = 0
    try:
        weed = int(json.loads(owner.stdout.readline())["pid"])  # type: ignore[union-attr]
        assert is_running(weed) and b"weed" in Path(f"/proc/{weed}/cmdline").read_bytes()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        assert gone_within(weed, 15), f"weed server {weed} outlived its owner"
    finally:
        owner.kill()
        owner.wait()
        if weed and is_running(weed):
            os.kill(weed, signal.SIGKILL)
