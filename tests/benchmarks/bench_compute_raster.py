"""The compute renderer's visibility and G-buffer (issue #30, part A): milliseconds per
five-view G-buffer of a generated sample level with the skinned humanoid walking, on CPU or
CUDA — the shadow map, the rasterization of every (view, sample), the material evaluation and
the character's skinning in torch included (the CPU poser still runs too: it
sets the joints, then skins on the CPU for the GL path, outside the timed span).

    python tests/benchmarks/bench_compute_raster.py [--size 1280x720] [--spatial 1]
        [--temporal 1] [--device cpu|cuda] [--level AlpineMeadow] [--frames 5] [--threads 1]
        [--kernel auto|torch|triton] [--compile auto|on|off] [--profile]

--kernel picks the depth pass (raster.KERNEL: the Triton kernel or torch ops); the visibility
of every (view, sample) is also timed on its own (``raster_ms``: the rasterization of the
cameras' views, the shadow map not included). --profile prints torch.profiler's table of the
ops that took the most device time over one frame (the split to optimise against).

The level and character come from the sample library's generators; a small GL renderer
(llvmpipe here, any EGL elsewhere) only loads and poses the scene, nothing is drawn. Prints
one JSON line: triangles, milliseconds per frame (median, mean, min over --frames after one
warm-up frame), the shadow map's share, and the G-buffer's coverage.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--spatial", type=int, default=1)
    ap.add_argument("--temporal", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--level", default="AlpineMeadow")
    ap.add_argument("--frames", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's)")
    ap.add_argument("--display", default="p3headlessgl")
    ap.add_argument("--kernel", default="auto", choices=("auto", "torch", "triton"))
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--compile", default="auto", choices=("auto", "on", "off"),
                    help="torch.compile the per-pixel material pass (auto: on a GPU)")
    a = ap.parse_args()
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    W, H = (int(x) for x in a.size.lower().split("x"))
    dev = torch.device(a.device)

    from stages.assetgen import characters, levels
    from stages.cluster.keys import render_settings
    from stages.config import RenderConfig
    from stages.engine.compute import raster
    from stages.engine.compute.cameras import cameras_from_poses, sun_for_target
    from stages.engine.compute.gbuffer import GBufferRenderer
    from stages.engine.compute.scene_geometry import SceneGeometry
    from stages.engine.level_render import load_level_lighting
    from stages.engine.look import Look
    from stages.engine.models import load_model
    from stages.engine.replay_render import CharacterPose, ReplayRenderer, SamplePose
    from tests.engine.compute.gl_gbuffer import default_poses

    raster.KERNEL = a.kernel
    look = Look.from_settings(render_settings(RenderConfig(), 30))
    tmp = Path(tempfile.mkdtemp(prefix="bench_compute_"))
    lv, ch = tmp / f"{a.level}.glb", tmp / "Alex.glb"
    lv.write_bytes(levels.RECIPES[a.level](7, 48, 256).to_glb())
    ch.write_bytes(characters.humanoid("Alex", 1.8, 1.0, "fabric", 3, 256, ["idle", "walk"]))
    # the scene as Stage II loads and poses it (a 64x36 GL target that never draws)
    r = ReplayRenderer(64, 36, 1, a.temporal, a.display, look=look)
    model = load_model(str(lv))
    model.flattenLight()
    r.load_level(model, load_level_lighting(str(lv)))
    r.load_character(load_model(str(ch)), str(ch), {}, 0.0)
    t0 = time.perf_counter()
    skins = [sk for p in r.char_posers for sk in getattr(p, "skins", [])]
    geo = SceneGeometry(r.scene, dynamic=r.level.prop_pivots, animated=r.char_copies,
                        device=dev, skins=skins)
    extract_s = time.perf_counter() - t0
    gr = GBufferRenderer(geo, W, H, compile_pixels=None if a.compile == "auto"
                         else a.compile == "on")
    views = default_poses(W, H)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times, shadow_ms, raster_ms, cover = [], [], [], 0.0
    for f in range(a.frames + 1):
        samples = []
        for t in range(a.temporal):
            yaw = math.radians(10.0 * f + 3.0 * t) / 2
            cp = CharacterPose((0.0, 0.0, 0.0), (math.cos(yaw), 0.0, 0.0, math.sin(yaw)),
                               (1.0, 1.0, 1.0), "walk", (f + t / a.temporal) / 30.0)
            r._place_character(t, cp, 0.0)
            samples.append(SamplePose(cp, views))
        sync()
        start = time.perf_counter()
        cams = cameras_from_poses(samples, W, H, a.spatial, device=dev)
        sun = sun_for_target(r.level.sun_dir, (0.0, 0.0, 0.0), look.shadow_extent_m,
                             look.shadow_map_size, look.shadow_pcf_taps, device=dev)
        gb = gr.render(cams, sun)  # the frame's triangles, shadow map, G-buffer
        sync()
        end = time.perf_counter()
        fr = gr.frame_tris
        assert fr is not None
        s0 = time.perf_counter()
        gr.shadow_map(fr, sun)  # its share, timed on its own
        sync()
        s1 = time.perf_counter()
        vis = ((fr.bits[None, :] >> cams.bit[:, None]) & 1).bool()
        raster.rasterize(fr.pos, cams.view_proj, W, H, visible=vis, cull=fr.cull,
                         cut_tris=fr.cut, cut_fn=gr._cut(fr), budget=gr.budget)
        sync()
        s2 = time.perf_counter()
        if f:  # the first frame warms caches and allocators
            times.append((end - start) * 1000.0)
            shadow_ms.append((s1 - s0) * 1000.0)
            raster_ms.append((s2 - s1) * 1000.0)
            cover = float(gb.covered.float().mean())
    print(json.dumps({
        "bench": "compute_raster", "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(), "level": a.level, "size": f"{W}x{H}",
        "spatial": a.spatial, "temporal": a.temporal, "views": 5,
        "gbuffer_planes": 5 * a.spatial * a.temporal, "triangles": geo.num_triangles,
        "shadow_map": look.shadow_map_size, "extract_s": round(extract_s, 3),
        "ms_per_frame_median": round(statistics.median(times), 2),
        "ms_per_frame_mean": round(statistics.mean(times), 2),
        "ms_per_frame_min": round(min(times), 2),
        "shadow_map_ms_median": round(statistics.median(shadow_ms), 2),
        "raster_ms_median": round(statistics.median(raster_ms), 2), "kernel": a.kernel,
        "compiled": gr.compiled,
        "covered_share": round(cover, 4), "frames": a.frames}))
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with profile(activities=acts) as prof:
            gr.render(cams, sun)
            sync()
        key = "cuda_time_total" if dev.type == "cuda" else "cpu_time_total"
        print(prof.key_averages().table(sort_by=key, row_limit=20))
    r.close()


if __name__ == "__main__":
    main()
