"""Stage II end to end on the real engine and encoder: replay, five views + preview, decoded
frame counts, checksums, alignment gate, progress/recovery (a real kill -9), bad input."""

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stages.cluster.keys import render_settings
from stages.cluster.recovery import recover_instance
from stages.core.progress import COMPLETE, PROGRESS, read_progress
from stages.core.trajectory import VIEWS
from stages.engine.instance_render import InstanceRenderer
from stages.media.video import read_frames
from stages.render import run_render
from tests.looks import look
from tests.posed_frames import posed_frames

from .conftest import RENDER_FRAMES as FRAMES
from .conftest import small_render_cfg as _rcfg


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_five_views_and_preview_decode_with_recorded_frame_count(rendered, trajs):
    root, index, fails = rendered
    assert fails.empty, fails.to_string()
    assert sorted(index["trajectory"]) == ["traj_0000", "traj_0001", "traj_0002"]
    for row in index.to_dict("records"):
        d = root / row["path"]
        # data/renders/<scene>/<level>/<instance>/<traj>
        assert d.parts[-4:-2] == ("NatureValley", "AlpineMeadow")
        assert d.parent.name.startswith("local-") and d.parent.name.count("-") == 2
        meta = json.loads((d / "meta.json").read_text())
        assert meta["videos"] == [f"{v}.mp4" for v in VIEWS] + ["preview.mp4"]
        for v in VIEWS:
            frames = read_frames(d / f"{v}.mp4")
            assert len(frames) == FRAMES and frames[0].shape == (108, 192, 3)
            assert frames[0].std() > 5  # a rendered scene, not a blank frame
        prev = read_frames(d / "preview.mp4")
        assert len(prev) == FRAMES and prev[0].shape == (2 * 54, 3 * 96, 3)
        for name, digest in meta["sha256"].items():
            assert _sha(d / name) == digest, name
        # the trajectory travels with its videos: frames unchanged, camera poses unchanged and
        # K (Stage I's, for 1280x720) at the render's size (render folder schema 2)
        src = trajs / "NatureValley__AlpineMeadow" / row["trajectory"]
        assert _sha(d / "frames.parquet") == _sha(src / "frames.parquet")
        got, was = pd.read_parquet(d / "cameras.parquet"), pd.read_parquet(src / "cameras.parquet")
        k = ["width", "height", "fx", "fy", "cx", "cy"]
        assert got.drop(columns=k).equals(was.drop(columns=k))
        assert (got["width"] == 192).all() and (got["cx"] == 96).all() and (got["cy"] == 54).all()
        assert np.allclose(got["fx"], was["fx"] * 192 / 1280)
        assert meta["encode"]["codec"] == "libx264" and meta["encode"]["pix_fmt"] == "yuv420p"
        assert meta["settings"]["spatial_samples"] == 2
        assert meta["idle_pose"] == "idle_clip"  # Alex has an idle clip
        assert meta["settings"]["temporal_samples"] == 2
        # alignment gate: every in-view frame of every external view lands on the character
        al = meta["alignment"]
        assert al["aligned_fraction"] >= 0.95 and al["transform_max_err"] <= 1e-4
        assert sum(al["in_view_frames"].values()) > 0.8 * 4 * FRAMES
        assert meta["level"]["textures"] > 0
        assert meta["level"]["textures_full_res"] == meta["level"]["textures"]
    # the node's two CPU slots each rendered part of the level: one progress line per
    # trajectory over the level's instances, each closed with its marker
    insts = {(root / p).parent for p in index["path"]}
    assert all((i / COMPLETE).exists() for i in insts)
    lines = [x for i in insts for x in (i / PROGRESS).read_text().splitlines()]
    assert sorted(x.split()[1] for x in lines) == ["traj_0000", "traj_0001", "traj_0002"]


