"""`report` stage: the dataset card — ``card/README.md`` plus PNG plots — and ``metrics.json``
(DVC metrics, kept in git, so ``dvc metrics diff`` tells the story between versions).

Figures: hours by resolution and view, levels by category, the nine action shares and the
transition matrix, the diagonal+backward+lateral share (the paper reports 46.6%, §4.3), the
hold-length distribution, pass rates (Stage I, Stage II, alignment gate), and spatial coverage
per level (a top-down map of the visited cells).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .core.actions import ACTIONS, NON_FORWARD
from .core.trajectory import VIEWS
from .datasets.clip_spans import Clip, ClipError, list_clips
from .datasets.grounded_caption import holds
from .datasets.samples import CONVENTIONS
from .shared.stage_args import stage_args

PAPER_NON_FORWARD_SHARE = 0.466


def _read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.is_file() else pd.DataFrame()


def dataset_metrics(clips: list[Clip], levels: pd.DataFrame, render_fail: pd.DataFrame,
                    traj_fail: pd.DataFrame, render_index: pd.DataFrame, cell_m: float,
                    screen: pd.DataFrame | None = None, select: pd.DataFrame | None = None
                    ) -> tuple[dict, dict]:
    """(metrics, plot data) from the clips and the stage outputs."""
    actions: list[str] = []
    transitions = np.zeros((len(ACTIONS), len(ACTIONS)), int)
    hold_s: list[float] = []
    hours_res: dict[str, float] = {}
    cells: dict[str, set[tuple[int, int]]] = {}
    paths: dict[str, list[np.ndarray]] = {}
    collapsed: dict[str, list[float]] = {}  # per external view: each clip's collapsed share
    char_share: dict[str, list[float]] = {}
    for c in clips:
        cams_p = c.render_dir / "cameras.parquet"
        cams = pd.read_parquet(cams_p) if cams_p.is_file() else pd.DataFrame()
        if "collapsed" in cams:
            cams = cams[(cams["frame"] >= c.start) & (cams["frame"] < c.end)]
            for v, g in cams.groupby("view"):
                if v != "fp":
                    collapsed.setdefault(str(v), []).append(float(g["collapsed"].mean()))
                    char_share.setdefault(str(v), []).append(float(g["char_share"].mean()))
        fr = pd.read_parquet(c.render_dir / "frames.parquet").sort_values("frame")
        fr = fr[(fr["frame"] >= c.start) & (fr["frame"] < c.end)]
        a = fr["action"].astype(str).tolist()
        actions += a
        for x, y in zip(a, a[1:], strict=False):
            if x != y:
                transitions[ACTIONS.index(x), ACTIONS.index(y)] += 1
        hold_s += [(h.end - h.start) / c.fps for h in holds(a)]
        res = f"{c.width}x{c.height}"
        hours_res[res] = hours_res.get(res, 0.0) + c.frames / c.fps / 3600
        xy = fr[["pos_x", "pos_y"]].to_numpy()
        cells.setdefault(c.level_id, set()).update(
            (int(math.floor(x / cell_m)), int(math.floor(y / cell_m))) for x, y in xy)
        paths.setdefault(c.level_id, []).append(xy)
    n = len(actions)
    share = {a: (actions.count(a) / n if n else 0.0) for a in ACTIONS}
    gt = ground_truth_metrics(clips)
    lv = levels[levels["level_id"].isin({c.level_id for c in clips})] if len(levels) else levels
    by_cat = (lv["category"].fillna("uncategorized").value_counts().sort_index().to_dict()
              if len(lv) else {})
    rendered = len(render_index)
    r_fail, t_fail = len(render_fail), len(traj_fail)
    hours = sum(hours_res.values())
    metrics = {
        "clips": len(clips),
        "trajectories": len({(c.level_id, c.trajectory) for c in clips}),
        "levels": len({c.level_id for c in clips}),
        "frames": n,
        "hours": round(hours, 6),
        "view_hours": round(hours * len(VIEWS), 6),
        "hours_by_resolution": {k: round(v, 6) for k, v in sorted(hours_res.items())},
        "levels_by_category": {str(k): int(v) for k, v in by_cat.items()},
        "action_share": {a: round(s, 6) for a, s in share.items()},
        "non_forward_share": round(sum(share[a] for a in NON_FORWARD), 6),
        "paper_non_forward_share": PAPER_NON_FORWARD_SHARE,
        "mean_hold_s": round(float(np.mean(hold_s)) if hold_s else 0.0, 6),
        "pass_rate": {
            **({"screening": round(float((screen["verdict"] == "pass").mean()), 6)}
               if screen is not None and len(screen) else {}),
            **({"selection": round(float(select["retained"].astype(bool).sum()) /
                                   max(1, int((select["views"] > 0).sum())), 6)}
               if select is not None and len(select) else {}),
            "stage1": round(1 - t_fail / max(1, t_fail + rendered + r_fail), 6),
            "stage2": round(rendered / max(1, rendered + r_fail), 6),
            "aligned_fraction_mean": round(float(render_index["aligned_fraction"].mean())
                                           if rendered else 0.0, 6)},
        "failures": {"stage1": t_fail, "stage2": r_fail},
        "ground_truth": gt,
        "coverage_cells": {k: len(v) for k, v in sorted(cells.items())},
        "coverage_cell_m": cell_m,
        # §6.3: a view is collapsed when its boom is below trajectories.cameras.collapse_ratio
        # of the distance configured for that view and level
        "views": {v: {"collapsed_share_mean": round(float(np.mean(s)), 6),
                      "collapsed_share_max": round(float(np.max(s)), 6),
                      "clips_over_10pct": int(sum(1 for x in s if x > 0.10)),
                      "character_share_mean": round(float(np.mean(char_share[v])), 6)}
                  for v, s in sorted(collapsed.items())},
    }
    return metrics, {"transitions": transitions, "hold_s": hold_s, "cells": cells,
                     "paths": paths}


def ground_truth_metrics(clips: list[Clip]) -> dict:
    """The rendered ground-truth layers (meta.json "ground_truth" of each rendered trajectory):
    which, their units, and their measured size in bytes per five-view minute."""
    by_layer: dict[str, int] = {}
    units: dict[str, dict] = {}
    layers: list[str] = []
    minutes = 0.0
    for d in sorted({c.render_dir for c in clips}):
        meta = json.loads((d / "meta.json").read_text())
        gt = meta.get("ground_truth")
        if not gt:
            continue
        minutes += meta["frame_count"] / meta["fps"] / 60
        units.update(gt.get("units") or {})
        layers += [x for x in gt["layers"] if x not in layers]
        for per_view in gt["views"].values():
            for layer, e in per_view.items():
                by_layer[layer] = by_layer.get(layer, 0) + int(e["bytes"])
    return {"layers": layers,
            "five_view_minutes": round(minutes, 6),
            "bytes_per_five_view_minute": {k: round(b / minutes) for k, b in by_layer.items()}
            if minutes else {},
            "units": {k: {x: u[x] for x in ("units", "scale", "no_surface", "meaning", "axes")
                          if x in u} for k, u in units.items()}}


def ground_truth_section(gt: dict) -> list[str]:
    if not gt.get("layers"):
        return ["## Ground truth", "", "No ground-truth layers were rendered "
                "(`render.ground_truth` is empty).", ""]
    rows = []
    for layer in gt["layers"]:
        u = gt["units"].get(layer, {})
        mb = gt["bytes_per_five_view_minute"].get(layer, 0) / 1e6
        rows.append(f"| {layer} | {u.get('units', '')} | {u.get('scale', '-')} | "
                    f"{u.get('no_surface', '')} | {u.get('meaning') or u.get('axes') or ''} | "
                    f"{mb:.1f} |")
    return ["## Ground truth", "",
            f"Per view and frame, lossless, beside each video (FFV1 in MKV; "
            f"{gt['five_view_minutes']:.2f} five-view minutes measured). In the exports: the "
            "files in each shard sample, arrays `observation.<layer>.<view>` in LeRobot.", "",
            "| layer | units | precision | no surface | meaning | MB per five-view minute |",
            "|---|---|---|---|---|---|", *rows, ""]


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)


def write_plots(m: dict, data: dict, out: Path, cell_m: float) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, ax = plt.subplots(figsize=(6, 3))
    res = list(m["hours_by_resolution"])
    x = np.arange(len(res))
    for i, v in enumerate(VIEWS):
        ax.bar(x + i * 0.15, [m["hours_by_resolution"][r] for r in res], 0.15, label=v)
    ax.set_xticks(x + 0.3, res)
    ax.set_ylabel("hours")
    ax.set_title("Video hours by resolution and view")
    ax.legend(fontsize=7)
    _save(fig, out / "hours_by_resolution_view.png")
    names.append("hours_by_resolution_view.png")

    fig, ax = plt.subplots(figsize=(6, 3))
    cats = m["levels_by_category"]
    ax.bar(list(cats), list(cats.values()), color="#3d8bd4")
    ax.set_ylabel("levels")
    ax.set_title("Levels by category")
    _save(fig, out / "levels_by_category.png")
    names.append("levels_by_category.png")

    fig, ax = plt.subplots(figsize=(6, 3))
    sh = m["action_share"]
    ax.bar(list(sh), [100 * s for s in sh.values()],
           color=["#d45b5b" if a in NON_FORWARD else "#3d8bd4" for a in sh])
    ax.set_ylabel("% of frames")
    ax.set_title(f"Action shares (diagonal+backward+lateral {100 * m['non_forward_share']:.1f}%,"
                 f" paper {100 * PAPER_NON_FORWARD_SHARE:.1f}%)", fontsize=9)
    _save(fig, out / "action_shares.png")
    names.append("action_shares.png")

    fig, ax = plt.subplots(figsize=(4.5, 4))
    t = data["transitions"].astype(float)
    rows = t.sum(1, keepdims=True)
    p = np.divide(t, rows, out=np.zeros_like(t), where=rows > 0)
    ax.imshow(p, cmap="viridis", vmin=0, vmax=max(0.01, p.max()))
    ax.set_xticks(range(len(ACTIONS)), ACTIONS, fontsize=7)
    ax.set_yticks(range(len(ACTIONS)), ACTIONS, fontsize=7)
    ax.set_xlabel("to")
    ax.set_ylabel("from")
    ax.set_title("Action transition matrix (row-normalised)", fontsize=9)
    _save(fig, out / "transitions.png")
    names.append("transitions.png")

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(data["hold_s"] or [0], bins=20, color="#3dbbb0")
    ax.set_xlabel("hold length, s")
    ax.set_ylabel("holds")
    ax.set_title(f"Hold lengths (mean {m['mean_hold_s']:.2f} s)")
    _save(fig, out / "hold_lengths.png")
    names.append("hold_lengths.png")

    fig, ax = plt.subplots(figsize=(6, 3))
    pr = m["pass_rate"]
    ax.bar(list(pr), [100 * v for v in pr.values()], color="#3dbb6a")
    ax.set_ylim(0, 105)
    ax.set_ylabel("%")
    ax.set_title("Pass rates")
    _save(fig, out / "pass_rates.png")
    names.append("pass_rates.png")

    lv = sorted(data["cells"])
    cols = min(4, max(1, len(lv)))
    rws = max(1, math.ceil(len(lv) / cols))
    fig, axes = plt.subplots(rws, cols, figsize=(3 * cols, 3 * rws), squeeze=False)
    for ax, level in zip(axes.flat, lv, strict=False):
        cs = np.array(sorted(data["cells"][level]))
        x0, y0 = cs.min(0)
        grid = np.zeros(tuple(cs.max(0) - cs.min(0) + 1)[::-1])
        grid[cs[:, 1] - y0, cs[:, 0] - x0] = 1
        ax.imshow(grid, origin="lower", cmap="Greens", vmin=0, vmax=1.2,
                  extent=(x0 * cell_m, (cs[:, 0].max() + 1) * cell_m, y0 * cell_m,
                          (cs[:, 1].max() + 1) * cell_m))
        for xy in data["paths"][level]:
            ax.plot(xy[:, 0], xy[:, 1], lw=0.8)
        ax.set_title(f"{level}\n{len(cs)} cells of {cell_m:g} m", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(lv):]:
        ax.axis("off")
    _save(fig, out / "coverage.png")
    names.append("coverage.png")
    return names


def characters_section(chars: pd.DataFrame | None) -> list[str]:
    """The card's characters: what the inventory measured and guessed for each (kind, height,
    scale, facing, the walk and idle clips, where the map came from), so a reader sees the
    characters the dataset was made with; each one's picture is `wmforge characters`'."""
    if chars is None or chars.empty:
        return []
    rows = []
    for r in chars.sort_values("character_id").itertuples():
        try:
            amap = json.loads(str(r.animation_json or "{}"))
        except ValueError:
            amap = {}
        if not r.ok:
            rows.append(f"| {r.character_id} | not used: {r.reason} | | | | | | |")
            continue
        rows.append(f"| {r.character_id} | {r.kind} | {r.visual_height_m:.2f} | {r.scale:g} | "
                    f"{r.yaw_correction_deg:g} | {amap.get('W') or '-'} | "
                    f"{amap.get('IDLE') or '-'} | {r.mapping_source} |")
    return ["## Characters", "",
            "As the inventory measured them (glTF skins in their bind pose); every guess is in "
            "`data/inventory/characters.parquet` (`guesses`), and `wmforge characters --library "
            "<library>` draws each one (front and side views, height, capsule, facing, one frame "
            "per mapped clip) into `data/inventory/sheets/index.html`.", "",
            "| character | kind | height m | scale | yaw correction deg | W clip | IDLE clip | "
            "clip map |", "|---|---|---|---|---|---|---|---|", *rows, ""]


def dataset_card(m: dict, plots: list[str], params: dict,
                 characters: pd.DataFrame | None = None) -> str:
    def table(d: dict, k: str, v: str) -> str:
        return f"| {k} | {v} |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in d.items())

    hours = m["hours"]
    lines = [
        "# wmforge dataset card", "",
        f"{m['clips']} clips from {m['trajectories']} trajectories on {m['levels']} levels: "
        f"{hours * 60:.1f} minutes of five-view video ({m['view_hours'] * 60:.1f} view-minutes),"
        f" {m['frames']} frames, every frame labelled with its action (W A S D WA WD SA SD "
        "IDLE), the character pose and five camera poses.", "",
        "## Hours by resolution", "",
        table({k: f"{v * 60:.2f} min x 5 views" for k, v in m["hours_by_resolution"].items()},
              "resolution", "five-view duration"),
        "![hours](hours_by_resolution_view.png)", "",
        "## Levels by category", "", table(m["levels_by_category"], "category", "levels"),
        "![categories](levels_by_category.png)", "",
        "## Actions", "",
        table({a: f"{100 * s:.1f}%" for a, s in m["action_share"].items()}, "action",
              "share of frames"),
        f"Diagonal + backward + lateral: **{100 * m['non_forward_share']:.1f}%** "
        f"(the paper reports {100 * PAPER_NON_FORWARD_SHARE:.1f}%). Mean hold "
        f"{m['mean_hold_s']:.2f} s.", "",
        "![actions](action_shares.png) ![transitions](transitions.png) "
        "![holds](hold_lengths.png)", "",
        "## Pass rates", "",
        table({k: f"{100 * v:.1f}%" for k, v in m["pass_rate"].items()}, "gate", "pass"),
        f"Failures: Stage I {m['failures']['stage1']}, Stage II {m['failures']['stage2']}.", "",
        "![pass rates](pass_rates.png)", "",
        "## Views", "",
        "Share of frames in which an external view has *collapsed* (its boom pulled in below "
        "the collapse ratio of the distance configured for that view and level), and the "
        "character's projected share of the image:", "",
        "| view | collapsed (mean) | collapsed (worst clip) | clips > 10% | character share |\n"
        "|---|---|---|---|---|\n" + "".join(
            f"| {v} | {100 * s['collapsed_share_mean']:.1f}% | "
            f"{100 * s['collapsed_share_max']:.1f}% | {s['clips_over_10pct']} | "
            f"{100 * s['character_share_mean']:.1f}% |\n" for v, s in m.get("views", {}).items())
        if m.get("views") else "(trajectories older than contract v3 carry no view statistics)",
        "",
        *characters_section(characters),
        *ground_truth_section(m.get("ground_truth") or {}),
        "## Spatial coverage", "",
        table(m["coverage_cells"], "level", f"visited {m['coverage_cell_m']:g} m cells"),
        "![coverage](coverage.png)", "",
        "## Configuration", "",
        "```json", json.dumps(params, indent=1, sort_keys=True), "```", "",
        "Formats: WebDataset shards in `data/shards/` (index `data/shards/index.parquet`), "
        "LeRobot v3.0 in `data/lerobot/`.", "",
        "## Conventions", "",
        *[f"- **{k.replace('_', ' ')}**: {v}" for k, v in CONVENTIONS.items()],
        "- **normalisation statistics** (LeRobot `meta/stats.json`): every episode aggregated, "
        "`count` in frames; per-episode statistics in `meta/episodes/`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parsed = stage_args("wmforge report", __doc__, argv, {
        "renders": "data/renders", "trajectories": "data/trajectories",
        "inventory": "data/inventory", "screen": "data/screen/levels.parquet",
        "select": "data/select/levels.parquet", "out": "data/report"})
    if parsed is None:
        return 2
    args, cfg = parsed
    from dataclasses import asdict

    renders, out = Path(args.renders), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    index = _read(renders / "index.parquet")
    try:
        clips = list_clips(renders, index, cfg.clips.clip_s, cfg.clips.min_clip_s)
    except ClipError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    m, data = dataset_metrics(clips, _read(Path(args.inventory) / "levels.parquet"),
                              _read(renders / "failures.parquet"),
                              _read(Path(args.trajectories) / "failures.parquet"), index,
                              cfg.report.coverage_cell_m, _read(Path(args.screen)),
                              _read(Path(args.select)))
    card = out / "card"
    card.mkdir(parents=True, exist_ok=True)
    plots = write_plots(m, data, card, cfg.report.coverage_cell_m) if clips else []
    params = {k: asdict(getattr(cfg, k)) for k in ("trajectories", "render", "clips", "caption")}
    chars_file = Path(args.inventory) / "characters.parquet"
    chars = pd.read_parquet(chars_file) if chars_file.is_file() else None
    (card / "README.md").write_text(dataset_card(m, plots, params, chars))
    (out / "metrics.json").write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    print(f"report: {m['clips']} clips, {m['hours'] * 60:.1f} five-view minutes, "
          f"non-forward share {100 * m['non_forward_share']:.1f}% → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
