"""The one-machine cluster of docs/cluster.md, command by command, with the real engine:
`wmforge cluster up --head --local-nodes 3`, a second `up` refused, `run` (Stage I + II of
three levels over three Ray nodes at a tiny preset, videos to SeaweedFS), `status`, `health`,
`down`."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from stages.config import load_params
from stages.pools import build_pools

from ..conftest import small_render_cfg
from .conftest import subprocess_env, upload_cfg

LEVELS = ["CastleCourtyard/Courtyard", "DesertCanyon/Canyon", "NatureValley/AlpineMeadow"]
NODES = ["local1", "local2", "local3"]


def _free_port() -> int:
    from stages.cluster.seaweed_server import free_port

    return free_port()


@pytest.fixture
def one_machine(s3server, sample_library, tmp_path):
    """params.yaml, inventory and pools of a tiny job; the environment of a user's shell."""
    from stages.inventory import run_inventory
    from stages.parquet_io import write_parquet

    cfg = load_params(overrides=[
        "trajectories.per_level=1", "trajectories.frames=24",
        "trajectories.characters=[CharacterPack/Alex]", f"library.root={sample_library}",
        "node.cpu_slots=1", "cluster.lease_s=60", f"cluster.head_port={_free_port()}",
        f"cluster.allocator_state={tmp_path}/alloc/state.json", "monitor.warn_free_mb=0",
        "monitor.drain_free_mb=0", "monitor.prune_free_mb=0"])
    cfg = dataclasses.replace(cfg, render=small_render_cfg(),
                              upload=upload_cfg(s3server, "one-machine", quiet_s=1.0))
    params = tmp_path / "params.yaml"
    params.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    inv = run_inventory(sample_library, cfg.inventory, "overrides.yaml")
    write_parquet(inv.levels, tmp_path / "inventory" / "levels.parquet")
    write_parquet(inv.characters, tmp_path / "inventory" / "characters.parquet")
    write_parquet(build_pools(LEVELS, NODES, 1, 0), tmp_path / "pools" / "pools.parquet")
    raytmp = tempfile.mkdtemp(prefix="cluster-cli-", dir="/tmp")  # short AF_UNIX paths
    env = subprocess_env({**s3server.env(), "RAY_TMPDIR": raytmp, "RAY_AUTH_MODE": "disabled"})
    try:
        yield params, env
    finally:
        session = Path(f"{tmp_path}/alloc/cluster.json")
        if session.exists():  # a failed test still leaves no Ray process behind
            subprocess.run([sys.executable, "-m", "stages.cli", "cluster", "--params",
                            str(params), "down", "--timeout", "5"], env=env, cwd=tmp_path,
                           capture_output=True, timeout=120)
        for d in Path("/proc").iterdir():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if d.name.isdigit() and raytmp.encode() in cmd:
                os.kill(int(d.name), signal.SIGKILL)
        shutil.rmtree(raytmp, ignore_errors=True)


def _wm(params: Path, env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stages.cli", "cluster", "--params",
                           str(params), *args], env=env, cwd=params.parent, text=True,
                          capture_output=True, timeout=timeout)


@pytest.mark.cluster_faults
def test_the_readme_cluster_on_one_machine_with_the_real_engine(one_machine, s3server):
    from stages.media.video import count_frames

    params, env = one_machine
    tmp = params.parent
    up = _wm(params, env, "up", "--head", "--local-nodes", "3")
    assert up.returncode == 0, up.stderr
    again = _wm(params, env, "up", "--head", "--port", str(_free_port()))
    assert again.returncode == 2 and "already runs on this node" in again.stderr
    run = _wm(params, env, "run", "--pools", "pools/pools.parquet", "--inventory", "inventory",
              "--work", "nodes", timeout=500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    st = _wm(params, env, "status", "--work", "nodes")
    assert st.returncode == 0, st.stderr
    rows = {ln.split()[0]: ln.split() for ln in st.stdout.splitlines() if ln.startswith("local")}
    # the three signals agree: finished (progress logs) = delivered (S3) = pool units done
    assert sum(int(r[1]) for r in rows.values()) == 3 and all(r[1] == r[2] for r in rows.values())
    assert sum(int(r[4]) for r in rows.values()) == 3, st.stdout
    # the videos are in the bucket, complete and decodable
    c = s3server.client()
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="one-machine")["Contents"]]
    done = [k for k in keys if k.endswith("_COMPLETE.json")]
    assert len(done) == 3
    for k in done:
        rec = json.loads(c.get_object(Bucket="one-machine", Key=k)["Body"].read())
        vids = [f for f in rec["files"] if f.endswith(".mp4") and "preview" not in f]
        assert len(vids) == 5, rec["files"].keys()  # five views
        local = tmp / "dl.mp4"
        base = k.rsplit("/", 1)[0]
        c.download_file("one-machine", f"{base}/{vids[0]}", str(local))
        assert count_frames(local) == 24
    health = _wm(params, env, "health", "--work", "nodes")
    assert health.returncode == 0 and health.stdout.count("no_gpu") == 3, health.stdout
    down = _wm(params, env, "down", "--timeout", "30")
    assert down.returncode == 0, down.stderr
    assert "stopped" in down.stdout and not (tmp / "alloc" / "cluster.json").exists()
    raytmp = env["RAY_TMPDIR"]
    alive = [d.name for d in Path("/proc").iterdir() if d.name.isdigit()
             and raytmp.encode() in _cmdline(d)]
    assert not alive


def _cmdline(d: Path) -> bytes:
    try:
        return (d / "cmdline").read_bytes()
    except OSError:
        return b""