def test_finished_trajectories_are_never_rendered_twice(rendered, trajs):
    root, index, _ = rendered
    before = sorted(p.name for p in (root / "NatureValley" / "AlpineMeadow").iterdir())
    index2, fails2 = run_render(_rcfg(), trajs, root)
    after = sorted(p.name for p in (root / "NatureValley" / "AlpineMeadow").iterdir())
    assert before == after and len(before) == index["instance"].nunique()  # no new instance
    assert index2["path"].tolist() == index["path"].tolist() and fails2.empty


def test_gop_allows_seeking_to_a_late_frame(rendered):
    import av

    root, index, _ = rendered
    path = root / index["path"].iloc[0] / "back.mp4"
    with av.open(str(path)) as c:
        st = c.streams.video[0]
        keys = [p.pts for p in c.demux(st) if p.is_keyframe]
    assert keys[0] == 0 and len(keys) == 1  # 24 frames < 1 s GOP: one closed GOP
    with av.open(str(path)) as c:
        st = c.streams.video[0]
        c.seek(int(20 / (st.time_base * 30)), stream=st, any_frame=False, backward=True)
        f = next(c.decode(st))
        assert f.pts <= 20


def test_instance_killed_mid_trajectory_recovers_finished_ones_bit_identical(trajs, rendered,
                                                                             tmp_path):
    """A real kill -9 of the rendering process in the middle of its second trajectory."""
    root, index, _ = rendered
    settings = render_settings(_rcfg(), 30)
    inst = tmp_path / "NatureValley" / "AlpineMeadow" / "local-20990101T000000Z-0000"
    inst.mkdir(parents=True)
    jobs = []
    for name in ("traj_0000", "traj_0001", "traj_0002"):
        ref = root / index.set_index("trajectory").loc[name, "path"]
        key = json.loads((ref / "meta.json").read_text())["render_key"]
        jobs.append({"name": name, "traj_dir": str(trajs / "NatureValley__AlpineMeadow" / name),
                     "key": key})
    ref_inst = (root / index.set_index("trajectory").loc["traj_0000", "path"]).parent
    lineage = json.loads((ref_inst / "instance.json").read_text())["lineage"]
    (inst / "instance.json").write_text(json.dumps(
        {"level_id": "NatureValley/AlpineMeadow", "settings": settings.as_dict(),
         "base": os.getcwd(), "jobs": jobs, "lineage": lineage}))
    proc = subprocess.Popen([sys.executable, "-m", "stages.engine.render_worker", str(inst)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        if len(read_progress(inst)) == 1 and list((inst / "traj_0001").glob("*.mp4.part")):
            break
        time.sleep(0.005)
    else:
        proc.kill()
        pytest.fail("renderer never reached its second trajectory")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (inst / COMPLETE).exists()
    kept = recover_instance(inst)
    assert kept == ["traj_0000"]
    assert sorted(p.name for p in inst.iterdir() if p.is_dir()) == ["traj_0000"]
    ref = root / index.set_index("trajectory").loc["traj_0000", "path"]
    ours = sorted(p.name for p in (inst / "traj_0000").iterdir())
    assert ours == sorted(p.name for p in ref.iterdir())
    for name in ours:
        if name == "meta.json" and _sha(inst / "traj_0000" / name) != _sha(ref / name):
            a_, b_ = (json.loads((d / name).read_text()) for d in (inst / "traj_0000", ref))
            diff = {k: (a_.get(k), b_.get(k)) for k in set(a_) | set(b_) if a_.get(k) != b_.get(k)}
            raise AssertionError(f"meta.json differs in {sorted(diff)}: {diff}")
        assert _sha(inst / "traj_0000" / name) == _sha(ref / name), name


def test_recovery_discards_an_instance_with_nothing_finished(tmp_path):
    inst = tmp_path / "S" / "L" / "local-20990101T000000Z-0001"
    (inst / "traj_0000").mkdir(parents=True)
    (inst / "traj_0000" / "back.mp4.part").write_bytes(b"\0" * 100)
    (inst / "instance.json").write_text("{}")
    (inst / PROGRESS).write_text("DONE traj_0000 frames=0000")  # torn line: not a record
    assert recover_instance(inst) == []
    assert not inst.exists()


def test_full_disk_during_encoding_leaves_no_complete_looking_video(trajs, tmp_path):
    """The kernel refuses writes past a file-size limit (RLIMIT_FSIZE) in the renderer
    process, so the encoder hits a real write error mid-video."""
    settings = render_settings(_rcfg(), 30)
    inst = tmp_path / "S" / "L" / "local-20990101T000000Z-0002"
    inst.mkdir(parents=True)
    (inst / "instance.json").write_text(json.dumps(
        {"settings": settings.as_dict(), "base": os.getcwd(), "jobs": [
            {"name": "traj_0000", "key": "0" * 16,
             "traj_dir": str(trajs / "NatureValley__AlpineMeadow" / "traj_0000")}]}))

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))

    subprocess.run([sys.executable, "-m", "stages.engine.render_worker", str(inst)], check=True,
                   preexec_fn=limit, capture_output=True)
    fails = [json.loads(x) for x in (inst / "failures.jsonl").read_text().splitlines()]
    assert len(fails) == 1 and fails[0]["reason"] in ("disk_full", "encode_failed"), fails
    assert read_progress(inst) == {}
    assert not list(inst.rglob("*.mp4")) and not list(inst.rglob("*.part"))


