"""`select` stage: thresholds on the scores (cheap; the sweep target).

A view passes when its aesthetic score clears the scorer's bar (``select.aes_min`` for LAION,
higher is better; ``select.brisque_max`` for BRISQUE, lower is better) and its mean luma lies
strictly between ``select.lum_min`` and ``select.lum_max``. A level is retained when more than
``select.level_pass_share`` of its sampled views pass; a scoring clip that failed Stage I or II
counts as five failed views (its reason in ``failures``), so a level that mostly fails to render
cannot be kept on the few clips that did. Outputs ``levels.parquet``,
``metrics.json`` (DVC metrics: levels in, retained, pass-rate distribution) and a plot of
retained levels against the aesthetic threshold. When every level is rejected the stage stops,
saying which threshold rejected how many levels.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .config import SelectConfig
from .parquet_io import write_parquet
from .shared.stage_args import stage_args

COLUMNS = ["level_id", "verdict", "retained", "reason", "views", "views_passed", "pass_rate",
           "aes_mean", "lum_mean", "screen_reasons", "clips_failed", "failures"]
VIEWS_PER_CLIP = 5  # a scoring clip that never rendered counts as this many failed views


class SelectionError(RuntimeError):
    """Every level was rejected (the message says which threshold rejected how many)."""


def view_passes(views: pd.DataFrame, cfg: SelectConfig, scorer: str,
                aes_bar: float | None = None) -> pd.Series:
    ok = views["ok"].astype(bool)
    aes = pd.to_numeric(views["aes"], errors="coerce")
    if scorer == "laion":
        aes_ok = aes > (cfg.aes_min if aes_bar is None else aes_bar)
    else:
        aes_ok = aes < (cfg.brisque_max if aes_bar is None else aes_bar)
    lum = pd.to_numeric(views["lum_mean"], errors="coerce")
    return ok & aes_ok & (lum > cfg.lum_min) & (lum < cfg.lum_max)


def select_levels(views: pd.DataFrame, screen: pd.DataFrame, cfg: SelectConfig, scorer: str
                  ) -> pd.DataFrame:
    """One row per screened level: retained or not, and why."""
    v = views[views["view"] != ""].copy()
    v["pass"] = view_passes(v, cfg, scorer)
    failed = views[views["view"] == ""]
    rows = []
    for r in screen.sort_values("level_id").to_dict("records"):
        lid = r["level_id"]
        if r["verdict"] != "pass":
            rows.append({"level_id": lid, "verdict": "rejected", "retained": False,
                         "reason": f"screen:{r['reasons'] or 'review'}", "views": 0,
                         "views_passed": 0, "pass_rate": 0.0, "aes_mean": None,
                         "lum_mean": None, "screen_reasons": r["reasons"], "clips_failed": 0,
                         "failures": ""})
            continue
        lv = v[v["level_id"] == lid]
        fl = failed[failed["level_id"] == lid]
        # a clip that failed Stage I or II is a failed sample: all its views count, unpassed
        n, k = len(lv) + VIEWS_PER_CLIP * len(fl), int(lv["pass"].sum())
        rate = k / n if n else 0.0
        keep = len(lv) > 0 and rate > cfg.level_pass_share
        reason = "" if keep else ("score:no_views" if n == 0 else
                                  f"score:pass_rate {rate:.2f} <= {cfg.level_pass_share}")
        codes = [str(x).split(":", 1)[0] for x in fl.get("reason", pd.Series(dtype=str))]
        failures = "; ".join(f"{c} x{codes.count(c)}" for c in sorted(set(codes)))
        rows.append({"level_id": lid, "verdict": "retained" if keep else "rejected",
                     "retained": keep, "reason": reason, "views": n, "views_passed": k,
                     "pass_rate": round(rate, 6),
                     "aes_mean": (round(float(pd.to_numeric(lv["aes"]).mean()), 6)
                                  if len(lv) else None),
                     "lum_mean": (round(float(pd.to_numeric(lv["lum_mean"]).mean()), 6)
                                  if len(lv) else None),
                     "screen_reasons": r["reasons"], "clips_failed": len(fl),
                     "failures": failures})
    return pd.DataFrame(rows, columns=COLUMNS)


def rejection_summary(views: pd.DataFrame, screen: pd.DataFrame, cfg: SelectConfig,
                      scorer: str) -> str:
    """Which threshold alone rejects how many of the screened-renderable levels."""
    v = views[views["view"] != ""]
    ok_levels = screen[screen["verdict"] == "pass"]["level_id"]
    aes = pd.to_numeric(v["aes"], errors="coerce")
    lum = pd.to_numeric(v["lum_mean"], errors="coerce")
    tests = {
        (f"aes_min={cfg.aes_min}" if scorer == "laion" else f"brisque_max={cfg.brisque_max}"):
            (aes > cfg.aes_min) if scorer == "laion" else (aes < cfg.brisque_max),
        f"lum_min={cfg.lum_min}": lum > cfg.lum_min,
        f"lum_max={cfg.lum_max}": lum < cfg.lum_max,
    }
    parts = [f"{len(screen) - len(ok_levels)} of {len(screen)} levels failed screening"]
    for name, passed in tests.items():
        rejected = 0
        for lid in ok_levels:
            m = (v["level_id"] == lid).to_numpy()
            if not m.any() or passed[m].mean() <= cfg.level_pass_share:
                rejected += 1
        parts.append(f"select.{name} alone rejects {rejected} of {len(ok_levels)}")
    return "; ".join(parts)


def select_metrics(levels: pd.DataFrame, views: pd.DataFrame, cfg: SelectConfig,
                   scorer: str) -> dict:
    rates = levels[levels["views"] > 0]["pass_rate"].to_numpy(float)
    hist, edges = np.histogram(rates, bins=5, range=(0, 1))
    return {"levels_in": int(len(levels)), "renderable": int((levels["views"] > 0).sum()),
            "retained": int(levels["retained"].sum()), "scorer": scorer,
            "thresholds": {"aes_min": cfg.aes_min, "brisque_max": cfg.brisque_max,
                           "lum_min": cfg.lum_min, "lum_max": cfg.lum_max,
                           "level_pass_share": cfg.level_pass_share},
            "pass_rate": {"mean": round(float(rates.mean()), 6) if len(rates) else 0.0,
                          "min": round(float(rates.min()), 6) if len(rates) else 0.0,
                          "max": round(float(rates.max()), 6) if len(rates) else 0.0,
                          "histogram": {f"{edges[i]:.1f}-{edges[i + 1]:.1f}": int(h)
                                        for i, h in enumerate(hist)}},
            "views_scored": int(views["ok"].astype(bool).sum())}


def threshold_curve(views: pd.DataFrame, screen: pd.DataFrame, cfg: SelectConfig, scorer: str,
                    out: Path) -> None:
    """Retained levels against the aesthetic threshold (the other thresholds as configured)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    aes = pd.to_numeric(views["aes"], errors="coerce").dropna()
    lo, hi = (float(aes.min()), float(aes.max())) if len(aes) else (0.0, 1.0)
    grid = np.linspace(lo - 0.05 * (hi - lo + 1e-9), hi + 0.05 * (hi - lo + 1e-9), 41)
    counts = []
    for bar in grid:
        c = dict(vars(cfg))
        c["aes_min" if scorer == "laion" else "brisque_max"] = float(bar)
        counts.append(int(select_levels(views, screen, SelectConfig(**c), scorer)
                          ["retained"].sum()))
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.step(grid, counts, where="mid")
    cur = cfg.aes_min if scorer == "laion" else cfg.brisque_max
    ax.axvline(cur, color="r", ls="--", label=f"current {cur:g}")
    ax.set_xlabel(f"{'aes_min (LAION)' if scorer == 'laion' else 'brisque_max (BRISQUE)'}")
    ax.set_ylabel("retained levels")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100, metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parsed = stage_args("wmforge select", __doc__, argv, {
        "views": "data/score/views.parquet", "screen": "data/screen/levels.parquet",
        "out": "data/select"})
    if parsed is None:
        return 2
    args, cfg = parsed
    views, screen = pd.read_parquet(args.views), pd.read_parquet(args.screen)
    scorer = cfg.score.scorer
    levels = select_levels(views, screen, cfg.select, scorer)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    m = select_metrics(levels, views, cfg.select, scorer)
    (out / "metrics.json").write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    write_parquet(levels, out / "levels.parquet")
    threshold_curve(views, screen, cfg.select, scorer, out / "retained_vs_aes.png")
    if m["retained"] == 0:
        print(f"error: select: all {len(levels)} levels rejected — "
              f"{rejection_summary(views, screen, cfg.select, scorer)}. Nothing downstream "
              "would have data; relax a threshold (dvc exp run -S select.…)", file=sys.stderr)
        return 3
    print(f"select: {m['retained']} of {m['levels_in']} levels retained ({scorer}) → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
