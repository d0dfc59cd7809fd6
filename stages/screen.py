"""`screen` stage: renderability screening (paper §4.2).

Per candidate level (enabled in the inventory): ``screen.clips`` short clips through Stage I and
Stage II at the screening preset, then automatic detectors, each a reason code:

- ``load_failure``: the engine exited, raised or timed out loading or rendering the level;
- ``no_walkable_region``: every spawn attempt failed;
- ``hovering``: the walking character out of ground contact for a large share of its walking
  frames, or its capsule bottom far above the visible ground straight below it (collision the
  camera cannot see: invisible blockers, misplaced custom collision);
- ``interpenetration``: the capsule overlapping visible geometry beyond a tolerance (drawn
  geometry without collision: foliage, set dressing);
- ``over_limit``: more triangles (the inventory's count) than ``render.limits.max_triangles``:
  no clip is run, the detail gives both numbers, and a review verdict does not lift it.

Screening uses the library's own characters (``screen.characters``: empty = every usable
walking character of the library screened; a named one it lacks stops the stage at start-up).
A contact sheet per level (``sheets/<level>.png``: tiles >= 320 px with the reasons written on
them) for the manual look the paper keeps, and a review file (``screen.review_file``) whose
entries override the automatic verdict. Outputs ``clips.parquet`` (one row per clip,
measurements, reasons and ``detail``: the engine's own error text for a clip that failed) and
``levels.parquet``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import yaml

from .config import ConfigError, WmforgeConfig
from .core.model_probe import normalize_coordinate_system
from .datasets.clip_spans import clip_index
from .engine.scene_limits import over_triangle_limit
from .media.contact_sheet import SheetClip, contact_sheet
from .parquet_io import write_parquet
from .quality.renderability import (
    LOAD_FAILURE,
    NO_WALKABLE_REGION,
    OVER_LIMIT,
    DetectorThresholds,
    clip_measurements,
    clip_reasons,
    level_verdict,
)
from .shared.clip_runs import clip_render_config, run_clips
from .shared.stage_args import stage_args

CLIP_COLUMNS = ["level_id", "clip", "character_id", "stage1", "stage2", "frames",
                "airborne_walk_share", "hover_gap_share", "median_gap_m", "penetration_share",
                "max_penetration_m", "reasons", "detail", "trajectory"]
LEVEL_COLUMNS = ["level_id", "category", "clips", "clips_rendered", "auto_verdict",
                 "auto_reasons", "review_verdict", "review_note", "verdict", "reasons",
                 "detail", "contact_sheet"]


class ReviewError(ValueError):
    """The review file is malformed (names the file, the entry and what is expected)."""


def read_review(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ReviewError(f"{path}: not valid YAML: {exc}") from None
    over = doc.get("overrides") or {}
    if not isinstance(over, dict):
        raise ReviewError(f"{path}: 'overrides' must map level ids to {{verdict, note}}")
    out = {}
    for lid, entry in over.items():
        if not isinstance(entry, dict) or entry.get("verdict") not in ("pass", "fail"):
            raise ReviewError(f"{path}: overrides.{lid}: expected {{verdict: pass|fail, "
                              f"note: ...}}, got {entry!r}")
        out[str(lid)] = {"verdict": entry["verdict"], "note": str(entry.get("note", ""))}
    return out


def walking_characters(chars: pd.DataFrame) -> list[str]:
    ok = chars[chars["ok"].astype(bool) & (chars["locomotion"] == "walk")]
    return sorted(ok["character_id"].astype(str))


def screening_characters(chars: pd.DataFrame, wanted: list[str], where: str) -> list[str]:
    """The characters screening uses: ``screen.characters`` when set (each must be a usable
    character of the library being screened), else every usable walking character of it.
    Raises ConfigError naming what is missing and what the library offers."""
    walking = walking_characters(chars)
    if wanted:
        usable = set(chars[chars["ok"].astype(bool)]["character_id"].astype(str))
        missing = [w for w in wanted if w not in usable]
        if missing:
            raise ConfigError(f"screen.characters: {', '.join(missing)}: not usable characters "
                              f"of the library in {where}; its walking characters are: "
                              f"{', '.join(walking) or 'none'} (leave screen.characters empty "
                              "to screen with them all)")
        return list(wanted)
    if not walking:
        raise ConfigError(f"screen.characters is empty and {where} lists no usable walking "
                          "character: add one to the library (a character.json beside its "
                          "model) or name one in screen.characters")
    return walking


def measure_clip(probe, render_dir: Path, th: DetectorThresholds) -> dict:
    """Hovering and interpenetration figures of one rendered clip against visible geometry."""
    fr = pd.read_parquet(render_dir / "frames.parquet").sort_values("frame")
    gaps: list[float | None] = []
    pens: list[float] = []
    cols = ["pos_x", "pos_y", "pos_z", "capsule_radius_m", "capsule_half_height_m"]
    for x, y, z, rad, hh in fr[cols].to_numpy(float):
        g = probe.ground_below(x, y, z + rad + hh)
        gaps.append(None if g is None else float(z - g))
        pens.append(probe.penetration(x, y, z, rad, hh))
    return clip_measurements(fr["action"].astype(str).tolist(), fr["grounded"].tolist(), gaps,
                             pens, th)


def over_limit_levels(levels: pd.DataFrame, max_triangles: int) -> dict[str, str]:
    """level id -> why, for inventory rows with more triangles than
    ``render.limits.max_triangles`` (rows without a count, such as Unreal maps, pass)."""
    out = {}
    for lid, tris in zip(levels["level_id"].astype(str), levels["triangles"], strict=True):
        if tris is not None and not pd.isna(tris):
            why = over_triangle_limit(int(tris), max_triangles)
            if why:
                out[lid] = f"{why} (inventory count)"
    return out


def screen_levels(cfg: WmforgeConfig, inventory: Path, out: Path, review: dict[str, dict],
                  library: Path, log=print) -> tuple[pd.DataFrame, pd.DataFrame]:
    from .engine.geometry_probe import VisibleGeometryProbe

    s = cfg.screen
    levels = pd.read_parquet(inventory / "levels.parquet")
    chars = pd.read_parquet(inventory / "characters.parquet")
    cand = levels[levels["enabled"].astype(bool)].sort_values("level_id")
    over = over_limit_levels(cand, cfg.render.limits.max_triangles)
    ids = [x for x in cand["level_id"].astype(str) if x not in over]
    who = screening_characters(chars, list(s.characters), str(inventory / "characters.parquet"))
    rcfg = clip_render_config(cfg, s.preset, s.width, s.height, s.spatial_samples, s.timeout_s)
    if ids:
        s1, index, s2 = run_clips(cfg, inventory, ids, s.clips, s.clip_s, s.seed_offset, who,
                                  rcfg, out / "work", s.timeout_s, log)
    else:  # never run_clips with no level: an empty level list means every level there
        s1 = s2 = pd.DataFrame(columns=["level_id", "trajectory", "reason", "detail"])
        index = pd.DataFrame(columns=["level_id", "trajectory", "character_id", "path"])
    th = DetectorThresholds(s.hover_airborne_share, s.hover_gap_m, s.hover_gap_share,
                            s.penetration_tol_m, s.penetration_share)
    root = out / "work" / "renders"
    clip_rows, level_rows = [], []
    for row in cand.to_dict("records"):
        lid = str(row["level_id"])
        if lid in over:
            level_rows.append(_over_limit_row(lid, row, over[lid], s.clips, review.get(lid),
                                              out, s.sheet_tile_w))
            log(f"screen: {lid}: fail {OVER_LIMIT}: {over[lid]}")
            continue
        f1 = s1[s1["level_id"] == lid]
        f2 = s2[s2["level_id"] == lid]
        engine_fail = []
        details: list[str] = []
        for r in f1.to_dict("records"):
            engine_fail.append(NO_WALKABLE_REGION if r["reason"] == "no_walkable_region"
                               else LOAD_FAILURE)
        for _ in f2.to_dict("records"):
            engine_fail.append(LOAD_FAILURE)
        probe = None
        rendered = index[index["level_id"] == lid].sort_values("trajectory")
        sheet_clips: list[SheetClip] = []
        reasons_per_clip: list[list[str]] = []
        if len(rendered):
            try:
                probe = VisibleGeometryProbe(str(library / row["path"]), float(row["scale"]),
                                             normalize_coordinate_system(row["up_axis"]))
            except Exception as exc:  # noqa: BLE001 - a probe that cannot load is a failure
                engine_fail.append(LOAD_FAILURE)
                details.append(f"visible-geometry probe: {type(exc).__name__}: {exc}")
                log(f"screen: {lid}: probe failed: {exc}")
        for r in rendered.to_dict("records"):
            d = root / r["path"]
            clip = clip_index(r["trajectory"])
            meta = json.loads((d / "meta.json").read_text())
            m = {}
            reasons: list[str] = []
            if probe is not None:
                m = measure_clip(probe, d, th)
                walks = str(meta.get("character", {}).get("locomotion", "walk")) == "walk"
                reasons = clip_reasons(m, th, walks)
            reasons_per_clip.append(reasons)
            sheet_clips.append(SheetClip(f"{r['trajectory']} {r['character_id']}", d, reasons))
            clip_rows.append({"level_id": lid, "clip": clip, "character_id": r["character_id"],
                              "stage1": "ok", "stage2": "ok", **m, "reasons": ",".join(reasons),
                              "detail": "", "trajectory": str(r["trajectory"])})
        for r in f1.to_dict("records"):
            code = NO_WALKABLE_REGION if r["reason"] == "no_walkable_region" else LOAD_FAILURE
            detail = f"Stage I {r['reason']}: {r['detail']}"
            details.append(detail)
            clip_rows.append({"level_id": lid, "clip": clip_index(r["trajectory"]),
                              "stage1": r["reason"], "stage2": "not_run", "reasons": code,
                              "detail": detail, "trajectory": str(r["trajectory"])})
            label = ("every clip (the level)" if str(r["trajectory"]) == "-1"
                     else f"clip {r['trajectory']}")
            sheet_clips.append(SheetClip(label, None, [code], detail))
        for r in f2.to_dict("records"):
            detail = f"Stage II {r['reason']}: {r['detail']}"
            details.append(detail)
            clip_rows.append({"level_id": lid, "clip": clip_index(r["trajectory"]),
                              "stage1": "ok", "stage2": r["reason"], "reasons": LOAD_FAILURE,
                              "detail": detail, "trajectory": str(r["trajectory"])})
            sheet_clips.append(SheetClip(f"{r['trajectory']} render", None, [LOAD_FAILURE],
                                         detail))
        auto, reasons = level_verdict(reasons_per_clip, engine_fail, s.reject_clip_share)
        rv = review.get(lid)
        final = rv["verdict"] if rv else auto
        sheet = out / "sheets" / f"{lid.replace('/', '__')}.png"
        contact_sheet(lid, sheet_clips, final, reasons, sheet, s.sheet_tile_w)
        level_rows.append({"level_id": lid, "category": row.get("category"),
                           "clips": s.clips, "clips_rendered": len(rendered),
                           "auto_verdict": auto, "auto_reasons": ",".join(reasons),
                           "review_verdict": rv["verdict"] if rv else None,
                           "review_note": rv["note"] if rv else None, "verdict": final,
                           "reasons": "" if final == "pass" and rv else ",".join(reasons),
                           "detail": " | ".join(dict.fromkeys(details))[:2000],
                           "contact_sheet": str(sheet.relative_to(out))})
        log(f"screen: {lid}: {final}{' (review)' if rv else ''} {','.join(reasons)}")
    clips_df = pd.DataFrame(clip_rows, columns=CLIP_COLUMNS).sort_values(
        ["level_id", "clip"]).reset_index(drop=True)
    return clips_df, pd.DataFrame(level_rows, columns=LEVEL_COLUMNS)


def _over_limit_row(lid: str, row: dict, why: str, clips: int, rv: dict | None, out: Path,
                    tile_w: int) -> dict:
    """The level row (and contact sheet) of a level over a render limit: failed, no clip run;
    a review verdict is recorded but does not lift the limit (raise the limit instead)."""
    detail = why + ("; the review verdict pass does not lift a render limit: raise "
                    "render.limits.max_triangles" if rv and rv["verdict"] == "pass" else "")
    sheet = out / "sheets" / f"{lid.replace('/', '__')}.png"
    contact_sheet(lid, [SheetClip("every clip (the level)", None, [OVER_LIMIT], detail)],
                  "fail", [OVER_LIMIT], sheet, tile_w)
    return {"level_id": lid, "category": row.get("category"), "clips": clips,
            "clips_rendered": 0, "auto_verdict": "fail", "auto_reasons": OVER_LIMIT,
            "review_verdict": rv["verdict"] if rv else None,
            "review_note": rv["note"] if rv else None, "verdict": "fail",
            "reasons": OVER_LIMIT, "detail": detail, "contact_sheet": str(sheet.relative_to(out))}


def main(argv: list[str] | None = None) -> int:
    parsed = stage_args("wmforge screen", __doc__, argv, {
        "inventory": "data/inventory", "out": "data/screen"})
    if parsed is None:
        return 2
    args, cfg = parsed
    try:
        review = read_review(Path(cfg.screen.review_file))
        chars = Path(args.inventory) / "characters.parquet"
        screening_characters(pd.read_parquet(chars), list(cfg.screen.characters), str(chars))
    except (ConfigError, ReviewError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    clips, levels = screen_levels(cfg, Path(args.inventory), out, review,
                                  Path(cfg.library.root))
    write_parquet(clips, out / "clips.parquet")
    write_parquet(levels, out / "levels.parquet")
    n = int((levels["verdict"] == "pass").sum())
    print(f"screen: {n} of {len(levels)} levels renderable → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
