"""One compute-backend frame, whole (issue #30): milliseconds per five-view frame drawn by
``ComputeTargets`` through the real ReplayRenderer (scene, visibility, material, lighting,
resolve, YUV, the copy to the host, the gate's masks), per ``render.compute_shading``, and the
split of the ``pixel`` path into its steps.

    python tests/benchmarks/bench_compute_frame.py [--size 1280x720] [--spatial 8]
        [--rates pixel,sample] [--frames 10] [--level NatureValley/AlpineMeadow]
        [--leaders auto,torch,triton,triton:168] [--profile] [--profile-rows 25]
        [--trace trace_{rate}_{leaders}.json.gz] [--json out.json]

It builds the sample library and one Stage I trajectory in a scratch folder, poses that
trajectory's frames and draws them: three warm-up frames (compiling), then ``--frames`` timed
ones; then the same frames again with every step waited for (the split: slower in total, each
step's own time). ``--profile``: torch.profiler's table of the ops that took the most device
time over two frames; ``--trace``: the same two frames recorded with Python stacks into a Chrome
trace (gzip), which ``trace_split.py`` splits by the function that launched each kernel (on a
CPU, each operator). ``--leaders``: how the surface leaders are shaded, one run each
(``render.compute_leaders``: torch, triton, triton:<registers>; auto). Prints
one JSON line per rate and leaders path.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--spatial", type=int, default=8)
    ap.add_argument("--rates", default="pixel,sample")
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--level", default="NatureValley/AlpineMeadow")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-rows", type=int, default=25, help="rows of --profile's table")
    ap.add_argument("--trace", default="")
    ap.add_argument("--leaders", default="auto", help="the surface leaders' shading per run: "
                    "auto, torch (the compiled graph), triton (leaders_triton), triton:<registers> "
                    "(ptxas capped at that many a lane); a list runs each")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    import torch

    from stages.config import load_params
    from tests.benchmarks.bench_render import make_trajectories
    from tests.posed_frames import posed_frames

    W, H = (int(x) for x in a.size.lower().split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="wmforge-frame-"))
    trajs = make_trajectories(tmp, a.level, 1, max(40, a.frames + 8))
    traj = trajs / a.level.replace("/", "__") / "traj_0000"
    out = []
    for rate, lk in [(r_, k_) for r_ in a.rates.split(",") for k_ in a.leaders.split(",")]:
        cfg = load_params(overrides=[
            f"render.width={W}", f"render.height={H}", f"render.spatial_samples={a.spatial}",
            "render.temporal_samples=1", "render.backend=compute",
            f"render.compute_shading={rate}", f"render.compute_leaders={lk}"]).render
        with posed_frames(tmp / f"r_{rate}_{lk}", cfg, traj) as pf:
            r = pf.ir.r
            dev = r.targets.device

            def frame(i: int, pf=pf, r=r) -> None:  # noqa: ANN001
                p = pf.pose(i, 0.0)
                r.render([p], p, 0.0)

            def sync(dev=dev) -> None:  # noqa: ANN001
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)

            t0 = time.perf_counter()
            for i in range(3):
                frame(i)
            sync()
            warm_s = time.perf_counter() - t0
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats(dev)
            ms = []
            for i in range(a.frames):
                t0 = time.perf_counter()
                frame(3 + i)
                sync()
                ms.append((time.perf_counter() - t0) * 1000)
            res = {"rate": rate, "leaders_kernel": r.targets.leaders_path,
                   "leaders_switch": lk,
                   "device": str(torch.cuda.get_device_name(dev))
                   if dev.type == "cuda" else "cpu", "size": a.size, "spatial": a.spatial,
                   "level": a.level, "frames": a.frames, "warmup_s": round(warm_s, 1),
                   "ms_per_frame_median": round(statistics.median(ms), 2),
                   "ms_per_frame_min": round(min(ms), 2),
                   "five_view_frames_per_s": round(1000 / statistics.median(ms), 2)}
            if dev.type == "cuda":
                res["gpu_peak_mib"] = round(torch.cuda.max_memory_allocated(dev) / 2**20)
            merged = getattr(r.targets, "_merged", None)
            if rate == "pixel" and merged is not None:
                res["leaders_share"] = round(merged.last_leaders / (5 * a.spatial * W * H), 4)
                merged.phases = {}
                t0 = time.perf_counter()
                for i in range(a.frames):
                    frame(3 + i)
                sync()
                total = (time.perf_counter() - t0) * 1000 / a.frames
                split = {k: round(v * 1000 / a.frames, 2) for k, v in merged.phases.items()}
                split["resolve, YUV, copy to host, masks, posing"] = round(
                    total - sum(split.values()), 2)
                res["split_ms"] = split
                merged.phases = None
            if a.profile and dev.type == "cuda":
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    frame(5)
                    frame(6)
                    sync()
                print(f"profile: {rate}, leaders {lk}")
                print(prof.key_averages().table(sort_by="cuda_time_total",
                                                row_limit=a.profile_rows))
            if a.trace:
                import gzip
                import shutil

                from torch.profiler import ProfilerActivity, profile

                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                                 if dev.type == "cuda" else [])
                with profile(activities=acts, with_stack=True) as prof:
                    frame(5)
                    frame(6)
                    sync()
                raw = tmp / f"trace_{rate}.json"
                prof.export_chrome_trace(str(raw))
                dest = Path(a.trace.replace("{rate}", rate).replace("{leaders}", lk))
                with raw.open("rb") as src, gzip.open(dest, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            print(json.dumps(res), flush=True)
            out.append(res)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
