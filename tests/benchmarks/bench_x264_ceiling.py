"""The host's x264 ceiling (issue #30): N encoder processes side by side, each writing one
720p stream through the project's own ``EncodeSettings`` (default: veryfast, CRF 20, 2
threads, mbtree off), the way a node's slots encode their views. Prints view-frames/s in total
and what that caps a node at: five-view minutes per hour = total / 5 / 30 x 60.

Run: .venv/bin/python tests/benchmarks/bench_x264_ceiling.py [--streams 1,16]
         [--presets veryfast,ultrafast] [--frames 300] [--size 1280x720] [--json out.json]

The input is a smooth image that moves (gradients and low-frequency waves drifting, a little
fixed-seed grain), closer to a rendered view than noise; each stream's frames are made before
its clock starts, so the figure is the encoder's alone. Figures are per machine (FACTS.md: the
lent H200 host made 653 veryfast, 1,128 ultrafast in total with 16 streams).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def frames_of(w: int, h: int, n: int, seed: int) -> list[np.ndarray]:
    """``n`` smooth moving RGB frames (a cycle of 30, reused)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    grain = rng.normal(0, 3, (h, w, 3)).astype(np.float32)
    cycle = []
    for i in range(min(n, 30)):
        t = i / 30.0
        r = 128 + 90 * np.sin(x / 97.0 + 6.28 * t) * np.cos(y / 71.0)
        g = 128 + 80 * np.sin((x + y) / 131.0 - 6.28 * t)
        b = 255 * (y / h) * 0.6 + 40 * np.cos(x / 53.0 + 3.14 * t)
        img = np.stack([r, g, b], -1) + grain
        cycle.append(np.clip(img, 0, 255).astype(np.uint8))
    return [cycle[i % len(cycle)] for i in range(n)]


def _stream(args: tuple[int, int, int, str, str, int, mp.Barrier]) -> float:
    w, h, n, preset, out, seed, barrier = args
    from stages.media.video import EncodeSettings, VideoWriter

    frames = frames_of(w, h, n, seed)
    barrier.wait()
    t0 = time.perf_counter()
    wr = VideoWriter(Path(out), w, h, 30, EncodeSettings(preset=preset))
    for f in frames:
        wr.write(f)
    wr.close(n)
    return time.perf_counter() - t0


def ceiling(streams: int, preset: str, w: int, h: int, n: int, tmp: Path) -> dict:
    ctx = mp.get_context("fork")
    barrier = ctx.Manager().Barrier(streams)
    with ctx.Pool(streams) as pool:
        t0 = time.perf_counter()
        secs = pool.map(_stream, [(w, h, n, preset, str(tmp / f"s{i}_{preset}.mp4"), i, barrier)
                                  for i in range(streams)])
        wall = time.perf_counter() - t0
    # the streams start together (the barrier, after each made its frames): the slowest one's
    # time is the run's
    slowest = max(secs)
    total = streams * n / slowest
    return {"streams": streams, "preset": preset, "width": w, "height": h, "frames": n,
            "per_stream_fps": round(n / float(np.mean(secs)), 1),
            "total_view_frames_per_s": round(total, 1),
            "ceiling_five_view_min_per_hour": round(total / 5 / 30 * 60, 1),
            "wall_s": round(wall, 2), "cores": os.cpu_count()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,16")
    ap.add_argument("--presets", default="veryfast,ultrafast")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    out = []
    with tempfile.TemporaryDirectory(prefix="wmforge-x264-") as d:
        for preset in a.presets.split(","):
            for s in (int(x) for x in a.streams.split(",")):
                r = ceiling(s, preset, w, h, a.frames, Path(d))
                out.append(r)
                print(f"x264 {preset} {w}x{h}, {s} stream(s) side by side: "
                      f"{r['per_stream_fps']} frames/s each, {r['total_view_frames_per_s']} "
                      f"view-frames/s in total = ceiling {r['ceiling_five_view_min_per_hour']} "
                      f"five-view min per hour ({r['cores']} cores)", flush=True)
                for f in Path(d).glob("*.mp4"):
                    f.unlink()
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