def test_invalid_trajectory_is_named_and_nothing_rendered(trajs, tmp_path):
    import shutil

    bad = tmp_path / "trajs" / "NatureValley__AlpineMeadow"
    shutil.copytree(trajs / "NatureValley__AlpineMeadow" / "traj_0000", bad / "traj_0000")
    f = pd.read_parquet(bad / "traj_0000" / "frames.parquet")
    f.loc[5, "action"] = "JUMP"
    f.to_parquet(bad / "traj_0000" / "frames.parquet")
    index, fails = run_render(_rcfg(), tmp_path / "trajs", tmp_path / "renders")
    assert index.empty
    assert fails["reason"].tolist() == ["invalid_trajectory"]
    detail = fails["detail"].iloc[0]
    assert "frames.parquet" in detail and "action" in detail and "row 5" in detail
    assert not list((tmp_path / "renders").rglob("*.mp4"))


def test_missing_asset_fails_that_trajectory_and_the_instance_goes_on(trajs, tmp_path):
    import shutil

    src = trajs / "NatureValley__AlpineMeadow"
    dst = tmp_path / "trajs" / "NatureValley__AlpineMeadow"
    for name in ("traj_0000", "traj_0001"):
        shutil.copytree(src / name, dst / name)
    m = json.loads((dst / "traj_0000" / "meta.json").read_text())
    m["character"]["model"] = "assets/nowhere/Ghost.glb"
    (dst / "traj_0000" / "meta.json").write_text(json.dumps(m))
    index, fails = run_render(_rcfg(), tmp_path / "trajs", tmp_path / "renders")
    assert index["trajectory"].tolist() == ["traj_0001"]
    assert fails["reason"].tolist() == ["missing_asset"]
    assert "Ghost.glb" in fails["detail"].iloc[0]


def test_alignment_gate_fails_a_misplaced_camera_injected_fault(trajs, tmp_path, monkeypatch):
    """Break the renderer's camera conversion (mirror the view) and the gate must catch it."""
    import stages.engine.replay_render as rr

    real = rr.cv_to_panda_mat

    def mirrored(q):
        x, y, z = real(q)
        return [[-c for c in x], [-c for c in y], z]  # looks backwards

    monkeypatch.setattr(rr, "cv_to_panda_mat", mirrored)
    inst = tmp_path / "inst"
    inst.mkdir()
    ir = InstanceRenderer(inst, render_settings(_rcfg(), 30), "p3headlessgl", Path.cwd())
    from stages.engine.instance_render import _Fail

    with pytest.raises(_Fail) as err:
        ir.render(trajs / "NatureValley__AlpineMeadow" / "traj_0000", "traj_0000", "k" * 16)
    assert err.value.reason == "misaligned"
    ir.close()


