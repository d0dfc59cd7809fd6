"""Truth checks of the ground-truth layers that do not reuse the renderer's numbers (#33):
depth against a Bullet ray cast on the level's collision geometry, normals of flat floors
against the collision normal, flow by warping the next RGB frame, the character's ids against
the alignment gate's mask."""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stages.cluster.keys import render_settings
from stages.engine.instance_render import InstanceRenderer, _resolve
from stages.media.layers import read_layer
from stages.media.video import read_frames

from ..conftest import small_render_cfg
from ..posed_frames import posed_frames

log = logging.getLogger("wmforge.gt_truth")
W, H = 160, 90


def _render(traj: Path, out: Path, **kw) -> Path:
    cfg = small_render_cfg(width=W, height=H, preview="false", **kw)
    ir = InstanceRenderer(out, render_settings(cfg, 30), "p3headlessgl", Path.cwd())
    try:
        ir.render(traj, traj.name, "k" * 16)
    finally:
        ir.close()
    return out / traj.name


def _rot(q) -> np.ndarray:
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _cam(cams: pd.DataFrame, view: str, f: int) -> tuple[np.ndarray, np.ndarray, float]:
    r = cams[(cams["view"] == view) & (cams["frame"] == f)].iloc[0]
    fx = (W / 2) / math.tan(math.radians(r.fov_deg) / 2)
    return (np.array([r.pos_x, r.pos_y, r.pos_z]),
            _rot((r.rot_w, r.rot_x, r.rot_y, r.rot_z)), fx)


def collision_depth(engine, level_info, cams, view, f, pixels, far=500.0):
    """z-depth and hit normal of a Bullet ray through each pixel centre, or None (with a
    logged reason) when the level has no collision geometry."""
    if level_info.triangles == 0:
        log.warning("depth truth check skipped: level %s has no collision geometry",
                    level_info.level_id)
        return None
    o, rot, fx = _cam(cams, view, f)
    out = []
    for u, v in pixels:
        d = rot @ np.array([(u + 0.5 - W / 2) / fx, (v + 0.5 - H / 2) / fx, 1.0])
        hit = engine.raycast(tuple(o), tuple(o + far * d))
        out.append((np.nan, (0, 0, 0)) if hit is None else (hit.fraction * far, hit.normal))
    return out


@pytest.fixture(scope="module")
def gt_dir(trajs, tmp_path_factory) -> Path:
    return _render(trajs / "NatureValley__AlpineMeadow" / "traj_0001",
                   tmp_path_factory.mktemp("truth"), spatial_samples=1, temporal_samples=1,
                   ground_truth="[depth,normals,ids,mask]")


@pytest.fixture(scope="module")
def level_engine(trajs):
    from stages.engine.embedded import EmbeddedEngine

    meta = json.loads((trajs / "NatureValley__AlpineMeadow" / "traj_0001" / "meta.json")
                      .read_text())
    lv = meta["level"]
    eng = EmbeddedEngine()
    info = eng.load_level(str(_resolve(lv["path"], Path.cwd())), meta["level_id"],
                          float(lv.get("scale", 1.0)), lv.get("up_axis"))
    yield eng, info
    eng.close()


def _static_smooth_pixels(d: Path, view: str, f: int, step: int = 7):
    """Pixels on static level meshes away from depth edges (ray and pixel see one surface)."""
    inst = pd.read_parquet(d / "instances.parquet")
    level_ids = set(inst.loc[inst["kind"] == "level", "id"])
    depth = read_layer(d, view, "depth")[f]
    ids = read_layer(d, view, "ids")[f]
    out = []
    for v in range(2, H - 2, step):
        for u in range(2, W - 2, step):
            win = depth[v - 1:v + 2, u - 1:u + 2]
            if (ids[v, u] in level_ids and np.isfinite(win).all()
                    and win.max() / win.min() < 1.03
                    and (ids[v - 1:v + 2, u - 1:u + 2] == ids[v, u]).all()):
                out.append((u, v))
    return out


