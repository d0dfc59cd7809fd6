"""Scoring throughput: frames/s and views/s (a view = score.frames_per_view frames) for the
BRISQUE scorer and the LAION scorer (CLIP ViT-L/14 + MLP, random weights in the real layouts:
speed does not depend on the weights), on the GPU when there is one.

Run: .venv/bin/python tests/benchmarks/bench_score.py [--frames 64] [--batch 32] [--size 960x540]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stages.quality.scorers import BrisqueScorer, LaionAestheticScorer, laion_mlp  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", default="960x540")
    ap.add_argument("--frames-per-view", type=int, default=8)
    ap.add_argument("--skip-laion", action="store_true")
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    imgs = [np.roll(base, i * 7, axis=1) for i in range(args.frames)]
    fpv = args.frames_per_view
    b = BrisqueScorer()
    t0 = time.perf_counter()
    b.score(imgs[: max(8, args.frames // 4)])
    dt = time.perf_counter() - t0
    n = max(8, args.frames // 4)
    print(f"brisque {w}x{h}: {n / dt:.1f} frames/s, {n / dt / fpv:.2f} views/s (one process)")
    if args.skip_laion:
        return
    import open_clip
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp)
        torch.save(open_clip.create_model("ViT-L-14-quickgelu", pretrained=None).state_dict(),
                   wd / "clip.bin")
        torch.save(laion_mlp().state_dict(), wd / "mlp.pth")
        sc = LaionAestheticScorer(wd, "clip.bin", "mlp.pth", batch_size=args.batch)
        sc.score(imgs[: args.batch])  # warm-up
        if sc.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        sc.score(imgs)
        if sc.device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    print(f"laion ViT-L/14 on {sc.device} ({torch.get_num_threads()} threads), batch "
          f"{args.batch}, {w}x{h} input: {args.frames / dt:.1f} frames/s, "
          f"{args.frames / dt / fpv:.2f} views/s")


if __name__ == "__main__":
    main()
