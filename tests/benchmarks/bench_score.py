"""Scoring throughput, in frames/s and views/s (a view = ``--frames-per-view`` frames).

1. The scorers alone, on frames already in memory: BRISQUE (one thread) and the LAION scorer
   (CLIP ViT-L/14 + MLP, random weights in the real layouts: speed does not depend on the
   weights), on the GPU when there is one.
2. End to end, as the `score` stage runs it (``stages.score.score_videos``): 10-second 540p
   H.264 view videos encoded here with the render settings (GOP 1 s), frames sampled at
   keyframes by ``--workers`` decode threads, luminance, then the scorer.

Run: .venv/bin/python tests/benchmarks/bench_score.py [--frames 64] [--batch 32] [--views 64]
     [--workers 0] [--variants fp16 fp16+compile fp8+compile] [--e2e-variants ...]
     [--skip-laion] [--skip-brisque-e2e]

Each LAION variant also prints its accuracy against the fp32 tower on the same frames.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stages.media.video import EncodeSettings, VideoWriter  # noqa: E402
from stages.quality.scorers import BrisqueScorer, LaionAestheticScorer, laion_mlp  # noqa: E402
from stages.score import score_videos  # noqa: E402


def textured(h: int, w: int, seed: int) -> np.ndarray:
    """A smooth random picture (compresses like a rendered frame, unlike white noise)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 255, (h // 16, w // 16, 3), dtype=np.uint8)
    big = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC))
    fine = rng.integers(0, 9, (h, w, 3), dtype=np.uint8)
    return np.clip(big.astype(np.int16) + fine - 4, 0, 255).astype(np.uint8)


