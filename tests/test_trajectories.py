"""Stage I end to end on the real engine: contract, determinism, resume, failures, cameras."""

import json
import math
import shutil

import pandas as pd
import pytest

from stages.config import ConfigError, load_params
from stages.core.cameras import CameraRigConfig, compute_tracks
from stages.core.engine_types import CharacterSpec
from stages.core.stage1 import Stage1Controller
from stages.core.stage1_config import ActionConfig, SpawnConfig
from stages.core.trajectory import TrajectoryError, action_stats, validate
from stages.engine.base import make_engine
from stages.inventory import run_inventory
from stages.trajectories import run_trajectories
from tests.engine.course import WALL_X, build_course


@pytest.fixture(scope="module")
def inv(sample_library):
    cfg = load_params()
    res = run_inventory(sample_library, cfg.inventory, "overrides.yaml")
    return res.levels, res.characters


def _cfg(**sets):
    over = ["trajectories.per_level=2", "trajectories.frames=120",
            "trajectories.levels=[NatureValley/AlpineMeadow,InteriorKit/Apartment]"]
    return load_params(overrides=over + [f"{k}={v}" for k, v in sets.items()])


def _read(d):
    f = pd.read_parquet(d / "frames.parquet")
    c = pd.read_parquet(d / "cameras.parquet")
    return f, c, json.loads((d / "meta.json").read_text())


def test_contract_determinism_and_resume(inv, sample_library, tmp_path):
    levels, chars = inv
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_trajectories(_cfg(), levels, chars, sample_library, a, log=lambda s: None).empty
    run_trajectories(_cfg(), levels, chars, sample_library, b, log=lambda s: None)
    dirs = sorted(p.relative_to(a) for p in a.glob("*/traj_*"))
    assert len(dirs) == 4
    for d in dirs:
        for name in ("frames.parquet", "cameras.parquet", "meta.json"):
            assert (a / d / name).read_bytes() == (b / d / name).read_bytes(), (d, name)
        f, c, meta = _read(a / d)
        validate({k: f[k].tolist() for k in f}, {k: c[k].tolist() for k in c}, meta)
        assert len(f) == 120 and len(c) == 120 * 5 and meta["frame_count"] == 120
        assert f["event"].iloc[0] == "spawn"
        assert set(f["action"]) <= {"W", "A", "S", "D", "WA", "WD", "SA", "SD", "IDLE"}
        stats = meta["action_stats"]
        assert sum(stats["shares"].values()) == pytest.approx(1.0)
    # resume: remove one trajectory; only that one is produced again
    victim = a / dirs[1]
    keep = a / dirs[0]
    keep_mtime = (keep / "meta.json").stat().st_mtime_ns
    shutil.rmtree(victim)
    run_trajectories(_cfg(), levels, chars, sample_library, a, log=lambda s: None)
    assert (victim / "meta.json").read_bytes() == (b / dirs[1] / "meta.json").read_bytes()
    assert (keep / "meta.json").stat().st_mtime_ns == keep_mtime
    # a changed config re-produces (its hash differs)
    run_trajectories(_cfg(**{"trajectories.actions.hold_min_frames": 5}), levels, chars,
                     sample_library, a, log=lambda s: None)
    assert (keep / "meta.json").stat().st_mtime_ns != keep_mtime


def test_camera_relative_mode_turns_toward_motion(inv, sample_library, tmp_path):
    levels, chars = inv
    cfg = _cfg(**{"trajectories.actions.coordinates": "camera",
                  "trajectories.actions.weights":
                      "{W: 0, A: 0, S: 0, D: 1.0, WA: 0, WD: 0, SA: 0, SD: 0, IDLE: 0}",
                  "trajectories.actions.hold_min_frames": 120,
                  "trajectories.actions.hold_max_frames": 120})
    run_trajectories(cfg, levels, chars, sample_library, tmp_path, log=lambda s: None)
    f, _, _ = _read(sorted(tmp_path.glob("*/traj_0000"))[0])
    # holding D (right) in camera coordinates: the character turns to face its motion
    last = f.iloc[-1]
    move = math.degrees(math.atan2(last.vel_y, last.vel_x))
    assert abs((move - last.yaw_deg + 180) % 360 - 180) < 20


