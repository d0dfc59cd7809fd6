"""Stage II in the editor: a recorded trajectory as a Level Sequence (paper §7.2).

One character (a SkeletalMeshActor) with Location/Rotation/Scale keys on every frame — scale
always written. A SkeletalMeshActor's root component IS its SkeletalMeshComponent, and the
transform track sets that root every frame, so nothing may be set on the component itself (an
offset or a turn there is overwritten): the keys are the transform the mesh needs — the
recorded feet position (the mesh's origin is at its feet, as Stage I places it in the capsule)
and the recorded yaw plus the model's yaw correction. Rotation keys are unwrapped (each angle
within 180° of the previous key's): Sequencer interpolates Euler channels as numbers, and MRQ's
temporal samples land between keys. The animation is chosen from the recorded action with the
root bone locked so root motion cannot fight the keys; the CineCameraActors of the requested
views carry the recorded poses and field of view, with depth of field off (a CineCamera's
default focus blurs the character); a camera-cut track (MRQ renders the other cameras with
render_all_cameras). Conversions: :mod:`ue_frame` only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import ue_frame
import ue_layers
import ue_paths

import unreal
from stages.core.trajectory import VIEWS

SENSOR_WIDTH_MM = 36.0
TRANSFORM_CHANNELS = ("Location.X", "Location.Y", "Location.Z", "Rotation.X", "Rotation.Y",
                      "Rotation.Z", "Scale.X", "Scale.Y", "Scale.Z")


def read_trajectory(traj_dir: Path) -> tuple[list[dict], list[dict]]:
    """frames and cameras rows (pyarrow in the editor's Python)."""
    import pyarrow.parquet as pq

    return (pq.read_table(traj_dir / "frames.parquet").to_pylist(),
            pq.read_table(traj_dir / "cameras.parquet").to_pylist())


def sanitize_level(log: Any) -> list[str]:
    """Remove the level's auto-playing LevelSequenceActors (Table 2: a showcase sequence took
    the camera); returns their labels."""
    actors = unreal.get_editor_subsystem(unreal.EditorActorSubsystem)
    if actors is None:
        raise RuntimeError("EditorActorSubsystem unavailable")
    removed = []
    for actor in actors.get_all_level_actors():
        if isinstance(actor, unreal.LevelSequenceActor) and actor.playback_settings.auto_play:
            removed.append(actor.get_actor_label())
            actors.destroy_actor(actor)
    log(f"wmforge: stage2: level sanitised, removed auto-play sequence actors: {removed}")
    return removed


def _double(ch: unreal.MovieSceneScriptingChannel) -> unreal.MovieSceneScriptingDoubleChannel:
    if not isinstance(ch, unreal.MovieSceneScriptingDoubleChannel):
        raise RuntimeError(f"transform channel {ch.get_name()} is not a double channel")
    return ch


def transform_channels(binding: unreal.MovieSceneBindingProxy, n: int
                       ) -> dict[str, unreal.MovieSceneScriptingDoubleChannel]:
    track = binding.add_track(unreal.MovieScene3DTransformTrack.static_class())
    section = track.add_section()
    section.set_range(0, n)
    chans = [_double(c) for c in section.get_all_channels()]
    if len(chans) != len(TRANSFORM_CHANNELS):
        raise RuntimeError(f"transform section has {len(chans)} channels, expected 9")
    return dict(zip(TRANSFORM_CHANNELS, chans, strict=True))


def key_transform(ch: dict[str, unreal.MovieSceneScriptingDoubleChannel], frame: int,
                  loc: tuple[float, float, float], rot: tuple[float, float, float],
                  scale: tuple[float, float, float]) -> None:
    """Every component keyed, scale included (§7.2: an unkeyed scale was reset). ``rot`` is
    (roll, pitch, yaw), already unwrapped against the previous key (:func:`key_track`)."""
    t = unreal.FrameNumber(frame)
    lin = unreal.MovieSceneKeyInterpolation.LINEAR
    unit = unreal.MovieSceneTimeUnit.DISPLAY_RATE
    for name, v in zip(TRANSFORM_CHANNELS, (*loc, *rot, *scale), strict=True):
        ch[name].add_key(t, float(v), 0.0, unit, lin)


def key_track(ch: dict[str, unreal.MovieSceneScriptingDoubleChannel],
              keys: list[tuple[int, tuple[float, float, float], tuple[float, float, float],
                               tuple[float, float, float]]]) -> None:
    """Key (frame, location, rotation, scale) rows in frame order, each rotation unwrapped
    against the one before so no interpolated sample turns the long way round."""
    prev: tuple[float, float, float] | None = None
    for frame, loc, rot, scale in sorted(keys, key=lambda k: k[0]):
        prev = ue_frame.unwrap_rotator(prev, rot)
        key_transform(ch, frame, loc, prev, scale)


def new_sequence(name: str, package: str, log: Any) -> unreal.LevelSequence:
    """A new Level Sequence asset ``package/name``. One left there by an earlier run (a crashed
    editor saved it and never deleted it) is deleted first: ``create_asset`` returns None for a
    path that holds an asset."""
    path = f"{package}/{name}"
    if unreal.EditorAssetLibrary.does_asset_exist(path):
        if not unreal.EditorAssetLibrary.delete_asset(path):
            raise RuntimeError(f"{path}: a sequence left by an earlier run could not be deleted")
        log(f"wmforge: stage2: deleted {path} left by an earlier run")
    tools = unreal.AssetToolsHelpers.get_asset_tools()
    seq = tools.create_asset(name, package, unreal.LevelSequence.static_class(),
                             unreal.LevelSequenceFactoryNew())
    if seq is None:
        raise RuntimeError(f"{path}: create_asset returned None (an asset is in the way)")
    if not isinstance(seq, unreal.LevelSequence):
        raise RuntimeError(f"{path}: not created as a LevelSequence ({seq!r})")
    return seq


def action_runs(frames: list[dict]) -> list[tuple[int, int, str]]:
    """(start, end exclusive, action) of each hold; a respawn starts a new run."""
    runs: list[tuple[int, int, str]] = []
    for f in frames:
        k, a = int(f["frame"]), str(f["action"])
        if runs and runs[-1][2] == a and runs[-1][1] == k and f["event"] != "respawn":
            runs[-1] = (runs[-1][0], k + 1, a)
        else:
            runs.append((k, k + 1, a))
    return runs


def lock_root(anim: unreal.AnimSequence, log: Any) -> None:
    """Root-bone translation locked (Table 2: root motion fought the recorded transform)."""
    anim.set_editor_property("enable_root_motion", False)
    anim.set_editor_property("force_root_lock", True)
    if not anim.get_editor_property("force_root_lock"):
        log(f"wmforge: root_motion_conflict {anim.get_path_name()}: root bone could not be "
            "locked")


def build_sequence(name: str, package: str, frames: list[dict], cameras: list[dict],
                   meta: dict, width: int, height: int, log: Any,
                   views: tuple[str, ...] = VIEWS, character_in_main_pass: bool = True,
                   character_hidden: bool = False
                   ) -> tuple[unreal.LevelSequence, list[unreal.Actor]]:
    """The Level Sequence of one trajectory (its character and the cameras of ``views``) and
    the actors spawned for it. ``character_in_main_pass=False``: the character is keyed and
    animated as always but left out of the main pass (its shadow and reflections stay): the
    first-person job (stage2_mrq). ``character_hidden``: not drawn at all (the first-person
    ground-truth job: its depth, normals and ids must not hold the body the fp video hides).
    The character's label is ``ue_layers.CHARACTER_LABEL``, its object-id name."""
    fps = int(meta["fps"])
    n = len(frames)
    seq = new_sequence(name, package, log)
    seq.set_display_rate(unreal.FrameRate(fps, 1))
    seq.set_tick_resolution(unreal.FrameRate(fps, 1))
    seq.set_playback_start(0)
    seq.set_playback_end(n)
    actors = unreal.get_editor_subsystem(unreal.EditorActorSubsystem)
    if actors is None:
        raise RuntimeError("EditorActorSubsystem unavailable")
    spawned: list[unreal.Actor] = []

    # ---- the character: keyed where its mesh stands (feet) and as its mesh faces
    ch = meta["character"]
    model = ue_paths.object_path(str(ch["model"]))
    mesh = unreal.EditorAssetLibrary.load_asset(model)
    if not isinstance(mesh, unreal.SkeletalMesh):
        raise RuntimeError(f"{model}: not a SkeletalMesh")
    actor = actors.spawn_actor_from_class(unreal.SkeletalMeshActor.static_class(),
                                          unreal.Vector(0.0, 0.0, 0.0))
    if not isinstance(actor, unreal.SkeletalMeshActor):
        raise RuntimeError("SkeletalMeshActor spawn failed")
    spawned.append(actor)
    actor.set_actor_label(ue_layers.CHARACTER_LABEL)
    comp = actor.skeletal_mesh_component  # the actor's root: the track sets its transform
    comp.set_skeletal_mesh_asset(mesh)
    if not character_in_main_pass:
        comp.set_render_in_main_pass(False)
    if character_hidden:
        actor.set_actor_hidden_in_game(True)
    correction = float(ch.get("yaw_correction_deg") or 0.0)
    bounds = mesh.get_imported_bounds()
    lowest = bounds.origin.z - bounds.box_extent.z  # the model's lowest point, mesh space, cm
    binding = seq.add_possessable(actor)
    chans = transform_channels(binding, n)
    keys = []
    for f in frames:
        x, y, z = ue_frame.to_ue_location((f["pos_x"], f["pos_y"], f["pos_z"]))
        z += ue_frame.lift_to_lowest_point_cm(lowest, float(f["scale_z"]))
        keys.append((int(f["frame"]), (x, y, z),
                     ue_frame.character_rotator(float(f["yaw_deg"]), correction),
                     (f["scale_x"], f["scale_y"], f["scale_z"])))
    key_track(chans, keys)
    anims = ch.get("animations") or {}
    track = binding.add_track(unreal.MovieSceneSkeletalAnimationTrack.static_class())
    for a, b, action in action_runs(frames):
        path = anims.get(action) or anims.get("W")
        if not path:
            continue
        anim_path = ue_paths.object_path(str(path), str(ch["model"]))
        anim = unreal.EditorAssetLibrary.load_asset(anim_path)
        if not isinstance(anim, unreal.AnimSequence):
            raise RuntimeError(f"{anim_path}: not an AnimSequence")
        lock_root(anim, log)
        sec = track.add_section()
        if not isinstance(sec, unreal.MovieSceneSkeletalAnimationSection):
            raise RuntimeError("animation track made a non-animation section")
        sec.set_range(a, b)
        params = sec.params
        params.animation = anim
        sec.params = params

    # ---- the cameras of ``views``
    by_view: dict[str, list[dict]] = {v: [] for v in VIEWS}
    for row in cameras:
        by_view[str(row["view"])].append(row)
    first = None
    for view in views:
        rows = sorted(by_view[view], key=lambda x: int(x["frame"]))
        cam = actors.spawn_actor_from_class(unreal.CineCameraActor.static_class(),
                                            unreal.Vector(0.0, 0.0, 0.0))
        if not isinstance(cam, unreal.CineCameraActor):
            raise RuntimeError("CineCameraActor spawn failed")
        spawned.append(cam)
        cam.set_actor_label(view)  # MRQ's {camera_name}
        cc = cam.get_cine_camera_component()
        fb = cc.filmback
        fb.sensor_width = SENSOR_WIDTH_MM
        fb.sensor_height = SENSOR_WIDTH_MM * height / width
        cc.filmback = fb
        fov = float(rows[0]["fov_deg"])
        cc.current_focal_length = SENSOR_WIDTH_MM / (2 * math.tan(math.radians(fov) / 2))
        focus = cc.focus_settings  # the embedded views are sharp everywhere: no depth of field
        focus.focus_method = unreal.CameraFocusMethod.DISABLE
        cc.focus_settings = focus
        cb = seq.add_possessable(cam)
        cch = transform_channels(cb, n)
        key_track(cch, [(int(row["frame"]),
                         ue_frame.to_ue_location((row["pos_x"], row["pos_y"], row["pos_z"])),
                         ue_frame.camera_rotator_from_cv_quat((row["rot_w"], row["rot_x"],
                                                               row["rot_y"], row["rot_z"])),
                         (1.0, 1.0, 1.0)) for row in rows])
        if first is None:
            first = cb
    assert first is not None
    cut_track = seq.add_track(unreal.MovieSceneCameraCutTrack.static_class())
    cut = cut_track.add_section()
    if not isinstance(cut, unreal.MovieSceneCameraCutSection):
        raise RuntimeError("camera cut track made a non-camera-cut section")
    cut.set_range(0, n)
    cut.set_camera_binding_id(seq.get_binding_id(first))
    if not unreal.EditorAssetLibrary.save_loaded_asset(seq):
        raise RuntimeError(f"{seq.get_path_name()}: could not be saved (MRQ loads it by path)")
    return seq, spawned


def probe(seq: unreal.LevelSequence, spawned: list[unreal.Actor], frames: list[dict],
          meta: dict, pass_name: str, log: Any) -> list[dict]:
    """What the sequence does to the world, read back in the editor (the smoke test's
    evidence, ``wmforge unreal smoke``): the sequence is opened in Sequencer and scrubbed to a
    few frames; for each, the character's lowest point (its bounds, all components) against the
    recorded feet, the direction it faces against recorded yaw + correction, whether it is in
    the main pass, and whether the fp camera sits inside its bounds (the body would fill fp)."""
    lib = unreal.LevelSequenceEditorBlueprintLibrary
    if not lib.open_level_sequence(seq):
        raise RuntimeError(f"{seq.get_path_name()}: Sequencer could not open it for the probe")
    char = next(a for a in spawned if isinstance(a, unreal.SkeletalMeshActor))
    fp = next((a for a in spawned if isinstance(a, unreal.CineCameraActor)
               and a.get_actor_label() == "fp"), None)
    correction = float(meta["character"].get("yaw_correction_deg") or 0.0)
    rows = []
    try:
        n = len(frames)
        for k in sorted({0, n // 2, n - 1}):
            lib.set_current_time(k)
            f = frames[k]
            origin, extent = char.get_actor_bounds(False)
            fwd = char.get_actor_forward_vector()
            ue_yaw = math.degrees(math.atan2(fwd.y, fwd.x))
            want = ue_frame.to_ue_yaw(float(f["yaw_deg"]) + correction)
            row = {"pass": pass_name, "frame": k, "feet_z_m": float(f["pos_z"]),
                   "lowest_z_m": ue_frame.from_ue_length(origin.z - extent.z),
                   "yaw_error_deg": abs(((ue_yaw - want) + 180.0) % 360.0 - 180.0),
                   "main_pass": bool(char.skeletal_mesh_component.get_editor_property(
                       "render_in_main_pass"))}
            if fp is not None:
                c = fp.get_actor_location()
                row["fp_camera_in_body"] = bool(
                    abs(c.x - origin.x) <= extent.x and abs(c.y - origin.y) <= extent.y
                    and abs(c.z - origin.z) <= extent.z)
            rows.append(row)
    finally:
        lib.close_level_sequence()
    log(f"wmforge: stage2: probe {pass_name}: {rows}")
    return rows
