"""The local S3 store dies with its owner: a process that started it, killed with kill -9,
leaves no ``weed server`` behind (the tests' session store, ``wmforge cluster s3-local``)."""

from __future__ import annotations

from pathlib import Path

from stages.engine.process_tree import is_running

from .conftest import kill_owner_drill

OWNER = """
import json, sys, time
from pathlib import Path
from stages.cluster.seaweed_server import SeaweedServer
srv = SeaweedServer(Path(sys.argv[1]), "OWNERKEY", "sk-owner-test").start()
print(json.dumps({"pid": srv.proc.pid, "port": srv.ports["s3"]}), flush=True)
time.sleep(600)
"""


def test_a_store_whose_owner_is_killed_goes_with_it(tmp_path):
    def is_weed(pid: int) -> None:
        assert is_running(pid) and b"weed" in Path(f"/proc/{pid}/cmdline").read_bytes()

    kill_owner_drill(OWNER, str(tmp_path / "s3"), is_weed, "weed server")
