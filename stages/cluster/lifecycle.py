"""A level's slot lifecycle (paper §5.3): assign → stage assets → Stage I (own process,
trajectories published as they finish) → Stage II for what Stage I produced → cleanup.

:class:`~stages.cluster.level_unit.LevelUnit` is the unit of work the node runner gives a slot;
the three entry points below build units and run them on every slot of this machine:

- :func:`make_trajectories` — Stage I only (the ``trajectories`` DVC stage, screening clips);
- :func:`render_trajectories` — Stage II only (the ``render`` DVC stage, screening clips);
- :func:`run_levels` — the whole lifecycle per level (``wmforge node run``, production).

Each pass of a node's pool (``pools.parquet``) is consumed in its own shuffled order; pass ``p``
makes trajectory indices ``p*per_level … (p+1)*per_level - 1`` of a level, so a second pass
adds new trajectories (§5.2: randomized initialization) instead of redoing the first.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ..config import RenderConfig, WmforgeConfig
from .keys import AssetDigests, pack_dir
from .level_unit import LevelUnit, spread
from .node_context import NodeContext
from .node_runner import NodeRunner
from .recovery import finished, recover_all
from .row_readers import character_specs, level_dir_name
from .steps import UnitFailure, stale_tmp_dirs

__all__ = ["LevelUnit", "NodeContext", "character_specs", "level_dir_name", "make_trajectories",
           "render_trajectories", "run_levels"]

STAGE1_FAIL_COLUMNS = ["level_id", "trajectory", "reason", "detail"]
RENDER_FAIL_COLUMNS = ["level_id", "trajectory", "reason", "detail", "instance"]
INDEX_COLUMNS = ["level_id", "trajectory", "path", "instance", "character_id", "frames", "fps",
                 "duration_s", "width", "height", "aligned_fraction"]


# ------------------------------------------------------------------ entry points


def _context(cfg: WmforgeConfig, library: Path, traj_root: Path, render_root: Path | None,
             chars: pd.DataFrame | None, rcfg: RenderConfig | None) -> NodeContext:
    work = Path(cfg.node.work_dir)
    ctx = NodeContext(cfg, library, traj_root, render_root, rcfg or cfg.render,
                      AssetDigests(work / "asset_digests.json"))
    if chars is not None:
        ctx.specs = character_specs(chars, library, cfg.trajectories.characters)
        ok = chars[chars["character_id"].isin([s.character_id for s in ctx.specs])]
        ctx.char_packs = sorted({pack_dir(library, str(p)) for p in ok["model_path"]})
    return ctx


def _runner(cfg: WmforgeConfig, log: Callable[[str], Any], watch: list | None) -> NodeRunner:
    return NodeRunner(cfg.node, cfg.render.node_id, log, watch_ancestors=watch)


def _unit_rows(fails: list[UnitFailure], stage: str) -> list[dict]:
    return [{"level_id": f.level_id, "trajectory": -1, "reason": f.reason,
             "detail": f"{f.detail} (after {f.attempts} attempts; snapshot {f.snapshot})",
             "instance": ""} for f in fails if f.stage in (stage, "stage_assets")]


def stage1_units(ctx: NodeContext, levels: pd.DataFrame, order: list[tuple[str, int]],
                 render: bool) -> list[LevelUnit]:
    per = ctx.cfg.trajectories.per_level
    rows = {str(r["level_id"]): r for r in levels.to_dict("records")}
    units = []
    for lid, p in order:
        if lid in rows:
            units.append(LevelUnit(ctx, rows[lid], list(range(p * per, (p + 1) * per)), render,
                                   f"{lid}#pass{p}"))
    return units


def default_order(levels: pd.DataFrame) -> list[tuple[str, int]]:
    return [(str(x), 0) for x in sorted(levels["level_id"].astype(str))]


def _stage1_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{k: r[k] for k in STAGE1_FAIL_COLUMNS} for r in rows],
                        columns=STAGE1_FAIL_COLUMNS)


def _run_stage1_units(cfg: WmforgeConfig, levels: pd.DataFrame, chars: pd.DataFrame,
                      library: Path, traj_root: Path, render_root: Path | None,
                      order: list[tuple[str, int]] | None, log: Callable[[str], Any],
                      watch: list | None) -> tuple[list[LevelUnit], list[UnitFailure],
                                                   NodeRunner]:
    """Stage I (and Stage II when ``render_root`` is given) for the enabled levels, in
    ``order`` ((level, pass) pairs), on every slot of this machine."""
    todo = levels[levels["enabled"].astype(bool)]
    if cfg.trajectories.levels:
        todo = todo[todo["level_id"].isin(cfg.trajectories.levels)]
    traj_root.mkdir(parents=True, exist_ok=True)
    if render_root is not None:
        render_root.mkdir(parents=True, exist_ok=True)
        recover_all(render_root, log)
    for p in stale_tmp_dirs(traj_root):
        shutil.rmtree(p, ignore_errors=True)
    ctx = _context(cfg, library, traj_root, render_root, chars,
                   cfg.render if render_root is not None else None)
    runner = _runner(cfg, log, watch)
    units = spread(stage1_units(ctx, todo, order or default_order(todo),
                                render=render_root is not None), len(runner.slots))
    fails = runner.run(list(units))
    ctx.digests.save()
    return units, fails, runner


def make_trajectories(cfg: WmforgeConfig, levels: pd.DataFrame, chars: pd.DataFrame,
                      library: Path, out: Path, log: Callable[[str], Any] = print,
                      order: list[tuple[str, int]] | None = None,
                      watch: list | None = None) -> pd.DataFrame:
    """Stage I for every enabled level (in ``order``: (level, pass) pairs); the failure rows."""
    units, fails, _ = _run_stage1_units(cfg, levels, chars, library, out, None, order, log,
                                        watch)
    return _stage1_frame([f for u in units for f in u.stage1_failures]
                         + _unit_rows(fails, "stage1"))


def render_index(root: Path, wanted: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    done = finished(root)
    rows = []
    for lid, lvl, traj, key in wanted:
        d = done.get((lvl, traj, key))
        if d is None:
            continue
        m = json.loads((d / "meta.json").read_text())
        rows.append({"level_id": lid, "trajectory": traj, "path": str(d.relative_to(root)),
                     "instance": d.parent.name, "character_id": m["character_id"],
                     "frames": m["frame_count"], "fps": m["fps"], "duration_s": m["duration_s"],
                     "width": m["settings"]["width"], "height": m["settings"]["height"],
                     "aligned_fraction": m["alignment"]["aligned_fraction"]})
    return pd.DataFrame(rows, columns=INDEX_COLUMNS)


def render_trajectories(cfg: WmforgeConfig, traj_root: Path, root: Path,
                        rcfg: RenderConfig | None = None, log: Callable[[str], Any] = print,
                        levels: list[str] | None = None, watch: list | None = None,
                        library: Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stage II for every trajectory under ``traj_root`` not rendered yet (only ``levels``, in
    that order, when given); returns (index, failures)."""
    root.mkdir(parents=True, exist_ok=True)
    recover_all(root, log)
    failures: list[dict] = []
    by_level: dict[str, dict] = {}
    chars_of: dict[str, set[Path]] = {}
    names_of: dict[str, set[str]] = {}
    for meta_p in sorted(traj_root.glob("*/traj_*/meta.json")):
        try:
            meta = json.loads(meta_p.read_text())
            lid = str(meta["level_id"])
            lv = meta.get("level") or {}
        except (OSError, ValueError, KeyError) as exc:
            failures.append({"level_id": meta_p.parent.parent.name,
                             "trajectory": meta_p.parent.name, "reason": "invalid_trajectory",
                             "detail": f"{meta_p}: {exc}", "instance": ""})
            continue
        by_level.setdefault(lid, {"level_id": lid, "path": str(lv.get("path", "")),
                                  "scale": lv.get("scale", 1.0),
                                  "up_axis": lv.get("up_axis")})
        names_of.setdefault(lid, set()).add(meta_p.parent.name)
        model = str((meta.get("character") or {}).get("model") or "")
        if model:
            chars_of.setdefault(lid, set()).add(Path(model).parent)
        chars_of.setdefault(lid, set())
    lib = library if library is not None else Path(cfg.library.root)
    ctx = _context(cfg, lib, traj_root, root, None, rcfg)
    order = [x for x in (levels if levels is not None else sorted(by_level)) if x in by_level]
    units = []
    for lid in order:
        row = dict(by_level[lid])
        level_file = Path(row["path"])
        pack = _recorded_pack(level_file, lib)
        units.append(LevelUnit(ctx, row, None, True, pack=pack,
                               char_dirs=sorted(chars_of[lid]), names=sorted(names_of[lid])))
    runner = _runner(cfg, log, watch)
    units = spread(units, len(runner.slots))
    fails = runner.run(list(units))
    ctx.digests.save()
    for u in units:
        failures += u.render_failures
    failures += _unit_rows(fails, "render")
    index = render_index(root, [w for u in units for w in u.wanted])
    return index, pd.DataFrame(failures, columns=RENDER_FAIL_COLUMNS)


