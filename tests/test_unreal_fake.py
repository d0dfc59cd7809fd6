"""The editor scripts (unreal/) on the fake ``unreal`` module backed by the embedded engine:
Stage I in PIE, Stage II's Level Sequence and MRQ job, the node-side encode, a crash mid-render
and its recovery."""

from __future__ import annotations

import json
import random
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from stages.config import UnrealConfig
from stages.core.engine_types import CharacterSpec
from stages.core.progress import COMPLETE, read_progress
from stages.core.trajectory import VIEWS, validate
from tests.engine.course import build_course
from tests.fakes.unreal import namespace as fu
from tests.fakes.unreal.editor import FakeEditor

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "unreal"
FRAMES = 90
MAP = "/Game/Course/Maps/Course"
MESHES = ("/Game/Chars/Alex/SK_Alex", "/Game/Chars/Bat/SK_Bat")
ANIMS = ("/Game/Chars/Anims/Walk", "/Game/Chars/Anims/Idle")
KEY = "0123456789abcdef"


def specs() -> list[CharacterSpec]:
    anims = {"W": ANIMS[0], "IDLE": ANIMS[1]}
    return [CharacterSpec("pack/alex", 0.3, 0.6, 1.8, model_path=MESHES[0], animations=anims),
            CharacterSpec("pack/bat", 0.25, 0.35, 1.2, walk_speed=1.2, model_path=MESHES[1],
                          animations=anims, yaw_correction_deg=90.0)]


def switching_indices(level_id: str, seed: int = 0) -> list[int]:
    """Two trajectory indices whose characters differ (the controller's own choice)."""
    pick = {i: random.Random(f"{seed}:{level_id}:{i}").randrange(2) for i in range(20)}
    a = 0
    b = next(i for i in range(1, 20) if pick[i] != pick[a])
    return [a, b]


def stage1_spec(folder: Path, out: Path, course: Path) -> dict:
    from stages.config import load_params

    cfg = load_params()
    return {
        "level_id": "test/course", "level_path": str(course), "load_path": "", "path_map": {},
        "scale": 1.0, "up_axis": "Z", "indices": switching_indices("test/course"),
        "frames": FRAMES, "fps": 30, "seed": 0, "engine": {"name": "unreal", "fps": 30},
        "characters": [asdict(s) for s in specs()],
        "actions": asdict(cfg.trajectories.actions), "spawn": asdict(cfg.trajectories.spawn),
        "cameras": asdict(cfg.trajectories.cameras), "camera_rays": True,
        "resolved_config": {}, "config_hash": KEY, "out_dir": str(out),
        "progress": str(folder / "progress.log"), "heartbeat": str(folder / "heartbeat"),
        "failures": str(folder / "failures.jsonl"), "unreal": asdict(UnrealConfig()),
        "ue_map": MAP, "map_on_command_line": True, "fps_note": "fixed step",
    }


def new_editor(course: Path, base_cm: float = 0.0, **kw) -> FakeEditor:
    assets = {p: fu.SkeletalMesh(p, height_cm=180.0, base_cm=base_cm) for p in MESHES}
    assets.update({p: fu.AnimSequence(p) for p in ANIMS})
    return FakeEditor({MAP: {"file": str(course), "level_id": "test/course"}}, assets, **kw)


@pytest.fixture(scope="module")
def stage1(tmp_path_factory):
    root = tmp_path_factory.mktemp("ue1")
    course = build_course(root / "course.glb")
    folder, out = root / "inst", root / "traj"
    folder.mkdir()
    spec = stage1_spec(folder, out, course)
    (folder / "spec.json").write_text(json.dumps(spec))
    ed = new_editor(course)
    rc = ed.run(SCRIPTS / "stage1_pie.py", {"WMFORGE_SPEC": str(folder / "spec.json")}, MAP)
    return {"rc": rc, "ed": ed, "spec": spec, "folder": folder, "out": out, "course": course,
            "driver": ed.script_globals.get("DRIVER")}