def test_up_refuses_an_unreachable_head_and_an_unknown_engine_user(tmp_path):
    env = subprocess_env({"RAY_TMPDIR": str(tmp_path)})
    port = _free_port()  # nothing listens there
    r = subprocess.run([sys.executable, "-m", "stages.cli", "cluster", "up", "--address",
                        f"127.0.0.1:{port}", "--node", "w1"], env=env, text=True,
                       capture_output=True, timeout=60)
    assert r.returncode == 2 and f"no Ray head answers at 127.0.0.1:{port}" in r.stderr
    r = subprocess.run([sys.executable, "-m", "stages.cli", "cluster", "-S",
                        "cluster.engine_user=no-such-user-here", "up", "--head"], env=env,
                       text=True, capture_output=True, timeout=60)
    assert r.returncode == 2 and "cluster.engine_user 'no-such-user-here'" in r.stderr
    r = subprocess.run([sys.executable, "-m", "stages.cli", "cluster", "-S",
                        "upload.bucket=Not_A_Bucket", "status"], env=env, text=True,
                       capture_output=True, timeout=60)
    assert r.returncode == 2 and "upload.bucket 'Not_A_Bucket'" in r.stderr


def _env_has(pid: str, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


@pytest.mark.cluster_faults
def test_down_leaves_no_process_of_the_session_behind(tmp_path):
    """`up --head --local-nodes 1`, then `down`: every process of that Ray session is gone
    right after, the agents that retitle themselves (ray::DashboardAgent, RuntimeEnvAgent)
    too. They are found by the RAY_TMPDIR this test alone gives them (kept in their
    environment, whatever their title)."""
    from tests.fakes.engine_standin import CHECKOUT

    raytmp = tempfile.mkdtemp(prefix="cl-down-", dir="/tmp")  # short AF_UNIX paths
    env = subprocess_env({"RAY_TMPDIR": raytmp, "RAY_AUTH_MODE": "disabled"})
    mine = f"RAY_TMPDIR={raytmp}".encode()
    params = ["--params", str(CHECKOUT / "params.yaml"), "-S",
              f"cluster.head_port={_free_port()}", "-S",
              f"cluster.allocator_state={tmp_path}/alloc/state.json"]

    def wm(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "stages.cli", "cluster", *params, *args],
                              env=env, cwd=tmp_path, text=True, capture_output=True,
                              timeout=180)

    before: list[str] = []
    started: dict[str, str] = {}
    try:
        up = wm("up", "--head", "--local-nodes", "1")
        assert up.returncode == 0, up.stderr
        # the session: processes with this test's RAY_TMPDIR and everything below them (a
        # retitled agent's title overwrites what /proc shows of its environment)
        before = _below([d.name for d in Path("/proc").iterdir() if d.name.isdigit()
                         and _env_has(d.name, mine)])
        started = {p: _started(p) for p in before}  # a reused pid is not a survivor
        titles = {Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0] for p in before
                  if Path(f"/proc/{p}/cmdline").exists()}
        assert any(b"Agent" in t for t in titles), titles  # the retitled agents run
        # include_dashboard is false (params.yaml): Ray 2.60's head starts dashboard.py all the
        # same (node.py start_head_processes -> start_api_server), but with only its
        # usage-stats module and no HTTP server: nothing answers at its --port
        dash = [p for p in before if b"ray/dashboard/dashboard.py" in _cmd(p)]
        assert len(dash) == 1, [_cmd(p)[:80] for p in before]
        args = _cmd(dash[0]).split(b"\0")
        assert b"--disable-frontend" in args and b"--modules-to-load=UsageStatsHead" in args
        port = int(next(a for a in args if a.startswith(b"--port=")).split(b"=")[1])
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=3).close()
        down = wm("down", "--timeout", "5")
        assert down.returncode == 0, down.stdout + down.stderr
        assert not (Path(f"/proc/{dash[0]}").exists() and _started(dash[0]) == started[dash[0]]
                    and _state(dash[0]) not in ("Z", "X", ""))  # the dashboard is gone
        alive = [p for p in before if Path(f"/proc/{p}").exists() and _started(p) ==
                 started[p] and _state(p) not in ("Z", "X", "")]
        assert not alive, [Path(f"/proc/{p}/cmdline").read_bytes()[:60] for p in alive]
        assert "none left" in down.stdout
    finally:
        # what down left (orphans included: known by pid and start time from before)
        left = _below([d.name for d in Path("/proc").iterdir() if d.name.isdigit()
                       and _env_has(d.name, mine)])
        left += [p for p in before if started.get(p) and _started(p) == started[p]]
        for p in set(left):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(p), signal.SIGKILL)
        shutil.rmtree(raytmp, ignore_errors=True)


def _cmd(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _stat(pid: str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return raw[raw.rindex(")") + 2:].split()


def _state(pid: str) -> str:
    st = _stat(pid)
    return st[0] if st else ""


def _started(pid: str) -> str:
    st = _stat(pid)
    return st[19] if len(st) > 19 else ""


def _below(pids: list[str]) -> list[str]:
    """``pids`` and all their descendants (by parent pid)."""
    kids: dict[str, list[str]] = {}
    for d in Path("/proc").iterdir():
        st = _stat(d.name) if d.name.isdigit() else []
        if st:
            kids.setdefault(st[1], []).append(d.name)
    out: list[str] = []
    todo = list(pids)
    while todo:
        p = todo.pop()
        if p not in out:
            out.append(p)
            todo += kids.get(p, [])
    return out