def test_colour_pass_draws_the_character_exactly_where_the_mask_is(trajs, tmp_path):
    """Render a recorded frame with and without the character: the pixels that change are the
    mask's pixels, and the projected recorded position falls inside them."""
    cfg = _rcfg(spatial_samples=1, temporal_samples=1)
    with posed_frames(tmp_path, cfg, trajs / "NatureValley__AlpineMeadow" / "traj_0001") as pf:
        pose = pf.pose(FRAMES // 2, 0.3)
        with_char, masks, _ = pf.ir.r.render([pose], pose, 0.0)
        for holder in pf.ir.r.char_copies:
            holder.hide()
        without, _, _ = pf.ir.r.render([pose], pose, 0.0)
    for v in ("back", "left", "right"):
        changed = np.abs(with_char[v].astype(int) - without[v].astype(int)).max(axis=2) > 12
        m = masks[v]
        assert m.sum() > 20, v
        iou = (changed & m).sum() / (changed | m).sum()
        assert iou > 0.7, (v, iou)


def test_pushed_props_are_recorded_and_replayed_where_stage1_put_them(trajs, tmp_path):
    """Stage I records every dynamic prop each frame (props.parquet); Stage II places each prop
    at its recorded transform (read back exactly), and a prop moved in props.parquet is drawn
    where the file says: here, in front of the back camera, hiding the character."""
    import shutil

    src = trajs / "NatureValley__AlpineMeadow" / "traj_0000"
    props = pd.read_parquet(src / "props.parquet")
    names = sorted(set(props["prop"]))
    assert names == [f"Crate_{i}" for i in range(4)]
    assert len(props) == FRAMES * len(names)
    assert sorted(props["frame"].unique().tolist()) == list(range(FRAMES))
    assert np.allclose(np.linalg.norm(props[["rot_w", "rot_x", "rot_y", "rot_z"]], axis=1), 1)

    moved = tmp_path / "moved"
    shutil.copytree(src, moved)
    cams = pd.read_parquet(src / "cameras.parquet")
    back = cams[cams["view"] == "back"].sort_values("frame")
    from stages.core.replay import project

    p2 = props.copy()
    for r in back.itertuples():
        q = (r.rot_w, r.rot_x, r.rot_y, r.rot_z)
        # forward = R @ (0, 0, 1) for the world-from-camera quaternion (OpenCV axes)
        w, x, y, z = q
        fwd = (2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y))
        at = (r.pos_x + 1.2 * fwd[0], r.pos_y + 1.2 * fwd[1], r.pos_z + 1.2 * fwd[2])
        fx = (192 / 2) / np.tan(np.radians(r.fov_deg) / 2)
        u, v, d = project(at, (r.pos_x, r.pos_y, r.pos_z), q, fx, fx, 96, 54)
        assert abs(u - 96) < 1 and abs(v - 54) < 1 and d > 1
        sel = (p2["frame"] == r.frame) & (p2["prop"] == "Crate_0")
        p2.loc[sel, ["pos_x", "pos_y", "pos_z"]] = at
    p2.to_parquet(moved / "props.parquet")

    settings = render_settings(_rcfg(spatial_samples=1, temporal_samples=1), 30)
    out = {}
    for name, tdir in (("orig", src), ("moved", moved)):
        inst = tmp_path / f"inst_{name}"
        inst.mkdir()
        ir = InstanceRenderer(inst, settings, "p3headlessgl", Path.cwd())
        meta = ir.render(tdir, "traj_0000", "k" * 16)
        ir.close()
        assert meta["alignment"]["props_replayed"] == 4
        assert meta["alignment"]["transform_max_err"] < 1e-4
        assert meta["level"]["dynamic_props"] == 4
        assert (inst / "traj_0000" / "props.parquet").read_bytes() == (
            tdir / "props.parquet").read_bytes()
        out[name] = {v: np.stack(read_frames(inst / "traj_0000" / f"{v}.mp4"))
                     for v in ("back", "top")}
    centre = np.s_[:, 44:64, 86:106]
    orig_c = out["orig"]["back"][centre].astype(int)
    moved_c = out["moved"]["back"][centre].astype(int)
    # the middle of every back frame turns from character (blue) on grass (green) into the
    # brown wood crate (red over green); measured by hue, not brightness: the scene is dark
    red_minus_green = {k: (x[..., 0] - x[..., 1]).mean(axis=(1, 2))
                       for k, x in (("orig", orig_c), ("moved", moved_c))}
    assert (red_minus_green["moved"] > 6).all(), red_minus_green["moved"]
    assert (red_minus_green["orig"] < 0).all(), red_minus_green["orig"]
    blue = {k: (x[..., 2] - x[..., 0]).mean() for k, x in (("orig", orig_c), ("moved", moved_c))}
    # the character is hidden (its blue shirt and jeans fill less of the crop than the old
    # box body did: a skinned body is narrower)
    assert blue["orig"] > 4 and blue["moved"] < 0, blue
    diff = np.abs(orig_c - moved_c)
    # a prop 1.2 m in front of the back camera is far from the top camera's centre of view
    assert np.abs(out["orig"]["top"].astype(int) - out["moved"]["top"]).mean() < diff.mean()


