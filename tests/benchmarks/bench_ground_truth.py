"""Cost of the ground-truth layers (issue #33): five-view frames/s with every layer off, with
each layer alone, with the defaults and with every layer on, and the bytes each layer adds per
five-view minute.

Run: .venv/bin/python tests/benchmarks/bench_ground_truth.py [--preset 540p] [--spatial 1]
         [--frames 120] [--level UrbanBlocks/Downtown] [--configs off,defaults,all,depth,...]
         [--procs 1] [--json out.json]

Same harness as bench_render.py (sample library, Stage I trajectories, the real render worker
in its own process); one trajectory per configuration, rendered one after another. Figures
are per machine: on a CPU machine the renderer is llvmpipe and the layer encoders share its
cores; ``scripts/gpu_run.sh gt`` runs it on the lent GPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stages.config import RESOLUTION_PRESETS, load_params  # noqa: E402
from stages.media.layers import LAYERS  # noqa: E402
from stages.render import render_settings  # noqa: E402
from tests.benchmarks.bench_render import make_trajectories  # noqa: E402


def layers_of(config: str, defaults: list[str]) -> list[str]:
    if config == "off":
        return []
    if config == "defaults":
        return list(defaults)
    if config == "all":
        return list(LAYERS)
    return config.split("+")


def run_one(trajs: Path, level: str, preset: str, spatial: int, layers: list[str],
            tmp: Path, tag: str, procs: int = 1) -> dict:
    over = [f"render.preset={preset}", "render.width=0", "render.height=0",
            f"render.spatial_samples={spatial}", "render.temporal_samples=1",
            "render.ground_truth=[" + ",".join(layers) + "]"]
    settings = render_settings(load_params(overrides=over).render, 30)
    insts = []
    for k in range(procs):  # one renderer per trajectory, side by side (a node's slots)
        inst = tmp / f"inst_{tag}_{k}"
        shutil.rmtree(inst, ignore_errors=True)
        inst.mkdir(parents=True)
        traj = trajs / level.replace("/", "__") / f"traj_{k:04d}"
        (inst / "instance.json").write_text(json.dumps(
            {"settings": settings.as_dict(), "base": os.getcwd(),
             "jobs": [{"name": "traj_0000", "key": "0" * 16, "traj_dir": str(traj)}]}))
        insts.append(inst)
    t0 = time.perf_counter()
    # each renderer's output to a file: a pipe read one renderer at a time stalls the others
    outs = [(i / "worker.log").open("wb") for i in insts]
    running = [subprocess.Popen([sys.executable, "-m", "stages.engine.render_worker", str(i)],
                                cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
               for i, f in zip(insts, outs, strict=True)]
    for p in running:
        p.wait()
    for f in outs:
        f.close()
    logs = [(i / "worker.log").read_text(errors="replace") for i in insts]
    wall = time.perf_counter() - t0
    for inst, p, out in zip(insts, running, logs, strict=True):
        if p.returncode != 0 or not (inst / "traj_0000" / "meta.json").exists():
            raise SystemExit(f"renderer failed ({tag}):\n{out[-3000:]}")
    # the renderers' own account: wall and CPU seconds of the trajectory (after level load
    # and warm-up); CPU seconds hold steady on a machine that other work shares
    own = [re.search(r"in ([\d.]+) s \(.*?([\d.]+) CPU s\)", out) for out in logs]
    render_s = max(float(m.group(1)) for m in own if m)
    cpu_s = sum(float(m.group(2)) for m in own if m)
    inst = insts[0]
    meta = json.loads((inst / "traj_0000" / "meta.json").read_text())
    n = meta["frame_count"]
    minutes = n / meta["fps"] / 60
    per_layer: dict[str, float] = {}
    for view in (meta.get("ground_truth") or {}).get("views", {}).values():
        for layer, e in view.items():
            per_layer[layer] = per_layer.get(layer, 0) + e["bytes"]
    rgb = sum((inst / "traj_0000" / v).stat().st_size for v in meta["videos"])
    # the RGB of every renderer, digested: layers on or off must not change one byte
    dig = hashlib.sha256()
    for i in insts:
        for v in meta["videos"]:
            dig.update(hashlib.sha256((i / "traj_0000" / v).read_bytes()).digest())
    return {"config": tag, "layers": layers, "frames": n, "procs": procs,
            "wall_s": round(wall, 2), "five_view_frames_per_s": round(procs * n / wall, 3),
            "five_view_min_per_hour": round(procs * n / meta["fps"] / wall * 60, 2),
            "render_s": render_s, "render_frames_per_s": round(procs * n / render_s, 3),
            "cpu_s_per_frame": round(cpu_s / (procs * n), 4),
            "mb_per_five_view_minute": {k: round(v / minutes / 1e6, 2)
                                        for k, v in per_layer.items()},
            "rgb_mb_per_five_view_minute": round(rgb / minutes / 1e6, 2),
            "rgb_sha256": dig.hexdigest()[:16], "rgb_frames": [
                json.loads((i / "traj_0000" / "meta.json").read_text())["frame_count"]
                for i in insts]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="540p")
    ap.add_argument("--spatial", type=int, default=1)
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--level", default="UrbanBlocks/Downtown")
    ap.add_argument("--configs", default="off,defaults,all," + ",".join(LAYERS),
                    help="comma-separated: off, defaults, all, or layers joined by +")
    ap.add_argument("--procs", type=int, default=1, help="renderer processes side by side")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    defaults = load_params().render.ground_truth
    tmp = Path(tempfile.mkdtemp(prefix="wmforge-bench-gt-"))
    w, h = RESOLUTION_PRESETS[args.preset]
    print(f"ground truth cost at {w}x{h} x{args.spatial} spatial, {args.frames} frames, "
          f"{os.cpu_count()} cores; defaults = {defaults or 'off'}", flush=True)
    trajs = make_trajectories(tmp, args.level, args.procs, args.frames)
    results, base = [], None
    for config in args.configs.split(","):
        r = run_one(trajs, args.level, args.preset, args.spatial,
                    layers_of(config, defaults), tmp, config, args.procs)
        base = r if config == "off" else base
        if base:
            r["of_rgb_only"] = round(r["render_frames_per_s"] / base["render_frames_per_s"], 3)
            r["cpu_of_rgb_only"] = round(base["cpu_s_per_frame"] / r["cpu_s_per_frame"], 3)
        results.append(r)
        print(f"[{config}] {args.procs} process(es): {r['five_view_frames_per_s']} five-view "
              f"frames/s end to end ({r['five_view_min_per_hour']} five-view min per hour); "
              f"frame loop {r['render_frames_per_s']} frames/s, {r['cpu_s_per_frame']} CPU s "
              "per five-view frame"
              + (f"; {100 * r['of_rgb_only']:.0f} % of RGB-only frames/s, "
                 f"{100 * r['cpu_of_rgb_only']:.0f} % by CPU time" if base and base is not r
                 else "")
              + f"; MB per five-view minute: {r['mb_per_five_view_minute'] or '-'} "
              f"(RGB MP4s {r['rgb_mb_per_five_view_minute']}, sha256 {r['rgb_sha256']}, "
              f"frames {r['rgb_frames']})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
