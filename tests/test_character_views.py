"""Characters and cameras as a lab would check them (issue #18): the observed capsule, declared
coordinate systems, characters found without sidecars, views that show the character."""

import math

import numpy as np

from stages.core import replay
from stages.core.cameras import CameraRigConfig
from stages.core.engine_types import CharacterSpec
from stages.core.stage1 import ActionConfig, SpawnConfig, Stage1Controller
from stages.core.trajectory import VIEWS


def _flat_ground(path):
    from stages.assetgen.gltf_writer import GlbBuilder
    from stages.assetgen.primitives import box

    g = GlbBuilder()
    g.node("ground", g.mesh("ground", box(30, 30, 0.2, center=(0, 0, -0.2)),
                            g.material("dark", (0.08, 0.08, 0.08))))
    path.write_bytes(g.to_glb())
    return path


def test_observed_capsule_is_recorded_and_feet_touch_the_ground(tmp_path):
    """A capsule the engine clamps (radius 1 cm requested, below Bullet's 4 cm margin): Stage I
    records what the engine built; the recorded feet are on the ground, and Stage II's mesh,
    placed from them, touches the ground within 2 px in both side views."""
    from stages.assetgen.gltf_writer import GlbBuilder
    from stages.assetgen.primitives import box
    from stages.engine.base import make_engine
    from stages.engine.embedded import load_model
    from stages.engine.replay_render import CharacterPose, ReplayRenderer, SamplePose, ViewPose

    ground = _flat_ground(tmp_path / "ground.glb")
    b = GlbBuilder()
    b.node("body", b.mesh("body", box(0.12, 0.12, 0.3), b.material(
        "red", (1.0, 0.0, 0.0), emissive=(1.0, 0.0, 0.0))))
    char = tmp_path / "tiny.glb"
    char.write_bytes(b.to_glb())
    spec = CharacterSpec("t/tiny", 0.01, 0.1, 0.3, walk_speed=0.8, model_path=str(char))
    eng = make_engine("embedded")
    rig = CameraRigConfig(width=640, height=360)
    ctrl = Stage1Controller(eng, str(ground), "t/ground", [spec], [0], 12, 30, 1,
                            ActionConfig(weights={"IDLE": 1.0}), SpawnConfig(), rig,
                            camera_rays=False)
    (res,) = ctrl.run(max_ticks=100_000)
    assert res.failure is None and len(res.frames) == 12
    cap = res.meta["capsule"]
    assert cap["source"] == "engine"
    assert cap["requested"]["radius_m"] == 0.01
    assert abs(cap["observed"]["radius_m"] - 0.04) < 1e-6  # what Bullet really built
    assert all(abs(f["capsule_radius_m"] - 0.04) < 1e-6 for f in res.frames)
    assert all(abs(f["pos_z"]) < 0.012 for f in res.frames), [f["pos_z"] for f in res.frames]
    eng.close()

    r = ReplayRenderer(640, 360, 1, 1, "p3headlessgl", 1)
    r.load_level(load_model(str(ground)), {})
    model = load_model(str(char))
    r.load_character(model, str(char), {}, 0.0)
    fx = 320 / math.tan(math.radians(rig.fov_deg) / 2)
    frame = res.frames[6]
    views = {v: [c for c in res.cameras if c["frame"] == 6 and c["view"] == v][0] for v in VIEWS}
    poses = {v: ViewPose((c["pos_x"], c["pos_y"], c["pos_z"]),
                         (c["rot_w"], c["rot_x"], c["rot_y"], c["rot_z"]), c["fov_deg"])
             for v, c in views.items()}
    cp = CharacterPose((frame["pos_x"], frame["pos_y"], frame["pos_z"]),
                       (frame["rot_w"], frame["rot_x"], frame["rot_y"], frame["rot_z"]),
                       (1.0, 1.0, 1.0), None, 0.0)
    sp = SamplePose(cp, poses)
    colors, _, _ = r.render([sp], sp, -r.model_min_z)
    r.close()
    for v in ("left", "right"):
        img = colors[v].astype(int)
        rows, _ = np.nonzero((img[..., 0] > 150) & (img[..., 1] < 80) & (img[..., 2] < 80))
        assert len(rows) > 50, v
        c = views[v]
        _, v_contact, _ = replay.project((frame["pos_x"], frame["pos_y"], 0.0),
                                         (c["pos_x"], c["pos_y"], c["pos_z"]),
                                         (c["rot_w"], c["rot_x"], c["rot_y"], c["rot_z"]),
                                         fx, fx, 320, 180)
        assert abs(rows.max() + 0.5 - v_contact) <= 2.0, (v, rows.max(), v_contact)
