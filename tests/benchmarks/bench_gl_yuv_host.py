"""The host CPU a GL five-view frame costs with ``render.yuv`` encoder against device (issue
#30 item 2): what the render slot's CPU does besides the GL driver, per frame.

Run: .venv/bin/python tests/benchmarks/bench_gl_yuv_host.py [--size 1280x720] [--frames 12]
         [--repeat 2] [--json out.json]

Real frames: the sample library's AlpineMeadow with Alex, one Stage I trajectory, rendered by
the embedded engine (1 spatial sample) through the PBO ring; each frame is drawn twice at the
same pose, once read back as the RGB strip and once as the packed planes of ``gl_yuv``. Then,
with the GL driver idle, the host's work on those frames is timed for each mode:

- ``collect``: the render thread's CPU (``time.thread_time``) to map and copy the PBOs and
  split them into views (RGB) or planes (yuv); the fence waits sleep and are not counted;
- ``encode``: the process's CPU (``time.process_time``: x264's own threads included) to make
  the five views' and the preview's streams with the config's encode settings: for RGB, the
  preview tiled on the CPU (``media.video.tile_preview``) and swscale's conversion inside each
  ``encode()``; for yuv, the planes as they are.

On a CPU machine the GL pass itself runs in llvmpipe (CPU), which is why ``render.yuv: auto``
keeps the encoder's conversion there; this measures what a GPU node's CPU is spared.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _encode(frames: list[dict], settings, out: Path, w: int, h: int) -> float:
    """CPU seconds to encode ``frames`` (views and preview, RGB or Yuv420) into MP4s."""
    from stages.core.trajectory import VIEWS
    from stages.media.video import VideoWriter, Yuv420, tile_preview

    enc, penc = settings.encode(), settings.preview_encode()
    pw, ph = 3 * (w // 2 // 2 * 2), 2 * (h // 2 // 2 * 2)
    out.mkdir(parents=True, exist_ok=True)
    writers = {v: VideoWriter(out / f"{v}.mp4", w, h, 30, enc) for v in VIEWS}
    writers["preview"] = VideoWriter(out / "preview.mp4", pw, ph, 30, penc)
    t0 = time.process_time()
    for imgs in frames:
        pics = dict(imgs)
        if not isinstance(pics["back"], Yuv420):
            pics["preview"] = tile_preview({v: pics[v] for v in VIEWS}, VIEWS)
        for name, wr in writers.items():
            wr.write(pics[name])
    for wr in writers.values():
        wr.close(len(frames))
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))

    from stages.cluster.keys import render_settings
    from stages.config import SampleLibraryConfig, load_params
    from stages.engine.instance_render import InstanceRenderer
    from stages.sample_library import build_sample_library
    from tests.conftest import make_trajectories
    from tests.posed_frames import PosedFrames

    tmp = Path(tempfile.mkdtemp(prefix="wmforge-glyuv-"))
    lib = tmp / "lib"
    build_sample_library(lib, SampleLibraryConfig())
    traj = make_trajectories(lib, tmp / "traj", 1, a.frames) / "NatureValley__AlpineMeadow" \
        / "traj_0000"
    cfg = load_params(overrides=[f"render.width={w}", f"render.height={h}",
                                 "render.spatial_samples=1", "render.temporal_samples=1",
                                 "render.yuv=device", "render.readback=pbo"]).render
    settings = render_settings(cfg, 30)
    ir = InstanceRenderer(tmp / "inst", settings, "p3headlessgl", Path.cwd(), readback="pbo")
    rgb_frames, yuv_frames = [], []
    cpu = {"rgb": 0.0, "yuv": 0.0}
    nbytes = {}
    try:
        pf = PosedFrames(ir, traj)
        t = ir.r.targets
        renderer = str(t.host.getGsg().getDriverRenderer())
        for f in range(a.frames):
            pose = pf.pose(f, 0.07 * f)
            for mode, want in (("rgb", ("colour", "mask")), ("yuv", ("yuv", "mask"))):
                ir.r._place_frame([pose], pose, 0.0)
                t.pbo.submit(want)
                t0 = time.thread_time()
                got = t.pbo.collect()
                if mode == "rgb":
                    colors = t._split(got["colour"][::-1], got["mask"][::-1, :, 0])[0]
                else:
                    colors = t.yuv_pass.unpack(got["yuv"], with_preview=True)
                    t._split(None, got["mask"][::-1, :, 0])
                cpu[mode] += time.thread_time() - t0
                nbytes[mode] = sum(v.nbytes for v in got.values())
                (rgb_frames if mode == "rgb" else yuv_frames).append(colors)
    finally:
        ir.close()
    enc = {"rgb": [], "yuv": []}
    for r in range(a.repeat):
        for mode, frames in (("rgb", rgb_frames), ("yuv", yuv_frames)):
            enc[mode].append(_encode(frames, settings, tmp / f"enc_{mode}_{r}", w, h))
    n = a.frames
    # two parts of the RGB path's encode, timed alone: the preview's tiling, and the copy of
    # each view out of the strip (VideoWriter makes a strided view contiguous for PyAV)
    from stages.core.trajectory import VIEWS
    from stages.media.video import tile_preview

    t0 = time.thread_time()
    for imgs in rgb_frames:
        tile_preview({v: imgs[v] for v in VIEWS}, VIEWS)
    tile_ms = 1e3 * (time.thread_time() - t0) / n
    t0 = time.thread_time()
    for imgs in rgb_frames:
        for v in VIEWS:
            np.ascontiguousarray(imgs[v])
    copy_ms = 1e3 * (time.thread_time() - t0) / n
    res = {"bench": "gl_yuv_host", "size": a.size, "frames": n, "gl_renderer": renderer,
           "machine": platform.node(), "cpu_count": __import__("os").cpu_count(),
           "encode_settings": settings.encode().as_dict(),
           "readback_bytes_per_frame": nbytes,
           "collect_cpu_ms_per_frame": {k: round(1e3 * v / n, 2) for k, v in cpu.items()},
           "encode_cpu_ms_per_frame": {k: round(1e3 * min(v) / n, 1) for k, v in enc.items()},
           "encode_cpu_ms_per_frame_runs": {k: [round(1e3 * x / n, 1) for x in v]
                                            for k, v in enc.items()},
           "rgb_encode_parts_ms_per_frame": {"tile_preview": round(tile_ms, 1),
                                             "views_made_contiguous": round(copy_ms, 1)}}
    tot = {k: res["collect_cpu_ms_per_frame"][k] + res["encode_cpu_ms_per_frame"][k]
           for k in ("rgb", "yuv")}
    res["host_cpu_ms_per_frame"] = {k: round(v, 1) for k, v in tot.items()}
    res["saved_share"] = round(1 - tot["yuv"] / tot["rgb"], 3)
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
