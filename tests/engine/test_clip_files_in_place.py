"""Issue 28: a Mixamo walk with root motion, in a skeleton-only clip file, plays in place on the
character it was matched to (Stage I's controller moves the capsule), and its joints are the
character's joints by name."""

from __future__ import annotations

import math

from stages.engine.clips import in_place, read_gltf_clips

from ..rigs import write_rig


def test_root_motion_is_removed_and_in_place_clips_are_untouched(tmp_path):
    f = write_rig(tmp_path / "anims/Walking.glb", prefix="mixamorig:", mesh=False,
                  clips={"Armature|mixamo.com|Layer0": (0, 0, 1.4), "Idle": (0, 0, 0)})
    clips = read_gltf_clips(f)
    walk, idle = clips["Armature|mixamo.com|Layer0"], clips["Idle"]
    (ch,) = walk.channels
    assert ch.node == "mixamorig:Hips"
    assert math.dist(ch.values[0], ch.values[-1]) > 100  # 1.4 m in the armature's cm
    (flat,) = in_place(walk).channels
    assert math.dist(flat.values[0], flat.values[-1]) < 1e-6
    # the bob (a deviation from the straight line) is kept
    assert abs(flat.values[1][1] - flat.values[0][1]) > 0.5
    assert in_place(idle).channels[0].values == idle.channels[0].values
    # the character's own joint names: the poser finds them in the matched model
    model = write_rig(tmp_path / "Soldier.glb", prefix="mixamorig:")
    from stages.core.model_probe import probe_model

    assert {c.node for c in walk.channels} <= set(probe_model(model).joints)
