"""render.readback=pbo (issue #30 item 2, the GL half): frames leave the GL buffers through
pixel-pack buffers and fences, pipelined; on the real engine (Mesa llvmpipe here) at 64x36.

The sync path is the reference: pbo must give the same bytes (decoded video pixels, masks,
meta.json), every frame exactly once and in order (the last ones flushed), and let go of every
fence and read-back slot after an error mid-trajectory."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from stages.cluster.keys import render_settings
from stages.config import ConfigError, load_params
from stages.core.trajectory import VIEWS
from stages.engine.instance_render import InstanceRenderer, _Fail
from stages.media.video import read_frames
from tests.conftest import make_trajectories, small_render_cfg
from tests.posed_frames import PosedFrames

FRAMES = 10


def _cfg():
    return small_render_cfg(width=64, height=36, spatial_samples=2, temporal_samples=1,
                            mask_scale=1, meter_frames=2, warmup_frames=1, preview="false")


@pytest.fixture(scope="module")
def traj(sample_library, tmp_path_factory) -> Path:
    out = make_trajectories(sample_library, tmp_path_factory.mktemp("traj"), 1, FRAMES)
    return out / "NatureValley__AlpineMeadow" / "traj_0000"


def _render(traj: Path, out: Path, readback: str, name: str = "t") -> tuple[dict, dict]:
    """One trajectory rendered end to end: (meta.json, decoded frames per view)."""
    ir = InstanceRenderer(out, render_settings(_cfg(), 30), "p3headlessgl", Path.cwd(),
                          readback=readback)
    try:
        meta = ir.render(traj, name, "k" * 16)
    finally:
        ir.close()
    return meta, {v: read_frames(out / name / f"{v}.mp4") for v in VIEWS}


@pytest.fixture(scope="module")
def sync_render(traj, tmp_path_factory):
    return _render(traj, tmp_path_factory.mktemp("sync"), "sync")


def _digest(colors: dict, masks: dict) -> str:
    h = hashlib.sha256()
    for v in VIEWS:
        h.update(np.ascontiguousarray(colors[v]).tobytes())
        h.update(np.packbits(masks[v]).tobytes())
    return h.hexdigest()


@contextmanager
def _posed(out: Path, traj: Path, readback: str) -> Iterator[PosedFrames]:
    ir = InstanceRenderer(out, render_settings(_cfg(), 30), "p3headlessgl", Path.cwd(),
                          readback=readback)
    try:
        yield PosedFrames(ir, traj)
    finally:
        ir.close()


def _pipelined(pf, n: int) -> list[str]:
    """Frames 0..n-1 submitted and collected the way the frame loop does (collect once more
    than ``lag`` are in flight, then flush): digests of the collected frames, in order."""
    r, got = pf.ir.r, []
    for f in range(n):
        pose = pf.pose(f, 0.07 * f)
        r.submit([pose], pose, 0.0)
        while r.targets.in_flight > r.lag:
            got.append(_digest(*r.collect()))
    while r.targets.in_flight:
        got.append(_digest(*r.collect()))
    return got


def test_pbo_renders_the_same_decoded_frames_and_meta_as_sync(traj, sync_render, tmp_path):
    meta_s, frames_s = sync_render
    meta_p, frames_p = _render(traj, tmp_path, "pbo")
    for v in VIEWS:
        assert len(frames_s[v]) == len(frames_p[v]) == FRAMES, v
        assert all(np.array_equal(a, b) for a, b in zip(frames_s[v], frames_p[v], strict=True))
    assert frames_s["back"][0].std() > 5  # a real picture, not a blank one
    # the gate saw the same masks; the videos are the same bytes
    assert meta_p["alignment"] == meta_s["alignment"]
    assert meta_p["alignment"]["aligned_frames"] != {v: 0 for v in ("back", "left", "right",
                                                                      "top")}
    assert meta_p["sha256"] == meta_s["sha256"]


def test_every_frame_is_collected_once_in_order_including_the_last(traj, tmp_path):
    """Seven distinct frames through the ring (lag 2): the same frames, colour and mask, in
    the same order as sync's draw(); nothing left in flight, every slot free again."""
    n = 7
    with _posed(tmp_path / "s", traj, "sync") as pf:
        ref = []
        for f in range(n):
            pose = pf.pose(f, 0.07 * f)
            ref.append(_digest(*pf.ir.r.render([pose], pose, 0.0)[:2]))
    assert len(set(ref)) == n  # distinct frames: a reordering or a repeat would show
    with _posed(tmp_path / "p", traj, "pbo") as pf:
        r, t = pf.ir.r, pf.ir.r.targets
        assert r.lag == 2 and t.pbo.slots == 3
        assert _pipelined(pf, n) == ref
        assert t.in_flight == 0 and t.pbo.free_slots == 3
        # a lone frame (fewer frames than the lag) comes out at the flush
        assert _pipelined(pf, 1) == ref[:1]
        with pytest.raises(RuntimeError, match=r"collect\(\) with no frame submitted"):
            t.collect()
        # more frames in flight than slots is refused, never overwritten
        pose = pf.pose(0, 0.0)
        for _ in range(3):
            r.submit([pose], pose, 0.0)
        with pytest.raises(RuntimeError, match="all 3 read-back slots"):
            r.submit([pose], pose, 0.0)
        assert [_digest(*r.collect()) for _ in range(3)] == ref[:1] * 3
        assert t.pbo.times.frames == n + 1 + 3 and t.pbo.free_slots == 3