def test_bad_action_distribution_is_a_config_error():
    with pytest.raises(ConfigError, match=r"trajectories\.actions\.weights.*sum"):
        load_params(overrides=["trajectories.actions.weights={W: 0.5, A: 0.2}"])
    with pytest.raises(ConfigError, match=r"negative"):
        load_params(overrides=["trajectories.actions.weights={W: 1.2, A: -0.2}"])
    with pytest.raises(ConfigError, match=r"unknown action"):
        load_params(overrides=["trajectories.actions.weights={W: 0.5, JUMP: 0.5}"])


def test_validator_names_file_column_row():
    frames = {"frame": [0, 1], "t": [0.0, 1 / 30], "action": ["W", "W"]}
    with pytest.raises(TrajectoryError, match="frames.parquet: missing column"):
        validate(frames, {}, {})
    from stages.core.trajectory import FRAME_COLUMNS

    full = {c: [0.0, 0.0] for c in FRAME_COLUMNS}
    full.update(frame=[0, 1], action=["W", "W"], event=["spawn", "none"], rot_w=[1.0, 1.0],
                segment=[0, 0], grounded=[True, True])
    full["pos_z"] = [0.0, float("nan")]
    with pytest.raises(TrajectoryError, match=r"frames.parquet: column 'pos_z' row 1"):
        validate(full, {}, {})
    full["pos_z"] = [0.0, 0.0]
    full["action"] = ["W", "JUMP"]
    with pytest.raises(TrajectoryError, match=r"column 'action' row 1"):
        validate(full, {}, {})


def test_no_walkable_region_is_a_failure(tmp_path):
    from stages.assetgen.levels import LevelBuilder
    from stages.assetgen.primitives import ramp

    b = LevelBuilder("Steep", "day", 16, 0)
    b.part("Cliff", ramp(10.0, 40.0, 70.0, 1.0, (-5, 0, 0)), "rock")
    level = tmp_path / "steep.glb"
    level.write_bytes(b.to_glb())
    eng = make_engine("embedded")
    spec = CharacterSpec("t/h", 0.3, 0.6, 1.8)
    ctrl = Stage1Controller(eng, str(level), "t/steep", [spec], [0], 60, 30, 0, ActionConfig(),
                            SpawnConfig(max_attempts=5), CameraRigConfig())
    res = ctrl.run(max_ticks=100_000)
    assert res[0].failure == "no_walkable_region" and not res[0].frames
    assert ctrl.done


def test_state_machine_ticks_through_states(tmp_path):
    course = build_course(tmp_path / "course.glb")
    eng = make_engine("embedded")
    spec = CharacterSpec("t/h", 0.3, 0.6, 1.8)
    ctrl = Stage1Controller(eng, str(course), "t/course", [spec], [0, 1], 40, 30, 3,
                            ActionConfig(), SpawnConfig(), CameraRigConfig())
    seen = []
    while not ctrl.done:
        if not seen or seen[-1] != ctrl.state:
            seen.append(ctrl.state)
        ctrl.tick()
    assert seen[:6] == ["initialize", "enter_runtime", "next", "prepare", "warmup", "loop"]
    assert seen.count("cameras") == 2 and len(ctrl.results) == 2
    assert all(len(r.frames) == 40 for r in ctrl.results)


class _Streamed:
    """Around the real engine: an engine that streams its level. The world around a new point
    is ready only from the ``delay``-th frame it is asked about in a row (never with None); it
    records its answers per point asked in a row and whether the level was ray cast while the
    world was not there."""

    def __init__(self, eng, delay):
        self._eng, self.delay = eng, delay
        self.name, self.version = eng.name, eng.version
        self.answers: list[tuple[tuple, list[bool]]] = []
        self._last = True
        self.cast_unready = 0

    def __getattr__(self, k):
        return getattr(self._eng, k)

    def world_ready(self, point):
        if not self.answers or self.answers[-1][0] != tuple(point):
            self.answers.append((tuple(point), []))
        got = self.answers[-1][1]
        got.append(self.delay is not None and len(got) + 1 >= self.delay)
        self._last = got[-1]
        return got[-1]

    def raycast(self, a, b):
        self.cast_unready += not self._last
        return self._eng.raycast(a, b)

    def world_status(self):
        return "3 cells loading"


def _course_run(eng, course, spawn=None):
    spec = CharacterSpec("t/h", 0.3, 0.6, 1.8)
    ctrl = Stage1Controller(eng, str(course), "t/course", [spec], [0, 1], 40, 30, 3,
                            ActionConfig(), spawn or SpawnConfig(), CameraRigConfig())
    ctrl.run(max_ticks=100_000)
    return ctrl


