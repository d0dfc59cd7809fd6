"""``wmforge unreal smoke`` on the fake editor process: the script a real UE 5.6 node runs,
in CI. Its report passes on the fake as it behaves like the engine, and names what fails when
the fake is told to fail like a misconfigured node (no -UseFixedTimeStep effect, an adapter
that falls back)."""

from __future__ import annotations

import json
import os
import threading

import pytest

from stages.config import UnrealConfig
from tests.test_unreal_engine import _kill_children, fake_editor
from tests.test_unreal_fake import ANIMS, MAP, MESHES, REPO, specs


def inprocess_launch(monkeypatch):
    """The launcher step in this process (the fake editor is still a process of its own):
    a non-root uid here, as on a node where the runner is not root."""
    from stages import unreal_smoke
    from stages.engine import unreal_launch

    monkeypatch.setattr(os, "geteuid", lambda: 1000)

    def launch(stage, target, env, watch, log_path, timeout_s):
        stop, gaps = threading.Event(), []
        w = threading.Thread(target=unreal_smoke._watch, args=(watch, stop, gaps), daemon=True)
        w.start()
        result: dict = {}
        th = threading.Thread(target=lambda: result.setdefault(
            "rc", unreal_launch.main([stage, str(target)])), daemon=True)
        th.start()
        th.join(timeout_s)
        stop.set()
        w.join()
        if th.is_alive():
            _kill_children()
            th.join(30)
        log_path.write_text("(in-process launcher: see captured output)\n")
        return result.get("rc", 124), "", max(gaps or [0.0])

    return launch


@pytest.fixture()
def world(tmp_path, monkeypatch):
    from tests.engine.course import build_course

    course = build_course(tmp_path / "course.glb")
    doc = {"maps": {MAP: {"file": str(course), "level_id": "smoke/level"}},
           "meshes": list(MESHES), "animations": list(ANIMS), "refuse_root": False,
           "vulkan_devices": ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"],
           "cold_start_s": 2.0}
    editor = fake_editor(tmp_path, doc)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("WMFORGE_FAKE_WORLD", str(tmp_path / "world.json"))
    monkeypatch.delenv("WMFORGE_GPU_UUID", raising=False)
    monkeypatch.delenv("WMFORGE_OWNER_LOCK_FD", raising=False)
    monkeypatch.chdir(REPO)
    return editor, doc


def run(tmp_path, monkeypatch, editor, devices, **kw):
    from stages.unreal_smoke import smoke

    cfg = UnrealConfig(editor=str(editor), project="/p/Render.uproject", exit_grace_s=5.0,
                       engine_warmup_frames=2)
    try:
        return smoke(cfg, MAP, specs()[0], tmp_path / "smoke", devices, frames=45, fps=30,
                     stall_timeout_s=1.5, timeout_s=300, log=lambda m: None,
                     launch=inprocess_launch(monkeypatch), size=(32, 18), **kw)
    finally:
        _kill_children()


def test_smoke_on_the_fake_passes_and_writes_its_report(tmp_path, monkeypatch, world):
    editor, _doc = world
    report = run(tmp_path, monkeypatch, editor, [0, 1])
    assert report == json.loads((tmp_path / "smoke" / "smoke.json").read_text())
    failed = {k: v for k, v in report["checks"].items() if not v["ok"]}
    assert report["ok"] and not failed, failed
    c = report["checks"]
    assert [s["index"] for s in c["devices"]["slots"]] == [0, 1]
    assert "Using device at index 1 of 2" in c["devices"]["slots"][1]["line"]
    assert c["cold_start"]["longest_silence_s"] < 1.5  # 2 s of shader compilation, alive
    assert c["stage1"]["fixed_step"] and c["stage1"]["frames"] == 45
    assert c["feet"]["samples"] >= 4 and c["facing"]["worst_deg"] < 1e-6
    assert c["fp_free_of_body"]["fp_camera_in_body"] and all(
        c["fp_free_of_body"]["fp_camera_in_body"])  # hiding the body mattered


def test_smoke_names_a_fallen_back_adapter(tmp_path, monkeypatch, world):
    editor, _doc = world
    report = run(tmp_path, monkeypatch, editor, [0, 2])  # device 2 does not exist
    c = report["checks"]
    assert not report["ok"] and not c["devices"]["ok"]
    assert [s["ok"] for s in c["devices"]["slots"]] == [True, False]
    assert "Falling back to first device" in c["devices"]["slots"][1]["line"]
    assert c["stage1"]["ok"] and c["fp_free_of_body"]["ok"]
