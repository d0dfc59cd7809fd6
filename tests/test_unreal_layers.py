"""Issue 33, the Unreal path: the editor scripts render the ground-truth passes on the fake
Unreal (per-camera MRQ jobs, EXR in Unreal's units and axes, Cryptomatte ids), and the node side
turns them into the layer contract. The checks use the recorded cameras and plain geometry, not
the fake's own ray casts: a floor's depth equals the ray–plane depth from K and the pose, its
normals point up in the world, ids are stable, forward and backward flow agree."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stages.media.layers import LAYERS, read_layer
from tests.fakes.unreal import namespace as fu
from tests.test_unreal_fake import KEY, MAP, SCRIPTS, new_editor, stage1, stage2_instance

_ = stage1  # the module-scoped Stage I fixture


@pytest.fixture(scope="module")
def gt(stage1, tmp_path_factory):  # noqa: F811
    from stages.engine.unreal_frames import finish_trajectory

    inst, spec = stage2_instance(tmp_path_factory.mktemp("ue_gt"), stage1)
    spec["jobs"] = spec["jobs"][:1]
    spec["ground_truth"] = list(LAYERS)
    (inst / "instance.json").write_text(json.dumps(spec))
    ed = new_editor(stage1["course"])
    rc = ed.run(SCRIPTS / "stage2_mrq.py", {"WMFORGE_SPEC": str(inst / "instance.json")}, MAP)
    job = spec["jobs"][0]
    name, traj = job["name"], Path(job["traj_dir"])
    ldir = inst / "layers" / name
    files = sorted(str(p.relative_to(ldir)) for p in ldir.rglob("*.exr"))
    from stages.engine.unreal_layers import read_exr

    raw = {b: read_exr(ldir / "back" / f"{p}.000010.exr") for b, p in (
        ("depth", "FinalImageWmfDepth"), ("normals", "FinalImageWmfNormal"),
        ("ids", "ActorHitProxyMask00"))}
    import shutil

    broken = inst / "broken"  # a copy with one pass missing (test below)
    shutil.copytree(ldir, broken, ignore=shutil.ignore_patterns("FinalImage.*"))
    (broken / "left" / "FinalImageWmfDepth.000042.exr").unlink()
    rmeta = finish_trajectory(inst / "frames" / name, traj, inst / name, name, KEY,
                              spec["settings"], layers=list(LAYERS), layers_dir=ldir)
    return {"broken": broken, "ed": ed, "rc": rc, "inst": inst, "spec": spec,
            "out": inst / name, "traj": traj, "files": files, "raw": raw, "rmeta": rmeta,
            "ldir": ldir}


def test_layer_jobs_are_one_camera_one_unjittered_sample_each(gt) -> None:
    assert gt["rc"] == 0, gt["ed"].log_lines[-5:]
    jobs = [j for js, _ in gt["ed"].renders for j in js]
    names = [j.job_name.split(":")[1] for j in jobs]
    assert names == ["views", "fp"] + [f"layers_{v}" for v in ("back", "left", "right", "top",
                                                              "fp")]
    for j in jobs[2:]:
        s = j.config.settings
        aa = s[fu.MoviePipelineAntiAliasingSetting]
        assert (aa.spatial_sample_count, aa.temporal_sample_count) == (1, 1)
        assert not s[fu.MoviePipelineCameraSetting].render_all_cameras
        ids = s[fu.MoviePipelineObjectIdRenderPass]
        assert ids.id_type is fu.MoviePipelineObjectIdPassIdType.ACTOR
        pp = s[fu.MoviePipelineDeferredPassBase].additional_post_process_materials
        assert [(p.name, p.enabled, p.high_precision_output) for p in pp] == [
            ("WmfDepth", True, True), ("WmfNormal", True, True)]
        exr = s[fu.MoviePipelineImageSequenceOutput_EXR]
        assert exr.compression is fu.EXRCompressionFormat.ZIP and not exr.multilayer
    n = len(pd.read_parquet(gt["traj"] / "frames.parquet"))
    for v in ("back", "fp"):
        for p in ("FinalImage", "FinalImageWmfDepth", "FinalImageWmfNormal",
                  "ActorHitProxyMask00", "ActorHitProxyMask02"):
            assert sum(f.startswith(f"{v}/{p}.") for f in gt["files"]) == n, (v, p)
    assert not gt["ldir"].exists()  # the EXRs go once the layers are written


def test_raw_passes_are_in_unreal_units_and_cryptomatte(gt) -> None:
    (dch, _), (nch, _), (ich, ih) = gt["raw"]["depth"], gt["raw"]["normals"], gt["raw"]["ids"]
    assert dch["R"].dtype == np.float32 and nch["R"].dtype == np.float32  # 32-bit passes
    d = dch["R"][np.isfinite(dch["R"]) & (dch["R"] < 1e8)]
    assert d.size and d.min() > 50.0  # centimetres: nothing nearer than 0.5 m to the back camera
    man = next(json.loads(v) for k, v in ih.items() if k.endswith("/manifest"))
    assert {"default", "course", "Crate"} <= set(man)
    ids = ich["R"].view(np.uint32)
    assert set(np.unique(ids).tolist()) <= {int(h, 16) for h in man.values()}


def _cam(traj: Path, view: str, k: int):
    c = pd.read_parquet(traj / "cameras.parquet")
    r = c[(c["view"] == view) & (c["frame"] == k)].iloc[0]
    w, x, y, z = r["rot_w"], r["rot_x"], r["rot_y"], r["rot_z"]
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return R, np.array([r["pos_x"], r["pos_y"], r["pos_z"]]), float(r["fov_deg"])


def _floor(gt, view: str, k: int):
    """Pixels whose back-projected point lies on the most common height (the ground), with
    the ray–plane depth of every pixel from the recorded camera alone."""
    st = gt["spec"]["settings"]
    W, H = st["width"], st["height"]
    depth = read_layer(gt["out"], view, "depth")[k]
    R, c, fov = _cam(gt["traj"], view, k)
    f = (W / 2) / math.tan(math.radians(fov) / 2)
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    ray = np.stack([(u - W / 2) / f, (v - H / 2) / f, np.ones_like(u)], -1)  # z = 1
    rw = ray @ R.T
    pz = c[2] + np.where(np.isfinite(depth), depth, 0) * rw[..., 2]
    zs = np.round(pz[np.isfinite(depth)], 2)
    h = float(pd.Series(zs).mode().iloc[0])
    on = np.isfinite(depth) & (np.abs(pz - h) < 0.01)
    inner = on.copy()  # away from the floor's edges (a wall's foot is at floor height too)
    inner[1:] &= on[:-1]
    inner[:-1] &= on[1:]
    inner[:, 1:] &= on[:, :-1]
    inner[:, :-1] &= on[:, 1:]
    inner[[0, -1]] = False
    inner[:, [0, -1]] = False
    on = inner
    with np.errstate(divide="ignore"):
        plane = (h - c[2]) / rw[..., 2]
    return depth, on, plane, R


def test_floor_depth_is_the_ray_plane_depth_and_its_normals_point_up(gt) -> None:
    """The top camera looks down on the ground the character walks on."""
    view = "top"
    normals = read_layer(gt["out"], view, "normals")
    for k in (0, 45, 89):
        depth, on, plane, R = _floor(gt, view, k)
        assert on.sum() >= 30, on.sum()
        # z-depth along the optical axis, metres: equal to the analytic plane depth
        assert np.abs(depth[on] - plane[on]).max() < 2e-3 * plane[on].max()
        up = normals[k][on] @ R.T  # camera → world
        ang = np.degrees(np.arccos(np.clip(up[:, 2], -1, 1)))
        assert ang.max() < 2.0, ang.max()
        assert np.all(np.isinf(depth) == np.all(normals[k] == 0, axis=-1))


def test_ids_are_stable_and_mapped_to_instances(gt) -> None:
    inst = pd.read_parquet(gt["out"] / "instances.parquet")
    assert inst["id"].dtype == np.uint32
    by_name = dict(zip(inst["name"], inst["id"], strict=True))
    assert by_name["wmforge_character"] == 1
    assert set(inst[inst["name"] == "wmforge_character"]["kind"]) == {"character"}
    assert {"course", "Crate"} <= set(by_name)
    seen_char = 0
    for view in ("back", "left", "right", "top", "fp"):
        ids = read_layer(gt["out"], view, "ids")
        mask = read_layer(gt["out"], view, "mask")
        depth = read_layer(gt["out"], view, "depth")
        assert set(np.unique(ids).tolist()) <= {0, *inst["id"].tolist()}
        assert np.array_equal(mask, ids == 1)
        assert np.array_equal(ids == 0, np.isinf(depth))
        floor = [int(np.bincount(ids[k][ids[k] > 1].ravel()).argmax()) for k in range(0, 90, 10)
                 if (ids[k] > 1).any()]
        assert set(floor) == {by_name["course"]}  # the level keeps its id in every frame
        if view == "fp":
            assert not mask.any()  # the body the fp video hides is not in its layers either
        else:
            seen_char += int(mask.any(axis=(1, 2)).sum())
    assert seen_char > 100


def test_forward_and_backward_flow_agree_on_static_surfaces(gt) -> None:
    fwd = read_layer(gt["out"], "back", "flow_fwd")
    bwd = read_layer(gt["out"], "back", "flow_bwd")
    mask = read_layer(gt["out"], "back", "mask")
    assert not fwd[-1, ..., 2].any() and not bwd[0, ..., 2].any()
    assert not fwd[..., 2][mask].any()  # the character's skinned motion is not known here
    H, W = fwd.shape[1:3]
    errs, moving = [], 0
    for k in range(0, 89, 4):
        ok = fwd[k, ..., 2] > 0
        js, is_ = np.nonzero(ok)
        x2 = is_ + 0.5 + fwd[k, js, is_, 0]
        y2 = js + 0.5 + fwd[k, js, is_, 1]
        i2 = np.clip(np.floor(x2).astype(int), 0, W - 1)  # quantised to 1/32 px: W stays out
        j2 = np.clip(np.floor(y2).astype(int), 0, H - 1)
        back = bwd[k + 1, j2, i2]
        good = back[:, 2] > 0
        # round trip to within the pixel the point landed in
        errs.append(np.abs(x2[good] + back[good, 0] - (is_[good] + 0.5)).max(initial=0))
        moving += int((np.abs(fwd[k, ..., :2][ok]) > 0.05).any(axis=-1).sum())
    assert max(errs) <= 1.0 and moving > 0


def test_meta_states_the_ground_truth_and_checksums_the_files(gt) -> None:
    meta = json.loads((gt["out"] / "meta.json").read_text())
    g = meta["ground_truth"]
    assert g["layers"] == list(LAYERS) and "un-jittered" in g["sampling"]
    assert set(g["views"]) == {"back", "left", "right", "top", "fp"}
    assert g["unreal"]["passes"]["ids"] == "ActorHitProxyMask00"
    assert "back.depth.mkv" in meta["sha256"] and "instances.parquet" in meta["sha256"]


def test_a_layer_the_project_cannot_make_fails_at_start_up(tmp_path) -> None:
    from stages.engine.unreal_layers import UnrealLayersError, check_layers

    proj = tmp_path / "Render.uproject"
    proj.write_text(json.dumps({"Plugins": [{"Name": "MovieRenderPipeline", "Enabled": True}]}))
    assert check_layers(["normals", "depth"], proj) == ("depth", "normals")
    with pytest.raises(UnrealLayersError, match="MoviePipelineMaskRenderPass") as e:
        check_layers(["depth", "mask"], proj)
    assert str(proj) in str(e.value) and "['mask']" in str(e.value)
    with pytest.raises(ValueError, match="unknown ground-truth layer"):
        check_layers(["depth", "velocity"], proj)


@pytest.mark.parametrize("view", ["back", "left", "right"])
def test_surfaces_are_flat_across_their_normals(gt, view) -> None:
    """Neighbouring pixels with the same normal (the walls and ground the views see) differ by
    a step within their plane: depth, the camera conversion and the normals' axes agree."""
    st = gt["spec"]["settings"]
    W, H = st["width"], st["height"]
    depth, normals = (read_layer(gt["out"], view, x) for x in ("depth", "normals"))
    checked = 0
    for k in range(0, 90, 15):
        R, c, fov = _cam(gt["traj"], view, k)
        f = (W / 2) / math.tan(math.radians(fov) / 2)
        u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
        d = np.where(np.isfinite(depth[k]), depth[k], 0.0)
        p = np.stack([(u - W / 2) / f * d, (v - H / 2) / f * d, d], -1) @ R.T + c
        n = normals[k] @ R.T
        same = (np.einsum("ijk,ijk->ij", n[:, 1:], n[:, :-1]) > math.cos(math.radians(0.5))) \
            & np.isfinite(depth[k][:, 1:]) & np.isfinite(depth[k][:, :-1]) \
            & (np.abs(depth[k][:, 1:] - depth[k][:, :-1]) < 0.2)
        off = np.abs(np.einsum("ijk,ijk->ij", p[:, 1:] - p[:, :-1], n[:, 1:]))[same]
        assert off.size == 0 or off.max() < 2e-3, off.max()
        checked += off.size
    assert checked > 500