def test_level_cameras_and_self_playing_animations_are_removed_and_reported(trajs, tmp_path):
    """A level file that carries its own camera (beside its sun, which Panda3D also types as a
    camera and which must survive), an animation bundle, a self-playing flip-book
    and an autoplay tag (as exported levels do): Stage II strips or freezes each one, says so
    in meta.json, and renders."""
    import shutil

    from panda3d.core import (
        AnimBundle,
        AnimBundleNode,
        Camera,
        NodePath,
        PerspectiveLens,
        SequenceNode,
    )

    from stages.engine.models import load_model

    src = trajs / "NatureValley__AlpineMeadow" / "traj_0000"
    meta = json.loads((src / "meta.json").read_text())
    level = load_model(meta["level"]["path"])
    level.flattenLight()
    root = NodePath("ExportedLevel")
    level.reparentTo(root)
    root.attachNewNode(Camera("EditorCam", PerspectiveLens())).setPos(0, -30, 10)
    root.attachNewNode(AnimBundleNode("IntroFlythrough", AnimBundle("IntroFlythrough", 30, 90)))
    seq = SequenceNode("TorchFlicker")
    seq.setFrameRate(12)
    flick = root.attachNewNode(seq)
    for i in range(3):
        NodePath("flame").copyTo(flick).setZ(i)
    seq.loop(True)
    root.attachNewNode("Windmill").setTag("autoplay", "1")
    bam = tmp_path / "ExportedLevel.bam"
    assert root.writeBamFile(str(bam))

    tdir = tmp_path / "traj" / "traj_0000"
    shutil.copytree(src, tdir)
    meta["level"] = {"path": str(bam), "scale": 1.0, "up_axis": "Z"}
    (tdir / "meta.json").write_text(json.dumps(meta))
    inst = tmp_path / "inst"
    inst.mkdir()
    settings = render_settings(_rcfg(spatial_samples=1, temporal_samples=1), 30)
    ir = InstanceRenderer(inst, settings, "p3headlessgl", Path.cwd())
    rmeta = ir.render(tdir, "traj_0000", "k" * 16)
    loaded = ir.r.level_np
    assert loaded.findAllMatches("**/+Camera").getNumPaths() == 0  # the level's cameras went
    # the level's sun is a light (a Camera subclass): it stays, as the shadow-casting sun
    assert ir.r.sun is not None and ir.r.sun.getName() == "Sun"
    assert ir.r.sun.node().isShadowCaster()
    assert rmeta["level"]["lights"] >= 1
    assert loaded.findAllMatches("**/+AnimBundleNode").getNumPaths() == 0
    frozen = loaded.find("**/+SequenceNode").node()
    assert not frozen.isPlaying() and frozen.getFrame() == 0
    ir.close()
    assert sorted(rmeta["level"]["removed"]) == [
        "animation:IntroFlythrough", "autoplay:TorchFlicker", "autoplay:Windmill",
        "camera:EditorCam"]
    on_disk = json.loads((inst / "traj_0000" / "meta.json").read_text())
    assert on_disk["level"]["removed"] == rmeta["level"]["removed"]
    assert len(read_frames(inst / "traj_0000" / "back.mp4")) == FRAMES