def test_stage1_writes_valid_trajectories_and_progress(stage1) -> None:
    assert stage1["rc"] == 0, stage1["ed"].log_lines[-5:]
    folder, out = stage1["folder"], stage1["out"]
    assert (folder / COMPLETE).exists()
    prog = read_progress(folder)
    names = [f"traj_{i:04d}" for i in stage1["spec"]["indices"]]
    assert sorted(prog) == names and all(v == (FRAMES, KEY) for v in prog.values())
    for n in names:
        frames = pd.read_parquet(out / n / "frames.parquet")
        cams = pd.read_parquet(out / n / "cameras.parquet")
        meta = json.loads((out / n / "meta.json").read_text())
        validate({c: frames[c].tolist() for c in frames}, {c: cams[c].tolist() for c in cams},
                 meta)
        assert meta["engine"] == "unreal" and meta["engine_version"] == "5.6.0-fake+embedded"
        assert len(frames) == FRAMES and len(cams) == FRAMES * len(VIEWS)
        # the capsule the engine used (read back from the capsule component)
        spec = next(s for s in specs() if s.character_id == meta["character_id"])
        assert frames["capsule_radius_m"].unique().tolist() == [pytest.approx(spec.capsule_radius)]
        assert frames["capsule_half_height_m"].unique().tolist() == [
            pytest.approx(spec.capsule_half_height)]
    lines = [x for x in stage1["ed"].log_lines if "wmforge: stage1: DONE" in x]
    assert len(lines) == 2


def test_each_frame_holds_the_state_its_own_input_produced(stage1) -> None:
    """Unreal resolves input in the world tick after the callback; the driver writes that
    tick's state as the frame's. A lagging record would pair IDLE frames with moving input."""
    ticks = stage1["ed"].world_ticks
    by_pos: dict[tuple, tuple[float, float]] = {}
    for _f, move, pos in ticks:
        by_pos.setdefault(tuple(round(v, 9) for v in pos), move)
    checked = mismatched = 0
    for n in (f"traj_{i:04d}" for i in stage1["spec"]["indices"]):
        fr = pd.read_parquet(stage1["out"] / n / "frames.parquet")
        for row in fr.itertuples():
            move = by_pos.get((round(row.pos_x, 9), round(row.pos_y, 9), round(row.pos_z, 9)))
            assert move is not None, f"{n} frame {row.frame}: position not from a world tick"
            checked += 1
            mismatched += (row.action == "IDLE") != (move == (0.0, 0.0))
    assert checked == 2 * FRAMES and mismatched == 0


def test_state_machine_order_pie_and_quit(stage1) -> None:
    d, ed = stage1["driver"], stage1["ed"]
    assert d.phases_seen == ["open_map", "start_pie", "wait_pie", "run", "stop_pie",
                             "wait_stop", "quit"]
    allowed = {"initialize": {"enter_runtime"}, "enter_runtime": {"next"},
               "next": {"prepare", "done"}, "prepare": {"warmup", "exit_runtime"},
               "warmup": {"loop", "prepare"}, "loop": {"exit_runtime", "respawn"},
               "respawn": {"warmup", "exit_runtime"}, "exit_runtime": {"cameras"},
               "cameras": {"next"}}
    states = ["initialize", *d.ctrl_states]
    assert states[1] == "enter_runtime" and states[-1] == "done"
    for a, b in zip(states, states[1:], strict=False):
        assert b in allowed[a], (a, b)
    assert states.count("cameras") == 2
    # PIE began before the first controller tick and ended after the last; keep-alive first
    assert [e for _f, e in ed.pie_log] == ["begin", "end"]
    assert ed.calls[0] == "set_keep_python_script_alive"
    assert ed.calls[-2:] == ["unregister_slate_post_tick_callback", "quit_editor"]


def test_character_switch_destroys_and_clears_the_previous_one(stage1) -> None:
    d = stage1["driver"]
    assert len(d.engine.destroyed) >= 2  # every trajectory's character, the last on close
    assert not stage1["ed"].pie_characters()


def test_without_clearing_the_switch_crashes_with_a_skeletal_assertion(stage1, tmp_path,
                                                                      monkeypatch) -> None:
    """Table 2: the previous model's skeletal state meets the next model. The fake engine
    asserts like Unreal did; the classifier names it from the log."""
    from stages.engine.unreal_log import classify_text

    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setitem(sys.modules, "unreal", fu)
    import ue_engine

    monkeypatch.setattr(ue_engine.UnrealPieEngine, "clear_character", lambda self: None)
    folder = tmp_path / "inst"
    folder.mkdir()
    spec = stage1_spec(folder, tmp_path / "traj", stage1["course"])
    (folder / "spec.json").write_text(json.dumps(spec))
    ed = new_editor(stage1["course"])
    rc = ed.run(SCRIPTS / "stage1_pie.py", {"WMFORGE_SPEC": str(folder / "spec.json")}, MAP)
    assert rc == 139
    assert classify_text("\n".join(ed.log_lines)).reason == "skeletal_assert_after_switch"
    assert len(read_progress(folder)) == 1  # the first trajectory was published before