def test_the_fake_averages_jittered_samples_as_mrq_does(stage1, tmp_path) -> None:  # noqa: F811
    """Why the layer jobs have one sample: with 3 x 2 samples MRQ (and the fake) jitters and
    averages, so depth at an edge is a blend of two surfaces that neither holds."""
    from tests.fakes.unreal import host, mrq_layers

    ed = new_editor(stage1["course"])
    assert ed.open_map(MAP)
    host.install(ed)
    try:
        cam = fu.Rotator(0.0, -10.0, 0.0)  # looking along +x, a little down
        loc = fu._ue((-8.0, 10.0, 1.5))  # the wall across lane y=10 at x=6 ahead
        out = {}
        for n in (1, 6):
            job = fu.MoviePipelineExecutorJob()
            s = job.config
            o = s.find_or_add_setting_by_class(fu.MoviePipelineOutputSetting)
            o.output_directory = fu.DirectoryPath(str(tmp_path / str(n)))
            o.file_name_format = "{camera_name}/{render_pass}.{frame_number}"
            aa = s.find_or_add_setting_by_class(fu.MoviePipelineAntiAliasingSetting)
            aa.spatial_sample_count, aa.temporal_sample_count = (1, 1) if n == 1 else (3, 2)
            mat = fu.Material("WmfDepth", "/Game/Wmforge/Materials/WmfDepth.WmfDepth")
            mat.set_editor_property("material_domain", fu.MaterialDomain.MD_POST_PROCESS)
            tex = fu.MaterialExpressionSceneTexture()
            mat.expressions, mat.emissive, mat.compiled = [tex], (tex, "Color"), True
            s.find_or_add_setting_by_class(fu.MoviePipelineDeferredPassBase) \
                .additional_post_process_materials = [
                    fu.MoviePipelinePostProcessPass(True, "WmfDepth", mat, True)]
            s.find_or_add_setting_by_class(fu.MoviePipelineImageSequenceOutput_EXR)
            mrq_layers.write_frame(ed, job, "cam", loc, cam, math.radians(90), 32, 18, 0)
            from stages.engine.unreal_layers import read_exr

            ch, _ = read_exr(tmp_path / str(n) / "cam" / "FinalImageWmfDepth.0000.exr")
            out[n] = ch["R"].astype(np.float64)
        near = (out[1] < 1e8) & (out[6] < 1e8)
        diff = np.abs(out[6] - out[1])[near]
        # averaged jittered samples: across an edge a blend of two depths, off by metres
        assert diff.max() > 50.0 and np.count_nonzero(diff) > diff.size // 2, diff.max()
    finally:
        host.install(None)
        ed.engine.close()


