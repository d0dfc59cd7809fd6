"""The allocator: its pure policy (pools, passes, leases, membership), its persisted state, its
HTTP status, and the real detached Ray actor killed and restarted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import urllib.request

import pytest

from stages.cluster.allocator_actor import AllocatorService, read_http_state
from stages.cluster.allocator_policy import AllocatorPolicy
from stages.cluster.pool_plan import pass_order
from stages.pools import build_pools

LEVELS = [f"Pack{i // 5}/Level{i}" for i in range(30)]
NODES = ["n1", "n2", "n3"]


def _policy(passes: int = 2, lease_s: float = 10.0) -> AllocatorPolicy:
    rows = build_pools(LEVELS, NODES, passes, seed=7).to_dict("records")
    return AllocatorPolicy.from_pools(rows, passes, 7, lease_s)


def test_bindings_come_from_pools_parquet_and_each_pass_runs_in_its_own_order():
    pools = build_pools(LEVELS, NODES, 2, seed=7)
    pol = AllocatorPolicy.from_pools(pools.to_dict("records"), 2, 7, 10.0)
    for n in NODES:
        got = []
        while (ls := pol.lease(n, now=0.0)) is not None:
            got.append((ls.level_id, ls.pass_index))
            assert pol.complete(ls.lease_id, n, now=0.0)
        mine = pools[pools["node"] == n]
        want = [(str(r["level_id"]), int(r["pass"]))
                for r in mine.sort_values(["pass", "position"]).to_dict("records")]
        assert got == want  # pass 0 in its order, then pass 1 reshuffled
        p0 = [lv for lv, p in got if p == 0]
        p1 = [lv for lv, p in got if p == 1]
        assert sorted(p0) == sorted(p1) and (p0 != p1 or len(p0) < 3)
    assert pol.finished()


def test_an_expired_lease_goes_back_and_a_late_completion_is_idempotent():
    pol = _policy(passes=1, lease_s=10.0)
    a = pol.lease("n1", now=0.0)
    assert a is not None and pol.renew(a.lease_id, "n1", now=5.0)
    assert pol.expire(now=14.0) == []  # renewed at 5: good until 15
    assert pol.expire(now=15.0)[0].lease_id == a.lease_id
    b = pol.lease("n1", now=15.0)
    assert b is not None and (b.level_id, b.attempt) == (a.level_id, 2)
    assert not pol.renew(a.lease_id, "n1", now=15.0)
    assert pol.complete(b.lease_id, "n1", now=16.0, trajectories=3)
    assert not pol.complete(b.lease_id, "n1", now=16.0)  # twice: nothing changes
    bal = pol.balance()["n1"]
    assert (bal["done"], bal["expired"], bal["trajectories"]) == (1, 1, 3)


def test_a_late_completion_of_an_expired_lease_counts_and_survives_a_restart():
    """At-least-once: a node whose lease expired (slow, partitioned) may still finish; its
    keyed outputs are the unit's, so the unit is done, the re-lease's completion changes
    nothing, and the allocator's persisted state remembers the expired lease."""
    from stages.cluster.allocator_policy import AllocatorPolicy

    pol = _policy(passes=1, lease_s=10.0)
    a = pol.lease("n1", now=0.0)
    assert a is not None and pol.expire(now=10.0)[0].lease_id == a.lease_id
    b = pol.lease("n1", now=10.0)
    assert b is not None and (b.level_id, b.pass_index) == (a.level_id, a.pass_index)
    restored = AllocatorPolicy.from_dict(pol.to_dict())
    for p_ in (pol, restored):
        assert p_.complete(a.lease_id, "n1", now=11.0, trajectories=2)  # late, still counts
        assert (a.level_id, a.pass_index) in p_.done
        assert not p_.complete(b.lease_id, "n1", now=12.0)  # already done


