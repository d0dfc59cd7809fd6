"""The Stage I engine process (paper §6): one level's trajectories in one engine process,
each published atomically the moment it is finished.

Run by a node-runner slot as ``python -m stages.engine.stage1_worker <spec.json>``. For every
finished trajectory it renames ``<out>/.<traj>.tmp-<pid>`` into ``<out>/<traj>`` (meta.json
written last) and then appends a progress line to the spec's ``progress`` file — so a crash
loses at most the trajectory in flight. While a trajectory runs it rewrites ``heartbeat`` with
the controller's tick count (the runner's stall detector reads it beside the progress log).
Trajectories that cannot be made (``no_walkable_region``, ``non_finite_transform``) are lines in
``failures.jsonl``.

The level and character files are read from the slot's staged copies (``load_path``,
``path_map``) while the trajectory records the library paths, so outputs do not depend on the
slot that made them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
import types
from pathlib import Path
from typing import Any

from ..core.asset_guard import check_model_file
from ..core.cameras import CameraRigConfig
from ..core.device_faults import beyond_device, classify, exit_on_device_fault
from ..core.engine_types import CharacterSpec
from ..core.progress import COMPLETE, append_progress
from ..core.stage1 import Stage1Controller
from ..core.stage1_config import ActionConfig, SpawnConfig
from ..core.stage1_records import TrajectoryResult
from ..core.trajectory import (
    CAMERA_COLUMNS,
    FRAME_COLUMNS,
    PROP_COLUMNS,
    SCHEMA_VERSION,
    validate,
    validate_props,
)

HEARTBEAT_EVERY_TICKS = 30


def write_trajectory(res: TrajectoryResult, out_dir: Path) -> None:
    """Write frames/cameras/props Parquet and meta.json into a private temporary folder, then
    rename it into place (a reader sees a whole trajectory or none)."""
    import pandas as pd

    from ..parquet_io import write_parquet

    frames = pd.DataFrame(res.frames, columns=list(FRAME_COLUMNS))
    cams = pd.DataFrame(res.cameras, columns=list(CAMERA_COLUMNS))
    props = pd.DataFrame(res.props, columns=list(PROP_COLUMNS))
    validate({str(c): frames[c].tolist() for c in frames},
             {str(c): cams[c].tolist() for c in cams}, res.meta)
    validate_props({str(c): props[c].tolist() for c in props}, len(frames))
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
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
    """A finished trajectory made with this exact key (config, code, assets)."""
    try:
        m = json.loads((out_dir / "meta.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return (m.get("config_hash") == chash and m.get("schema_version") == SCHEMA_VERSION
            and (out_dir / "props.parquet").is_file())


class StagedEngine:
    """The engine, reading level and character files from the slot's staged copies."""

    def __init__(self, engine: Any, load_path: str, path_map: dict[str, str],
                 level_root: str = ""):
        self._e, self._load_path, self._map = engine, load_path, path_map
        self._root = level_root  # the level's pack: what its references may point into

    def __getattr__(self, name: str) -> Any:
        return getattr(self._e, name)

    def _staged(self, p: str) -> str:
        for src, dst in self._map.items():
            if p == src or p.startswith(src.rstrip("/") + "/"):
                return dst + p[len(src):]
        return p

    def load_level(self, path: str, level_id: str, scale: float = 1.0,
                   up_axis: str | None = None):
        real = self._load_path or self._staged(path)
        # refuse a level whose references leave its pack before any loader follows them (the
        # root is the staged pack itself, never mapped: a character of the same pack maps it)
        check_model_file(Path(real), Path(self._root) if self._root else None)
        return self._e.load_level(real, level_id, scale, up_axis)

    def load_character(self, spec: CharacterSpec) -> Any:
        return self._e.load_character(dataclasses.replace(
            spec, model_path=self._staged(spec.model_path)))


def controller_from_spec(engine: Any, spec: dict) -> Stage1Controller:
    chars = [CharacterSpec(**c) for c in spec["characters"]]
    return Stage1Controller(
        StagedEngine(engine, spec.get("load_path", ""), spec.get("path_map") or {},
                     spec.get("level_root", "")),
        spec["level_path"], spec["level_id"], chars, list(spec["indices"]), spec["frames"],
        spec["fps"], spec["seed"], ActionConfig(**spec["actions"]), SpawnConfig(**spec["spawn"]),
        CameraRigConfig(**spec["cameras"]), level_scale=float(spec["scale"]),
        level_up_axis=spec.get("up_axis"), camera_rays=bool(spec["camera_rays"]),
        camera_scale=spec.get("camera_scale"),
        resolved_config=spec.get("resolved_config") or {},
        extra_starts=[((s[0], s[1], s[2]), s[3]) for s in spec.get("starts") or []],
        level_record=spec.get("level_record") or {},
        interior=bool(spec.get("interior")))


def run_spec(spec: dict, engine: Any, log=print) -> int:
    """Drive the controller tick by tick, publishing each trajectory when it is finished."""
    from . import fault_injection

    out = Path(spec["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    progress, beat = Path(spec["progress"]), Path(spec["heartbeat"])
    failures = Path(spec["failures"])
    level = spec["level_id"]
    fault_injection.at("stage1", level)
    ctrl = controller_from_spec(engine, spec)
    published = 0
    t0 = time.perf_counter()
    while not ctrl.done:
        try:
            ctrl.tick()
        except Exception as exc:  # noqa: BLE001 - an engine failure is a row, not a crash
            kind = classify(exc)
            beyond = beyond_device(exc, kind)
            if kind and not beyond:  # memory or a driver error: the runner retries the process
                raise
            # deterministic (a level that does not load, a broken asset): not retried
            reason = kind or "load_failed"
            detail = f"{type(exc).__name__}: {exc}" + (f"; {beyond}" if beyond else "")
            with open(failures, "a") as f:
                f.write(json.dumps({"level_id": level, "trajectory": -1, "reason": reason,
                                    "detail": detail}) + "\n")
            log(f"stage1: {level}: {reason}: {detail}")
            break
        if ctrl.ticks % HEARTBEAT_EVERY_TICKS == 0:
            beat.write_text(f"{ctrl.ticks}\n")
        while published < len(ctrl.results):
            res = ctrl.results[published]
            published += 1
            res.meta["config_hash"] = spec["config_hash"]
            name = f"traj_{res.index:04d}"
            if res.failure:
                with open(failures, "a") as f:
                    f.write(json.dumps({"level_id": level, "trajectory": res.index,
                                        "reason": res.failure, "detail": res.detail}) + "\n")
                log(f"stage1: {level}/{name}: {res.failure}: {res.detail}")
            else:
                write_trajectory(res, out / name)
                append_progress(progress, name, len(res.frames), spec["config_hash"])
                log(f"stage1: {level}/{name}: {len(res.frames)} frames "
                    f"({time.perf_counter() - t0:.1f} s)")
            fault_injection.at("stage1", level, published)
    return published


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m stages.engine.stage1_worker <spec.json>", file=sys.stderr)
        return 2
    spec_path = Path(args[0])
    spec = json.loads(spec_path.read_text())
    from .base import make_engine

    engine = make_engine(types.SimpleNamespace(**spec["engine"]))
    n = run_spec(spec, engine, log=lambda m: print(m, flush=True))
    engine.close()
    (spec_path.parent / COMPLETE).write_text(json.dumps({"trajectories": n}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(exit_on_device_fault(main, "stage1"))