def test_orientation_correction_turns_the_model_to_its_walking_direction(tmp_path):
    """A body with a red nose on the model's own forward (+Y, as Panda3D models are authored),
    seen by a camera straight above: with the recorded correction (-90°) the nose leads along
    the character's yaw; without it (0°) the character faces sideways, as before this fix."""
    import math

    from stages.assetgen.gltf_writer import GlbBuilder
    from stages.assetgen.primitives import box
    from stages.core import replay
    from stages.core.trajectory import yaw_quat
    from stages.engine.models import load_model
    from stages.engine.replay_render import CharacterPose, ReplayRenderer, SamplePose, ViewPose

    b = GlbBuilder()
    b.node("body", b.mesh("body", box(0.4, 0.4, 1.6), b.material("grey", (0.5, 0.5, 0.5))))
    b.node("nose", b.mesh("nose", box(0.2, 0.3, 0.2, center=(0.0, 0.35, 1.2)),
                          b.material("red", (1.0, 0.0, 0.0), emissive=(1.0, 0.0, 0.0))))
    char = tmp_path / "marker.glb"
    char.write_bytes(b.to_glb())
    g = GlbBuilder()
    g.node("ground", g.mesh("ground", box(20, 20, 0.1, center=(0, 0, -0.1)),
                            g.material("dark", (0.1, 0.1, 0.1))))
    ground = tmp_path / "ground.glb"
    ground.write_bytes(g.to_glb())
    r = ReplayRenderer(160, 160, 1, 1, "p3headlessgl", 1, look=look())
    r.load_level(load_model(str(ground)), {})
    top = ViewPose((0.0, 0.0, 6.0), (0.0, 1.0, 0.0, 0.0), 50.0)  # looking straight down
    fx = 80 / math.tan(math.radians(25))
    for corr, yaw in ((-90.0, 0.0), (-90.0, 90.0), (-90.0, -135.0), (0.0, 0.0)):
        r.load_character(load_model(str(char)), str(char), {}, corr)
        pose = SamplePose(CharacterPose((0.0, 0.0, 0.0), yaw_quat(yaw), (1.0, 1.0, 1.0), None,
                                        0.0), {v: top for v in VIEWS})
        colors, _, _ = r.render([pose], pose, 0.0)
        img = colors["top"].astype(int)
        v, u = np.nonzero((img[..., 0] > 150) & (img[..., 1] < 90) & (img[..., 2] < 90))
        assert len(u) > 10, (corr, yaw)
        a = math.radians(90.0 + corr + yaw)  # the model's +Y, turned by the correction and yaw
        want = replay.project((0.35 * math.cos(a), 0.35 * math.sin(a), 1.3), top.pos,
                              top.quat, fx, fx, 80, 80)
        got = (u.mean(), v.mean())
        assert math.dist(got, want[:2]) < 5, (corr, yaw, got, want)
        if corr == -90.0:  # the nose leads along the walking direction (yaw)
            walk = replay.project((0.35 * math.cos(math.radians(yaw)),
                                   0.35 * math.sin(math.radians(yaw)), 1.3), top.pos, top.quat,
                                  fx, fx, 80, 80)
            assert math.dist(got, walk[:2]) < 5
    r.close()