def _recorded_pack(level_file: Path, library: Path) -> Path:
    """The folder to stage for a recorded level path: its pack (first folder under the
    library) when it lies inside ``library``, else the folder that holds it."""
    try:
        rel = Path(os.path.realpath(level_file)).relative_to(os.path.realpath(library))
    except ValueError:
        return level_file.parent
    return library / rel.parts[0] if len(rel.parts) > 1 else level_file.parent


def run_levels(cfg: WmforgeConfig, levels: pd.DataFrame, chars: pd.DataFrame, library: Path,
               traj_root: Path, render_root: Path, order: list[tuple[str, int]] | None = None,
               log: Callable[[str], Any] = print) -> dict[str, pd.DataFrame]:
    """The whole slot lifecycle per level: Stage I, then Stage II for what it produced.
    Returns stage1_failures, render_failures, index and steps (one row per engine process)."""
    units, fails, runner = _run_stage1_units(cfg, levels, chars, library, traj_root,
                                             render_root, order, log, None)
    s2 = [f for u in units for f in u.render_failures] + _unit_rows(fails, "render")
    return {"stage1_failures": _stage1_frame([f for u in units for f in u.stage1_failures]
                                             + _unit_rows(fails, "stage1")),
            "render_failures": pd.DataFrame(s2, columns=RENDER_FAIL_COLUMNS),
            "index": render_index(render_root, [w for u in units for w in u.wanted]),
            "steps": pd.DataFrame(runner.step_table())}