def test_without_keep_alive_the_editor_exits_after_the_script(tmp_path) -> None:
    script = tmp_path / "once.py"
    script.write_text("import unreal\nunreal.register_slate_post_tick_callback(lambda dt: None)"
                      "\n")
    ed = FakeEditor({})
    assert ed.run(script, {}) == 0 and ed.frame == 0


# ---------------------------------------------------------------- Stage II


def stage2_instance(root: Path, stage1: dict) -> tuple[Path, dict]:
    from stages.cluster.keys import render_settings
    from tests.conftest import small_render_cfg

    inst = root / "inst2"
    inst.mkdir()
    rcfg = small_render_cfg(width=32, height=18, spatial_samples=3, temporal_samples=2,
                            warmup_frames=3)
    settings = render_settings(rcfg, 30)
    jobs = [{"name": n, "traj_dir": str(stage1["out"] / n), "key": KEY}
            for n in sorted(read_progress(stage1["folder"]))]
    ucfg = asdict(UnrealConfig(engine_warmup_frames=2, texture_pool_mb=4096))
    spec = {"level_id": "test/course", "settings": settings.as_dict(), "jobs": jobs, "unreal": ucfg,
            "ue_map": MAP, "map_on_command_line": True}
    (inst / "instance.json").write_text(json.dumps(spec))
    return inst, spec


def run_stage2(root: Path, stage1: dict, auto_play=(True, False), base_cm: float = 0.0
               ) -> tuple[FakeEditor, Path, dict, int]:
    inst, spec = stage2_instance(root, stage1)
    actors = [fu.LevelSequenceActor(auto_play=a) for a in auto_play]
    for a, name in zip(actors, ("Intro", "Manual"), strict=False):
        a.set_actor_label(name)
    ed = new_editor(stage1["course"], base_cm=base_cm, level_actors=actors)
    rc = ed.run(SCRIPTS / "stage2_mrq.py", {"WMFORGE_SPEC": str(inst / "instance.json")}, MAP)
    return ed, inst, spec, rc


@pytest.fixture(scope="module")
def stage2(stage1, tmp_path_factory):
    ed, inst, spec, rc = run_stage2(tmp_path_factory.mktemp("ue2"), stage1)
    return {"ed": ed, "inst": inst, "spec": spec, "rc": rc}


