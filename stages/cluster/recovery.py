"""The scheduler's side of the progress protocol (paper §8.2): which render instances are
finished, and partial recovery of interrupted ones.

Recovery keeps a trajectory only if its progress line exists and its expected videos (and its
ground-truth layer files, where it has them) decode to the recorded frame count; everything
else of the instance is removed; an instance with nothing left is discarded. An instance whose
``owner.lock`` is held — a live renderer, from this run or another — is never recovered or
deleted.
"""

from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.progress import COMPLETE, PROGRESS, RECOVERED, read_progress
from ..engine.render_worker import OWNER_LOCK

KEEP_FILES = (PROGRESS, "instance.json", "failures.jsonl", "renderer.log", "device.json",
              OWNER_LOCK)


def owned_by_live_process(inst: Path) -> bool:
    """True while some process holds the instance's owner lock."""
    p = inst / OWNER_LOCK
    if not p.exists():
        return False
    try:
        with open(p) as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    except FileNotFoundError:
        return False
    return False


def closed(inst: Path) -> bool:
    return (inst / COMPLETE).exists() or (inst / RECOVERED).exists()


def recover_instance(inst: Path, log: Callable[[str], object] = print) -> list[str]:
    """Keep only trajectories with a progress line and videos that decode to the expected frame
    count; delete everything else; discard the instance if nothing is left. Returns the kept
    trajectory names (an instance a live process owns is left alone: its progress so far)."""
    from ..media.video import count_frames

    if closed(inst):
        return sorted(read_progress(inst))
    if owned_by_live_process(inst):
        log(f"recover: {inst}: owned by a live process, left alone")
        return sorted(read_progress(inst))
    done = read_progress(inst)
    kept = []
    for child in sorted(inst.iterdir()):
        if not child.is_dir():
            continue
        ok = child.name in done
        if ok:
            try:
                m = json.loads((child / "meta.json").read_text())
                ok = all(count_frames(child / v) == done[child.name][0]
                         for v in m["videos"] + layer_files(m))
            except (OSError, KeyError, json.JSONDecodeError):
                ok = False
        if ok:
            kept.append(child.name)
        else:
            shutil.rmtree(child)
            log(f"recover: {inst.name}/{child.name}: removed (unfinished)")
    if not kept:
        shutil.rmtree(inst)
        log(f"recover: {inst}: nothing finished, instance discarded")
        return []
    for f in inst.iterdir():
        if f.is_file() and f.name not in KEEP_FILES:
            f.unlink()
    (inst / RECOVERED).write_text(json.dumps({"kept": kept}) + "\n")
    log(f"recover: {inst}: kept {len(kept)} trajectories")
    return kept


def layer_files(meta: dict) -> list[str]:
    """The ground-truth layer files (issue #33) a published meta.json lists, per view."""
    views = (meta.get("ground_truth") or {}).get("views") or {}
    return [e["file"] for v in views.values() for e in v.values()]


def instances(root: Path) -> list[Path]:
    """Every instance folder under a renders root (scene/level/instance)."""
    return sorted({p for p in root.glob("*/*/*") if p.is_dir() and (
        (p / PROGRESS).exists() or (p / "instance.json").exists())})


def prune_instances(root: Path, index: Any, failures: Any) -> list[Path]:
    """After a render run: removes the instance folders under ``root`` that no row of its
    ``index`` (``path`` column: ``<scene>/<level>/<instance>/<traj>``) or ``failures``
    (``level_id``, ``instance``) names, in the level folders where the index has a current
    render: renders of settings, code or trajectories no longer current, which the DVC stage's
    ``persist`` would otherwise carry into every later version of its output. Levels without
    a current render (a level outside this node's pool), levels with a failure that names no
    instance (a staging failure: a unit of the level that never reached its renderer, whose
    finished clips the index then lacks) and instances a live process owns are left alone.
    Returns the removed folders."""
    keep = {root / Path(str(p)).parent for p in index["path"]} if len(index) else set()
    levels = {inst.parent for inst in keep}
    if len(failures):
        named = "instance" in failures.columns
        for r in failures.itertuples():
            lvl = root.joinpath(*level_parts(str(r.level_id)))
            if named and r.instance:
                keep.add(lvl / str(r.instance))
            else:
                levels.discard(lvl)
    gone = []
    for inst in instances(root):
        if inst.parent in levels and inst not in keep and not owned_by_live_process(inst):
            shutil.rmtree(inst)
            gone.append(inst)
    return gone


def recover_all(root: Path, log: Callable[[str], object] = print) -> None:
    for inst in instances(root):
        if inst.exists() and not closed(inst):
            recover_instance(inst, log)


def level_parts(level_id: str) -> tuple[str, str]:
    """``Pack/Level`` → (scene folder, level folder) of the render layout."""
    scene, _, level = level_id.partition("/")
    return scene or "_", (level or scene).replace("/", "__")


def finished(root: Path) -> dict[tuple[str, str, str], Path]:
    """(scene/level, traj, key) → trajectory folder, for every closed instance."""
    out: dict[tuple[str, str, str], Path] = {}
    for inst in instances(root):
        if not closed(inst):
            continue
        lvl = f"{inst.parent.parent.name}/{inst.parent.name}"
        for traj, (_, key) in read_progress(inst).items():
            if (inst / traj / "meta.json").exists():
                out[(lvl, traj, key)] = inst / traj
    return out
