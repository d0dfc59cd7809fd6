"""Stage II speed and memory: five-view output seconds per wall second, five-view minutes per
GPU-hour, encoder frames/s, peak RSS of the rendering processes.

Run: .venv/bin/python tests/benchmarks/bench_render.py [--preset 720p] [--spatial 1,8]
         [--frames 300] [--procs 1] [--level UrbanBlocks/Downtown] [--encoder-only]
         [--backend gl,compute] [--warmup 8] [--readback sync,pbo] [--yuv auto,device]

``--backend``: ``render.backend`` of each run (gl: Panda3D's OpenGL path; compute: the torch
renderer of issue #30, on CUDA where torch sees a GPU, else on the CPU; ``compute:sample`` /
``compute:pixel`` set its ``render.compute_shading``; ``compute:pixel:torch`` and
``compute:pixel:triton[:<registers>]`` its ``render.compute_leaders`` too). ``--warmup``:
``render.warmup_frames`` (default: the config's); the rate counts the whole run (start-up, the
warm-up and meter frames), so give the compute backend's slow CPU runs few extra frames. The
*steady* figure counts every renderer's frames over the window in which all of them ran
steadily (from the latest renderer's 10th frame to the first renderer's last; the workers
write each frame's wall-clock time): what slots that render trajectory after trajectory make
together once their processes are warm (compiled kernels, loaded level).
``--readback``: ``render.readback`` of each GL run (sync: Panda3D's read at each frame's end;
pbo: pixel-pack buffers and fences, stages/engine/gl_readback.py); the same bytes either way.
``--yuv``: ``render.yuv`` of each run (device: the views leave the GPU as yuv420p planes,
gl_yuv.py or compute/yuv.py; encoder: swscale in the encoding threads; auto: the config's
rule). A GL run with device needs ``--readback pbo``. ``--compile-cache DIR``: the compute
renderers' ``render.compile_cache_dir`` (one renderer compiles, the others wait and load;
stages/engine/compute/compile_cache.py); without it each uses torch's default cache.

It builds the sample library (without the wheel assets) and Stage I trajectories in a scratch
folder, then runs ``--procs`` renderer processes side by side, each over its own trajectory
(the way a node runs one renderer per slot), and prints one line per configuration. Figures are
per machine: on a CPU machine the renderer is Mesa llvmpipe, on a GPU machine the NVIDIA driver.
The paper's reference: 33 five-view minutes per node-hour of eight RTX 5090s under Unreal Engine
(about 4.1 minutes per GPU-hour) — a different renderer with far heavier shading.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stages.config import RESOLUTION_PRESETS, load_params  # noqa: E402
from stages.engine.instance_render import STEADY_SKIP  # noqa: E402
from stages.engine.render_worker import FRAME_TIMES_ENV  # noqa: E402
from stages.render import render_settings  # noqa: E402


def encoder_bench(w: int, h: int, frames: int, tmp: Path) -> float:
    from stages.media.video import EncodeSettings, VideoWriter

    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    wr = VideoWriter(tmp / "enc.mp4", w, h, 30, EncodeSettings())
    t0 = time.perf_counter()
    for i in range(frames):
        wr.write(np.roll(base, i * 4, axis=1))
    wr.close(frames)
    return frames / (time.perf_counter() - t0)


def make_trajectories(tmp: Path, level: str, n: int, frames: int) -> Path:
    from stages.inventory import run_inventory
    from stages.sample_library import build_sample_library
    from stages.trajectories import run_trajectories

    cfg = load_params(overrides=["sample_library.include_wheel_assets=false",
                                 f"node.work_dir={tmp}/work",
                                 f"node.snapshot_dir={tmp}/work/snapshots",
                                 f"trajectories.per_level={n}", f"trajectories.frames={frames}",
                                 f"trajectories.levels=[{level}]",
                                 "trajectories.characters=[CharacterPack/Alex]"])
    lib = tmp / "lib"
    build_sample_library(lib, cfg.sample_library)
    inv = run_inventory(lib, cfg.inventory, "overrides.yaml")
    out = tmp / "traj"
    fails = run_trajectories(cfg, inv.levels, inv.characters, lib, out, log=lambda *_: None)
    if not fails.empty:
        raise SystemExit(f"stage I failed: {fails.to_dict('records')}")
    return out


def steady_rate(times: list[list[float]], procs: int) -> float | None:
    """Five-view frames/s of all renderers together over the window in which every one ran
    steadily: from the latest one's frame STEADY_SKIP to the earliest one's last frame."""
    if len(times) != procs or any(len(t) < 2 for t in times):
        return None
    start = max(t[min(STEADY_SKIP, len(t) // 2)] for t in times)
    end = min(t[-1] for t in times)
    if end <= start:
        return None
    return sum(start < x <= end for t in times for x in t) / (end - start)


def render_bench(trajs: Path, level: str, preset: str, spatial: int, procs: int,
                 frames: int, tmp: Path, enc_threads: int, variant: str = "",
                 backend: str = "gl", warmup: int | None = None,
                 readback: str = "sync", yuv: str = "auto",
                 compile_cache: str = "", log_dir: Path | None = None) -> dict:
    w, h = RESOLUTION_PRESETS[preset]
    extra = [] if warmup is None else [f"render.warmup_frames={warmup}"]
    backend, _, rate = backend.partition(":")
    rate, _, leaders = rate.partition(":")
    if rate:
        extra.append(f"render.compute_shading={rate}")
    if leaders:
        extra.append(f"render.compute_leaders={leaders}")
    rcfg = load_params(overrides=[f"render.preset={preset}", "render.width=0", "render.height=0",
                                  f"render.spatial_samples={spatial}",
                                  "render.temporal_samples=1",
                                  f"render.encoder_threads={enc_threads}",
                                  f"render.backend={backend}", f"render.yuv={yuv}",
                                  *extra]).render
    settings = render_settings(rcfg, 30)
    lvl_dir = trajs / level.replace("/", "__")
    insts = []
    for p in range(procs):
        inst = (tmp / f"inst_{variant or 'base'}_{preset}_{spatial}_{backend}{rate}"
                      f"{leaders.replace(':', '')}_{readback}_{yuv}_{p}")
        shutil.rmtree(inst, ignore_errors=True)
        inst.mkdir(parents=True)
        (inst / "instance.json").write_text(json.dumps(
            {"settings": settings.as_dict(), "base": os.getcwd(), "readback": readback,
             **({"compile_cache": compile_cache} if compile_cache else {}),
             "jobs": [
                {"name": "traj_0000", "key": "0" * 16,
                 "traj_dir": str(lvl_dir / f"traj_{p:04d}")}]}))
        insts.append(inst)
    t0 = time.perf_counter()
    worker = (["-m", "tests.benchmarks.look_variants", variant] if variant
              else ["-m", "stages.engine.render_worker"])
    env = {**os.environ, FRAME_TIMES_ENV: "1"}
    # each renderer's output to its own file, never a pipe: a pipe read one renderer at a
    # time stalls every other renderer that fills its 64 KiB buffer meanwhile (and with it a
    # first-compile gate the others wait on); under log_dir the logs outlive a killed run
    log_paths = [(log_dir or i) / f"{i.name}.log" for i in insts]
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    outs = [lp.open("wb") for lp in log_paths]
    running = [subprocess.Popen([sys.executable, *worker, str(i)], cwd=ROOT, env=env,
                                stdout=f, stderr=subprocess.STDOUT)
               for i, f in zip(insts, outs, strict=True)]
    rss_timeline: list[tuple[float, float]] = []  # (s since start, MiB) of the first renderer

    def sample_rss() -> None:
        status = Path(f"/proc/{running[0].pid}/status")
        while running[0].poll() is None:
            try:
                kb = next(int(x.split()[1]) for x in status.read_text().splitlines()
                          if x.startswith("VmRSS:"))
            except (OSError, StopIteration):
                break
            rss_timeline.append((time.perf_counter() - t0, kb / 1024))
            time.sleep(0.5)

    import threading

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    for p in running:
        p.wait()
    wall = time.perf_counter() - t0
    for f in outs:
        f.close()
    logs = [lp.read_bytes().decode(errors="replace") for lp in log_paths]
    sampler.join()
    # RSS at a quarter, half and the end of the run: flat memory means these stay level
    marks = {}
    for frac in (0.25, 0.5, 1.0):
        pts = [m for t, m in rss_timeline if t <= frac * wall]
        marks[f"rss_mib_at_{int(frac * 100)}pct"] = round(max(pts), 1) if pts else None
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if variant == "overdraw":
        return {"variant": variant, "procs": procs, "spatial": spatial,
                "overdraw": [ln for lg in logs for ln in lg.splitlines() if "overdraw" in ln]}
    for inst, log, p in zip(insts, logs, running, strict=True):
        if p.returncode != 0 or not (inst / "traj_0000" / "meta.json").exists():
            raise SystemExit(f"renderer failed in {inst}:\n{log[-3000:]}")
    out_s = procs * frames / 30
    steady = steady_rate([json.loads((i / "frame_times.json").read_text())["traj_0000"]
                          for i in insts if (i / "frame_times.json").exists()], procs)
    meta0 = json.loads((insts[0] / "traj_0000" / "meta.json").read_text())
    yuv_used = meta0.get("yuv")
    return {"variant": variant or "base", "backend": backend, "readback": readback,
            "yuv": yuv, "yuv_used": yuv_used, "compute_leaders": meta0.get("compute_leaders"),
            "compute_shading": (rate or rcfg.compute_shading) if backend != "gl" else None,
            "preset": preset, "width": w,
            "height": h, "spatial": spatial, "procs": procs, "warmup_frames": rcfg.warmup_frames,
            "frames": frames, "wall_s": round(wall, 2),
            "five_view_frames_per_s": round(procs * frames / wall, 3),
            "output_s_per_wall_s": round(out_s / wall, 3),
            "five_view_min_per_gpu_hour": round(out_s / wall * 60, 1),
            "steady_five_view_frames_per_s": None if steady is None else round(steady, 3),
            "steady_five_view_min_per_gpu_hour": None if steady is None
            else round(steady / 30 * 60, 1),
            "peak_rss_mib": round(peak_kb / 1024, 1), **marks,
            "log": next((ln for ln in reversed(logs[0].splitlines())
                         if ln.startswith("render:")), logs[0].strip().splitlines()[-1])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="720p")
    ap.add_argument("--spatial", default="1,8")
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--procs", default="1")
    ap.add_argument("--level", default="UrbanBlocks/Downtown")
    ap.add_argument("--encoder-threads", type=int, default=2)
    ap.add_argument("--encoder-only", action="store_true")
    ap.add_argument("--variants", default="",
                    help="renderer variants (tests/benchmarks/look_variants.py), e.g. "
                         "base,const_fs,no_shadow: what each part of the look costs")
    ap.add_argument("--backend", default="gl", help="render.backend per run: gl, compute "
                    "or both (gl,compute)")
    ap.add_argument("--warmup", type=int, default=None, help="render.warmup_frames")
    ap.add_argument("--yuv", default="auto", help="render.yuv per run: auto, device, encoder")
    ap.add_argument("--compile-cache", default="", help="render.compile_cache_dir (compute)")
    ap.add_argument("--readback", default="sync", help="render.readback per GL run: sync, "
                    "pbo or both (sync,pbo)")
    ap.add_argument("--json", default="")
    ap.add_argument("--log-dir", default="", help="the renderers' logs here (kept if the run "
                    "is killed), not in the scratch folder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wmforge-bench-"))
    results = []
    w, h = RESOLUTION_PRESETS[args.preset]
    fps = encoder_bench(w, h, 240, tmp)
    print(f"encoder: libx264 veryfast {w}x{h}: {fps:.0f} frames/s (one stream, "
          f"{os.cpu_count()} cores)", flush=True)
    results.append({"encoder_fps": round(fps, 1), "width": w, "height": h})
    if not args.encoder_only:
        procs = [int(p) for p in args.procs.split(",")]
        trajs = make_trajectories(tmp, args.level, max(procs), args.frames)
        for p in procs:
            for s, v, b, rb, yv in ((int(x), v, b, rb, yv) for x in args.spatial.split(",")
                                    for v in (args.variants.split(",") if args.variants
                                              else [""])
                                    for b in args.backend.split(",")
                                    for rb in args.readback.split(",")
                                    for yv in args.yuv.split(",")):
                r = render_bench(trajs, args.level, args.preset, s, p, args.frames, tmp,
                                 args.encoder_threads, v, b, args.warmup, rb, yv,
                                 args.compile_cache,
                                 Path(args.log_dir) if args.log_dir else None)
                results.append(r)
                if v == "overdraw":
                    print(f"render [overdraw] x{s}: {r['overdraw']}", flush=True)
                    continue
                print(f"render [{r['variant']}, {b}, readback {rb}, yuv {yv}: "
                      f"{r['yuv_used']}] {r['preset']} x{s} spatial, "
                      f"{p} process(es), "
                      f"{args.frames} frames: "
                      f"{r['five_view_frames_per_s']} five-view frames/s, "
                      f"{r['output_s_per_wall_s']} output s per wall s, "
                      f"{r['five_view_min_per_gpu_hour']} five-view min per GPU-hour "
                      f"(steady: {r['steady_five_view_min_per_gpu_hour']}), "
                      f"peak RSS {r['peak_rss_mib']} MiB per process (first renderer at "
                      f"25/50/100% of the run: {r['rss_mib_at_25pct']} / "
                      f"{r['rss_mib_at_50pct']} / {r['rss_mib_at_100pct']} MiB)", flush=True)
                print(f"  first renderer: {r['log']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