def test_stage2_sequence_keys_every_frame_with_explicit_scale(stage1, stage2) -> None:
    """Two sequences per trajectory (the four third-person views; fp with the character out of
    the main pass); the character keyed at its feet and turned by yaw + the model's
    correction (its root component is the mesh: nothing set on it survives the track)."""
    assert stage2["rc"] == 0, stage2["ed"].log_lines[-5:]
    ed = stage2["ed"]
    pkg = f"/Game/Wmforge/Sequences/{stage2['inst'].name}"
    names = [f"{j['name']}_{p}" for j in stage2["spec"]["jobs"] for p in ("views", "fp")]
    assert sorted(ed.deleted) == sorted(f"{pkg}/{n}.{n}" for n in names)  # cleaned up
    for job in stage2["spec"]["jobs"]:
        frames = pd.read_parquet(Path(job["traj_dir"]) / "frames.parquet")
        cams = pd.read_parquet(Path(job["traj_dir"]) / "cameras.parquet")
        meta = json.loads((Path(job["traj_dir"]) / "meta.json").read_text())
        corr = float(meta["character"]["yaw_correction_deg"] or 0.0)
        n = len(frames)
        for pass_name, views in (("views", ("back", "left", "right", "top")), ("fp", ("fp",))):
            name = f"{job['name']}_{pass_name}"
            seq = ed.sequences[f"{pkg}/{name}.{name}"]
            assert (seq.start, seq.end, seq.display_rate.numerator) == (0, n, 30)
            char = next(b for b in seq.bindings if isinstance(b.object, fu.SkeletalMeshActor))
            assert char.object.skeletal_mesh_component.render_in_main_pass == (pass_name ==
                                                                               "views")
            ch = {c.get_name(): c.keys for c in char.transform().channels}
            assert all(sorted(ch[k]) == list(range(n)) for k in ch)  # 9 channels x every frame
            assert [ch["Scale.X"][k] for k in range(n)] == frames["scale_x"].tolist()
            assert ch["Location.Y"][5] == pytest.approx(-frames["pos_y"][5] * 100)
            assert ch["Location.Z"][5] == pytest.approx(frames["pos_z"][5] * 100)  # the feet
            want = -(frames["yaw_deg"][5] + corr)
            assert (ch["Rotation.Z"][5] - want) % 360 == pytest.approx(0.0, abs=1e-6) or \
                (ch["Rotation.Z"][5] - want) % 360 == pytest.approx(360.0, abs=1e-6)
            # animation sections cover the frames; root bone locked
            anim = next(t for t in char.tracks
                        if isinstance(t, fu.MovieSceneSkeletalAnimationTrack))
            assert anim.sections and all(s.params.animation.get_editor_property(
                "force_root_lock") for s in anim.sections)
            cams_b = [b for b in seq.bindings if isinstance(b.object, fu.CineCameraActor)]
            assert sorted(b.object.label for b in cams_b) == sorted(views)
            for b in cams_b:
                rows = cams[cams["view"] == b.object.label].sort_values("frame")
                cc = {c.get_name(): c.keys for c in b.transform().channels}
                assert sorted(cc["Location.X"]) == list(range(n))
                assert cc["Location.Y"][7] == pytest.approx(-rows["pos_y"].iloc[7] * 100)
                f, _r, _u = fu.camera_basis(fu.Rotator(cc["Rotation.X"][7], cc["Rotation.Y"][7],
                                                       cc["Rotation.Z"][7]))
                w, x, y, z = (rows[c].iloc[7] for c in ("rot_w", "rot_x", "rot_y", "rot_z"))
                fwd_cv = (2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y))
                assert f == pytest.approx(fwd_cv, abs=1e-6)  # looks where the contract says
            cut = next(t for t in seq.tracks if isinstance(t, fu.MovieSceneCameraCutTrack))
            assert cut.sections[0].range == (0, n) and cut.sections[0].camera in cams_b


def test_stage2_stands_a_model_centred_on_its_origin_on_its_lowest_point(stage1, tmp_path):
    """``pos`` means the character's lowest point for every kind of model (issue #33): a mesh
    whose origin is its centre (a flying drone's, base -90 cm of 180 cm) is keyed 90 cm x scale
    above the recorded position, so what MRQ draws stands on it, not sunk half into the floor."""
    ed, _inst, spec, rc = run_stage2(tmp_path, stage1, base_cm=-90.0)
    assert rc == 0, ed.log_lines[-5:]
    checked = 0
    for job in spec["jobs"]:
        frames = pd.read_parquet(Path(job["traj_dir"]) / "frames.parquet")
        got = [s for s in ed.world_states if s["kind"] == "sample" and s.get("sub", 0) == 0
               and s["job"].split(":")[0] == job["name"]]
        assert got
        for s in got:
            row = frames.iloc[s["frame"]]
            (c,) = s["characters"]
            assert c["lowest"] == pytest.approx((row.pos_x, row.pos_y, row.pos_z), abs=1e-6)
            assert c["feet"][2] == pytest.approx(row.pos_z + 0.9 * row.scale_z, abs=1e-6)
            checked += 1
    assert checked >= 2 * FRAMES


