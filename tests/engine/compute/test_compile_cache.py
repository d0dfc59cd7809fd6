"""render.compile_cache_dir (issue #30: the compile once per node): Inductor's cache in the
node's own folder, and one renderer of a configuration compiling at a time while the others
wait and then load its graphs (``stages/engine/compute/compile_cache.py``).

Real processes and real locks: a leader holding the lock, a follower waiting on it (with its
heartbeat) and going on when the leader is done, is killed with kill -9, or takes too long;
real torch.compile graphs (Inductor's CPU back end) compiled by a leader and loaded warm by a
follower; the compute renderer's first frames gated on the CPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stages.engine.compute import compile_cache as cc

REPO = Path(__file__).resolve().parents[3]

# one renderer's part: enter, hold (seconds, as compiling would), leave; prints its record
PART = """
import json, sys, time
from pathlib import Path
from stages.engine.compute.compile_cache import FirstCompile
cache, key, hold, wait_s = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
beats = []
g = FirstCompile(cache, key, wait_s=wait_s, beat=lambda: beats.append(1))
t0 = time.monotonic()
print("ENTERING", flush=True)
role = g.enter()
print("ENTERED " + role, flush=True)
time.sleep(hold if role == "leader" else 0)
g.leave(ok=True)
print("RESULT " + json.dumps({"role": role, "waited_s": g.waited_s, "beats": len(beats),
                               "t": time.monotonic() - t0}), flush=True)
"""

# a leader or follower that compiles two real graphs inside its gated part
COMPILE = """
import json, sys, time
from pathlib import Path
from stages.engine.compute.compile_cache import FirstCompile, use_cache
cache = use_cache(sys.argv[1])
import torch
from stages.engine.compute.yuv import packed_planes
from stages.engine.compute.targets import resolve_views
g = FirstCompile(cache, "probe")
role = g.enter()
t0 = time.monotonic()
torch.compile(packed_planes, dynamic=False)(torch.zeros((5, 54, 96, 3), dtype=torch.uint8))
torch.compile(resolve_views, dynamic=False)(torch.rand(5, 2, 54, 96, 3), torch.tensor(1.0),
                                            "aces")
compile_s = time.monotonic() - t0
g.leave(ok=True)
from torch._dynamo.utils import counters
ind = counters["inductor"]
print("RESULT " + json.dumps({"role": role, "compile_s": compile_s, "waited_s": g.waited_s,
                              "hits": ind["fxgraph_cache_hit"],
                              "misses": ind["fxgraph_cache_miss"]}))