def test_depth_equals_a_bullet_ray_cast_within_one_percent(gt_dir, level_engine, trajs):
    eng, info = level_engine
    cams = pd.read_parquet(trajs / "NatureValley__AlpineMeadow" / "traj_0001" / "cameras.parquet")
    checked, worst = 0, 0.0
    for view in ("back", "left", "right", "top", "fp"):
        for f in (0, 11, 23):
            px = _static_smooth_pixels(gt_dir, view, f)
            got = collision_depth(eng, info, cams, view, f, px)
            assert got is not None
            depth = read_layer(gt_dir, view, "depth")[f]
            for (u, v), (z, _) in zip(px, got, strict=True):
                assert np.isfinite(z), (view, f, u, v)
                assert abs(depth[v, u] - z) <= 0.01 * z, (view, f, u, v, depth[v, u], z)
                checked += 1
                worst = max(worst, abs(depth[v, u] - z) / z)
    print(f"depth vs Bullet: {checked} pixels, worst {100 * worst:.3f} %")
    assert checked > 300


def test_a_level_without_collision_geometry_skips_the_depth_check_with_a_reason(caplog):
    from stages.core.engine_types import LevelInfo

    info = LevelInfo(level_id="Pack/NoCollision", bounds_min=(0, 0, 0), bounds_max=(0, 0, 0))
    with caplog.at_level(logging.WARNING, logger="wmforge.gt_truth"):
        assert collision_depth(None, info, None, "back", 0, [(1, 1)]) is None
    assert "Pack/NoCollision has no collision geometry" in caplog.text


@pytest.fixture(scope="module")
def downtown(sample_library, tmp_path_factory) -> tuple[Path, Path]:
    """One short trajectory on UrbanBlocks/Downtown (flat streets) and its render."""
    from stages.config import load_params
    from stages.inventory import run_inventory
    from stages.trajectories import run_trajectories

    cfg = load_params(overrides=[
        "trajectories.per_level=1", "trajectories.frames=8",
        "trajectories.levels=[UrbanBlocks/Downtown]",
        "trajectories.characters=[CharacterPack/Alex]"])
    inv = run_inventory(sample_library, cfg.inventory, "overrides.yaml")
    out = tmp_path_factory.mktemp("traj_downtown")
    assert run_trajectories(cfg, inv.levels, inv.characters, sample_library, out).empty
    traj = out / "UrbanBlocks__Downtown" / "traj_0000"
    return traj, _render(traj, tmp_path_factory.mktemp("truth_downtown"), spatial_samples=1,
                         temporal_samples=1, ground_truth="[depth,normals,ids]")


def test_normals_on_flat_floors_lie_within_two_degrees_of_up(downtown):
    from stages.engine.embedded import EmbeddedEngine

    traj, gt_dir = downtown
    meta = json.loads((traj / "meta.json").read_text())
    lv = meta["level"]
    eng = EmbeddedEngine()
    info = eng.load_level(str(_resolve(lv["path"], Path.cwd())), meta["level_id"],
                          float(lv.get("scale", 1.0)), lv.get("up_axis"))
    cams = pd.read_parquet(traj / "cameras.parquet")
    angles = []
    for view in ("back", "left", "right", "top"):
        for f in (0, 7):
            px = _static_smooth_pixels(gt_dir, view, f, step=3)
            hits = collision_depth(eng, info, cams, view, f, px)
            n = read_layer(gt_dir, view, "normals")[f]
            _, rot, _ = _cam(cams, view, f)
            for (u, v), (_, hn) in zip(px, hits, strict=True):
                if hn[2] > 0.99999:  # the collision mesh is flat and level here
                    up = rot @ n[v, u]
                    angles.append(math.degrees(math.acos(min(1.0, up[2]))))
    eng.close()
    print(f"flat-floor normals: {len(angles)} pixels, worst {max(angles, default=0):.3f} deg")
    assert len(angles) > 50, len(angles)
    assert max(angles) < 2.0, max(angles)


def test_character_ids_equal_the_alignment_gate_mask(trajs, tmp_path):
    cfg = small_render_cfg(width=W, height=H, spatial_samples=1, temporal_samples=1,
                           ground_truth="[ids]")
    compared = 0
    with posed_frames(tmp_path, cfg, trajs / "NatureValley__AlpineMeadow" / "traj_0001") as pf:
        r = pf.ir.r
        for f in (3, 12, 20):
            pose = pf.pose(f, 0.1 * f)
            r.start_ground_truth()
            r.prepare_ground_truth(f, pf.segs, lambda g, p=pose: p, lambda g: None, 0.0)
            _, masks, _ = r.render([pose], pose, 0.0)
            planes = r.gt.read()
            for v in ("back", "left", "right", "top"):
                gt_mask = np.rint(planes[v]["depth"][..., 1]) == 1
                gate = masks[v]  # mask_scale 1: the gate's mask at full resolution
                assert gate.shape == gt_mask.shape
                assert (gt_mask == gate).all(), (v, f, (gt_mask != gate).sum(), gate.sum())
                compared += int(gate.sum())
    assert compared > 200


