"""The operator view: `wmforge cluster health` and `status` against a real SeaweedFS server
that is then stopped for real; only real node folders are listed; an uploader that gave up and
a finished trajectory left local need a person (exit 1)."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys

import pytest

from stages.cluster.seaweed_server import SeaweedServer
from tests.fakes.engine_standin import CHECKOUT

from .conftest import finished_instance, subprocess_env


@pytest.fixture
def own_store(tmp_path):
    """A server of this test alone: the test stops it."""
    srv = SeaweedServer(tmp_path / "seaweed", "HEALTHKEY", "sk-" + secrets.token_hex(12))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _wm(srv: SeaweedServer, tmp, *args: str) -> subprocess.CompletedProcess:
    opts = [f"upload.endpoint_url={srv.endpoint}", "upload.bucket=health-b",
            "monitor.warn_free_mb=0", "monitor.drain_free_mb=0", "monitor.prune_free_mb=0",
            f"cluster.allocator_state={tmp}/alloc/state.json"]
    sets = [x for o in opts for x in ("-S", o)]
    params = str(CHECKOUT / "params.yaml")
    return subprocess.run([sys.executable, "-m", "stages.cli", "cluster", "--params", params,
                           *sets, *args],
                          env=subprocess_env(srv.env()), text=True, capture_output=True,
                          timeout=120, cwd=tmp)


def _rows(out: str) -> dict[str, str]:
    return {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith(("n1 ", "n2 ",
                                                                         "pools"))}


@pytest.mark.cluster_faults
def test_health_and_status_show_a_dead_uploader_its_backlog_and_a_store_that_is_down(
        own_store, tmp_path):
    work = tmp_path / "work"
    (work / "pools").mkdir(parents=True)  # the README's layout: pools beside the nodes
    (work / "pools" / "pools.parquet").write_bytes(b"")
    for n in ("n1", "n2"):
        (work / n / "renders").mkdir(parents=True)
        (work / n / "params.yaml").write_text("{}\n")
    finished_instance(work / "n1" / "renders", "n1-A", {"traj_0000": {"back.mp4": 1000}})
    (work / "n1" / "uploader.json").write_text(json.dumps({
        "status": "poisoned", "pid": None, "restarts": 4,
        "error": "5 crashes in a row (signal 9): boom"}))
    (work / "n2" / "uploader.json").write_text(json.dumps({"status": "stopped", "pid": None,
                                                           "restarts": 0, "error": ""}))
    h = _wm(own_store, tmp_path, "health", "--work", str(work))
    rows = _rows(h.stdout)
    assert h.returncode == 1, h.stdout + h.stderr  # n1 needs a person
    assert "pools" not in rows and set(rows) == {"n1", "n2"}, h.stdout
    n1 = rows["n1"].split()
    assert n1[1] == "ok" and n1[2] == "poisoned" and n1[3] == "4" and n1[4] == "1", rows["n1"]
    assert "uploader poisoned" in rows["n1"] and rows["n2"].rstrip().endswith("-"), h.stdout
    assert "uploader n1: 5 crashes in a row (signal 9): boom" in h.stdout
    st = _wm(own_store, tmp_path, "status", "--work", str(work))
    assert st.returncode == 0 and st.stderr == "", st.stderr
    own_store.stop(timeout_s=2)  # the store goes away for real
    st = _wm(own_store, tmp_path, "status", "--work", str(work))
    assert st.returncode == 1, st.stdout
    err = st.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot read the store: S3 at "
                                               f"{own_store.endpoint}"), st.stderr
    assert "Traceback" not in st.stderr and own_store.secret_key not in st.stderr + st.stdout
    assert "store: not readable" in st.stdout
    assert _rows(st.stdout)["n1"].split()[2] == "?"  # never "delivered 0"
    h = _wm(own_store, tmp_path, "health", "--work", str(work))
    assert h.returncode == 1 and "store not answering" in _rows(h.stdout)["n2"], h.stdout
    assert all(r.split()[1] == "DOWN" for r in _rows(h.stdout).values())


@pytest.mark.cluster_faults
def test_health_shows_lease_ages_from_a_live_allocator_and_the_configured_backlog_alert(
        s3server, tmp_path):
    """`cluster health` reads the live allocator's state over its HTTP address (the real
    allocator service, as the Ray actor runs it): n1 holds two leases granted ~2 s ago, n2
    none; a backlog older than monitor.backlog_alert_s needs a person."""
    import os
    import time

    from stages.cluster.allocator_actor import AllocatorService
    from stages.pools import build_pools

    rows = build_pools([f"P{i}/L{i}" for i in range(6)], ["n1", "n2"], 1, 0).to_dict("records")
    alloc = AllocatorService(str(tmp_path / "alloc" / "state.json"), rows, 1, 0, 300.0)
    try:
        held = [alloc.lease("n1"), alloc.lease("n1")]
        assert all(held)
        granted = max(ls["granted"] for ls in held)
        work = tmp_path / "work"
        for n in ("n1", "n2"):
            (work / n / "renders").mkdir(parents=True)
            (work / n / "params.yaml").write_text("{}\n")
            (work / n / "uploader.json").write_text(json.dumps({
                "status": "stopped", "pid": None, "restarts": 0, "error": ""}))
        inst = finished_instance(work / "n1" / "renders", "n1-A",
                                 {"traj_0000": {"back.mp4": 1000}})
        old = time.time() - 120  # finished two minutes ago, still local
        for f in (inst / "traj_0000").iterdir():
            os.utime(f, (old, old))
        time.sleep(2.0)
        h = _wm(s3server, tmp_path, "health", "--work", str(work))
        after = time.time()
        rows_out = _rows(h.stdout)
        assert "allocator: not reachable" not in h.stdout, h.stdout
        n1, n2 = rows_out["n1"].split(), rows_out["n2"].split()
        assert n1[9] == "2" and n2[9] == "0", h.stdout  # leases
        assert 2 <= int(n1[10]) <= after - granted + 1 and n2[10] == "0", h.stdout  # lease s
        assert n1[4] == "1" and 119 <= int(n1[5]) <= 200, h.stdout  # backlog 1, ~120 s old
        assert "s old" not in rows_out["n1"], h.stdout  # under the default alert (1800 s)
        alert = _wm(s3server, tmp_path, "-S", "monitor.backlog_alert_s=60", "health",
                    "--work", str(work))
        alerted = re.search(r"backlog (\d+) s old", _rows(alert.stdout)["n1"])
        assert alert.returncode == 1 and alerted, alert.stdout
        assert 119 <= int(alerted.group(1)) <= time.time() - old + 1, alert.stdout
        # the leases go back: health says so
        for ls in held:
            alloc.complete(ls["lease_id"], "n1")
        h = _wm(s3server, tmp_path, "health", "--work", str(work))
        assert _rows(h.stdout)["n1"].split()[9] == "0", h.stdout
    finally:
        alloc._http.shutdown()
