"""The GL backend's frame read-back on its own (issue #30 item 2): ``render.readback`` sync
(Panda3D's glReadPixels at each frame's end) against pbo (pixel-pack buffers and fences,
collected two frames later), both in one run, on the same real level, character and poses.

Run: .venv/bin/python tests/benchmarks/bench_gl_readback.py [--width 1280 --height 720]
         [--spatial 8] [--temporal 1] [--frames 60] [--warmup 4] [--modes sync,pbo]
         [--level UrbanBlocks/Downtown] [--encode] [--gpu 0] [--json out.json]

Per mode it prints frames/s of the render loop (pose, draw, read back: the frame loop's
submit/collect, no encoding), the main thread's CPU seconds per frame (``time.thread_time``),
the process's (``time.process_time``: Mesa's or the driver's own threads too), and the wall
time per frame in submit (sync: the draw and Panda3D's read inside ``renderFrame``, then its
RAM conversion; pbo: the draw and issuing the reads), in collect (pbo: the sleeping fence
wait, then mapping and copying) and at the end of the mask and resolve buffers' frames inside
``renderFrame`` (marked by probe display regions): where sync's reads wait for the GPU (and,
on the NVIDIA driver, spin), and pbo reads nothing. It checks that every mode delivered the
same frames (a hash of each, its time left out of the figures). ``--encode`` also times each
mode's whole trajectory render (metering, gate, x264 encoders) as a render worker does it.
``--gpu N`` binds EGL to CUDA GPU N as a node slot does (default: EGL's default device). Needs
only the repository and its venv: it builds the sample library and one Stage I trajectory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stages.cluster.keys import render_settings  # noqa: E402
from stages.config import load_params  # noqa: E402


class _Clock:
    """Wall, main-thread CPU and process CPU seconds of a stretch of code, summed."""

    def __init__(self) -> None:
        self.wall = self.thread = self.proc = 0.0

    def __enter__(self) -> _Clock:
        self._t = (time.perf_counter(), time.thread_time(), time.process_time())
        return self

    def __exit__(self, *exc: object) -> None:
        w, t, p = self._t
        self.wall += time.perf_counter() - w
        self.thread += time.thread_time() - t
        self.proc += time.process_time() - p


class _BufferEnds:
    """Wall time at the end of the mask and resolve buffers' frames, where Panda3D's
    ``RTM_copy_ram`` reads them back (sync; with pbo nothing is read there): from the mask
    buffer's last display region to the resolve buffer's first, plus from the resolve
    buffer's last region to ``renderFrame``'s return. Probe regions (empty scenes, no clears,
    draw callbacks that only note the time) mark the points; the engine is wrapped to note
    the return."""

    def __init__(self, targets) -> None:
        from panda3d.core import Camera, NodePath, OrthographicLens

        self.root = NodePath("buffer_end_probes")
        self.marks: dict[str, float] = {}
        self.s = 0.0
        self.frames = 0
        for buf, sort, name in ((targets.mask_buf, 1 << 22, "mask_end"),
                                (targets.resolve, -(1 << 22), "resolve_start"),
                                (targets.resolve, 1 << 22, "resolve_end")):
            dr = buf.makeDisplayRegion()
            dr.setSort(sort)
            dr.setClearColorActive(False)
            dr.setClearDepthActive(False)
            dr.setCamera(self.root.attachNewNode(Camera(name, OrthographicLens())))
            dr.setDrawCallback(lambda cb, n=name: self.marks.__setitem__(n, time.perf_counter()))
        engine = targets.engine
        ends = self

        class _Engine:
            def renderFrame(self) -> None:  # noqa: N802 - Panda3D's name
                ends.marks.clear()
                engine.renderFrame()
                m = ends.marks
                if len(m) == 3:
                    ends.s += (m["resolve_start"] - m["mask_end"]
                               + time.perf_counter() - m["resolve_end"])
                    ends.frames += 1

            def __getattr__(self, name: str):
                return getattr(engine, name)

        targets.engine = _Engine()


def _digest(colors: dict, masks: dict) -> str:
    from stages.core.trajectory import VIEWS

    h = hashlib.blake2b(digest_size=16)
    for v in VIEWS:
        h.update(colors[v].tobytes())
        h.update(masks[v].tobytes())
    return h.hexdigest()


def render_loop(mode: str, settings, traj_dir: Path, tmp: Path, frames: int, warmup: int,
                encode: bool) -> dict:
    import stages.engine.render_targets as rt
    from stages.engine.gl_readback import ReadbackTimes
    from stages.engine.instance_render import InstanceRenderer
    from tests.posed_frames import PosedFrames

    inst = tmp / f"inst_{mode}"
    shutil.rmtree(inst, ignore_errors=True)
    inst.mkdir(parents=True)
    ir = InstanceRenderer(inst, settings, "p3headlessgl", ROOT, readback=mode)
    try:
        pf = PosedFrames(ir, traj_dir)
        r = ir.r
        n_rec = len(pf.rows)
        T = settings.temporal_samples
        poses = [pf.pose(f % n_rec, (f % n_rec) / 30) for f in range(frames)]
        for f in range(warmup):
            p = poses[f % frames]
            r.render([p] * T, p, 0.0)
        t = r.targets
        if t.pbo is not None:
            t.pbo.times = ReadbackTimes()
        ends = _BufferEnds(t)
        ram = _Clock()  # sync: Panda3D's RAM image converted to RGB (in draw, after the read)
        real_ram = rt._ram

        def timed_ram(*a):
            with ram:
                return real_ram(*a)

        rt._ram = timed_ram
        loop, sub, col, hashing = _Clock(), _Clock(), _Clock(), _Clock()
        digests: list[str] = []

        def take() -> None:
            with col:
                colors, masks = r.collect()
            with hashing:
                digests.append(_digest(colors, masks))

        try:
            with loop:
                for p in poses:
                    with sub:
                        r.submit([p] * T, p, 0.0)
                    while t.in_flight > r.lag:
                        take()
                while t.in_flight:
                    take()
        finally:
            rt._ram = real_ram
        wall = loop.wall - hashing.wall
        out = {"mode": mode, "frames": frames, "lag": r.lag,
               "renderer": str(r.gsg.getDriverRenderer()),
               "frames_per_s": frames / wall, "wall_s": wall,
               "main_thread_cpu_s_per_frame": (loop.thread - hashing.thread) / frames,
               "process_cpu_s_per_frame": (loop.proc - hashing.proc) / frames,
               "submit_ms_per_frame": 1e3 * sub.wall / frames,
               "collect_ms_per_frame": 1e3 * col.wall / frames,
               "buffer_end_ms_per_frame": 1e3 * ends.s / max(1, ends.frames),
               "digest": hashlib.sha256("".join(digests).encode()).hexdigest()}
        if t.pbo is not None:
            tm = t.pbo.times
            out.update({"issue_ms_per_frame": 1e3 * tm.issue_s / frames,
                        "fence_wait_ms_per_frame": 1e3 * tm.wait_s / frames,
                        "fences_not_ready": tm.waits,
                        "map_copy_ms_per_frame": 1e3 * tm.copy_s / frames})
        else:
            out["ram_convert_ms_per_frame"] = 1e3 * ram.wall / frames
        if encode:
            with _Clock() as enc:
                meta = ir.render(traj_dir, "traj", "k" * 16)
            n = int(meta["frame_count"])
            out.update({"encode_frames": n, "encode_frames_per_s": n / enc.wall,
                        "encode_main_thread_cpu_s_per_frame": enc.thread / n,
                        "encode_process_cpu_s_per_frame": enc.proc / n,
                        "encode_sha256": meta["sha256"]})
        return out
    finally:
        ir.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--height", type=int, default=180)
    ap.add_argument("--spatial", type=int, default=1)
    ap.add_argument("--temporal", type=int, default=1)
    ap.add_argument("--frames", type=int, default=60, help="timed frames per mode")
    ap.add_argument("--warmup", type=int, default=4, help="untimed frames first, per mode")
    ap.add_argument("--modes", default="sync,pbo")
    ap.add_argument("--level", default="UrbanBlocks/Downtown")
    ap.add_argument("--encode", action="store_true",
                    help="also time the whole trajectory render with encoders, per mode")
    ap.add_argument("--gpu", type=int, default=None, help="CUDA GPU to bind EGL to")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.gpu is not None:
        from stages.engine.device import SlotDevice, bind_display

        bind_display(SlotDevice(args.gpu))
    from tests.benchmarks.bench_render import make_trajectories

    tmp = Path(tempfile.mkdtemp(prefix="wmforge-readback-"))
    try:
        trajs = make_trajectories(tmp, args.level, 1, min(args.frames, 120))
        traj_dir = trajs / args.level.replace("/", "__") / "traj_0000"
        rcfg = load_params(overrides=[
            f"render.width={args.width}", f"render.height={args.height}",
            f"render.spatial_samples={args.spatial}",
            f"render.temporal_samples={args.temporal}", "render.warmup_frames=2",
            # a speed figure: the gate's threshold is not what is measured (at tiny sizes a
            # half-resolution mask can miss the character in the top view)
            "render.align_min=0.0"]).render
        settings = render_settings(rcfg, 30)
        results = []
        for mode in args.modes.split(","):
            r = render_loop(mode, settings, traj_dir, tmp, args.frames, args.warmup,
                            args.encode)
            results.append(r)
            detail = (f"issuing reads {r['issue_ms_per_frame']:.2f}; collect "
                      f"{r['collect_ms_per_frame']:.2f} ms/frame: fence wait "
                      f"{r['fence_wait_ms_per_frame']:.2f} ({r['fences_not_ready']} of "
                      f"{r['frames']} not ready at the first poll), map+copy "
                      f"{r['map_copy_ms_per_frame']:.2f}" if mode == "pbo" else
                      f"of which RAM conversion {r['ram_convert_ms_per_frame']:.2f}; "
                      "Panda3D's read is inside renderFrame")
            print(f"readback {mode}: {args.width}x{args.height} x{args.spatial} spatial "
                  f"x{args.temporal} temporal, {args.frames} frames, lag {r['lag']}: "
                  f"{r['frames_per_s']:.2f} five-view frames/s, main thread "
                  f"{r['main_thread_cpu_s_per_frame']:.4f} CPU s/frame, process "
                  f"{r['process_cpu_s_per_frame']:.4f} CPU s/frame; submit "
                  f"{r['submit_ms_per_frame']:.2f} ms/frame ({detail}); at the buffers' "
                  f"frame ends (sync: Panda3D's reads) {r['buffer_end_ms_per_frame']:.2f} "
                  "ms/frame", flush=True)
            if args.encode:
                print(f"  whole trajectory with encoders: {r['encode_frames']} frames, "
                      f"{r['encode_frames_per_s']:.2f} frames/s, main thread "
                      f"{r['encode_main_thread_cpu_s_per_frame']:.4f} CPU s/frame, process "
                      f"{r['encode_process_cpu_s_per_frame']:.4f} CPU s/frame", flush=True)
        same = len({r["digest"] for r in results}) == 1
        print(f"renderer: {results[0]['renderer']}; {os.cpu_count()} CPUs; frames identical "
              f"across modes: {'yes' if same else 'NO'}", flush=True)
        if args.encode:
            same_v = len({json.dumps(r["encode_sha256"], sort_keys=True)
                          for r in results}) == 1
            print(f"videos identical across modes: {'yes' if same_v else 'NO'}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"args": vars(args), "cpus": os.cpu_count(), "identical": same,
                 "results": results}, indent=1))
        if not same:
            raise SystemExit("the modes delivered different frames")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
