"""Stage I output from inside the editor: the trajectory contract written with pyarrow (install
it into the editor's Python, docs/unreal.md), published by rename, and the
progress line. Mirrors stages/engine/stage1_worker.py's layout without importing it (editor
scripts import stages.core only)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stages.core.progress import append_progress
from stages.core.stage1_records import TrajectoryResult
from stages.core.trajectory import (
    CAMERA_COLUMNS,
    FRAME_COLUMNS,
    PROP_COLUMNS,
    validate,
    validate_props,
)


def _arrow_table(rows: list[dict], spec: dict[str, tuple[str, str]]) -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        raise RuntimeError("pyarrow is missing in the editor's Python: run "
                           "<UE>/Engine/Binaries/ThirdParty/Python3/Linux/bin/python3 -m pip "
                           "install pyarrow") from None
    types = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_()}
    schema = pa.schema([(c, types[k]) for c, (k, _unit) in spec.items()])
    return pa.Table.from_pydict({c: [r[c] for r in rows] for c in spec}, schema=schema)


def _columns(rows: list[dict], spec: dict[str, tuple[str, str]]) -> dict[str, Sequence]:
    return {c: [r[c] for r in rows] for c in spec}


def write_trajectory(res: TrajectoryResult, out_dir: Path) -> None:
    """frames/cameras/props Parquet + meta.json into a private folder, then renamed into place."""
    import pyarrow.parquet as pq

    validate(_columns(res.frames, FRAME_COLUMNS), _columns(res.cameras, CAMERA_COLUMNS),
             res.meta)
    validate_props(_columns(res.props, PROP_COLUMNS), len(res.frames))
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for name, rows, spec in (("frames", res.frames, FRAME_COLUMNS),
                             ("cameras", res.cameras, CAMERA_COLUMNS),
                             ("props", res.props, PROP_COLUMNS)):
        pq.write_table(_arrow_table(rows, spec), tmp / f"{name}.parquet", compression="zstd",
                       write_statistics=True)
    (tmp / "meta.json").write_text(json.dumps(res.meta, indent=1, sort_keys=True) + "\n")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)


def publish(res: TrajectoryResult, spec: dict, log: Any) -> bool:
    """Write a finished trajectory and its progress line, or its failure row."""
    level = spec["level_id"]
    res.meta["config_hash"] = spec["config_hash"]
    name = f"traj_{res.index:04d}"
    if res.failure:
        with open(spec["failures"], "a") as f:
            f.write(json.dumps({"level_id": level, "trajectory": res.index,
                                "reason": res.failure, "detail": res.detail}) + "\n")
        log(f"wmforge: stage1: {level}/{name}: {res.failure}: {res.detail}")
        return False
    write_trajectory(res, Path(spec["out_dir"]) / name)
    append_progress(Path(spec["progress"]), name, len(res.frames), spec["config_hash"])
    log(f"wmforge: stage1: DONE {level}/{name} frames={len(res.frames)}")
    return True