"""


@pytest.fixture
def no_cache_env(monkeypatch):
    """TORCHINDUCTOR_CACHE_DIR unset for the test and restored after it, whatever use_cache
    set meanwhile (``monkeypatch.delenv`` of an unset variable records nothing to undo)."""
    for var in (cc.ENV, cc.TRITON_ENV):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    return monkeypatch


@pytest.fixture(scope="module", autouse=True)
def _cache_variable_left_as_found():
    """TORCHINDUCTOR_CACHE_DIR as this module found it, after all of its tests: use_cache
    sets it, and a test that calls it (directly or through the compute renderer) must not
    leave it for the tests after them (which would compile into another test's tmp folder).
    Captured here, not at import: torch itself sets it to its default on a first compile in
    an earlier test module."""
    before = [os.environ.get(v) for v in (cc.ENV, cc.TRITON_ENV)]
    yield
    after = [os.environ.get(v) for v in (cc.ENV, cc.TRITON_ENV)]
    assert after == before, (before, after)


def _start(code: str, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in (cc.ENV, cc.TRITON_ENV)}
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**env, "PYTHONPATH": str(REPO)})


def _wait_for(p: subprocess.Popen, word: str) -> str:
    assert p.stdout is not None
    while True:
        line = p.stdout.readline()
        assert line, f"the process ended before {word!r}: {p.stderr.read() if p.stderr else ''}"
        if line.startswith(word):
            return line


def _result(p: subprocess.Popen, timeout: float = 120) -> dict:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-3000:]
    line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_followers_wait_for_the_leader_then_later_ones_find_it_warm(tmp_path):
    leader = _start(PART, str(tmp_path), "k1", "3", "60")
    assert _wait_for(leader, "ENTERED").split()[1] == "leader"
    follower = _start(PART, str(tmp_path), "k1", "0", "60")
    other_key = _start(PART, str(tmp_path), "k2", "0", "60")  # another configuration
    lead, fol, other = _result(leader), _result(follower), _result(other_key)
    assert lead["role"] == "leader" and other["role"] == "leader" and other["waited_s"] == 0
    assert fol["role"] == "follower" and fol["waited_s"] > 1.5  # it waited for the leader
    assert fol["beats"] >= 3  # and kept its heartbeat going meanwhile
    assert (tmp_path / "wmforge" / "warm-k1").exists()
    later = _result(_start(PART, str(tmp_path), "k1", "0", "60"))
    assert later == {"role": "warm", "waited_s": 0.0, "beats": 0, "t": later["t"]}


def test_a_leader_killed_while_compiling_lets_the_followers_go(tmp_path):
    leader = _start(PART, str(tmp_path), "k", "600", "60")
    _wait_for(leader, "ENTERED leader")
    follower = _start(PART, str(tmp_path), "k", "0", "60")
    _wait_for(follower, "ENTERING")
    time.sleep(1.0)
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait(timeout=30)
    fol = _result(follower)
    # nothing was marked warm, so the follower compiles in the leader's place (it leads)
    assert fol["role"] == "leader" and 0.5 < fol["waited_s"] < 30
    # and, done, marks it warm for the next one
    assert _result(_start(PART, str(tmp_path), "k", "0", "60"))["role"] == "warm"


def test_a_follower_stops_waiting_after_wait_s(tmp_path):
    leader = _start(PART, str(tmp_path), "k", "8", "60")
    _wait_for(leader, "ENTERED leader")
    fol = _result(_start(PART, str(tmp_path), "k", "0", "1"))
    assert fol["role"] == "alone" and 1.0 <= fol["waited_s"] < 5
    assert _result(leader)["role"] == "leader"


def test_a_waiting_follower_names_the_leader_it_waits_for(tmp_path, monkeypatch, caplog):
    """The leader writes its pid and command into the lock file; a follower that waits past
    REPORT_S logs whom it waits for and whether that process is alive or is itself (a second
    open of the lock file in one process); one whose leader's marker appears while the lock
    is still held goes on warm; a leader that leaves takes its name out of the file."""
    import logging
    import os

    monkeypatch.setattr(cc, "REPORT_S", 0.2)
    lead = cc.FirstCompile(tmp_path, "k")
    assert lead.enter() == "leader"
    assert (tmp_path / "wmforge" / "lock-k").read_text().split()[0] == str(os.getpid())
    with caplog.at_level(logging.WARNING, logger=cc.__name__):
        fol = cc.FirstCompile(tmp_path, "k", wait_s=0.7)  # another open of the lock file
        assert fol.enter() == "alone"
    said = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    assert said and f"held by pid {os.getpid()}, this process" in said[0], said
    # the leader's marker written while the lock is still held (an inherited open of the
    # file, say): a waiting follower goes on warm at once, not after wait_s
    import threading

    threading.Timer(0.5, lambda: lead.marker.write_text("x")).start()
    late = cc.FirstCompile(tmp_path, "k", wait_s=30)
    assert late.enter() == "follower" and late.waited_s < 10
    lead.marker.unlink()
    lead.leave(ok=True)
    # the leader's name goes with it: a later wait is not reported as for this pid, gone
    assert (tmp_path / "wmforge" / "lock-k").read_bytes() == b""
    fd = os.open(tmp_path / "wmforge" / "lock-k", os.O_RDONLY)
    try:
        assert cc.holder(fd) == "holder unknown"
    finally:
        os.close(fd)
    (tmp_path / "wmforge" / "lock-k").write_text("999999999 gone-process\n")
    fd = os.open(tmp_path / "wmforge" / "lock-k", os.O_RDONLY)
    try:
        assert cc.holder(fd).startswith("held by pid 999999999, gone")
    finally:
        os.close(fd)


def test_slots_copies_of_a_level_share_its_stamp_and_a_replaced_one_does_not(tmp_path):
    """A node stages a level pack into each slot with copytree (mtime kept): every copy has
    the stamp of the pool's file, so the slots share one compile gate; the file rewritten in
    place has another."""
    import os
    import shutil

    from stages.engine.replay_inputs import file_stamp

    pool = tmp_path / "pool" / "Pack"
    pool.mkdir(parents=True)
    (pool / "level.glb").write_bytes(b"glTF" + bytes(60))
    os.utime(pool / "level.glb", ns=(1_700_000_000_123_456_789,) * 2)
    copies = [shutil.copytree(pool, tmp_path / f"slot{i}" / "Pack") for i in range(2)]
    stamps = {file_stamp(c / "level.glb") for c in copies} | {file_stamp(pool / "level.glb")}
    assert stamps == {"64:1700000000123456789"}
    (copies[0] / "level.glb").write_bytes(b"glTF" + bytes(61))
    assert file_stamp(copies[0] / "level.glb") not in stamps
    assert file_stamp(tmp_path / "none.glb") == "missing"


def test_real_graphs_compiled_once_then_loaded(tmp_path):
    """Two processes with the node's cache folder: the leader compiles two real graphs
    (Inductor's CPU back end); the follower waits and loads them from the cache, in a
    fraction of the time; the graphs are in the folder."""
    cache = tmp_path / "cache"
    leader = _start(COMPILE, str(cache))
    time.sleep(0.5)
    follower = _start(COMPILE, str(cache))
    lead, fol = _result(leader, 600), _result(follower, 600)
    roles = sorted([lead["role"], fol["role"]])
    assert roles == ["follower", "leader"], roles
    first, second = (lead, fol) if lead["role"] == "leader" else (fol, lead)
    assert second["waited_s"] > 0.5 * first["compile_s"]
    # the leader compiled both graphs; the follower compiled none, it loaded both (Inductor's
    # own cache counters: a timing ratio failed under a loaded 2-core machine)
    assert first["misses"] >= 2 and first["hits"] == 0, first
    assert second["hits"] >= 2 and second["misses"] == 0, second
    print(f"compile {first['compile_s']:.1f} s, load {second['compile_s']:.1f} s")
    assert any((cache / "fxgraph").rglob("*")), sorted(p.name for p in cache.iterdir())


def test_use_cache_sets_the_folder_unless_the_operator_did(tmp_path, no_cache_env):
    monkeypatch = no_cache_env
    assert cc.use_cache(None) is None and cc.ENV not in os.environ
    d = tmp_path / "a" / "b"
    assert cc.use_cache(d) == d and d.is_dir() and os.environ[cc.ENV] == str(d)
    assert os.environ[cc.TRITON_ENV] == str(d / "triton")  # Triton's own kernels beside
    monkeypatch.setenv(cc.ENV, str(tmp_path / "operator"))
    monkeypatch.setenv(cc.TRITON_ENV, str(tmp_path / "operator_triton"))
    assert cc.use_cache(tmp_path / "mine") == tmp_path / "operator"
    assert os.environ[cc.TRITON_ENV] == str(tmp_path / "operator_triton")
    monkeypatch.delenv(cc.ENV)
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match=r"render\.compile_cache_dir '.*file/sub': cannot make"):
        cc.use_cache(tmp_path / "file" / "sub")


def test_the_compute_renderers_first_frames_are_gated(sample_library, tmp_path,
                                                      no_cache_env):
    """The compute renderer with a compile cache: nothing is gated on the CPU (nothing is
    compiled there); gated as on a GPU, the first renderer of a configuration leads until its
    first colour frame (the meter frames included) and marks it warm; the next one finds it
    warm; the render worker's device.json names the folder. Each level is a configuration of
    its own (its lights and textures are compile-time constants): the first renderer meeting
    a second level leads that level's gate, under another key. A level file replaced in place
    (same path, another size or mtime) is loaded again and gated again, under a third key."""
    import os
    import shutil

    from stages.cluster.keys import render_settings
    from stages.config import load_params
    from stages.engine.instance_render import InstanceRenderer
    from tests.conftest import make_trajectories

    monkeypatch = no_cache_env
    trajs = make_trajectories(sample_library, tmp_path / "traj", 1, 3, levels=(
        "NatureValley/AlpineMeadow", "UrbanBlocks/Downtown"))
    traj = trajs / "NatureValley__AlpineMeadow" / "traj_0000"
    town = trajs / "UrbanBlocks__Downtown" / "traj_0000"
    cache = tmp_path / "cache"
    # AlpineMeadow's pack read from a copy (a slot's staged copy), to replace its level later
    nv = tmp_path / "nv"
    shutil.copytree(sample_library / "NatureValley", nv)
    path_map = {str(sample_library / "NatureValley"): str(nv)}
    rcfg = load_params(overrides=[
        "render.width=64", "render.height=36", "render.spatial_samples=1",
        "render.temporal_samples=1", "render.mask_scale=1", "render.warmup_frames=0",
        "render.meter_frames=2", "render.shadow_map_size=256", "render.preview=false",
        "render.backend=compute"]).render
    roles = []
    for run in ("first", "second"):
        ir = InstanceRenderer(tmp_path / run, render_settings(rcfg, 30), "p3headlessgl",
                              Path.cwd(), compile_cache=str(cache), path_map=path_map)
        try:
            t = ir._renderer().targets
            assert t.compile_cache == cache and t._first is None  # CPU: no compiles to gate
            t.gate_compiles = True
            gate = t.start_gate()
            seen = []
            real = t._draw
            monkeypatch.setattr(t, "_draw", lambda real=real, t=t, seen=seen: (
                seen.append((t.meter_on, t._first is not None)), real())[1])
            ir.render(traj, "traj_0000", "k" * 16)
            roles.append(gate.role)
            assert t._first is None  # the gate was left after the first colour frame
            # meter frames (and the prime) and the first colour frame ran gated, no later one
            first_colour = [m for m, _ in seen].index(False)
            assert all(g for _, g in seen[:first_colour + 1]) and not any(
                g for _, g in seen[first_colour + 1:])
            if run == "first":  # the same renderer meets a second level: a gate of its own
                seen.clear()
                ir.render(town, "traj_0001", "t" * 16)
                assert t._first is None and t._gated_level and "Downtown" in t._gated_level
                first_colour = [m for m, _ in seen].index(False)
                assert all(g for _, g in seen[:first_colour + 1]) and not any(
                    g for _, g in seen[first_colour + 1:])
            else:  # AlpineMeadow replaced in place (a new mtime): loaded and gated again
                meadow = nv / "NatureValley" / "Content" / "Maps" / "AlpineMeadow.glb"
                assert t._gated_level and "AlpineMeadow.glb@" in t._gated_level
                before, loads = t._gated_level, []
                real_load = ir.r.load_level
                monkeypatch.setattr(ir.r, "load_level", lambda *a, loads=loads, real_load=real_load,
                                    **k: (loads.append(1), real_load(*a, **k))[1])
                ns = meadow.stat().st_mtime_ns + 10**9
                os.utime(meadow, ns=(ns, ns))
                ir.render(traj, "traj_0002", "m" * 16)
                assert loads == [1] and t._first is None
                assert t._gated_level != before and "AlpineMeadow.glb@" in t._gated_level
        finally:
            ir.close()
    assert roles == ["leader", "warm"]
    warm = sorted((cache / "wmforge").glob("warm-*"))
    # AlpineMeadow's, Downtown's and the replaced AlpineMeadow's
    assert len(warm) == 3 and gate.marker in warm


def _small_compute_renderer(inst: Path, cache: Path):
    """A compute InstanceRenderer at 64 x 36 x 1 with the compile cache ``cache``."""
    from stages.cluster.keys import render_settings
    from stages.config import load_params
    from stages.engine.instance_render import InstanceRenderer

    rcfg = load_params(overrides=[
        "render.width=64", "render.height=36", "render.spatial_samples=1",
        "render.temporal_samples=1", "render.preview=false", "render.backend=compute"]).render
    return InstanceRenderer(inst, render_settings(rcfg, 30), "p3headlessgl", Path.cwd(),
                            compile_cache=str(cache))


def test_a_renderer_closed_inside_its_gate_lets_the_others_go(tmp_path, no_cache_env):
    """A leader closed before its first colour frame (its jobs failed after the meter
    frames, say) lets go of the lock then, not at the process's exit: the next renderer of
    the configuration in this process (or another) leads at once, and nothing is marked
    warm."""
    cache = tmp_path / "cache"
    ir = _small_compute_renderer(tmp_path / "r", cache)
    try:
        t = ir._renderer().targets
        gate = t.start_gate()
        assert t._gate() is gate and gate.role == "leader"  # as after a first meter frame
    finally:
        ir.close()
    nxt = cc.FirstCompile(cache, gate.key, wait_s=1.0)
    assert nxt.enter() == "leader" and nxt.waited_s == 0.0
    nxt.leave(ok=False)
    assert not gate.marker.exists()


def test_a_level_change_inside_a_gate_leaves_it_unmarked(tmp_path, no_cache_env):
    """A renderer whose job failed between a level's meter frames and its first colour frame
    (gate entered, never left) and that goes on to another level: that level's frames open
    a gate of their own (another key), and the first level's lock is let go without marking
    it warm (its colour graphs were never compiled), so another renderer leads it."""
    cache = tmp_path / "cache"
    ir = _small_compute_renderer(tmp_path / "r", cache)
    try:
        t = ir._renderer().targets
        t.gate_compiles = True  # as on a GPU
        t.replay.level_key = "Pack/a.glb"
        gate_a = t.start_gate()
        assert t._gate() is gate_a and gate_a.role == "leader"
        t.replay.level_key = "Pack/b.glb"  # the next job's level, gate A still held
        gate_b = t._gate()
        assert gate_b is not gate_a and gate_b.role == "leader" and gate_b.key != gate_a.key
        assert t._gated_level == "Pack/b.glb"
        other = cc.FirstCompile(cache, gate_a.key, wait_s=1.0)
        assert other.enter() == "leader" and other.waited_s == 0.0  # A's lock let go
        other.leave(ok=False)
        assert not gate_a.marker.exists()
        gate_b.leave(ok=True)
        assert gate_b.marker.exists()
        t._first = None
        t.replay.level_key = "Pack/a.glb"  # back to A: a gate again (A was never warm)
        again = t._gate()
        assert again is not None and again.key == gate_a.key and again.role == "leader"
        again.leave(ok=False)
        t._first = None
    finally:
        ir.close()


def test_after_a_killed_leader_one_follower_leads_and_the_others_wait_for_it(tmp_path):
    """A leader killed mid-compile leaves nothing warm: one of its followers takes over the
    compile and the others go on waiting for that one (not all compiling at once, which the
    gate is there to avoid); the one that finishes marks the configuration warm."""
    leader = _start(PART, str(tmp_path), "k", "600", "60")
    _wait_for(leader, "ENTERED leader")
    followers = [_start(PART, str(tmp_path), "k", "3", "60") for _ in range(2)]
    for p in followers:
        _wait_for(p, "ENTERING")
    time.sleep(1.0)
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait(timeout=30)
    got = sorted((_result(p) for p in followers), key=lambda r: r["role"])
    assert [r["role"] for r in got] == ["follower", "leader"], got
    assert got[0]["waited_s"] > got[1]["waited_s"] + 2.0  # it waited for the new leader
    assert (tmp_path / "wmforge" / "warm-k").exists()


def test_a_marker_that_cannot_be_written_leaves_the_frames_standing(tmp_path, monkeypatch,
                                                                     caplog):
    """A full or read-only cache disk: the leader's frames rendered, so ``leave`` must not
    raise out of the draw; the lock is let go, no marker claims the configuration warm, and
    the next renderer leads in turn."""
    first = cc.FirstCompile(tmp_path, "k1")
    assert first.enter() == "leader"

    def full(*_a: object, **_k: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    first.leave(ok=True)
    monkeypatch.undo()
    assert "cannot mark k1 warm" in caplog.text
    assert not first.marker.exists()
    assert cc.FirstCompile(tmp_path, "k1", wait_s=1).enter() == "leader"


def test_the_gate_key_says_which_leaders_path_shades(tmp_path, no_cache_env, monkeypatch):
    """Renderers shading the leaders with the Triton kernel compile other things than those
    with the torch graph: a warm marker of one must not let the other skip its wait. Decided
    as MergedShading decides it, before the scene exists (the gate is entered first)."""
    from stages.engine.compute import leaders_triton
    from stages.engine.compute.targets import ComputeTargets
    from tests.looks import look as make_look

    monkeypatch.setattr(leaders_triton, "available", lambda device: True)
    t = ComputeTargets(32, 18, 2, look=make_look(), compile_cache=str(tmp_path / "cc"))
    try:
        keys = {}
        for mode in ("triton", "torch", "auto", "triton:168"):
            t.leaders = mode  # render.compute_leaders
            keys[mode] = t._gate_key()
        assert keys["triton"] != keys["torch"]
        # a register cap is another binary of the kernel
        assert keys["triton:168"] not in (keys["triton"], keys["torch"])
        assert keys["auto"] == (keys["triton"] if leaders_triton.AUTO_TAKES_KERNEL
                                else keys["torch"])
    finally:
        t.close()