def test_stage1_waits_for_a_streamed_world_before_the_floor_and_while_settling(tmp_path):
    """Issue 29: an engine that streams its world is asked about each candidate before its
    floor is searched, and about the spawn each warm-up frame: the character is not let go
    (the trajectory does not start) before the world around it is there. The trajectories are
    those of the loaded world. The embedded engine is ready at once."""
    course = build_course(tmp_path / "course.glb")
    plain = _course_run(make_engine("embedded"), course)
    eng = _Streamed(make_engine("embedded"), 40)  # longer than settling and warm-up (18)
    streamed = _course_run(eng, course)
    assert make_engine("embedded").world_ready((0.0, 0.0, 0.0)) is True
    assert [r.failure for r in streamed.results] == [None, None]
    for a, b in zip(streamed.results, plain.results, strict=True):
        assert a.meta["spawns"] == b.meta["spawns"]
        assert [f["pos_z"] for f in a.frames] == pytest.approx([f["pos_z"] for f in b.frames])
        assert [f["action"] for f in a.frames] == [f["action"] for f in b.frames]
    assert eng.cast_unready == 0  # no floor searched in a world not there
    spawned = [tuple(s["position"]) for r in streamed.results for s in r.meta["spawns"]]
    # per spawn: its candidate asked until ready (then the floor), the spawn asked each warm-up
    # frame: 39 times no, then settling and warm-up counted only on yes
    assert [pt for pt, _ in eng.answers[1::2]] == spawned
    # (the frame that completes settling is the first warm-up frame)
    wait = SpawnConfig().settle_frames + SpawnConfig().warmup_frames - 1
    for _pt, got in eng.answers:
        assert got[:40] == [False] * 39 + [True] and all(got[40:]), got
    for _pt, got in eng.answers[1::2]:
        assert len(got) >= 39 + wait, len(got)


def test_a_world_that_never_streams_in_fails_with_streaming_timeout(tmp_path):
    course = build_course(tmp_path / "course.glb")
    ctrl = _course_run(_Streamed(make_engine("embedded"), None), course,
                       SpawnConfig(stream_timeout_s=0.5))
    assert [r.failure for r in ctrl.results] == ["streaming_timeout"] * 2
    d = ctrl.results[0].detail
    assert d.startswith(f"level t/course ({course}): the world around the ") and \
        "did not finish streaming in 15 frames (0.5 s at 30 fps; " \
        "trajectories.spawn.stream_timeout_s): 3 cells loading" in d, d
    assert not ctrl.results[0].frames and ctrl.done


def test_occlusion_moves_camera_in_front_of_wall(tmp_path):
    course = build_course(tmp_path / "course.glb")
    eng = make_engine("embedded")
    eng.load_level(str(course), "t/course")
    # character 1.5 m in front of the wall, facing away from it (-x): back camera is behind
    # the wall unless occlusion pulls it in
    pos = [(WALL_X - 1.5, 10.0, 0.0)] * 10
    def ray(a, b):
        return [h.fraction for h in eng.raycast_all(a, b)]
    rig = CameraRigConfig(arc_max_deg=0, fit_to_space=False)
    rows = [r for r in compute_tracks(pos, [180.0] * 10, 1.8, rig, ray) if r["view"] == "back"]
    assert all(r["occluded"] for r in rows)
    assert all(r["pos_x"] < WALL_X - 0.1 for r in rows)  # in front of the wall, with margin
    assert all(r["boom_m"] < r["boom_desired_m"] for r in rows)


def test_asymmetric_smoothing_contracts_fast_expands_slowly():
    # the character stands still; frame i is told apart by a tiny x offset of its position
    pos = [(i * 1e-4, 0.0, 0.0) for i in range(40)]
    rig = CameraRigConfig()

    def ray2(a, b):
        i = round(a[0] / 1e-4)
        return [0.3] if i in (10, 11) else []  # a solid occluder for two frames

    rows = [r for r in compute_tracks(pos, [0.0] * 40, 1.8, rig, ray2) if r["view"] == "back"]
    full = rows[0]["boom_desired_m"]
    assert rows[10]["boom_m"] < 0.4 * full  # contracted at once
    assert rows[12]["boom_m"] < rows[20]["boom_m"] < full  # expands over many frames


