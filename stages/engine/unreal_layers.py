"""Unreal's ground-truth EXR passes → the layer contract (stages/media/layers.py), on the node.

Movie Render Queue wrote, per camera and frame (unreal/ue_layers.py), ``<camera>/<pass>.<frame>
.exr`` under ``<instance>/layers/<trajectory>/``: ``FinalImageWmfDepth`` (R = SceneDepth, cm,
the linear depth along the view axis: Unreal's SceneDepth is view-space z, not the ray length),
``FinalImageWmfNormal`` (RGB = the GBuffer's world normal, Unreal axes: x forward, y right,
z up, left-handed; not normalised) and ``ActorHitProxyMask00`` (Cryptomatte: R = the rank-0 id,
the float bits of MurmurHash3_32 of the actor label; the label→hash manifest in the header).
Conversions, here only:

- depth: cm → m; non-finite, ≥ :data:`NO_SURFACE_CM`, or an id of nothing (``default``) →
  ``inf``;
- normals: Unreal world (x, y, z) → our right-handed world (x, −y, z) → OpenCV camera axes with
  the recorded camera's world-from-camera rotation (cameras.parquet), normalised; zero where
  there is no surface;
- ids: every label in any manifest of the trajectory, sorted, numbered from 2 (1 = the
  character, ``wmforge_character``; 0 = no surface) → ``instances.parquet`` — the same id in
  every frame and view; mask = the character's id;
- flow: not Unreal's velocity buffer (it holds backward motion only, relative to the previous
  temporal sample, without occlusion): computed from geometry — each pixel's depth back-
  projected with its frame's recorded camera, moved into the next (previous) frame's camera and
  projected; valid where that lands in the frame in front of the surface seen there (depth
  within 1 % + 2 cm, the same id). The character's skinned motion comes from the engine's
  animation, which the host does not know: its pixels are 0 (not valid) in both flows.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.cameras import intrinsics
from ..core.trajectory import VIEWS
from ..media.layers import LayerWriter, ground_truth_meta, validate_layers
from .stage2 import Stage2Failure

RENDER_PASS = {"depth": "FinalImageWmfDepth", "normals": "FinalImageWmfNormal",
               "ids": "ActorHitProxyMask00"}  # unreal/ue_layers.py
NEEDS = {"depth": ("depth",), "normals": ("normals", "depth"), "ids": ("ids",),
         "mask": ("ids",), "flow_fwd": ("depth", "ids"), "flow_bwd": ("depth", "ids")}
CHARACTER_LABEL = "wmforge_character"
NO_SURFACE_CM = 1e8  # 1000 km: Unreal's far value for no geometry was not measured here
MASK_PLUGIN = "MoviePipelineMaskRenderPass"  # the Object ID pass
MRQ_PLUGIN = "MovieRenderPipeline"
FLOW_REL_TOL, FLOW_ABS_TOL_M = 0.01, 0.02


class UnrealLayersError(Stage2Failure):
    """Unreal's ground-truth passes are missing, unreadable or cannot be produced."""


def buffers_for(layers: Sequence[str]) -> tuple[str, ...]:
    want = {b for layer in layers for b in NEEDS[layer]}
    return tuple(b for b in ("depth", "normals", "ids") if b in want)


def _enabled_plugins(project: Path) -> set[str]:
    try:
        doc = json.loads(project.read_text())
    except (OSError, ValueError) as exc:
        raise UnrealLayersError("layers_unavailable", f"{project}: cannot read the project "
                                f"file ({exc})") from None
    return {str(p.get("Name")) for p in doc.get("Plugins") or [] if p.get("Enabled")}


def check_layers(layers: Sequence[str], project: str | Path | None) -> tuple[str, ...]:
    """The layers in canonical order, before the editor starts: an unknown name, or a layer
    whose MRQ pass the project lacks (ids, mask and flow need the Object ID pass of the plugin
    ``MoviePipelineMaskRenderPass``), fails here with the project file and the plugin named."""
    names = validate_layers(list(layers))
    if not names or not project or not Path(project).is_file():
        return names  # no project to read (the launcher checks it exists)
    enabled = _enabled_plugins(Path(project))
    need = [(MRQ_PLUGIN, names)]
    if "ids" in buffers_for(names):
        need.append((MASK_PLUGIN, tuple(n for n in names if "ids" in NEEDS[n])))
    for plugin, which in need:
        if plugin not in enabled:
            raise UnrealLayersError(
                "layers_unavailable", f"render.ground_truth {list(which)} cannot be made by "
                f"Unreal with {project}: it needs the plugin '{plugin}' enabled in that project "
                f"(\"Plugins\": [{{\"Name\": \"{plugin}\", \"Enabled\": true}}]); enable it, "
                "or leave these layers out of render.ground_truth")
    return names


