"""`score` stage: visual quality of every renderable level (paper §4.2).

``score.clips`` clips per level that passed screening, through Stage I and Stage II at the
scoring preset; every individual view video is scored (never the tiled preview, which is not
rendered here): ``score.frames_per_view`` frames spread over the clip, the aesthetic score of
the configured scorer (mean over the frames) and BT.709 luminance (mean, min, max over the
frames). Scoring writes scores; `select` applies thresholds, so changing a threshold never
re-runs this stage. A view whose video does not decode is a row with ``ok`` false and a reason.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from .cluster.lifetimes import exit_with_parent
from .config import ConfigError, WmforgeConfig
from .core.trajectory import VIEWS
from .datasets.clip_spans import clip_index
from .parquet_io import write_parquet
from .quality.scorers import ScorerError, luminance, make_scorer, sample_frames
from .shared.clip_runs import clip_render_config, run_clips
from .shared.stage_args import stage_args

COLUMNS = ["level_id", "clip", "view", "scorer", "aes", "lum_mean", "lum_min", "lum_max",
           "frames_sampled", "ok", "reason"]


_WORKER_SCORER = None  # a per-frame CPU scorer, made once in each decode worker


def _init_worker(scorer, parent: int) -> None:
    global _WORKER_SCORER
    exit_with_parent(parent)  # a kill -9 of the stage takes its decode workers along
    _WORKER_SCORER = scorer


def _read_view(v: dict, frames_per_view: int, sample_at: str, name: str,
               scorer=None) -> tuple[dict, list]:
    """Decode one view's sampled frames (and, for a per-frame CPU scorer, score them): the
    work of one decode worker. Returns the row and the frames still to be scored."""
    scorer = scorer or _WORKER_SCORER
    row = {"level_id": v["level_id"], "clip": v["clip"], "view": v["view"],
           "scorer": name, "aes": None, "lum_mean": None, "lum_min": None,
           "lum_max": None, "frames_sampled": 0, "ok": False, "reason": ""}
    try:
        frames = sample_frames(Path(v["video"]), frames_per_view, sample_at)
    except Exception as exc:  # noqa: BLE001 - any decoder error is this view's failure
        row["reason"] = f"decode_failed: {type(exc).__name__}: {exc}"[:300]
        return row, []
    lum = [luminance(f) for f in frames]
    row.update(lum_mean=round(sum(lum) / len(lum), 6), lum_min=round(min(lum), 6),
               lum_max=round(max(lum), 6), frames_sampled=len(frames), ok=True)
    if scorer is not None:
        row["aes"] = _mean(scorer.score(frames))
        return row, []
    return row, frames


def _mean(vals: list[float]) -> float:
    # rounded: BLAS/OpenCV/GPU reductions vary in the last bits from run to run, and these
    # numbers feed selection and the shards, whose bytes must not
    return round(sum(vals) / len(vals), 6)


def score_videos(videos: list[dict], scorer, frames_per_view: int, log=print,
                 sample_at: str = "keyframes", workers: int = 0,
                 chunk_views: int = 0) -> pd.DataFrame:
    """One row per view video (dicts with level_id, clip, view, video: Path).

    Views are decoded by ``workers`` workers (0: one per CPU; 1: in this process) in chunks
    of ``chunk_views`` while the previous chunk is being scored, so memory holds two chunks of
    frames however many levels there are, and a batched (GPU) scorer sees full batches made
    of many views' frames.

    - Batched scorer (LAION): the workers are threads, because the frames must come back to
      this process; shipping them from processes (12 MB a view through a pipe) cost more than
      the GIL does (2 cores: threads 1.6× one thread, processes 1.05×; the H200 host's 16
      threads gave 6.6×).
    - Per-frame CPU scorer (BRISQUE): the workers are processes that decode *and* score, and
      send back one row per view; BRISQUE's numpy/Python work holds the GIL.
    """
    workers = workers or os.cpu_count() or 1
    if chunk_views <= 0:
        per_batch = max(1, getattr(scorer, "batch_size", 1) // max(1, frames_per_view))
        chunk_views = max(4 * workers, 4 * per_batch)
    in_worker = None if scorer.batched else scorer
    rows: list[dict] = []
    t0, n_frames = time.perf_counter(), 0

    def flush(done: list[tuple[dict, list]]) -> None:
        nonlocal n_frames
        images = [f for _, frames in done for f in frames]
        scores = iter(scorer.score(images) if images else [])
        for row, frames in done:
            if frames:
                row["aes"] = _mean([next(scores) for _ in frames])
            n_frames += row["frames_sampled"]
            rows.append(row)

    if workers == 1:
        for i in range(0, len(videos), chunk_views):
            flush([_read_view(v, frames_per_view, sample_at, scorer.name, in_worker)
                   for v in videos[i:i + chunk_views]])
    else:
        # spawn: the parent may hold CUDA and threads, which a forked child must not inherit
        pool: Executor = (
            ThreadPoolExecutor(workers, thread_name_prefix="score-decode") if scorer.batched
            else ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"),
                                     initializer=_init_worker, initargs=(in_worker, os.getpid())))
        with pool:
            pending = None
            for i in range(0, len(videos), chunk_views):
                futs = [pool.submit(_read_view, v, frames_per_view, sample_at, scorer.name)
                        for v in videos[i:i + chunk_views]]
                if pending is not None:
                    flush([f.result() for f in pending])
                pending = futs
            if pending is not None:
                flush([f.result() for f in pending])
    if n_frames:
        dt = time.perf_counter() - t0
        log(f"score: {n_frames} frames of {len(rows)} views decoded and scored by "
            f"{scorer.name} in {dt:.1f} s ({len(rows) / dt:.1f} views/s, {workers} workers)")
    return pd.DataFrame(rows, columns=COLUMNS)


def failure_rows(fails: pd.DataFrame, index: pd.DataFrame, clips: int, scorer: str
                 ) -> list[dict]:
    """One row (``view`` empty, ``ok`` false, the reason and the engine's text) per scoring
    clip that failed Stage I or II; a failure of a whole level (trajectory -1: it did not load,
    its engine process died) stands for each of its clips that has no other row, so selection
    counts every clip the level should have given."""
    rows: list[dict] = []
    seen = {(r["level_id"], clip_index(r["trajectory"])) for r in index.to_dict("records")}
    recs = fails.to_dict("records")
    for r in recs:
        c = clip_index(r["trajectory"])
        if c >= 0:
            seen.add((r["level_id"], c))
    for r in recs:
        c = clip_index(r["trajectory"])
        for k in ([c] if c >= 0 else [k for k in range(clips) if (r["level_id"], k) not in seen]):
            seen.add((r["level_id"], k))
            rows.append({"level_id": r["level_id"], "clip": k, "view": "", "scorer": scorer,
                         "frames_sampled": 0, "ok": False,
                         "reason": f"{r['reason']}: {r['detail']}"[:300]})
    return rows


def score_levels(cfg: WmforgeConfig, inventory: Path, screen_levels: pd.DataFrame, out: Path,
                 log=print) -> pd.DataFrame:
    s = cfg.score
    scorer = make_scorer(s)  # fails before any rendering when weights or packages are missing
    ids = sorted(screen_levels[screen_levels["verdict"] == "pass"]["level_id"].astype(str))
    rcfg = clip_render_config(cfg, s.preset, s.width, s.height, s.spatial_samples, s.timeout_s)
    s1, index, s2 = run_clips(cfg, inventory, ids, s.clips, s.clip_s, s.seed_offset,
                              list(cfg.trajectories.characters), rcfg, out / "work",
                              s.timeout_s, log)
    root = out / "work" / "renders"
    videos = []
    for r in index.sort_values(["level_id", "trajectory"]).to_dict("records"):
        for v in VIEWS:
            videos.append({"level_id": r["level_id"],
                           "clip": clip_index(r["trajectory"]), "view": v,
                           "video": root / r["path"] / f"{v}.mp4"})
    table = score_videos(videos, scorer, s.frames_per_view, log, s.sample_at, s.decode_workers)
    failed = failure_rows(pd.concat([s1, s2], ignore_index=True), index, s.clips, scorer.name)
    if failed:
        table = pd.concat([table, pd.DataFrame(failed, columns=COLUMNS)], ignore_index=True)
    return table.sort_values(["level_id", "clip", "view"]).reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parsed = stage_args("wmforge score", __doc__, argv, {
        "inventory": "data/inventory", "screen": "data/screen/levels.parquet",
        "out": "data/score"})
    if parsed is None:
        return 2
    args, cfg = parsed
    try:
        table = score_levels(cfg, Path(args.inventory), pd.read_parquet(args.screen),
                             Path(args.out))
    except (ConfigError, ScorerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_parquet(table, Path(args.out) / "views.parquet")
    ok = table[table["ok"].astype(bool)]
    print(f"score: {len(ok)} views scored ({cfg.score.scorer}) on "
          f"{ok['level_id'].nunique()} levels, {len(table) - len(ok)} failed → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