def test_stage2_removes_auto_play_actors_and_sets_mrq_from_config(stage2) -> None:
    ed, inst, spec = stage2["ed"], stage2["inst"], stage2["spec"]
    assert json.loads((inst / "sanitized.json").read_text()) == {"removed": ["Intro"]}
    assert [a.label for a in ed.editor_world.actors if isinstance(a, fu.LevelSequenceActor)
            ] == ["Manual"]
    assert len(ed.renders) == 2 * len(spec["jobs"])  # the views job and the fp job
    st = spec["settings"]
    for (jobs, ex), job in zip(ed.renders, [j for j in spec["jobs"] for _ in (0, 1)],
                               strict=True):
        (mj,) = jobs
        s = mj.config.settings
        aa = s[fu.MoviePipelineAntiAliasingSetting]
        assert (aa.spatial_sample_count, aa.temporal_sample_count) == (3, 2)
        assert (aa.render_warm_up_count, aa.engine_warm_up_count) == (3, 2)
        out = s[fu.MoviePipelineOutputSetting]
        assert (out.output_resolution.x, out.output_resolution.y) == (st["width"], st["height"])
        assert out.output_directory.path == str(inst / "frames" / job["name"])
        assert s[fu.MoviePipelineCameraSetting].render_all_cameras
        assert fu.MoviePipelineImageSequenceOutput_PNG in s
        assert s[fu.MoviePipelineGameOverrideSetting].flush_streaming_managers
        cv = s[fu.MoviePipelineConsoleVariableSetting].cvars
        assert cv["r.Streaming.PoolSize"] == 4096 and cv["r.Streaming.FullyLoadUsedTextures"] == 1
        assert ex.allow_unsaved and mj.map.path == MAP + ".Course"  # an object path
    rendered = [json.loads(x) for x in (inst / "rendered.jsonl").read_text().splitlines()]
    assert [r["trajectory"] for r in rendered] == [j["name"] for j in spec["jobs"]]
    assert all(r["ok"] and r["mrq"][p]["spatial_samples"] == 3 for r in rendered
               for p in ("views", "fp"))
    assert sum("wmforge: stage2: rendered" in x for x in ed.log_lines) == len(spec["jobs"])
    assert (inst / "ENGINE_DONE").exists() and ed.calls[-1] == "quit_editor"


def test_node_side_verifies_encodes_then_deletes_frames(stage2) -> None:
    from stages.engine.unreal_frames import finish_trajectory
    from stages.media.video import count_frames

    inst, spec = stage2["inst"], stage2["spec"]
    job = spec["jobs"][0]
    fdir = inst / "frames" / job["name"]
    assert all(len(list((fdir / v).glob("*.png"))) == FRAMES for v in VIEWS)
    rmeta = finish_trajectory(fdir, Path(job["traj_dir"]), inst / job["name"], job["name"],
                              KEY, spec["settings"])
    for v in VIEWS:
        assert count_frames(inst / job["name"] / f"{v}.mp4") == FRAMES
        assert not (fdir / v).exists()  # deleted only after the videos verified
    assert count_frames(inst / job["name"] / "preview.mp4") == FRAMES
    assert rmeta["sha256"]["back.mp4"] and rmeta["engine"] == "unreal"


def test_a_missing_frame_fails_and_keeps_the_images(stage2) -> None:
    from stages.engine.unreal_frames import FramesError, finish_trajectory

    inst, spec = stage2["inst"], stage2["spec"]
    job = spec["jobs"][1]
    fdir = inst / "frames" / job["name"]
    victim = sorted((fdir / "left").glob("*.png"))[10]
    saved = victim.read_bytes()
    victim.unlink()
    with pytest.raises(FramesError, match="left") as e:
        finish_trajectory(fdir, Path(job["traj_dir"]), inst / "x", job["name"], KEY,
                          spec["settings"])
    assert e.value.reason == "frames_missing"
    assert len(list((fdir / "back").glob("*.png"))) == FRAMES
    victim.write_bytes(saved)


def test_a_camera_taken_by_a_level_sequence_is_found_in_the_frames(stage1, tmp_path,
                                                                   monkeypatch) -> None:
    """Table 2: with the auto-play actor left in the level, every camera shows its showcase
    view; the node side sees a still picture while the recorded camera moves."""
    from stages.engine.unreal_frames import FramesError, finish_trajectory

    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setitem(sys.modules, "unreal", fu)
    import ue_sequence

    monkeypatch.setattr(ue_sequence, "sanitize_level", lambda log: [])
    ed, inst, spec, rc = run_stage2(tmp_path, stage1, auto_play=(True,))
    assert rc == 0
    job = spec["jobs"][0]
    with pytest.raises(FramesError) as e:
        finish_trajectory(inst / "frames" / job["name"], Path(job["traj_dir"]),
                          inst / job["name"], job["name"], KEY, spec["settings"])
    assert e.value.reason == "sequence_took_camera"
    assert not (inst / job["name"]).exists()


# ---------------------------------------------------------------- the launcher and a crash