def read_exr(path: Path, header_only: bool = False
             ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Channels (float32 or float16 as stored; none with ``header_only``) and header of one
    single-part EXR."""
    import OpenEXR

    if not path.is_file():
        raise UnrealLayersError("layers_missing", f"{path}: ground-truth pass not written")
    try:
        with OpenEXR.File(str(path), separate_channels=True, header_only=header_only) as f:
            if header_only:
                return {}, dict(f.header())
            return ({k: np.asarray(c.pixels) for k, c in f.channels().items()},
                    dict(f.header()))
    except Exception as exc:  # noqa: BLE001 - a broken file is this trajectory's failure
        raise UnrealLayersError("layers_invalid", f"{path}: not a readable EXR ({exc})") from None


def pass_path(layers_dir: Path, view: str, buffer: str, frame: int) -> Path:
    return layers_dir / view / f"{RENDER_PASS[buffer]}.{frame:06d}.exr"


def manifest(header: dict[str, Any]) -> dict[int, str]:
    """Cryptomatte manifest of an ids pass: hash (uint32) → label."""
    for k, v in header.items():
        if k.startswith("cryptomatte/") and k.endswith("/manifest"):
            return {int(h, 16): name for name, h in json.loads(str(v)).items()}
    raise UnrealLayersError("layers_invalid", "ids pass without a Cryptomatte manifest")


def instance_table(layers_dir: Path, n: int, model: str) -> tuple[dict[int, int], list[dict]]:
    """(hash → id, rows of instances.parquet) from every ids pass of the trajectory: labels
    sorted, the character first; ``default`` (nothing hit) → 0."""
    labels: dict[int, str] = {}
    for v in VIEWS:
        for k in range(n):
            labels.update(manifest(read_exr(pass_path(layers_dir, v, "ids", k), True)[1]))
    names = sorted({x for x in labels.values() if x not in ("default", CHARACTER_LABEL)})
    ids = {CHARACTER_LABEL: 1, **{x: i + 2 for i, x in enumerate(names)}}
    lut = {h: ids.get(x, 0) for h, x in labels.items()}
    rows = [{"id": 1, "kind": "character", "name": CHARACTER_LABEL, "source": model}]
    rows += [{"id": ids[x], "kind": "level", "name": x, "source": "unreal actor label"}
             for x in names]
    return lut, rows


def _rot(q: Sequence[float]) -> np.ndarray:
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def flow(src: dict, dst: dict, K: tuple[float, float, float, float], char_id: int
         ) -> np.ndarray:
    """(H, W, 3) dx, dy, valid from frame ``src`` to ``dst`` (each: depth m, ids, R, c)."""
    fx, fy, cx, cy = K
    H, W = src["depth"].shape
    u, v = np.meshgrid(np.arange(W, dtype=np.float32) + 0.5,
                       np.arange(H, dtype=np.float32) + 0.5)
    z = src["depth"]
    ok = np.isfinite(z) & (src["ids"] != char_id)
    zz = np.where(ok, z, 0.0).astype(np.float32)
    pc = np.stack([(u - cx) / fx * zz, (v - cy) / fy * zz, zz], -1)
    # camera(src) → world → camera(dst) in one rotation and offset (float32: mm at 100 km)
    rot = (dst["R"].T @ src["R"]).astype(np.float32)
    off = (dst["R"].T @ (src["c"] - dst["c"])).astype(np.float32)
    q = pc @ rot.T + off
    zq = q[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u2 = fx * q[..., 0] / zq + cx
        v2 = fy * q[..., 1] / zq + cy
    ok &= (zq > 1e-6) & (u2 >= 0) & (u2 < W) & (v2 >= 0) & (v2 < H)
    i2 = np.clip(np.floor(np.nan_to_num(u2)).astype(int), 0, W - 1)
    j2 = np.clip(np.floor(np.nan_to_num(v2)).astype(int), 0, H - 1)
    zd = dst["depth"][j2, i2]
    ok &= np.isfinite(zd) & (np.abs(zd - zq) <= FLOW_REL_TOL * zq + FLOW_ABS_TOL_M)
    ok &= dst["ids"][j2, i2] == src["ids"]
    out = np.zeros((H, W, 3), np.float32)
    out[..., 0] = np.where(ok, u2 - u, 0.0)
    out[..., 1] = np.where(ok, v2 - v, 0.0)
    out[..., 2] = ok
    return out


def _frame(layers_dir: Path, view: str, k: int, buffers: tuple[str, ...], lut: dict[int, int],
           cam: Any, W: int, H: int) -> dict[str, Any]:
    """One frame of one view in contract units and axes (what the layers are made from)."""
    f: dict[str, Any] = {"R": _rot((cam.rot_w, cam.rot_x, cam.rot_y, cam.rot_z)),  # world←cam
                         "c": np.array([cam.pos_x, cam.pos_y, cam.pos_z])}
    if "ids" in buffers:
        ch, _ = read_exr(pass_path(layers_dir, view, "ids", k))
        h = np.asarray(ch["R"], np.float32).view(np.uint32)
        keys, inv = np.unique(h, return_inverse=True)
        f["ids"] = np.array([lut.get(int(x), 0) for x in keys], np.uint32)[inv].reshape(h.shape)
    if "depth" in buffers:
        ch, _ = read_exr(pass_path(layers_dir, view, "depth", k))
        d = np.asarray(ch["R"], np.float64)
        none = ~np.isfinite(d) | (d >= NO_SURFACE_CM)
        if "ids" in f:
            none |= f["ids"] == 0
        f["depth"] = np.where(none, np.inf, d / 100.0)
    if "normals" in buffers:
        ch, _ = read_exr(pass_path(layers_dir, view, "normals", k))
        n_w = np.stack([np.asarray(ch["R"], np.float32), -np.asarray(ch["G"], np.float32),
                        np.asarray(ch["B"], np.float32)], -1)  # Unreal → our world axes
        n_c = n_w @ f["R"].astype(np.float32)  # world → OpenCV camera: R^T n
        norm = np.linalg.norm(n_c, axis=-1, keepdims=True)
        ok = (norm[..., 0] > 1e-6) & np.isfinite(f["depth"])
        f["normals"] = np.where(ok[..., None], n_c / np.where(norm > 1e-6, norm, 1.0), 0.0)
    for key in ("depth", "normals", "ids"):
        if key in f and f[key].shape[:2] != (H, W):
            raise UnrealLayersError("layers_invalid", f"{layers_dir / view}: frame {k} is "
                                    f"{f[key].shape[1]}x{f[key].shape[0]}, expected {W}x{H}")
    return f


def convert(layers_dir: Path, traj_dir: Path, out: Path, layers: Sequence[str], width: int,
            height: int, log: Any = print) -> dict:
    """Write every view's layers and ``instances.parquet`` into ``out``; returns meta.json's
    ``ground_truth`` block. Streams: three frames of one view in memory at a time."""
    import pandas as pd

    names = validate_layers(list(layers))
    buffers = buffers_for(names)
    meta = json.loads((traj_dir / "meta.json").read_text())
    n, fps = int(meta["frame_count"]), int(meta["fps"])
    model = str((meta.get("character") or {}).get("model") or meta.get("character_id", ""))
    lut, rows = instance_table(layers_dir, n, model) if "ids" in buffers else ({}, [])
    cams = pd.read_parquet(traj_dir / "cameras.parquet")
    views: dict[str, dict] = {}
    for view in VIEWS:
        rows_v = list(cams[cams["view"] == view].sort_values("frame").itertuples())
        if len(rows_v) != n:
            raise UnrealLayersError("layers_missing", f"{traj_dir}: {len(rows_v)} camera rows "
                                    f"for {view}, expected {n}")
        fov = cams.loc[cams["view"] == view, "fov_deg"].to_numpy(dtype=float)
        K = intrinsics(width, height, float(fov[0]))
        w = LayerWriter(out, view, names, width, height, fps)
        try:
            window = [None, _frame(layers_dir, view, 0, buffers, lut, rows_v[0], width, height)]
            for k in range(n):
                nxt = (_frame(layers_dir, view, k + 1, buffers, lut, rows_v[k + 1], width,
                              height) if k + 1 < n else None)
                prev, cur = window
                assert cur is not None
                plane: dict[str, np.ndarray] = {}
                if "depth" in names:
                    plane["depth"] = cur["depth"].astype(np.float32)
                if "normals" in names:
                    plane["normals"] = cur["normals"].astype(np.float32)
                if "ids" in names:
                    plane["ids"] = cur["ids"]
                if "mask" in names:
                    plane["mask"] = cur["ids"] == 1
                zero = np.zeros((height, width, 3), np.float32)
                if "flow_fwd" in names:
                    plane["flow_fwd"] = zero if nxt is None else flow(cur, nxt, K, 1)
                if "flow_bwd" in names:
                    plane["flow_bwd"] = zero if prev is None else flow(cur, prev, K, 1)
                w.add(plane)
                window = [cur, nxt]
            views[view] = w.close()
        except BaseException:
            w.abort()
            raise
        log(f"wmforge: layers {traj_dir.name} {view}: {list(names)} x {n} frames")
    if rows:
        pd.DataFrame(rows).astype({"id": "uint32"}).to_parquet(out / "instances.parquet",
                                                               index=False)
    gt = ground_truth_meta(names, views)
    gt["unreal"] = {"passes": {b: RENDER_PASS[b] for b in buffers},
                    "flow": "from depth and recorded cameras; character pixels not valid",
                    "normals": "GBuffer world normal (after normal maps)"}
    shutil.rmtree(layers_dir, ignore_errors=True)  # the EXRs: the layers verified
    return gt
