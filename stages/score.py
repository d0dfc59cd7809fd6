"""`score` stage: visual quality of every renderable level (paper §4.2).

``score.clips`` clips per level that passed screening, through Stage I and Stage II at the
scoring preset; every individual view video is scored (never the tiled preview, which is not
rendered here): ``score.frames_per_view`` frames spread over the clip, the aesthetic score of
the configured scorer (mean over the frames) and BT.709 luminance (mean, min, max over the
frames). Scoring writes scores; `select` applies thresholds, so changing a threshold never
re-runs this stage. A view whose video does not decode is a row with ``ok`` false and a reason.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from .clip_runs import clip_render_config, run_clips
from .config import ConfigError, WmforgeConfig
from .core.trajectory import VIEWS
from .datasets.clip_spans import clip_index
from .inventory import write_parquet
from .quality.scorers import ScorerError, luminance, make_scorer, sample_frames
from .stage_args import stage_args

COLUMNS = ["level_id", "clip", "view", "scorer", "aes", "lum_mean", "lum_min", "lum_max",
           "frames_sampled", "ok", "reason"]


def score_videos(videos: list[dict], scorer, frames_per_view: int, log=print) -> pd.DataFrame:
    """One row per view video (dicts with level_id, clip, view, video: Path). Frames from all
    videos go to the scorer together, so a GPU scorer sees full batches."""
    rows, images, owners = [], [], []
    for v in videos:
        row = {"level_id": v["level_id"], "clip": v["clip"], "view": v["view"],
               "scorer": scorer.name, "aes": None, "lum_mean": None, "lum_min": None,
               "lum_max": None, "frames_sampled": 0, "ok": False, "reason": ""}
        try:
            frames = sample_frames(Path(v["video"]), frames_per_view)
        except Exception as exc:  # noqa: BLE001 - any decoder error is this view's failure
            row["reason"] = f"decode_failed: {type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            continue
        lum = [luminance(f) for f in frames]
        # rounded: BLAS/OpenCV reductions vary in the last bits from run to run, and these
        # numbers feed selection and the shards, whose bytes must not
        row.update(lum_mean=round(sum(lum) / len(lum), 6), lum_min=round(min(lum), 6),
                   lum_max=round(max(lum), 6), frames_sampled=len(frames), ok=True)
        owners += [len(rows)] * len(frames)
        images += frames
        rows.append(row)
    t0 = time.perf_counter()
    scores = scorer.score(images) if images else []
    if images:
        log(f"score: {len(images)} frames of {len(rows)} views scored by {scorer.name} in "
            f"{time.perf_counter() - t0:.1f} s")
    sums: dict[int, list[float]] = {}
    for i, s in zip(owners, scores, strict=True):
        sums.setdefault(i, []).append(s)
    for i, vals in sums.items():
        rows[i]["aes"] = round(sum(vals) / len(vals), 6)
    return pd.DataFrame(rows, columns=COLUMNS)


def score_levels(cfg: WmforgeConfig, params: Path, inventory: Path, screen_levels: pd.DataFrame,
                 out: Path, overrides: list[str] | None = None, log=print) -> pd.DataFrame:
    s = cfg.score
    scorer = make_scorer(s)  # fails before any rendering when weights or packages are missing
    ids = sorted(screen_levels[screen_levels["verdict"] == "pass"]["level_id"].astype(str))
    rcfg = clip_render_config(cfg, s.preset, s.width, s.height, s.spatial_samples, s.timeout_s)
    s1, index, s2 = run_clips(cfg, params, inventory, ids, s.clips, s.clip_s, s.seed_offset,
                              list(cfg.trajectories.characters), rcfg, out / "work",
                              s.timeout_s, list(overrides or []), log)
    root = out / "work" / "renders"
    videos = []
    for r in index.sort_values(["level_id", "trajectory"]).to_dict("records"):
        for v in VIEWS:
            videos.append({"level_id": r["level_id"],
                           "clip": clip_index(r["trajectory"]), "view": v,
                           "video": root / r["path"] / f"{v}.mp4"})
    table = score_videos(videos, scorer, s.frames_per_view, log)
    failed = [{"level_id": r["level_id"], "clip": clip_index(r["trajectory"]), "view": "",
               "scorer": scorer.name, "frames_sampled": 0, "ok": False,
               "reason": f"{r['reason']}: {r['detail']}"[:300]}
              for r in pd.concat([s1, s2], ignore_index=True).to_dict("records")]
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
        table = score_levels(cfg, Path(args.params), Path(args.inventory),
                             pd.read_parquet(args.screen), Path(args.out), args.set)
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
