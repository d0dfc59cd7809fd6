"""`trajectories` stage (Stage I, paper §6): physics-resolved trajectories with five camera
tracks, one directory per trajectory under ``data/trajectories/<level>/<traj>/``.

Each trajectory is deterministic in (level, trajectory index, seed, config). A finished
trajectory (its ``meta.json`` written last, after an atomic rename of the directory) whose config
hash matches is never produced again, so re-running after a crash produces only the missing ones.
Failures (``no_walkable_region``, ``non_finite_transform``, ``load_failed``) are rows in
``failures.parquet``; the stage goes on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from .config import ConfigError, WmforgeConfig, load_params
from .core.engine_types import CharacterSpec
from .core.stage1 import Stage1Controller, TrajectoryResult
from .core.trajectory import (
    CAMERA_COLUMNS,
    FRAME_COLUMNS,
    PROP_COLUMNS,
    SCHEMA_VERSION,
    validate,
    validate_props,
)
from .engine.base import make_engine
from .inventory import write_parquet


def character_specs(chars: pd.DataFrame, library: Path, wanted: list[str],
                    max_slope_deg: float = 45.0) -> list[CharacterSpec]:
    ok = chars[chars["ok"].astype(bool)]
    if wanted:
        missing = sorted(set(wanted) - set(ok["character_id"]))
        if missing:
            raise ConfigError(f"trajectories.characters: unknown or unusable {missing}")
        ok = ok[ok["character_id"].isin(wanted)]
    specs = []
    for r in ok.sort_values("character_id").to_dict("records"):
        specs.append(CharacterSpec(
            character_id=str(r["character_id"]), capsule_radius=float(r["capsule_radius_m"]),
            capsule_half_height=float(r["capsule_half_height_m"]),
            visual_height=float(r["visual_height_m"]), walk_speed=float(r["walk_speed"]),
            step_height=float(r["step_height_m"]), locomotion=str(r["locomotion"]),
            height_offset=float(r["height_offset_m"]), max_slope_deg=max_slope_deg,
            scale=float(r["scale"]), yaw_correction_deg=float(r["yaw_correction_deg"]),
            model_path=str(library / str(r["model_path"])),
            animations=json.loads(str(r["animation_json"]))))
    if not specs:
        raise ConfigError("no usable character in characters.parquet")
    return specs


def config_hash(cfg: WmforgeConfig, level_row: dict) -> str:
    blob = json.dumps({"seed": cfg.seed, "trajectories": asdict(cfg.trajectories),
                       "engine": asdict(cfg.engine), "level": level_row}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _frames_df(rows: list[dict], spec: dict) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(spec))


def write_trajectory(res: TrajectoryResult, out_dir: Path) -> None:
    """Write frames/cameras Parquet and meta.json atomically (tmp dir, then rename)."""
    frames = _frames_df(res.frames, FRAME_COLUMNS)
    cams = _frames_df(res.cameras, CAMERA_COLUMNS)
    props = _frames_df(res.props, PROP_COLUMNS)
    validate({str(c): frames[c].tolist() for c in frames},
             {str(c): cams[c].tolist() for c in cams},
             res.meta)
    validate_props({str(c): props[c].tolist() for c in props}, len(frames))
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    write_parquet(frames, tmp / "frames.parquet")
    write_parquet(cams, tmp / "cameras.parquet")
    write_parquet(props, tmp / "props.parquet")
    (tmp / "meta.json").write_text(json.dumps(res.meta, indent=1, sort_keys=True) + "\n")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)


def is_complete(out_dir: Path, chash: str) -> bool:
    meta = out_dir / "meta.json"
    if not meta.exists():
        return False
    try:
        m = json.loads(meta.read_text())
    except json.JSONDecodeError:
        return False
    return (m.get("config_hash") == chash and m.get("schema_version") == SCHEMA_VERSION
            and (out_dir / "props.parquet").is_file())


def run_trajectories(cfg: WmforgeConfig, levels: pd.DataFrame, chars: pd.DataFrame,
                     library: Path, out: Path, log=print) -> pd.DataFrame:
    """Produce every missing trajectory; return the failure rows."""
    tcfg = cfg.trajectories
    specs = character_specs(chars, library, tcfg.characters)
    todo = levels[levels["enabled"].astype(bool)]
    if tcfg.levels:
        todo = todo[todo["level_id"].isin(tcfg.levels)]
    failures = []
    engine = make_engine(cfg.engine)
    for row in todo.sort_values("level_id").to_dict("records"):
        lid = row["level_id"]
        level_dir = out / lid.replace("/", "__")
        chash = config_hash(cfg, {k: row[k] for k in ("level_id", "path", "scale", "up_axis")})
        missing = [i for i in range(tcfg.per_level)
                   if not is_complete(level_dir / f"traj_{i:04d}", chash)]
        if not missing:
            continue
        t0 = time.perf_counter()
        resolved = {"trajectories": asdict(tcfg), "engine": asdict(cfg.engine), "seed": cfg.seed,
                    "config_hash": chash}
        ctrl = Stage1Controller(
            engine, str(library / row["path"]), lid, specs, missing, tcfg.frames, cfg.engine.fps,
            cfg.seed, tcfg.actions, tcfg.spawn, tcfg.cameras, level_scale=float(row["scale"]),
            level_up_axis=str(row["up_axis"]), camera_rays=tcfg.camera_rays,
            resolved_config=resolved)
        try:
            results = ctrl.run()
        except Exception as exc:  # an engine failure is a row, not a crash of the stage
            failures.append({"level_id": lid, "trajectory": -1, "reason": "load_failed",
                             "detail": f"{type(exc).__name__}: {exc}"})
            continue
        for res in results:
            res.meta["config_hash"] = chash
            if res.failure:
                failures.append({"level_id": lid, "trajectory": res.index,
                                 "reason": res.failure, "detail": res.detail})
                continue
            write_trajectory(res, level_dir / f"traj_{res.index:04d}")
        sim = sum(len(r.frames) for r in results) / cfg.engine.fps
        log(f"{lid}: {len(results)} trajectories, {sim:.0f} s simulated in "
            f"{time.perf_counter() - t0:.1f} s")
    engine.close()
    return pd.DataFrame(failures, columns=["level_id", "trajectory", "reason", "detail"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge trajectories", description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--inventory", default="data/inventory")
    ap.add_argument("--out", default="data/trajectories")
    ap.add_argument("--pools", default="", help="pools.parquet: only the levels of this "
                    "machine's pool (cluster.node; every pool when empty)")
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    try:
        cfg = load_params(args.params, args.set)
        inv = Path(args.inventory)
        levels = pd.read_parquet(inv / "levels.parquet")
        chars = pd.read_parquet(inv / "characters.parquet")
        if args.pools:
            from .pools import pool_levels

            wanted = pool_levels(pd.read_parquet(args.pools), cfg.cluster.node)
            levels = levels[levels["level_id"].isin(wanted)]
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        failures = run_trajectories(cfg, levels, chars, Path(cfg.library.root), out)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_parquet(failures, out / "failures.parquet")
    print(f"trajectories: {len(failures)} failures → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