def test_a_node_leaving_or_joining_moves_a_minimal_share_of_levels():
    pol = _policy()
    before = dict(pol.owner)
    held = pol.lease("n2", now=0.0)
    moved = pol.leave("n2", now=1.0)
    assert sorted(moved) == sorted(lv for lv, n in before.items() if n == "n2")
    assert all(pol.owner[lv] == before[lv] for lv in LEVELS if lv not in moved)
    assert all(pol.owner[lv] in ("n1", "n3") for lv in moved)
    assert held is not None and held.lease_id not in pol.leases  # its lease expired at once
    # the unit it held is handed to the level's new owner
    new_owner = pol.owner[held.level_id]
    got = [pol.lease(new_owner, now=2.0) for _ in range(40)]
    assert any(g is not None and g.level_id == held.level_id and g.pass_index == 0
               for g in got)
    pol2 = _policy()
    taken = pol2.join("n4")
    assert 0 < len(taken) < len(LEVELS) / 2
    assert all(pol2.owner[lv] == "n4" for lv in taken)
    assert sum(pol2.owner[lv] != _policy().owner[lv] for lv in LEVELS) == len(taken)


def test_units_completed_by_a_node_that_then_died_are_reopened_for_their_new_owner():
    """A node completed its unit, then died before its uploads were delivered: once every unit
    is done the run looks finished; reopening the dead node's levels puts exactly those units
    back, and they are leased to the levels' new owners."""
    pol = _policy(passes=1)
    for n in NODES:  # every unit of every node leased and completed
        while (ls := pol.lease(n, now=0.0)) is not None:
            assert pol.complete(ls.lease_id, n, now=0.5, trajectories=2)
    assert pol.finished()
    moved = pol.leave("n1", now=1.0)
    assert moved and pol.finished()  # nothing in flight: without a reopen nobody redoes them
    back = pol.reopen(moved)
    assert sorted(back) == sorted((lv, 0) for lv in moved) and not pol.finished()
    again = []
    for n in ("n2", "n3"):
        while (ls := pol.lease(n, now=2.0)) is not None:
            assert ls.level_id in moved and pol.owner[ls.level_id] == n
            again.append(ls.level_id)
    assert sorted(again) == sorted(moved)
    assert pol.reopen([]) == []


def test_a_drained_node_gets_no_lease_until_undrained():
    pol = _policy()
    pol.drain("n1", "disk_pressure")
    assert pol.lease("n1", now=0.0) is None
    assert pol.balance()["n1"]["drained"] == "disk_pressure"
    pol.undrain("n1")
    assert pol.lease("n1", now=0.0) is not None


def test_state_round_trips_and_a_restarted_service_reshuffles_nothing(tmp_path):
    rows = build_pools(LEVELS, NODES, 2, seed=7).to_dict("records")
    path = tmp_path / "alloc" / "state.json"
    svc = AllocatorService(str(path), rows, 2, 7, 30.0)
    leases = [svc.lease(n) for n in NODES for _ in range(2)]
    svc.complete(leases[0]["lease_id"], "n1", trajectories=2)
    svc.leave("n3")
    before = svc.state()
    svc._http.shutdown()
    # a second service on the same state file (what a restarted actor runs) has the same state
    svc2 = AllocatorService(str(path), [], 1, 0, 1.0)
    after = svc2.state()
    assert svc2.restored and not before["restored"]
    for k in ("owner", "leases", "done", "nodes", "balance"):
        assert after[k] == before[k], k
    # pass order after the restart is the one the policy had before
    n1 = [lv for lv, n in after["owner"].items() if n == "n1"]
    nxt = svc2.lease("n1")
    assert nxt is not None and nxt["level_id"] in pass_order(n1, "n1", 0, 7)
    # served over HTTP
    http = read_http_state(str(path))
    assert http["owner"] == after["owner"] and http["pid"] == os.getpid()
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(http["http"] + "/nothing", timeout=5)
    svc2._http.shutdown()
    assert json.loads(path.read_text())["version"] == 2