def _turning_trajectory(src: Path, dst: Path, deg_per_frame: float) -> Path:
    """The trajectory with its back camera held at frame 0's position, turning about the
    world's vertical axis: a static scene seen by a turning camera."""
    shutil.copytree(src, dst)
    cams = pd.read_parquet(dst / "cameras.parquet")
    back = cams["view"] == "back"
    r0 = cams[back & (cams["frame"] == 0)].iloc[0]
    q0 = np.array([r0.rot_w, r0.rot_x, r0.rot_y, r0.rot_z])
    for i in cams.index[back]:
        a = math.radians(deg_per_frame * cams.at[i, "frame"]) / 2
        qz = np.array([math.cos(a), 0, 0, math.sin(a)])
        w1, x1, y1, z1 = qz
        w2, x2, y2, z2 = q0
        q = (w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
             w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2)
        cams.loc[i, ["rot_w", "rot_x", "rot_y", "rot_z"]] = q
        cams.loc[i, ["pos_x", "pos_y", "pos_z"]] = (r0.pos_x, r0.pos_y, r0.pos_z)
    cams.to_parquet(dst / "cameras.parquet")
    return dst


def _bilinear(img: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x0 = np.clip(np.floor(x).astype(int), 0, img.shape[1] - 2)
    y0 = np.clip(np.floor(y).astype(int), 0, img.shape[0] - 2)
    ax, ay = (x - x0)[..., None], (y - y0)[..., None]
    return ((1 - ay) * ((1 - ax) * img[y0, x0] + ax * img[y0, x0 + 1])
            + ay * ((1 - ax) * img[y0 + 1, x0] + ax * img[y0 + 1, x0 + 1]))


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(((a - b) ** 2).mean())
    return 10 * math.log10(255.0 ** 2 / max(mse, 1e-12))


def test_warping_the_next_frame_by_the_flow_reproduces_this_one(trajs, tmp_path):
    """Static, unoccluded pixels of a turning camera (3 degrees a frame), RGB with 8 spatial
    samples: frame t+1 sampled at x + flow_fwd(x) matches frame t at >= 30 dB and beats zero
    flow by >= 6 dB; backward flow the same way."""
    traj = _turning_trajectory(trajs / "NatureValley__AlpineMeadow" / "traj_0002",
                               tmp_path / "traj_turn", 3.0)
    d = _render(traj, tmp_path / "out", spatial_samples=8, temporal_samples=1,
                ground_truth="[ids,flow_fwd,flow_bwd]")
    rgb = np.stack(read_frames(d / "back.mp4")).astype(np.float64)
    ids = read_layer(d, "back", "ids")
    inst = pd.read_parquet(d / "instances.parquet")
    static = np.isin(ids, inst.loc[inst["kind"] == "level", "id"].to_numpy())
    u, v = np.meshgrid(np.arange(W) + 0.0, np.arange(H) + 0.0)
    for layer, step in (("flow_fwd", 1), ("flow_bwd", -1)):
        fl = read_layer(d, "back", layer)
        warped, zero, ref = [], [], []
        for t in range(2, len(rgb) - 2):
            ok = static[t] & (fl[t, ..., 2] > 0)
            # away from the border, where bilinear sampling would clamp
            ok[:2], ok[-2:], ok[:, :2], ok[:, -2:] = False, False, False, False
            w = _bilinear(rgb[t + step], u + fl[t, ..., 0], v + fl[t, ..., 1])
            warped.append(w[ok])
            zero.append(rgb[t + step][ok])
            ref.append(rgb[t][ok])
        p_flow = _psnr(np.concatenate(warped), np.concatenate(ref))
        p_zero = _psnr(np.concatenate(zero), np.concatenate(ref))
        print(f"{layer}: warped {p_flow:.1f} dB, zero flow {p_zero:.1f} dB")
        assert p_flow >= 30.0, (layer, p_flow)
        assert p_flow - p_zero >= 6.0, (layer, p_flow, p_zero)