def test_an_error_while_frames_are_in_flight_leaks_nothing(traj, tmp_path, monkeypatch):
    """An exception raised mid-clip with frames in flight: the trajectory fails with a reason,
    every fence and slot is let go, and the same renderer then renders it whole and right."""
    from stages.engine import alignment_gate

    real = alignment_gate.AlignmentGate.check
    seen = []

    def failing(self, f, *a, **kw):
        seen.append(f)
        if f == 4:
            raise OSError(5, "injected I/O error at frame 4")
        return real(self, f, *a, **kw)

    ir = InstanceRenderer(tmp_path, render_settings(_cfg(), 30), "p3headlessgl", Path.cwd(),
                          readback="pbo")
    try:
        monkeypatch.setattr(alignment_gate.AlignmentGate, "check", failing)
        with pytest.raises(_Fail) as err:
            ir.render(traj, "t", "k" * 16)
        assert err.value.reason == "encode_failed" and "frame 4" in err.value.detail
        t = ir.r.targets
        assert seen == [0, 1, 2, 3, 4]  # frames 5 and 6 were submitted, never collected
        assert t.in_flight == 0 and t.pbo.free_slots == t.pbo.slots
        assert not (tmp_path / "t").exists() or not any((tmp_path / "t").glob("*.mp4"))
        monkeypatch.setattr(alignment_gate.AlignmentGate, "check", real)
        meta = ir.render(traj, "t", "k" * 16)
        assert meta["frame_count"] == FRAMES
    finally:
        ir.close()


def test_an_error_inside_the_read_back_frees_its_slot(traj, tmp_path, monkeypatch):
    """A GL failure while a frame's reads are issued (inside Panda3D's draw callback) is raised
    by submit(); the slot is free again and the next frames are right."""
    from stages.engine import gl_readback

    with _posed(tmp_path, traj, "pbo") as pf:
        r = pf.ir.r
        pose = pf.pose(2, 0.1)
        good = _digest(*r.render([pose], pose, 0.0)[:2])
        real = gl_readback.PboReadback._issue

        def broken(self, f, which):
            raise RuntimeError("render.readback=pbo: injected GL failure")

        monkeypatch.setattr(gl_readback.PboReadback, "_issue", broken)
        with pytest.raises(RuntimeError, match="injected GL failure"):
            r.submit([pose], pose, 0.0)
        t = r.targets
        assert t.in_flight == 0 and t.pbo.free_slots == t.pbo.slots
        monkeypatch.setattr(gl_readback.PboReadback, "_issue", real)
        assert _digest(*r.render([pose], pose, 0.0)[:2]) == good


def test_a_bad_readback_setting_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"render\.readback is 'async'; expected sync or pbo"):
        load_params(overrides=["render.readback=async"])
    assert load_params(overrides=[]).render.readback == "pbo"
    assert load_params(overrides=["render.readback=sync"]).render.readback == "sync"
    from stages.engine.look import Look
    from stages.engine.render_targets import RenderTargets

    look = Look.from_settings(render_settings(_cfg(), 30))
    with pytest.raises(ValueError, match=r"render\.readback is 'PBO'; expected sync or pbo"):
        RenderTargets(64, 36, look=look, readback="PBO")


def test_readback_is_not_part_of_the_render_key(traj):
    """The same bytes either way: switching it must not re-render finished trajectories."""
    s = render_settings(_cfg(), 30)
    assert "readback" not in json.dumps(s.as_dict())


class _fake_fence_gl:  # noqa: N801 - a stand-in for the GL calls of the fence wait
    """glClientWaitSync of a fence the GPU signals ``after_s`` from now; counts the polls."""

    def __init__(self, after_s: float):
        import time

        self.ready_at = time.perf_counter() + after_s
        self.polls = 0
        self.timeouts: set[int] = set()

    def glClientWaitSync(self, fence, flags, timeout):  # noqa: N802 - GL's name
        import time

        from stages.engine import gl_calls as g

        self.polls += 1
        self.timeouts.add(timeout)
        return (g.GL_ALREADY_SIGNALED if time.perf_counter() >= self.ready_at
                else g.GL_TIMEOUT_EXPIRED)

    def glGetError(self):  # noqa: N802 - GL's name
        return 0


def test_the_fence_wait_sleeps_instead_of_spinning(monkeypatch):
    """A frame the GPU finishes 60 ms later: a handful of non-blocking polls with sleeps
    between them (a spin would poll many thousand times and burn the 60 ms of CPU), and a
    fence never signalled ends in a clear error rather than a hang."""
    import time
    from types import SimpleNamespace

    from stages.engine import gl_readback

    t0, c0 = time.perf_counter(), time.thread_time()
    fake = _fake_fence_gl(0.06)
    rb = SimpleNamespace(gl=fake, times=gl_readback.ReadbackTimes())
    gl_readback.PboReadback._wait(rb, object())
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    assert wall >= 0.06 and fake.timeouts == {0}  # only polls, never a blocking driver wait
    assert fake.polls < 150 and cpu < 0.5 * wall, (fake.polls, cpu, wall)
    assert rb.times.waits == 1 and rb.times.wait_s >= 0.055
    monkeypatch.setattr(gl_readback, "FENCE_TIMEOUT_S", 0.05)
    rb.gl = _fake_fence_gl(3600.0)
    with pytest.raises(RuntimeError, match="not signalled within"):
        gl_readback.PboReadback._wait(rb, object())