@pytest.fixture
def ray_local(monkeypatch):
    ray = pytest.importorskip("ray")
    import tempfile

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # loopback only; writes no token to ~/.ray
    tmp = tempfile.mkdtemp(prefix="cluster-ray-", dir="/tmp")  # AF_UNIX paths: keep it short
    ray.init(num_cpus=1, include_dashboard=False, namespace="wmforge-test", _temp_dir=tmp,
             log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.cluster_faults
def test_the_allocator_actor_killed_restarts_with_the_same_pools_and_leases(ray_local,
                                                                             tmp_path):
    from stages.cluster.allocator_actor import get_allocator

    ray = ray_local
    rows = build_pools(LEVELS, NODES, 1, seed=7).to_dict("records")
    path = str(tmp_path / "state.json")
    alloc = get_allocator(path, rows, 1, 7, 300.0)
    pid1 = ray.get(alloc.ping.remote())
    held = [ray.get(alloc.lease.remote(n)) for n in NODES]
    before = ray.get(alloc.state.remote())
    os.kill(pid1, signal.SIGKILL)  # the actor's process dies; Ray restarts it (max_restarts=-1)
    deadline = time.time() + 60
    pid2 = pid1
    while time.time() < deadline:
        try:
            pid2 = ray.get(alloc.ping.remote(), timeout=10)
            if pid2 != pid1:
                break
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            time.sleep(0.5)
    assert pid2 != pid1
    after = ray.get(alloc.state.remote())
    assert after["restored"]
    for k in ("owner", "leases", "done", "nodes"):
        assert after[k] == before[k], k
    assert {x["lease_id"] for x in after["leases"]} == {h["lease_id"] for h in held}
    # found by name (what a node runner or `cluster status` does)
    same = ray.get_actor("wmforge-allocator", namespace="wmforge")
    assert ray.get(same.ping.remote()) == pid2
    assert read_http_state(path)["pid"] == pid2
    ray.kill(same, no_restart=True)


def test_a_version_1_state_file_is_migrated_for_its_own_run_and_refused_for_another(tmp_path):
    """State schema 2 names the run (``identity``); a version-1 file (as the code before it
    wrote one: the policy's keys, no identity) is read and written back as version 2 when its
    pools, passes and seed are this run's, and refused, naming the file, when they are not."""
    from stages.cluster.allocator_actor import OtherRunError, run_identity

    rows = build_pools(LEVELS, NODES, 1, seed=7).to_dict("records")
    path = tmp_path / "alloc" / "state.json"
    path.parent.mkdir()
    old = AllocatorPolicy.from_pools(rows, 1, 7, 300.0)
    held = old.lease("n1", now=time.time())
    v1 = {**old.to_dict(), "version": 1}
    path.write_text(json.dumps(v1))
    ident = run_identity(rows, 1, 7, str(path), "http://s3/b/renders")
    svc = AllocatorService(str(path), rows, 1, 7, 300.0, identity=ident)
    try:
        st = svc.state()
        assert st["restored"] and st["migrated_from"] == 1
        assert [ls["lease_id"] for ls in st["leases"]] == [held.lease_id]  # its lease kept
        on_disk = json.loads(path.read_text())
        assert on_disk["version"] == 2 and on_disk["identity"] == ident
    finally:
        svc._http.shutdown()
    # a version-1 file of other pools (or another seed): refused, naming the file
    path.write_text(json.dumps(v1))
    other = build_pools(LEVELS[:20], NODES, 1, seed=7).to_dict("records")
    with pytest.raises(OtherRunError) as e:
        AllocatorService(str(path), other, 1, 8, 300.0,
                         identity=run_identity(other, 1, 8, str(path), "http://s3/b/renders"))
    msg = str(e.value)
    assert str(path) in msg and "schema version 1" in msg and "pools" in msg, msg
    assert "seed 7 (this run: 8)" in msg and "remove that file" in msg and "\n" not in msg
    # a version this code does not know: refused, naming the file and the versions it reads
    path.write_text(json.dumps({**v1, "version": 3}))
    with pytest.raises(OtherRunError) as e:
        AllocatorService(str(path), rows, 1, 7, 300.0, identity=ident)
    assert f"allocator state {path}: schema version 3" in str(e.value), str(e.value)
    assert "reads versions 1, 2" in str(e.value)