def test_crash_mid_render_leaves_only_finished_trajectories(stage1, tmp_path, monkeypatch,
                                                            capsys) -> None:
    """The fake editor process crashes (SIGSEGV) after MRQ finished the first trajectory (its
    views job and its fp job); the launcher
    had verified, encoded and published that one; recovery keeps it and nothing else.
    The launcher runs here with a non-root uid (Unreal refuses root; this machine's Python is
    readable by root only, so no other user can run it)."""
    import os

    from stages.cluster.recovery import recover_instance
    from stages.engine import unreal_launch

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    inst, spec = stage2_instance(tmp_path, stage1)
    world = {"maps": {MAP: {"file": str(stage1["course"]), "level_id": "test/course"}},
             "meshes": list(MESHES), "animations": list(ANIMS), "crash_after_jobs": 2,
             "refuse_root": False}
    (tmp_path / "world.json").write_text(json.dumps(world))
    editor = tmp_path / "UnrealEditor-Cmd"
    editor.write_text(f"#!/bin/sh\nexec {sys.executable} -m tests.fakes.unreal.editor_process "
                      '"$@"\n')
    editor.chmod(0o755)
    spec["unreal"]["editor"], spec["unreal"]["project"] = str(editor), "/p/Render.uproject"
    (inst / "instance.json").write_text(json.dumps(spec))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("WMFORGE_FAKE_WORLD", str(tmp_path / "world.json"))
    monkeypatch.delenv("WMFORGE_GPU_UUID", raising=False)
    monkeypatch.delenv("WMFORGE_OWNER_LOCK_FD", raising=False)
    monkeypatch.chdir(REPO)
    assert unreal_launch.main(["stage2", str(inst)]) == 1
    out = capsys.readouterr().out
    assert "log reason signal_crash" in out and "Caught signal 11" in out, out[-2000:]
    assert "editor exit code -11" in out
    first = spec["jobs"][0]["name"]
    assert list(read_progress(inst)) == [first]
    assert not (inst / COMPLETE).exists()
    recover_instance(inst, lambda m: None)
    kept = sorted(x.name for x in inst.iterdir() if x.is_dir())
    assert kept == [first]  # the second job's frames and folders are gone
    assert all((inst / first / f"{v}.mp4").exists() for v in VIEWS)


def test_an_editor_that_exits_0_without_frames_has_failed(stage1, tmp_path, monkeypatch,
                                                          capsys) -> None:
    """A command-line MRQ render exits 0 when it failed (FACTS: Unreal): success is judged by
    the frames and progress lines, never by the exit code."""
    import os

    from stages.engine import unreal_launch

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    inst, spec = stage2_instance(tmp_path, stage1)
    editor = tmp_path / "UnrealEditor-Cmd"
    editor.write_text("#!/bin/sh\necho '[2025.01.01-00.00.01:000][  4]LogMovieRenderPipeline: "
                      "MoviePipelineLinearExecutorBase finished 1 jobs in +00:00:01.000.'\n"
                      "exit 0\n")
    editor.chmod(0o755)
    spec["unreal"]["editor"], spec["unreal"]["project"] = str(editor), "/p/Render.uproject"
    (inst / "instance.json").write_text(json.dumps(spec))
    monkeypatch.delenv("WMFORGE_GPU_UUID", raising=False)
    monkeypatch.delenv("WMFORGE_OWNER_LOCK_FD", raising=False)
    assert unreal_launch.main(["stage2", str(inst)]) == 1
    out = capsys.readouterr().out
    assert "editor exit code 0" in out and "no completion marker" in out
    assert not (inst / COMPLETE).exists() and not read_progress(inst)


def test_stage2_leaves_when_every_step_fails(stage1, tmp_path, monkeypatch) -> None:
    """A failure that repeats on every frame (here: no MRQ subsystem) ends the editor instead of
    spinning; each trajectory gets a failed line the node side turns into a failure row."""
    ed_inst, spec = stage2_instance(tmp_path, stage1)
    ed = new_editor(stage1["course"])
    monkeypatch.delitem(ed.subsystems, fu.MoviePipelineQueueSubsystem)
    rc = ed.run(SCRIPTS / "stage2_mrq.py", {"WMFORGE_SPEC": str(ed_inst / "instance.json")}, MAP,
                max_frames=200)
    assert rc == 0 and ed.calls[-1] == "quit_editor"
    rows = [json.loads(x) for x in (ed_inst / "rendered.jsonl").read_text().splitlines()]
    assert [r["ok"] for r in rows] == [False, False]
    assert all("MoviePipelineQueueSubsystem unavailable" in r["detail"] for r in rows)
