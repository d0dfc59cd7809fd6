"""What the encoder thread spends on the RGB → YUV420 conversion (issue #30 item 2): x264 fed
rgb24 frames (PyAV/libswscale convert inside ``encode()``, as the GL path's ``VideoWriter``
does) against yuv420p planes made beforehand (``media.video.Yuv420``, what the compute backend
hands over from the GPU), with the project's own ``EncodeSettings``, one stream per run.

Run: .venv/bin/python tests/benchmarks/bench_encode_input.py [--size 1280x720] [--frames 90]
         [--preset veryfast] [--threads 1] [--repeat 2] [--json out.json]

The pictures are a rendered-looking field (moving gradients, edges and fine noise, so x264
has texture to code); the conversion's cost does not depend on content, x264's does. Printed
per mode: CPU milliseconds per frame of the encoding thread (``time.thread_time``: x264's own
threads, with --threads > 1, are not in it — use --threads 1 for the whole cost), and the
conversion alone (``VideoFrame.reformat`` to yuv420p) for scale.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stages.media.video import EncodeSettings, VideoWriter, Yuv420  # noqa: E402


def _pictures(w: int, h: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:h, 0:w]
    out = []
    for i in range(n):
        img = np.stack([(xx + 4 * i) % 256, (yy + 2 * i) % 256,
                        np.where(((xx + i) // 24 + yy // 24) % 2 == 1, 200, 40)], -1)
        img = img + rng.integers(-6, 7, img.shape)
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--preset", default="veryfast")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    import av
    import torch

    from stages.engine.compute.yuv import rgb_to_yuv420

    pics = _pictures(w, h, a.frames)
    planes = [Yuv420(*(p.numpy() for p in rgb_to_yuv420(torch.from_numpy(x)))) for x in pics]
    enc = EncodeSettings(preset=a.preset, threads=a.threads)
    rows: dict[str, list[float]] = {"rgb24": [], "yuv420p": [], "conversion_alone": []}
    tmp = Path("/tmp/bench_encode_input.mp4")
    for _ in range(a.repeat):
        for mode, src in (("rgb24", pics), ("yuv420p", planes)):
            wr = VideoWriter(tmp, w, h, 30, enc)
            t0 = time.thread_time()
            for x in src:
                wr.write(x)
            wr.close(a.frames)
            rows[mode].append((time.thread_time() - t0) / a.frames * 1e3)
        t0 = time.thread_time()
        for x in pics:
            av.VideoFrame.from_ndarray(x, format="rgb24").reformat(format="yuv420p")
        rows["conversion_alone"].append((time.thread_time() - t0) / a.frames * 1e3)
    tmp.unlink(missing_ok=True)
    res = {"size": a.size, "frames": a.frames, "preset": a.preset, "threads": a.threads,
           "cpu_ms_per_frame": {k: [round(v, 2) for v in vs] for k, vs in rows.items()}}
    best = {k: min(vs) for k, vs in rows.items()}
    res["saved_share"] = round(1 - best["yuv420p"] / best["rgb24"], 3)
    for k, v in best.items():
        print(f"{k:>17}: {v:6.2f} CPU ms per {a.size} frame (best of {a.repeat})")
    print(f"yuv420p input saves {res['saved_share']:.1%} of the encoding thread's CPU")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