def test_the_renderer_beats_while_it_makes_frames(trajs, tmp_path, monkeypatch):
    """A trajectory that renders longer than node.stall_timeout_s is not a stall: the renderer
    touches <instance>/heartbeat while it makes frames (the node runner watches the instance
    folder's files; the videos grow one folder below). Seen here at every beat."""
    seen: list[int] = []
    inst = tmp_path / "inst"
    inst.mkdir()
    ir = InstanceRenderer(inst, render_settings(_rcfg(), 30), "p3headlessgl", Path.cwd())
    real = InstanceRenderer.beat

    def beat(self, every_s: float = 0.5) -> None:
        real(self, 0.0)
        seen.append((inst / "heartbeat").stat().st_mtime_ns)

    monkeypatch.setattr(InstanceRenderer, "beat", beat)
    try:
        ir.render(trajs / "NatureValley__AlpineMeadow" / "traj_0000", "traj_0000", "k" * 16)
    finally:
        ir.close()
    frames = json.loads((inst / "traj_0000" / "meta.json").read_text())["frame_count"]
    assert len(seen) >= frames + 2  # after the level load, after warm-up, every frame
    assert seen == sorted(seen) and seen[-1] > seen[0]


def test_prune_removes_only_instances_no_current_row_names(tmp_path):
    """`render --prune` (the DVC stage's): in each level folder the run rendered, instance
    folders that neither the index nor the failures name are removed. Levels the run has no
    current render of (a staging failure, another node's pool), live instances, and folders
    that are not instances stay; a level id with a nested path maps to its folder."""
    import fcntl

    import pandas as pd

    from stages.engine.render_worker import OWNER_LOCK
    from stages.render import prune_instances

    def inst(level_dir, name):
        d = tmp_path / level_dir / name
        (d / "traj_0000").mkdir(parents=True)
        (d / "instance.json").write_text("{}")
        (d / "traj_0000" / "rgb_fp.mp4").write_bytes(b"x")
        return d

    lv = "NatureValley/AlpineMeadow"
    nested = "Pack/Maps__Arena"  # level id Pack/Maps/Arena (two levels of one file name)
    cur, old, failed, live = (inst(lv, n) for n in ("local-a", "local-b", "local-c", "local-d"))
    n_cur, n_old = inst(nested, "local-a"), inst(nested, "local-b")
    other_old = inst("UrbanBlocks/Downtown", "local-z")  # no current render: not this run's
    # a level rendered in part: one unit's staging failed (a failure naming no instance), so
    # its finished clips are missing from the index although still current: left alone
    part = "SciFiOutpost/Outpost"
    p_cur, p_unit = inst(part, "local-a"), inst(part, "local-b")
    (tmp_path / lv / "notes").mkdir()
    index = pd.DataFrame({"level_id": [lv, "Pack/Maps/Arena", part],
                          "path": [f"{lv}/local-a/traj_0000", f"{nested}/local-a/traj_0000",
                                   f"{part}/local-a/traj_0000"],
                          "instance": ["local-a", "local-a", "local-a"]})
    failures = pd.DataFrame({"level_id": [lv, "UrbanBlocks/Downtown", part],
                             "trajectory": ["t", "t", "t"],
                             "reason": ["gate", "staging", "staging"],
                             "detail": ["", "", ""], "instance": ["local-c", "", ""]})
    with open(live / OWNER_LOCK, "w") as held:  # a renderer still running in it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        gone = prune_instances(tmp_path, index, failures)
    assert sorted(gone) == sorted([old, n_old])
    for d in (cur, failed, live, n_cur, other_old, p_cur, p_unit):
        assert (d / "instance.json").exists(), d
    assert (cur / "traj_0000" / "rgb_fp.mp4").exists() and (tmp_path / lv / "notes").exists()
    assert not old.exists() and not n_old.exists()
    assert sorted(prune_instances(tmp_path, index, failures)) == [live]  # its owner is gone
    # an empty index (nothing rendered: a pool without this node) removes nothing
    assert prune_instances(tmp_path, index.iloc[:0], failures.iloc[:0]) == []
    assert cur.exists() and other_old.exists()