def make_video(path: Path, w: int, h: int, seconds: float, seed: int) -> Path:
    base = textured(h, w, seed)
    n = round(30 * seconds)
    wr = VideoWriter(path, w, h, 30, EncodeSettings(threads=1))
    for i in range(n):
        wr.write(np.roll(base, (i * 3, i * 5), axis=(0, 1)))
    return wr.close(n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=64, help="frames for the scorer-only figure")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", default="960x540")
    ap.add_argument("--frames-per-view", type=int, nargs="+", default=[8])
    ap.add_argument("--views", type=int, default=64, help="view videos for the end-to-end run")
    ap.add_argument("--distinct", type=int, default=8, help="distinct videos among them")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=0, help="decode threads; 0: one per CPU")
    ap.add_argument("--skip-laion", action="store_true")
    ap.add_argument("--variants", nargs="*", default=None,
                    help="LAION set-ups: PRECISION[+compile], PRECISION one of fp32 fp16 "
                         "bf16 fp8 (default on CUDA: fp16 fp16+compile fp8+compile)")
    ap.add_argument("--e2e-variants", nargs="*", default=None,
                    help="run end to end only these variants (default: all)")
    ap.add_argument("--skip-brisque-e2e", action="store_true")
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    workers = args.workers or os.cpu_count() or 1
    print(f"machine: {os.cpu_count()} CPUs; input {w}x{h}; decode workers {workers} "
          "(threads for LAION, processes for BRISQUE)")
    imgs = [np.roll(textured(h, w, 0), i * 7, axis=1) for i in range(args.frames)]

    b = BrisqueScorer()
    n = min(16, args.frames)
    t0 = time.perf_counter()
    b.score(imgs[:n])
    dt = time.perf_counter() - t0
    print(f"[scorer only] brisque, 1 thread: {n / dt:.1f} frames/s")

    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            files = list(pool.map(lambda i: make_video(tmpd / f"v{i}.mp4", w, h, args.seconds,
                                                       i), range(args.distinct)))
        print(f"encoded {len(files)} videos of {args.seconds:g} s in "
              f"{time.perf_counter() - t0:.1f} s")
        videos = [{"level_id": f"L/{i % 50}", "clip": i, "view": "back",
                   "video": files[i % len(files)]} for i in range(args.views)]

        def e2e(scorer, label: str, views: list[dict]) -> None:
            for fpv in args.frames_per_view:
                t0 = time.perf_counter()
                table = score_videos(views, scorer, fpv, log=lambda _m: None,
                                     workers=workers)
                dt = time.perf_counter() - t0
                assert table["ok"].all(), table[~table["ok"]]
                print(f"[end to end] {label}, {fpv} frames/view: {len(views) / dt:.1f} views/s "
                      f"({len(views) * fpv / dt:.1f} frames/s) over {len(views)} views")

        if not args.skip_brisque_e2e:
            e2e(b, f"brisque in {workers} processes", videos[:max(workers * 2, 8)])
        # decoding alone: a scorer that does nothing, to show what the decoder allows
        e2e(_NullScorer(), "decode + luminance only", videos)
        if workers > 1:
            t0 = time.perf_counter()
            one = videos[:max(8, len(videos) // workers)]
            score_videos(one, _NullScorer(), args.frames_per_view[0], log=lambda _m: None,
                         workers=1)
            print(f"[end to end] decode + luminance only, 1 thread: "
                  f"{len(one) / (time.perf_counter() - t0):.1f} views/s")
        if args.skip_laion:
            return
        import open_clip
        import torch

        wd = tmpd / "weights"
        wd.mkdir()
        torch.manual_seed(0)
        torch.save(open_clip.create_model("ViT-L-14-quickgelu", pretrained=None).state_dict(),
                   wd / "clip.bin")
        torch.save(laion_mlp().state_dict(), wd / "mlp.pth")
        cuda = torch.cuda.is_available()
        variants = args.variants or (["fp16", "fp16+compile", "fp8+compile"] if cuda
                                     else ["fp32"])
        ref = LaionAestheticScorer(wd, "clip.bin", "mlp.pth", batch_size=args.batch,
                                   precision="fp32", compile=False)
        probe = imgs[:64]
        ref_emb, ref_scores = ref.embed(probe), np.array(ref.score(probe))
        del ref
        for variant in variants:
            try:
                _laion_variant(args, variant, wd, imgs, probe, ref_emb, ref_scores, e2e,
                               videos)
            except Exception as exc:  # noqa: BLE001 - report it, measure the next variant
                print(f"[{variant}] failed: {type(exc).__name__}: {str(exc)[:2000]}")
            if cuda:
                torch.cuda.empty_cache()


def _laion_variant(args, variant, wd, imgs, probe, ref_emb, ref_scores, e2e, videos) -> None:
    import torch

    cuda = torch.cuda.is_available()
    prec, _, comp = variant.partition("+")
    t0 = time.perf_counter()
    sc = LaionAestheticScorer(wd, "clip.bin", "mlp.pth", batch_size=args.batch,
                              precision=prec, compile=comp == "compile")
    sc.score(imgs[: args.batch])  # warm-up (and compilation)
    print(f"[{variant}] load + first batch: {time.perf_counter() - t0:.1f} s")
    # accuracy against fp32 on the same frames (random weights: the embedding's
    # cosine is the meaningful figure; the random MLP's scores are ~0.05)
    cos = (sc.embed(probe).float().cpu() * ref_emb.cpu()).sum(-1)
    dev = np.abs(np.array(sc.score(probe)) - ref_scores) / np.abs(ref_scores).mean()
    print(f"[{variant}] vs fp32 on {len(probe)} frames: embedding cosine min "
          f"{cos.min():.5f}, score deviation max {dev.max():.2e} of the mean score")
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    sc.score(imgs)
    if cuda:
        torch.cuda.synchronize()
    fps = args.frames / (time.perf_counter() - t0)
    per = ", ".join(f"{fps / k:.1f} views/s at {k} frames/view"
                    for k in args.frames_per_view)
    print(f"[scorer only] laion ViT-L/14 {variant} on {sc.device} "
          f"({torch.get_num_threads()} torch threads), batch {args.batch}: "
          f"{fps:.1f} frames/s = {per}")
    if cuda:  # the parts of a batch: host staging, GPU preprocessing, the tower alone
        import torch.nn.functional as F

        batch = imgs[: args.batch]
        host = torch.empty((len(batch), *batch[0].shape), dtype=torch.uint8, pin_memory=True)
        t0 = time.perf_counter()
        for _ in range(4):
            np.stack(batch, out=host.numpy())
        dt = (time.perf_counter() - t0) / 4
        print(f"[host] np.stack of {len(batch)} frames into pinned memory: {dt * 1e3:.1f} ms "
              f"({len(batch) / dt:.0f} frames/s)")
        xg = host.to(sc.device)

        def interp():  # the F.interpolate preprocessing used before the resize matrices
            x = xg.permute(0, 3, 1, 2).float() / 255.0
            x = F.interpolate(x, size=(224, round(x.shape[-1] * 224 / x.shape[-2])),
                              mode="bicubic", antialias=True, align_corners=False)
            return x[..., :224].clamp(0, 1)

        mm = torch.float16 if sc.precision != "fp32" else torch.float32

        def mats():
            return sc._preprocess(xg, mm)

        for label, fn in (("F.interpolate (before)", interp), ("resize matrices", mats)):
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(4):
                fn()
            torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) / 4
            print(f"[preprocess] {label}, batch {len(batch)}: {dt * 1e3:.1f} ms "
                  f"({len(batch) / dt:.0f} frames/s)")
        x = sc._gpu_batch(imgs[: args.batch])
        with torch.inference_mode():
            sc.model.encode_image(x)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(8):
                sc.model.encode_image(x)
            torch.cuda.synchronize()
        fps = 8 * args.batch / (time.perf_counter() - t0)
        print(f"[model only] ViT-L/14 {variant} encode_image, batch {args.batch} on "
              f"the GPU: {fps:.1f} frames/s ({fps * 162e9 / 1e12:.0f} TFLOP/s at "
              "162 GFLOP a frame)")
    if args.e2e_variants is None or variant in args.e2e_variants:
        e2e(sc, f"laion {variant} on {sc.device}", videos)


class _NullScorer:
    name = "none"
    batched = True
    batch_size = 256

    def score(self, images):
        return [0.0] * len(images)


if __name__ == "__main__":
    main()
