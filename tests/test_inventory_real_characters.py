"""Issue 28: characters and levels as people bring them — measured through their skins, kind
and facing from the skeleton, clips named as a person reads them, clip-only files matched by
skeleton, nothing dropped in silence, FBX through Panda3D's Assimp loader.

Real third-party files (tests/data/real_assets/, sources and licences in its SOURCE.md) beside
rigs built with the quirks real exporters leave in (tests/rigs.py: no real Mixamo export could
be had on this machine)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stages.config import InventoryConfig
from stages.core.character_guess import map_clips
from stages.core.model_probe import probe_model
from stages.engine.fbx_probe import find_fbx2gltf
from stages.inventory import run_inventory

from .rigs import (
    BIPED,
    CONVENTIONS,
    QUADRUPED,
    UNREAL_NAMES,
    a_pose,
    with_json,
    write_level,
    write_rig,
)

REAL = Path(__file__).parent / "data" / "real_assets"
CFG = InventoryConfig()


def _chars(root: Path):
    res = run_inventory(root, CFG, "overrides.yaml")
    return res, res.characters.set_index("character_id")


# ---------------------------------------------------------------- skins


def test_mixamo_armature_quirk_is_measured_through_the_skin(tmp_path):
    """Armature at +90 deg X, scale 0.01, joints in cm: 1.8 m tall and standing, not 3.6 mm
    lying down (what the mesh node's ancestors give)."""
    f = write_rig(tmp_path / "lib/Chars/Soldier/Soldier.glb", prefix="mixamorig:")
    p = probe_model(f)
    ext = p.extent
    assert ext[2] == pytest.approx(1.91, abs=0.02)  # head-top box 1.87, toe box -0.04
    assert ext[0] == pytest.approx(1.84, abs=0.02)  # arm span (T-pose), along X
    assert ext[1] == pytest.approx(0.31, abs=0.02)  # depth
    assert "mixamorig:Hips" in p.joints and p.joints["mixamorig:Hips"][2] == pytest.approx(0.95)
    _, ch = _chars(tmp_path / "lib")
    r = ch.loc["Chars/Soldier"]
    assert r.ok and r.kind == "humanoid" and r.scale == 1.0
    assert 1.62 < r.visual_height_m < 2.1  # 1.8 m +- 10 %, standing
    assert r.yaw_correction_deg == 90.0  # faces glTF +Z = contract -Y
    assert r.capsule_radius_m < 0.3  # from the depth, not the 1.84 m arm span
    guesses = " ".join(json.loads(r.guesses))
    assert "left/right joint pairs" in guesses and "toes ahead of ankles" in guesses


def test_a_mesh_parented_under_a_joint_counts_in_the_bind_pose(tmp_path):
    """A hat (an unskinned mesh) under the head-top joint of the rotated, 0.01-scaled
    armature: placed by the joint's world transform, it adds its 0.3 m to the height."""
    bare = probe_model(write_rig(tmp_path / "a.glb", prefix="mixamorig:"))
    hat = probe_model(write_rig(tmp_path / "b.glb", prefix="mixamorig:", hat_m=0.3))
    assert hat.bounds_max[2] == pytest.approx(2.10, abs=0.01)
    assert hat.extent[2] - bare.extent[2] == pytest.approx(2.10 - 1.87, abs=0.01)


@pytest.mark.parametrize("pose", ["T", "A"])
def test_bipeds_wider_than_deep_are_humanoids_facing_their_toes(tmp_path, pose):
    """T- and A-pose bipeds with Unreal mannequin names, turned to face +X (glTF): kind from
    the joints, facing from left/right pairs — the two +Z-facing rigs get the same correction."""
    skel = BIPED if pose == "T" else a_pose(BIPED)
    write_rig(tmp_path / "lib/Chars/Manny/Manny.glb", skel=skel, names=UNREAL_NAMES,
              armature_quirk=False, facing_yaw_deg=90)
    write_rig(tmp_path / "lib/Chars/Quinn/Quinn.glb", skel=skel, names=UNREAL_NAMES)
    write_rig(tmp_path / "lib/Chars/Mixy/Mixy.glb", skel=skel, prefix="mixamorig:",
              armature_quirk=False)
    _, ch = _chars(tmp_path / "lib")
    assert set(ch["kind"]) == {"humanoid"}
    assert ch.loc["Chars/Manny", "yaw_correction_deg"] == 0.0  # faces +X already
    assert ch.loc["Chars/Quinn", "yaw_correction_deg"] == 90.0
    assert ch.loc["Chars/Mixy", "yaw_correction_deg"] == 90.0  # same as Quinn: both face +Z
    for r in ch.itertuples():
        assert 1.62 < r.visual_height_m < 2.1


def test_nameless_skeleton_kind_and_facing_from_topology(tmp_path):
    names = {k: f"Bone.{i:03d}" for i, k in enumerate(BIPED)}
    write_rig(tmp_path / "lib/Chars/Anon/Anon.glb", skel=a_pose(BIPED), names=names,
              facing_yaw_deg=180)  # faces glTF -Z = contract +Y
    qnames = {k: f"Bone.{i:03d}" for i, k in enumerate(QUADRUPED)}
    write_rig(tmp_path / "lib/Chars/Beast/Beast.glb", skel=QUADRUPED, names=qnames,
              armature_quirk=False)
    _, ch = _chars(tmp_path / "lib")
    anon, beast = ch.loc["Chars/Anon"], ch.loc["Chars/Beast"]
    assert anon.kind == "humanoid" and anon.yaw_correction_deg == -90.0
    assert "topology: 2 feet on the ground" in anon.guesses
    assert beast.kind == "quadruped" and beast.yaw_correction_deg == 90.0
    assert "topology: 4 feet on the ground" in beast.guesses


def test_quadruped_in_centimetres_with_a_survey_idle(tmp_path):
    """A fox-like rig (front legs named arms, hands on the ground, a tail) in cm, clips
    Survey / Walk / Run: quadruped, scale 0.01, IDLE <- Survey, W <- Walk (over Run)."""
    write_rig(tmp_path / "lib/Animals/Fox/Fox.glb", skel=QUADRUPED, armature_quirk=False,
              scale=100.0, clips={"Survey": (0, 0, 0), "Walk": (0, 0, 0.8), "Run": (0, 0, 2.5)})
    _, ch = _chars(tmp_path / "lib")
    r = ch.loc["Animals/Fox"]
    assert r.kind == "quadruped" and r.scale == pytest.approx(0.01)
    assert 0.6 < r.visual_height_m < 0.85 and r.yaw_correction_deg == 90.0
    amap = json.loads(r.animation_json)
    assert amap["IDLE"] == "Survey" and amap["W"] == "Walk"
    assert "runner-up 'Run'" in r.guesses
    rm = json.loads(r.root_motion_json)
    assert rm["Walk"]["handling"] == "in_place" and "Survey" not in rm


# ---------------------------------------------------------------- clip names


@pytest.mark.parametrize("clips, want", [
    (["Walking", "Running", "WalkJump", "Idle", "Dance", "Jump"], {"W": "Walking", "IDLE": "Idle"}),
    (["fight_idle", "idle", "walk_forward", "walk_backwards", "strafe_left", "side-step right",
      "Turn Left"], {"IDLE": "idle", "W": "walk_forward", "S": "walk_backwards",
                     "A": "strafe_left", "D": "side-step right"}),
    (["Survey", "Walk", "Run"], {"IDLE": "Survey", "W": "Walk"}),
    (["Armature|Breathing Idle", "Armature|Jogging", "Armature|Sprint"],
     {"IDLE": "Armature|Breathing Idle", "W": "Armature|Jogging"}),
    (["jog_fwd_left", "JogBackRight", "Look Around"], {"WA": "jog_fwd_left", "SD": "JogBackRight",
                                                      "IDLE": "Look Around"}),
])
def test_clip_names_are_read_as_a_person_reads_them(clips, want):
    got, guesses = map_clips(clips)
    assert got == want, guesses


def test_plainest_clip_wins_and_its_runner_up_is_written():
    got, guesses = map_clips(["fight_idle", "idle"])
    assert got == {"IDLE": "idle"}
    assert "IDLE <- clip 'idle' by its name (runner-up 'fight_idle')" in guesses
    assert "turn in place" in " ".join(map_clips(["Turn Left"])[1])


def test_clip_only_files_are_matched_by_skeleton_and_named_after_their_file(tmp_path):
    """Mixamo "without skin" downloads beside a character: matched by joint names and
    hierarchy; Blender's 'Armature|mixamo.com|Layer0' and Mixamo's 'mixamo.com' named after
    their files; a clip whose skeleton fits nothing is a skipped row with its reason."""
    lib = tmp_path / "lib"
    write_rig(lib / "Mixamo/Soldier/Soldier.glb", prefix="mixamorig:")
    write_rig(lib / "Mixamo/Soldier/anims/Walking.glb", prefix="mixamorig:", mesh=False,
              clips={"Armature|mixamo.com|Layer0": (0, 0, 1.5)})
    write_rig(lib / "Mixamo/Soldier/anims/Breathing Idle.glb", prefix="mixamorig:", mesh=False,
              clips={"mixamo.com": (0, 0, 0)})
    write_rig(lib / "Mixamo/Soldier/anims/Gallop.glb", skel=QUADRUPED, mesh=False,
              clips={"Take 001": (0, 0, 2)})
    res, ch = _chars(lib)
    r = ch.loc["Mixamo/Soldier"]
    amap = json.loads(r.animation_json)
    assert amap["W"] == "anims/Walking.glb" and amap["IDLE"] == "anims/Breathing Idle.glb"
    assert json.loads(r.root_motion_json)["anims/Walking.glb"]["handling"] == "in_place"
    assert "anims/Gallop.glb" not in json.loads(r.model_clips)
    sk = res.skipped.set_index("path")
    assert sk.loc["Mixamo/Soldier/anims/Gallop.glb", "reason"] == \
        "clip-only file, no character with its skeleton"
    assert len(res.levels) == 0 or "Mixamo/" not in set(res.levels["level_id"])


def test_sketchfab_scene_gltf_is_named_after_its_folder(tmp_path):
    write_rig(tmp_path / "lib/Store/Robot/scene.glb", prefix="mixamorig:")
    write_rig(tmp_path / "lib/Store/Knight/knight.glb", prefix="mixamorig:")
    _, ch = _chars(tmp_path / "lib")
    assert {"Store/Robot", "Store/knight"} == set(ch.index)


# ---------------------------------------------------------------- real files


def _real_library(tmp_path: Path) -> Path:
    lib = tmp_path / "lib"
    (lib / "Real/SimpleSkin").mkdir(parents=True)
    shutil.copy(REAL / "assimp_simple_skin/simple_skin.gltf", lib / "Real/SimpleSkin/")
    (lib / "Real/Characters/Morph").mkdir(parents=True)
    for f in (REAL / "assimp_AnimatedMorphCube").glob("AnimatedMorphCube.*"):
        shutil.copy(f, lib / "Real/Characters/Morph/")
    (lib / "Props/MorphCube").mkdir(parents=True)
    for f in (REAL / "assimp_AnimatedMorphCube").glob("AnimatedMorphCube.*"):
        shutil.copy(f, lib / "Props/MorphCube/")
    (lib / "Blender/Huesitos").mkdir(parents=True)
    shutil.copy(REAL / "fbx2gltf_blender_rigs/huesitos.glb", lib / "Blender/Huesitos/")
    (lib / "FbxBox").mkdir()
    shutil.copy(REAL / "assimp_fbx/box.fbx", lib / "FbxBox/")
    (lib / "FbxBox/Truncated.fbx").write_bytes((REAL / "assimp_fbx/box.fbx").read_bytes()[:900])
    (lib / "FbxRig/Characters").mkdir(parents=True)
    shutil.copy(REAL / "assimp_fbx/huesitos.fbx", lib / "FbxRig/Characters/")
    shutil.copy(REAL / "assimp_fbx/animation_with_skeleton.fbx", lib / "FbxRig/")
    return lib


def test_real_files_are_rows_with_reasons_never_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("WMFORGE_FBX2GLTF", "none")  # Panda3D's loader alone
    lib = _real_library(tmp_path)
    res, ch = _chars(lib)
    lv = res.levels.set_index("path")
    sk = res.skipped.set_index("path")
    # the glTF tutorial's skin: its inverse bind matrix moves the mesh 0.5 along -X
    simple = probe_model(lib / "Real/SimpleSkin/simple_skin.gltf")
    assert simple.bounds_min[0] == pytest.approx(-0.5) and simple.bounds_max[0] == \
        pytest.approx(0.5)
    assert simple.extent[2] == pytest.approx(2.0)
    assert ch.loc["Real/simple_skin", "visual_height_m"] == pytest.approx(2.0)
    # FBX2glTF's output of a Blender FBX: armature at -90 deg X, x100; measured through the
    # skin it is 5.44 Blender units tall, and no unit makes that a plausible height
    hue = ch.loc["Blender/huesitos"]
    assert hue.visual_height_m == pytest.approx(5.44, abs=0.02)
    fix = " ".join(json.loads(hue.guesses))
    assert '{"model": "huesitos.glb", "scale": 0.331}' in fix  # the line that would fix it
    # morph-only animation: a skipped row in a character folder, and outside one
    for path in ("Real/Characters/Morph/AnimatedMorphCube.gltf",
                 "Props/MorphCube/AnimatedMorphCube.gltf"):
        assert sk.loc[path, "reason"] == "animated without skin (morph targets)", path
        assert path not in lv.index
    # FBX through Panda3D's Assimp loader: a mesh-only FBX is measured ...
    box = lv.loc["FbxBox/box.fbx"]
    assert box.format == "fbx" and box.triangles == 12
    # the file declares UpAxis 1 (Y): its raw Y extent (0.406) is its height once upright
    assert box.coordinate_system == "y-up" and box.coordinate_system_source == "declared"
    assert box.extent_z_m == pytest.approx(0.406, abs=0.01)
    # ... a truncated one, and Blender's skinned+animated FBX files, which panda3d 1.10.16's
    # loader refuses, are rows with the loader's message
    assert lv.loc["FbxBox/Truncated.fbx", "reason"] == "unreadable"
    assert lv.loc["FbxRig/animation_with_skeleton.fbx", "reason"] == "unreadable"
    assert "mismatched number of frames" in lv.loc["FbxRig/animation_with_skeleton.fbx",
                                                   "detail"]
    assert sk.loc["FbxRig/Characters/huesitos.fbx", "reason"] == (
        "unreadable: Panda3D's Assimp loader: mismatched number of frames at line 242 of "
        "panda/src/chan/animChannelMatrixXfmTable.cxx")


def test_a_skin_whose_inverse_bind_accessor_is_missing_is_a_reason(tmp_path):
    f = write_rig(tmp_path / "lib/Pack/Characters/Broken.glb", prefix="mixamorig:")
    with_json(f, lambda d: d["skins"][0].__setitem__("inverseBindMatrices", 99))
    res, _ = _chars(tmp_path / "lib")
    sk = res.skipped.set_index("path")
    assert sk.loc["Pack/Characters/Broken.glb", "reason"].startswith("unreadable: bad_skin: ")
    assert "inverseBindMatrices accessor 99" in sk.loc["Pack/Characters/Broken.glb", "detail"]


# ---------------------------------------------------------------- levels


def test_town_in_a_huge_ground_plane_is_a_playable_level(tmp_path):
    lib = tmp_path / "lib"
    boxes = [((-1024, -0.1, -1024), (1024, 0.0, 1024))]  # Godot-style 2 km ground plane
    boxes += [((x, 0, z), (x + 8, 6, z + 8)) for x in range(-30, 30, 15) for z in (-20, 10)]
    write_level(lib / "Levels/Harbour/town_model.glb", boxes)
    write_level(lib / "Continents/Continent.glb", [((-2500, 0, -2500), (2500, 30, 2500)),
                                                   ((0, 0, 0), (3000, 50, 3000))])
    lv = run_inventory(lib, CFG, "overrides.yaml").levels.set_index("level_id")
    town = lv.loc["Levels/Harbour"]
    assert town.kind == "persistent" and town.enabled
    assert town.extent_x_m == pytest.approx(53, abs=1) and town.extent_y_m == pytest.approx(38)
    assert "ground plane 'Box0' 2048 x 2048 m measured apart" in town.detail
    big = lv.loc["Continents/Continent"]
    assert big.kind == "too_large" and big.reason == "too_large"
    assert "5500 x 5500" in big.detail


def test_levels_are_named_after_the_users_folders(tmp_path):
    lib = tmp_path / "lib"
    write_level(lib / "Samples/OcclusionRoom/room.glb", [((0, 0, 0), (10, 3, 10))])
    write_level(lib / "Samples/Town/town_model.glb", [((0, 0, 0), (50, 3, 50))])
    write_level(lib / "Samples/Maps/Harbour.glb", [((0, 0, 0), (50, 3, 50))])
    write_level(lib / "OcclusionRoom/room.glb", [((0, 0, 0), (10, 3, 10))])
    ids = set(run_inventory(lib, CFG, "overrides.yaml").levels["level_id"])
    assert ids == {"Samples/OcclusionRoom", "Samples/Town", "Samples/Harbour",
                   "OcclusionRoom/OcclusionRoom"}


def test_webp_and_percent_escaped_textures_are_counted(tmp_path):
    lib = tmp_path / "lib"
    lvl = lib / "Godot/Meadow/meadow.glb"
    (lib / "Godot/Meadow/textures").mkdir(parents=True)
    (lib / "Godot/Meadow/textures/grass blade.webp").write_bytes(b"RIFF....WEBP")
    (lib / "Godot/Meadow/textures/grass blade.png").write_bytes(b"\x89PNG")
    write_level(lvl, [((0, 0, 0), (40, 1, 40))], extensions_used=["EXT_texture_webp"],
                images=[{"uri": "textures%2Fgrass%20blade.webp"},
                        {"uri": "textures/grass%20blade.png"}, {"uri": "textures/gone.webp"}],
                textures=[{"source": 1, "extensions": {"EXT_texture_webp": {"source": 0}}}])
    row = run_inventory(lib, CFG, "overrides.yaml").levels.set_index("level_id").loc[
        "Godot/meadow"]
    assert row.file_count == 3  # the .glb and its two declared textures in textures/
    assert "EXT_texture_webp" in row.detail and "with a fallback image" in row.detail
    assert "1 declared image(s) missing: ['textures/gone.webp']" in row.detail


@pytest.mark.skipif(find_fbx2gltf() is None, reason="no FBX2glTF (npm package fbx2gltf; set "
                    "$WMFORGE_FBX2GLTF): the skinned FBX files stay 'unreadable' rows")
def test_skinned_fbx_is_measured_through_fbx2gltf_when_at_hand(tmp_path):
    """Blender's skinned, animated FBX (assimp's huesitos.fbx), which Panda3D's loader refuses:
    measured through FBX2glTF's conversion — skin, clip, bind pose — and a row that says the
    engine cannot load it, never a silent drop."""
    lib = tmp_path / "lib"
    (lib / "Rigs/Huesitos").mkdir(parents=True)
    shutil.copy(REAL / "assimp_fbx/huesitos.fbx", lib / "Rigs/Huesitos/")
    res, ch = _chars(lib)
    r = ch.loc["Rigs/huesitos"]
    assert not r.ok and r.reason == "fbx_engine_cannot_load"
    assert "mismatched number of frames" in r.animation_notes
    assert r.visual_height_m == pytest.approx(5.44, abs=0.02)  # as the committed conversion
    assert json.loads(r.model_clips) == ["Armature|Action"]
    assert "measured through FBX2glTF's conversion" in r.guesses
    assert res.skipped.empty and res.levels.empty


@pytest.mark.parametrize("make", ["mixamo", "unreal", "hat", "simple_skin"])
def test_bind_pose_matches_panda3d_skinning_the_loaded_model(tmp_path, make):
    """An oracle outside our code: panda3d-gltf loads the model as a Character and Panda3D
    skins its vertices on the CPU; their tight bounds equal the bind pose we compute (for
    Blender/Mixamo-style rigs, and the glTF tutorial's real skin)."""
    from stages.engine.models import load_model

    path = {
        "mixamo": lambda: write_rig(tmp_path / "m.glb", prefix="mixamorig:"),
        "unreal": lambda: write_rig(tmp_path / "u.glb", names=UNREAL_NAMES,
                                    armature_quirk=False, facing_yaw_deg=90),
        "hat": lambda: write_rig(tmp_path / "h.glb", prefix="mixamorig:", hat_m=0.3),
        "simple_skin": lambda: REAL / "assimp_simple_skin/simple_skin.gltf",
    }[make]()
    lo, hi = load_model(str(path)).getTightBounds()
    ours = probe_model(path)
    assert list(hi - lo) == pytest.approx(list(ours.extent), abs=0.01)
    assert lo.z == pytest.approx(ours.bounds_min[2], abs=0.01)
    assert hi.z == pytest.approx(ours.bounds_max[2], abs=0.01)


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
@pytest.mark.parametrize("facing", [0.0, 90.0, -90.0, 180.0])
def test_joint_name_conventions_give_kind_and_facing(tmp_path, convention, facing):
    """Godot/Unity humanoid, Blender Rigify, 3ds Max Biped and the Unreal mannequin's names, in
    an A-pose turned four ways: humanoid by names, forward by left/right pairs."""
    from stages.core.skeleton_guess import analyse_skeleton, yaw_for_forward

    names = CONVENTIONS[convention]
    assert set(names) == set(BIPED)
    p = probe_model(write_rig(tmp_path / "r.glb", skel=a_pose(BIPED), names=names,
                              facing_yaw_deg=facing))
    g = analyse_skeleton(p.joints, p.joint_parents, p.bounds_min[2], p.extent[2])
    assert g.kind == "humanoid" and "joint names" in g.kind_evidence
    # glTF +Z turned by `facing` about Y; +Z is contract -Y (yaw correction 90)
    want = (90.0 - facing + 180) % 360 - 180
    assert yaw_for_forward(g.forward) == pytest.approx(180.0 if want == -180 else want)
    assert "left/right joint pairs" in g.facing_evidence and "disagrees" not in \
        g.facing_evidence


def test_fbx_character_written_by_assimp_is_measured_upright(tmp_path):
    """Our Mixamo-style rig exported to ASCII FBX by assimp 5.2.5 (Debian assimp-utils):
    Panda3D's Assimp loader reads its skin but keeps its Y-up axes and drops the armature's
    transform from the joints. The inventory reads the FBX's UpAxis, measures 1.91 m standing,
    says the joints are not usable, and the engine loads it upright at the same height; the
    skeleton-only FBX beside it (no mesh) is a row with its reason."""
    from stages.engine.models import load_model

    lib = tmp_path / "lib"
    (lib / "Rigs/Soldier").mkdir(parents=True)
    for f in ("Soldier.fbx", "Walking_without_skin.fbx"):
        shutil.copy(REAL / "assimp_exported_rig" / f, lib / "Rigs/Soldier/")
    res, ch = _chars(lib)
    r = ch.loc["Rigs/Soldier"]
    assert r.ok and r.kind == "humanoid" and r.yaw_correction_deg == 90.0
    assert r.visual_height_m == pytest.approx(1.91, abs=0.01)
    assert r.coordinate_system == "y-up" and r.coordinate_system_source == "declared"
    assert "drops the armature's transform" in r.guesses
    lo, hi = load_model(str(lib / "Rigs/Soldier/Soldier.fbx")).getTightBounds()
    assert hi.z - lo.z == pytest.approx(r.visual_height_m, abs=0.01)
    row = res.levels.set_index("path").loc["Rigs/Soldier/Walking_without_skin.fbx"]
    assert row.reason == "no_geometry" and row.kind == "broken"


def test_panda3d_panda_without_its_sidecar_reads_as_a_person_reads_it(tmp_path):
    """Panda3D's own panda (the panda3d wheel's models/, BSD), its character.json left out:
    its egg skeleton (Bone_lf_leg_upper ... Bone_rr_foot: left/right-front/rear) says
    quadruped and faces -Y, the yaw 90 its sample sidecar gives; panda-walk4 is its W clip.
    Its size is the open question a person has too: 550 units read as millimetres (0.55 m;
    the sample sidecar says 0.0025, 1.38 m), written in guesses with the line that fixes it."""
    import panda3d

    models = Path(panda3d.__file__).parent / "models"
    lib = tmp_path / "lib"
    (lib / "Zoo/Panda").mkdir(parents=True)
    for f in ("panda-model.egg.pz", "panda-walk4.egg.pz"):
        shutil.copy(models / f, lib / "Zoo/Panda" / f)
    _, ch = _chars(lib)
    r = ch.loc["Zoo/panda-model"]
    assert r.ok and r.kind == "quadruped" and r.yaw_correction_deg == 90.0
    assert "joint names: front, rear" in r.guesses and "left/right joint pairs" in r.guesses
    assert json.loads(r.animation_json)["W"] == "panda-walk4.egg.pz"
    assert r.scale == pytest.approx(0.001) and r.visual_height_m == pytest.approx(0.55, abs=0.01)