def test_flat_character_framed_by_visual_height():
    rig = CameraRigConfig()
    bat = compute_tracks([(0.0, 0.0, 0.0)], [0.0], 0.06, rig, None)
    human = compute_tracks([(0.0, 0.0, 0.0)], [0.0], 1.8, rig, None)
    assert bat[0]["pos_z"] < 0.5 * human[0]["pos_z"]  # back camera far lower for the bat


def test_action_stats_non_forward_share():
    s = action_stats(["W"] * 10 + ["A"] * 5 + ["IDLE"] * 5)
    assert s["non_forward_share"] == pytest.approx(0.25)
    assert s["transitions"]["W"]["A"] == 1 and s["hold_lengths"] == {"5": 2, "10": 1}


def _room_level(tmp_path):
    """A 2 m x 2 m walled room and nothing else: every walk ends in a dead end."""
    from stages.assetgen.levels import LevelBuilder
    from stages.assetgen.primitives import box

    b = LevelBuilder("Room", "day", 16, 0)
    b.part("Floor", box(2.4, 2.4, 0.3, 1.0, center=(0, 0, -0.3)), "concrete")
    for name, size, c in (("WallN", (2.4, 0.2, 3.0), (0, 1.1, 0)),
                          ("WallS", (2.4, 0.2, 3.0), (0, -1.1, 0)),
                          ("WallE", (0.2, 2.4, 3.0), (1.1, 0, 0)),
                          ("WallW", (0.2, 2.4, 3.0), (-1.1, 0, 0))):
        b.part(name, box(*size, 1.0, center=c), "brick")
    b.marker("player_start", "PlayerStart_0", (0, 0, 0.1), 0)
    level = tmp_path / "room.glb"
    level.write_bytes(b.to_glb())
    return level


def test_dead_end_escapes_then_respawns_as_new_segment(tmp_path):
    level = _room_level(tmp_path)
    eng = make_engine("embedded")
    spec = CharacterSpec("t/h", 0.3, 0.6, 1.8)
    acts = ActionConfig(weights={"W": 1.0}, hold_min_frames=30, hold_max_frames=30,
                        max_escapes=2, deadend_window_frames=15)
    ctrl = Stage1Controller(eng, str(level), "t/room", [spec], [0], 600, 30, 0, acts,
                            SpawnConfig(), CameraRigConfig())
    res = ctrl.run(max_ticks=200_000)[0]
    assert res.failure is None and len(res.frames) == 600
    f = pd.DataFrame(res.frames)
    events = f["event"].tolist()
    assert events[0] == "spawn"
    first_respawn = events.index("respawn")
    # K escapes come before the first respawn, which opens segment 1
    assert events[:first_respawn].count("escape") == acts.max_escapes
    assert f["segment"].iloc[first_respawn] == 1 and f["segment"].iloc[first_respawn - 1] == 0
    assert f["segment"].is_monotonic_increasing
    # every escape turns the character by at least escape_min_deg within a second
    for i in [i for i, e in enumerate(events) if e == "escape"]:
        if i + 30 < len(f) and f["segment"].iloc[i + 30] == f["segment"].iloc[i]:
            d = abs((f["yaw_deg"].iloc[i + 30] - f["yaw_deg"].iloc[i - 1] + 180) % 360 - 180)
            assert d >= acts.escape_min_deg - 1e-6
    # the capsule never leaves the room
    assert f["pos_x"].abs().max() < 1.0 and f["pos_y"].abs().max() < 1.0
    eng.close()


class _NaNAfter:
    """Injected fault around the real engine: the character state turns NaN after n ticks."""

    def __init__(self, eng, n):
        self._eng, self._n, self._calls = eng, n, 0
        self.name, self.version = eng.name, eng.version

    def __getattr__(self, k):
        return getattr(self._eng, k)

    def character_state(self):
        self._calls += 1
        st = self._eng.character_state()
        if self._calls > self._n:
            st.position = (math.nan, st.position[1], math.inf)
        return st


def _stage1_in_process(cfg, levels, chars, library, out, engine, level_id, scratch):
    """One level's Stage I worker (``stages.engine.stage1_worker``) run in this process on a
    given engine object, from the spec the node runner would hand it; its failure rows."""
    from stages.cluster.lifecycle import LevelUnit, NodeContext, character_specs
    from stages.engine.stage1_worker import run_spec

    ctx = NodeContext(cfg, library, out, None,
                      specs=character_specs(chars, library, cfg.trajectories.characters))
    row = levels.set_index("level_id").loc[level_id].to_dict()
    row["level_id"] = level_id
    unit = LevelUnit(ctx, row, list(range(cfg.trajectories.per_level)), False)
    step = unit._stage1_step(scratch, f"inst-{level_id.replace('/', '_')}")
    assert step is not None
    run_spec(json.loads((step.folder / "spec.json").read_text()), engine, log=lambda m: None)
    fl = step.folder / "failures.jsonl"
    return [json.loads(x) for x in fl.read_text().splitlines()] if fl.exists() else []