def test_the_launcher_refuses_layers_the_project_cannot_make_before_the_editor_starts(
        tmp_path, capsys, monkeypatch) -> None:
    from stages.engine import unreal_launch

    proj = tmp_path / "Render.uproject"
    proj.write_text(json.dumps({"Plugins": [{"Name": "MovieRenderPipeline", "Enabled": True}]}))
    inst = tmp_path / "inst"
    inst.mkdir()
    (inst / "instance.json").write_text(json.dumps({
        "level_id": "x/y", "jobs": [], "ue_map": MAP,
        "settings": {"width": 32, "height": 18, "ground_truth": ["depth", "flow_fwd"]},
        "unreal": {"project": str(proj), "editor": "/nonexistent/UnrealEditor-Cmd"}}))
    started = []
    monkeypatch.setattr(unreal_launch, "run_editor", lambda *a, **k: started.append(a))
    assert unreal_launch.main(["stage2", str(inst)]) == 1
    out = capsys.readouterr().out
    assert "MoviePipelineMaskRenderPass" in out and "flow_fwd" in out and str(proj) in out
    assert not started  # refused before any editor ran


def test_a_missing_pass_fails_the_trajectory_naming_the_file(gt, tmp_path) -> None:
    from stages.engine.unreal_layers import UnrealLayersError, convert

    st = gt["spec"]["settings"]
    with pytest.raises(UnrealLayersError, match="FinalImageWmfDepth.000042.exr") as e:
        convert(gt["broken"], gt["traj"], tmp_path, ["depth"], st["width"], st["height"])
    assert e.value.reason == "layers_missing"
    assert not list(tmp_path.glob("left.depth.*"))  # no file for the view that failed
