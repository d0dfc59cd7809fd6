"""Visibility by the tile rasterizer or by primary rays against a BVH (issue #30, item 1: the
microbenchmark behind the compute backend's choice). Prints one JSON line per level.

    python tests/benchmarks/bench_raster_vs_bvh.py [--size 1280x720] [--spatial 8]
        [--levels NatureValley/AlpineMeadow,UrbanBlocks/Downtown] [--reps 10] [--json out.json]

For each level it poses one recorded frame of a real Stage I trajectory (the sample library,
the character included) and takes that frame's world triangles and the 5 x ``--spatial``
(view, sample) cameras, then answers "which triangle is nearest at each sample" three ways:

- ``raster``: ``raster.visibility`` (clipping, set-up, the Triton depth pass) and the
  per-sample triangle ids (``triangles()``), every triangle drawn by every camera, no culling,
  no alpha: the same question the rays answer;
- ``raster_production``: the same with the renderer's draw masks, back-face culling and alpha
  cut-out (``GBufferRenderer.visibility``), for reference;
- ``bvh``: one ray per sample through ``bvh/bvh_cast.cu`` (nvcc; a stack-based closest-hit
  traversal, one thread a ray, 8 x 4 pixel tiles per warp) over a median-split BVH built on
  the host (``bvh/bvh.py``); the build and its upload are timed apart (a renderer would rebuild
  or refit the moving pieces' part every frame).

Times are CUDA-synchronised medians over ``--reps`` after one warm-up; ``agree`` is the share
of samples where the BVH and ``raster`` name the same triangle. On a CPU (no CUDA) it runs the
host build of the same traversal at the given size: a check, not a figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).with_name("bvh")))


def _timed(fn, reps: int, sync) -> tuple[float, object]:  # noqa: ANN001
    out = fn()
    sync()
    ms = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        sync()
        ms.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ms), out


def _level(level: str, W: int, H: int, spatial: int, reps: int, tmp: Path) -> dict:
    """One level's figures (see the module docstring)."""
    import bvh as B
    import numpy as np
    import torch

    from stages.config import load_params
    from stages.engine.compute.cameras import cameras_from_targets
    from stages.engine.compute.raster import visibility
    from tests.benchmarks.bench_render import make_trajectories
    from tests.posed_frames import posed_frames

    trajs = make_trajectories(tmp / level.replace("/", "__"), level, 1, 12)
    traj = trajs / level.replace("/", "__") / "traj_0000"
    cfg = load_params(overrides=[
        f"render.width={W}", f"render.height={H}", f"render.spatial_samples={spatial}",
        "render.temporal_samples=1", "render.backend=compute",
        "render.compute_shading=pixel"]).render
    with posed_frames(tmp / f"r_{level.replace('/', '__')}", cfg, traj) as pf:
        r = pf.ir.r
        p = pf.pose(4, 0.0)
        r.render([p], p, 0.0)  # places every node; the targets keep the frame's triangles
        tg = r.targets
        gbr = tg._geometry()
        fr = gbr.frame_tris
        cams = cameras_from_targets(tg, tg.device)
        dev = tg.device

        def sync() -> None:
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)

        res: dict = {"level": level, "device": torch.cuda.get_device_name(dev)
                     if dev.type == "cuda" else "cpu", "size": f"{W}x{H}",
                     "planes": int(cams.view_proj.shape[0]), "triangles": int(len(fr.pos))}
        ms_r, (tri_r, _) = _timed(lambda: visibility(
            fr.pos, cams.view_proj, W, H, budget=gbr.budget).triangles(), reps, sync)
        res["raster_ms"] = round(ms_r, 2)
        ms_p, _ = _timed(lambda: gbr.visibility(fr, cams).triangles(), reps, sync)
        res["raster_production_ms"] = round(ms_p, 2)
        t0 = time.perf_counter()
        bv = B.build(fr.pos.detach().cpu().numpy())
        res["bvh_build_host_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        res["bvh_nodes"], res["bvh_depth"] = int(len(bv.nodes)), bv.depth
        inv = torch.linalg.inv(cams.view_proj.to(torch.float64)).to(torch.float32)
        if dev.type == "cuda":
            t0 = time.perf_counter()
            dbv = B.to_device(bv, dev)
            sync()
            res["bvh_upload_ms"] = round((time.perf_counter() - t0) * 1000, 2)
            ms_b, (tri_b, _) = _timed(lambda: B.cast(dbv, inv, W, H), reps, sync)
            tri_b = tri_b.reshape(-1).long()
        else:
            t0 = time.perf_counter()
            tri_h, _ = B.cast(bv, inv.numpy(), W, H)
            ms_b = (time.perf_counter() - t0) * 1000
            tri_b = torch.from_numpy(tri_h.reshape(-1).astype(np.int64))
        res["bvh_cast_ms"] = round(ms_b, 2)
        res["bvh_mrays_per_s"] = round(res["planes"] * W * H / ms_b / 1000, 1)
        res["agree"] = round(float((tri_r.cpu() == tri_b.cpu()).double().mean()), 5)
        res["raster_over_bvh"] = round(ms_r / ms_b, 3)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--spatial", type=int, default=8)
    ap.add_argument("--levels", default="NatureValley/AlpineMeadow,UrbanBlocks/Downtown")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    W, H = (int(x) for x in a.size.lower().split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="wmforge-bvh-"))
    out = []
    for level in a.levels.split(","):
        res = _level(level, W, H, a.spatial, a.reps, tmp)
        print(json.dumps(res), flush=True)
        out.append(res)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