def test_non_finite_transform_discards_trajectory_injected_fault(inv, sample_library, tmp_path):
    levels, chars = inv
    cfg = _cfg(**{"trajectories.per_level": 1,
                  "trajectories.levels": "[NatureValley/AlpineMeadow]"})
    eng = _NaNAfter(make_engine(cfg.engine), 200)
    fails = _stage1_in_process(cfg, levels, chars, sample_library, tmp_path / "out", eng,
                               "NatureValley/AlpineMeadow", tmp_path / "slot")
    assert [f["reason"] for f in fails] == ["non_finite_transform"]
    assert "nan" in fails[0]["detail"]
    assert not list(tmp_path.rglob("frames.parquet"))  # nothing with NaN was written


def test_character_models_loaded_once_per_task(inv, sample_library, tmp_path):
    levels, chars = inv
    cfg = _cfg(**{"trajectories.per_level": 3, "trajectories.frames": 30,
                  "trajectories.characters": "[CharacterPack/Alex,CharacterPack/Bat]"})
    ids = sorted(levels[levels["enabled"].astype(bool)]["level_id"])
    if cfg.trajectories.levels:
        ids = [i for i in ids if i in cfg.trajectories.levels]
    eng = make_engine(cfg.engine)
    for lid in ids:
        fails = _stage1_in_process(cfg, levels, chars, sample_library, tmp_path / "out", eng,
                                   lid, tmp_path / "slot")
        assert not fails
    # 2 levels x 3 trajectories, 2 characters: each model loaded once; + 2 level loads
    assert len(ids) == 2
    assert len(eng._model_cache) == 2
    assert eng.model_loads == 2 + 2


def test_swim_holds_its_altitude_while_fly_follows_terrain(tmp_path):
    from tests.engine.course import STAIRS

    course = build_course(tmp_path / "course.glb")
    eng = make_engine("embedded")
    eng.load_level(str(course), "t/course")
    out = {}
    for mode in ("fly", "swim"):
        spec = CharacterSpec(f"t/{mode}", 0.2, 0.1, 0.4, locomotion=mode, height_offset=3.0)
        eng.spawn_character(spec, (STAIRS[0] - 2.0, STAIRS[1], 3.0), 0.0)
        zs = []
        for _ in range(150):
            eng.apply_input((1.0, 0.0), 0.0, 1 / 30)
            zs.append(eng.character_state().position[2])
        out[mode] = zs
    assert max(out["swim"]) - min(out["swim"]) < 1e-6  # a water surface: constant height
    assert out["fly"][-1] > out["fly"][0] + 1.0  # rose with the stairs (2 m high)
    eng.close()


def test_falling_out_of_the_level_respawns(tmp_path):
    from stages.assetgen.levels import LevelBuilder
    from stages.assetgen.primitives import box

    b = LevelBuilder("Island", "day", 16, 0)
    b.part("Platform", box(4.0, 4.0, 0.3, 1.0, center=(0, 0, -0.3)), "stone")
    level = tmp_path / "island.glb"
    level.write_bytes(b.to_glb())
    eng = make_engine("embedded")
    acts = ActionConfig(weights={"W": 1.0}, hold_min_frames=30, hold_max_frames=30)
    spawn = SpawnConfig(fall_limit_m=2.0)
    ctrl = Stage1Controller(eng, str(level), "t/island", [CharacterSpec("t/h", 0.3, 0.6, 1.8)],
                            [0], 300, 30, 0, acts, spawn, CameraRigConfig())
    f = pd.DataFrame(ctrl.run(max_ticks=100_000)[0].frames)
    assert (f["event"] == "respawn").any()
    # nobody is recorded further below the level than the limit (+ one frame of falling)
    assert f["pos_z"].min() > -0.3 - 2.0 - 0.5
    first = f.index[f["event"] == "respawn"][0]
    assert f["grounded"].iloc[first] and abs(f["pos_z"].iloc[first]) < 0.05
    eng.close()
