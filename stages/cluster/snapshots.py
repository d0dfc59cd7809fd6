"""Failure snapshots (paper §8.3, App. C): everything needed for a post-mortem, written before
cleanup into ``<snapshot_dir>/<node>/<instance>/``, and their aggregation by reason.

A snapshot holds ``engine.log`` (the whole engine log), ``progress.log`` (the progress lines),
and ``snapshot.json``: reason code, exit code or signal, slot, GPU id and UUID, level, stage,
attempt, config hash, free disk and memory, the command line and the time, and what the engine
log says (``log_reason``, ``log_evidence``: :mod:`stages.engine.unreal_log`).
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..engine.unreal_log import classify_log_file

# App. C's order: scheduler log, engine log, progress log, GPU state, snapshot
TROUBLESHOOTING = ("scheduler log (this runner's output): active slots, counters, disk",
                   "engine.log: crash location or the last progress point",
                   "progress.log: trajectories finished before the failure",
                   "GPU state inside the container and on the host (gpu, gpu_uuid)",
                   "snapshot.json: the reason codes aggregated below")


def _mem_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def write_snapshot(folder: Path, step: Any, result: Any, slot: Any, log_path: Path,
                   progress_lines: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if log_path.exists():
        shutil.copyfile(log_path, folder / "engine.log")
    (folder / "progress.log").write_text(progress_lines)
    try:
        free = shutil.disk_usage(step.folder if step.folder.exists() else folder).free
    except OSError:
        free = None
    gpu = slot.gpu
    # what the engine log says (Unreal's Table 2 cases, crashes, Python errors): beside the
    # runner's own reason, which only knows exit codes and silence
    verdict = classify_log_file(log_path, result.signal_name or "")
    doc = {
        "reason": result.reason, "detail": result.detail, "exit_code": result.exit_code,
        "signal": result.signal_name or None, "stage": step.kind, "instance": step.instance,
        "attempt": result.attempt, "slot": slot.slot,
        "gpu": gpu.index if gpu else None, "gpu_uuid": gpu.uuid if gpu else None,
        "gpu_name": gpu.name if gpu else None,
        "level_id": step.level_id,
        "progress_lines": len([x for x in progress_lines.splitlines() if x.startswith("DONE ")]),
        "trajectories_expected": step.total, "config_hash": step.config_hash,
        "free_disk_bytes": free, "mem_available_bytes": _mem_available(),
        "argv": step.argv, "time": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        **verdict.as_dict(),
    }
    (folder / "snapshot.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return folder


def read_snapshots(root: Path) -> list[dict]:
    out = []
    for p in sorted(Path(root).glob("*/*/snapshot.json")):
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        d["path"] = str(p.parent)
        out.append(d)
    return out


def summarize(snaps: list[dict]) -> str:
    """A table of failures by reason (most frequent first), with where to look."""
    if not snaps:
        return "no failure snapshots"
    by: dict[str, list[dict]] = defaultdict(list)
    for d in snaps:  # the runner's reason, refined by the engine log's when it has one
        by[str(d.get("reason")) + (f":{d['log_reason']}" if d.get("log_reason") else "")
           ].append(d)
    lines = ["Troubleshooting order (paper App. C): " + "; ".join(
        f"{i + 1}. {t}" for i, t in enumerate(TROUBLESHOOTING)), ""]
    lines.append(f"{'reason':<16} {'count':>5}  {'levels':<40} {'stages':<14} {'slots/GPUs':<18}"
                 " latest snapshot")
    for reason, rows in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        levels = sorted({str(r.get("level_id")) for r in rows})
        stages = sorted({str(r.get("stage")) for r in rows})
        where = sorted({f"{r.get('slot')}/{r.get('gpu') if r.get('gpu') is not None else '-'}"
                        for r in rows})
        latest = max(rows, key=lambda r: str(r.get("time")))
        lv = ", ".join(levels)
        lines.append(f"{reason:<16} {len(rows):>5}  {lv[:40]:<40} {','.join(stages):<14} "
                     f"{','.join(where)[:18]:<18} {latest['path']}")
        sig = {str(r.get("signal")) for r in rows if r.get("signal")}
        if sig:
            lines.append(f"{'':<23}signals: {', '.join(sorted(sig))}")
    return "\n".join(lines)
