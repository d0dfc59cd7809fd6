"""A level's unit of work on one slot (paper §5.3): stage assets → Stage I (own engine process,
trajectories published as they finish) → Stage II for what Stage I produced → cleanup."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from ..config import WmforgeConfig
from ..core.model_probe import normalize_coordinate_system
from ..core.progress import PROGRESS
from ..engine.compute.backend import node_backend
from ..engine.render_worker import OWNER_LOCK
from ..engine.stage1_worker import is_complete
from ..engine.unreal import launcher_argv, map_object_path
from .gpus import SlotPlan
from .keys import (
    STAGE1_SOURCES,
    STAGE2_SOURCES,
    code_version,
    pack_dir,
    render_key,
    render_settings,
)
from .lifetimes import try_lock
from .node_context import NodeContext, copy_stable
from .recovery import finished, level_parts, recover_instance
from .row_readers import is_interior, level_dir_name, level_overrides, optional_number
from .steps import StagingError, Step, StepResult, python_argv, stale_tmp_dirs

MAX_RESTAGES = 2  # a pack changing again and again while its unit runs fails the unit


def unreal_spec(cfg: WmforgeConfig, level_file: Path) -> dict:
    """What an Unreal stage script needs beside the embedded engine's spec: the launch settings
    and the level's map object path (``/Game/...`` from the pack's Content folder)."""
    # the editor runs as cluster.engine_user when set, else unreal.run_as (Unreal refuses root)
    ucfg = {**asdict(cfg.unreal), "run_as": cfg.cluster.engine_user or cfg.unreal.run_as}
    return {"unreal": ucfg, "ue_map": map_object_path(level_file),
            "fps": cfg.engine.fps, "map_on_command_line": True}


class LevelUnit:
    """One level on one slot: Stage I for ``indices`` (None: skip), then Stage II (if
    ``render``) for the trajectories of those indices (all of the level's when None)."""

    def __init__(self, ctx: NodeContext, row: dict, indices: list[int] | None, render: bool,
                 unit_id: str = "", pack: Path | None = None,
                 char_dirs: list[Path] | None = None, names: list[str] | None = None):
        self.ctx, self.row = ctx, row
        self.names = names  # Stage II only: these trajectories of the level (None: all)
        # what is copied into the slot: the level's pack; the characters' folders (cached)
        self.level_file = (ctx.library / str(row["path"])) if pack is None else Path(row["path"])
        self.pack = pack if pack is not None else pack_dir(ctx.library, str(row["path"]))
        self.char_dirs = list(ctx.char_packs if char_dirs is None else char_dirs)
        self.level_id = str(row["level_id"])
        self.unit_id = unit_id or self.level_id
        self.indices, self.render = indices, render
        self.phase = "stage1" if indices is not None else ("render" if render else "done")
        self.chash = self._stage1_key() if indices else ""
        self.out = ctx.traj_root / level_dir_name(self.level_id)
        self.stage1_failures: list[dict] = []
        self.render_failures: list[dict] = []
        self.wanted: list[tuple[str, str, str, str]] = []  # (level, scene/level, traj, key)
        # what an engine process reported as not makeable: never asked again in this run
        self.failed: set[int] = set()
        self.failed_names: set[str] = set()
        self.load_failed = False
        self.path_map1: dict[str, str] = {}
        self.path_map2: dict[str, str] = {}
        self.load_path = ""
        self.load_root = ""  # the staged copy of the level's pack (empty: not staged)
        # digest of each pack folder staged for this unit (the level's, the characters'):
        # checked again before Stage II, which keys its renders on the library's bytes
        self.staged: dict[str, str] = {}
        self.restages = 0

    # -------------------------------------------------------------- staging (§5.3, §12)

    def stage(self, slot_dir: Path) -> None:
        ctx = self.ctx
        self.load_path = self.load_root = ""
        self.path_map1, self.path_map2, self.staged = {}, {}, {}
        if not ctx.node.stage_assets or not self.pack.is_dir():
            return  # a missing pack: the engine process names the missing file per trajectory
        staged = slot_dir / "assets" / self.pack.name
        # links followed: the copy stands on its own
        self.staged[str(self.pack)] = copy_stable(ctx.digests, self.pack, staged)
        self.load_path = str(staged / os.path.relpath(os.path.abspath(self.level_file),
                                                      os.path.abspath(self.pack)))
        self.load_root = str(staged)  # what the level's references may point into
        self.path_map1 = {str(self.pack): str(staged)}
        self.path_map2 = {os.path.abspath(self.pack): os.path.abspath(staged)}
        for cd in self.char_dirs:
            if not cd.is_dir():
                continue
            tag = hashlib.sha256(os.path.abspath(cd).encode()).hexdigest()[:8]
            link = slot_dir / "characters" / f"{cd.name}-{tag}"
            link.parent.mkdir(parents=True, exist_ok=True)
            cached, self.staged[str(cd)] = ctx.char_cache(cd)
            cached = cached.resolve()
            link.symlink_to(cached)
            self.path_map1[str(cd)] = str(link)
            self.path_map2[os.path.abspath(cd)] = os.path.abspath(link)

    def cleanup(self, slot_dir: Path) -> None:
        shutil.rmtree(slot_dir / "assets", ignore_errors=True)
        shutil.rmtree(slot_dir / "characters", ignore_errors=True)

    # -------------------------------------------------------------- steps

    def next_step(self, slot: SlotPlan, slot_dir: Path, instance: str) -> Step | None:
        if self.phase == "stage1":
            step = self._stage1_step(slot_dir, instance)
            if step is not None:
                return step
            self.phase = "render" if self.render else "done"
        if self.phase == "render":
            if self._staged_stale():
                self._restage(slot_dir)
                if self.phase == "stage1":
                    return self.next_step(slot, slot_dir, instance)
            step = self._render_step(slot, instance)
            if step is not None:
                return step
            self.phase = "done"
        return None

    def _stage1_key(self) -> str:
        row = self.row
        return self.ctx.stage1_key({k: row[k] for k in ("level_id", "path", "scale", "up_axis")
                                    if k in row}
                                   | level_overrides(row) | {"interior": is_interior(row)})

    def _restage(self, slot_dir: Path) -> None:
        """The library changed since this unit staged it: stage again, so that what Stage II
        reads is what its keys name; a unit that made trajectories on the old packs makes
        them again first (their key names the packs). Raises StagingError."""
        self.restages += 1
        if self.restages > MAX_RESTAGES:
            raise StagingError("render", f"{self.pack}: changed in the library "
                               f"{self.restages} times while this unit ran: not rendered")
        self.cleanup(slot_dir)
        try:
            self.stage(slot_dir)
        except OSError as exc:
            self.cleanup(slot_dir)
            detail = str(exc).replace(os.path.abspath(slot_dir), "<slot>").replace(
                str(slot_dir), "<slot>")
            raise StagingError("render", f"{self.pack}: staging again after a change in the "
                               f"library failed: {detail}") from None
        if self.indices:
            self.chash = self._stage1_key()
            self.phase = "stage1"

    def _staged_stale(self) -> bool:
        """Whether a staged pack's folder in the library has other bytes now."""
        return any(self.ctx.digests.tree(Path(src)) != d for src, d in self.staged.items())

    def missing(self) -> list[int]:
        if self.load_failed:
            return []
        return [i for i in (self.indices or []) if i not in self.failed
                and not is_complete(self.out / f"traj_{i:04d}", self.chash)]

    def _stage1_step(self, slot_dir: Path, instance: str) -> Step | None:
        missing = self.missing()
        if not missing:
            return None
        ctx, cfg = self.ctx, self.ctx.cfg
        over = level_overrides(self.row)
        folder = slot_dir / instance
        folder.mkdir(parents=True)
        spec = {
            "level_id": self.level_id, "level_path": str(self.level_file),
            "level_root": self.load_root or str(self.pack),
            "load_path": self.load_path, "path_map": self.path_map1,
            "scale": float(self.row["scale"]),
            "up_axis": normalize_coordinate_system(self.row["up_axis"]),
            "camera_scale": optional_number(self.row.get("camera_scale")),
            "indices": missing, "frames": cfg.trajectories.frames, "fps": cfg.engine.fps,
            "seed": cfg.seed, "engine": asdict(cfg.engine),
            "characters": [asdict(s) | ({"walk_speed": over["walk_speed"]}
                                        if over.get("walk_speed") else {})
                           for s in ctx.specs],
            "starts": over["starts"],
            "interior": is_interior(self.row),
            "level_record": {k: over[k] for k in ("walk_speed", "exposure_compensation")
                             if over.get(k) is not None},
            "actions": asdict(cfg.trajectories.actions), "spawn": asdict(cfg.trajectories.spawn),
            "cameras": asdict(cfg.trajectories.cameras),
            "camera_rays": cfg.trajectories.camera_rays,
            "resolved_config": {"trajectories": asdict(cfg.trajectories),
                                "engine": asdict(cfg.engine), "seed": cfg.seed,
                                "config_hash": self.chash,
                                "code_version": code_version(STAGE1_SOURCES)},
            "config_hash": self.chash, "out_dir": str(self.out),
            "progress": str(folder / PROGRESS), "heartbeat": str(folder / "heartbeat"),
            "failures": str(folder / "failures.jsonl"),
        }
        argv = python_argv("stages.engine.stage1_worker", str(folder / "spec.json"))
        if cfg.engine.name == "unreal":  # the launcher runs Unreal Editor with unreal/ scripts
            spec.update(unreal_spec(cfg, self.level_file))
            argv = launcher_argv("stage1", folder / "spec.json")
        (folder / "spec.json").write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n")
        return Step("stage1", instance, argv,
                    folder, folder / PROGRESS, folder / "engine.log",
                    [folder / "heartbeat"], self.ctx.node.stage1_timeout_s,
                    len(missing), self.chash, self.level_id)

    def _render_step(self, slot: SlotPlan, instance: str) -> Step | None:
        ctx = self.ctx
        assert ctx.render_root is not None and ctx.rcfg is not None
        rcfg, root = ctx.rcfg, ctx.render_root
        settings = render_settings(rcfg, ctx.cfg.engine.fps)
        # render.backend auto resolved for this slot here, so the key names what draws
        settings = settings.replace(backend=node_backend(
            settings.backend, slot.gpu is not None and ctx.cfg.engine.name == "embedded",
            settings.ground_truth))
        code = code_version(STAGE2_SOURCES)
        scene, level = level_parts(self.level_id)
        done = finished(root)
        jobs, self.wanted = [], []
        levels: dict[str, str] = {}
        models: dict[Path, str] = {}  # each model digested once per step, not per trajectory
        names = (set(self.names) if self.names is not None else None if self.indices is None
                 else {f"traj_{i:04d}" for i in self.indices})
        for meta_p in sorted(self.out.glob("traj_*/meta.json")):
            tdir = meta_p.parent
            if (names is not None and tdir.name not in names) or tdir.name in self.failed_names:
                continue
            if self.indices is not None and not is_complete(tdir, self.chash):
                continue  # an older trajectory this run did not make: never rendered as current
            key = render_key(tdir, settings, code, self._render_assets(tdir, levels, models))
            self.wanted.append((self.level_id, f"{scene}/{level}", tdir.name, key))
            if ((f"{scene}/{level}", tdir.name, key) in done
                    or (f"{scene}/{level}", tdir.name, key) in ctx.delivered):
                continue
            jobs.append({"name": tdir.name, "traj_dir": str(tdir.resolve()), "key": key})
        if not jobs:
            return None
        inst = root / scene / level / instance
        inst.mkdir(parents=True)
        # owned from before instance.json exists: no other run's recovery can take it while
        # the engine process starts (the lock travels to it; the runner lets go after spawning)
        owner = try_lock(inst / OWNER_LOCK)
        ispec = {"level_id": self.level_id, "settings": settings.as_dict(),
                 "display": ctx.cfg.engine.display, "readback": rcfg.readback,
                 "compile_cache": (str(ctx.base / rcfg.compile_cache_dir)
                                   if rcfg.compile_cache_dir else None),
                 "base": str(ctx.base), "jobs": jobs, "level_digests": levels,
                 "path_map": self.path_map2, "lineage": {"code_version": code}}
        argv = python_argv("stages.engine.render_worker", str(inst))
        if ctx.cfg.engine.name == "unreal":
            ispec.update(unreal_spec(ctx.cfg, self.level_file))
            argv = launcher_argv("stage2", inst)
        (inst / "instance.json").write_text(json.dumps(ispec, indent=1) + "\n")
        return Step("render", instance, argv,
                    inst, inst / PROGRESS, inst / "renderer.log", [inst],
                    rcfg.instance_timeout_s, len(jobs), "", self.level_id, owner=owner)

    def _render_assets(self, tdir: Path, levels: dict[str, str], models: dict[Path, str]
                       ) -> str:
        """Digest of what Stage II reads besides the trajectory: the level's and the
        character's model files, their folders and what they reference outside them (paths
        as recorded). The level's own digest goes into ``levels``
        under its recorded path (``instance.json``'s ``level_digests``: the renderer's level
        key, so a level replaced in place, or only its ``.bin`` or a texture, is another
        level, and the copies of one pack in a node's slots are one level)."""
        try:
            meta = json.loads((tdir / "meta.json").read_text())
        except (OSError, ValueError):
            return ""
        level = (meta.get("level") or {}).get("path")
        level_d = self._model_digest(level, models)
        char_d = self._model_digest((meta.get("character") or {}).get("model"), models)
        if level_d:
            levels[str(level)] = level_d
        return hashlib.sha256("|".join(d for d in (level_d, char_d) if d).encode()
                              ).hexdigest()[:16]

    def _unstaged(self, text: str) -> str:
        """``text`` (a failure's detail) with the slot's staged copies named by the library
        paths they copy: which slot ran a unit is scheduling, and must not reach an output
        (screening's table names the failure)."""
        for m in (self.path_map2, self.path_map1):  # absolute first: a relative path is
            for src, dst in sorted(m.items(), key=lambda kv: -len(kv[1])):  # a part of one
                text = text.replace(dst, src)
        return text

    def _model_digest(self, rec: object, memo: dict[Path, str]) -> str:
        """Content digest of a model file as a trajectory records it: its folder and what it
        references outside it (``AssetDigests.model``; '' when not recorded, or not there:
        never the checkout's parent folder for an empty path); ``memo`` keeps each model's
        digest for the rest of one step."""
        if not rec:
            return ""
        p = Path(str(rec))
        p = p if p.is_absolute() else self.ctx.base / p
        if not p.exists():
            return ""
        if p not in memo:
            memo[p] = self.ctx.digests.model(p, self._pack_of(p))
        return memo[p]

    def _pack_of(self, p: Path) -> Path:
        """The library pack a model file lies in (what its references may point into); its
        own folder for a file outside the library."""
        lib = Path(os.path.abspath(self.ctx.library))  # as written: a pack may be a link
        try:
            rel = Path(os.path.abspath(p)).relative_to(lib)
        except ValueError:
            return p.parent
        return pack_dir(lib, str(rel)) if len(rel.parts) > 1 else p.parent

    def recover(self, step: Step) -> None:
        if step.kind == "render":
            recover_instance(step.folder, lambda m: None)
        else:
            for p in stale_tmp_dirs(self.ctx.traj_root):
                shutil.rmtree(p, ignore_errors=True)

    def step_ended(self, result: StepResult) -> None:
        """Collect the engine process's failure rows (before any recovery removes them)."""
        step = result.step
        fl = step.folder / "failures.jsonl"
        rows = ([json.loads(x) for x in fl.read_text().splitlines() if x.strip()]
                if fl.exists() else [])
        for r in rows:  # the slot's staged copies named as the library's files
            r["detail"] = self._unstaged(str(r.get("detail", "")))
        if step.kind == "stage1":
            fl.unlink(missing_ok=True)
            self.stage1_failures += rows
            for r in rows:
                if int(r["trajectory"]) < 0:
                    self.load_failed = True
                else:
                    self.failed.add(int(r["trajectory"]))
        else:
            for d in rows:
                self.failed_names.add(str(d["trajectory"]))
                self.render_failures.append({"level_id": self.level_id,
                                             "trajectory": d["trajectory"],
                                             "reason": d["reason"], "detail": d["detail"],
                                             "instance": step.instance})
        if result.ok or result.final:
            # a step runs again only to retry a failed engine process: what it reported as
            # not makeable (failures.jsonl) stays a failure row
            self.phase = ("render" if step.kind == "stage1" and self.render else "done")

    def split(self) -> LevelUnit | None:
        """Half of this unit's trajectories as a unit of its own (None if it has one), so that a
        pool with fewer levels than slots still keeps every slot busy."""
        if self.indices is not None and len(self.indices) > 1:
            k = len(self.indices) // 2
            other = LevelUnit(self.ctx, self.row, self.indices[k:], self.render,
                              f"{self.unit_id}[{self.indices[k]}:]", self.pack, self.char_dirs)
            other.level_file = self.level_file
            self.indices = self.indices[:k]
            return other
        if self.indices is None and self.names is not None and len(self.names) > 1:
            k = len(self.names) // 2
            other = LevelUnit(self.ctx, self.row, None, self.render,
                              f"{self.unit_id}[{self.names[k]}:]", self.pack, self.char_dirs,
                              self.names[k:])
            other.level_file = self.level_file
            self.names = self.names[:k]
            return other
        return None


def spread(units: list[LevelUnit], slots: int) -> list[LevelUnit]:
    """Split the largest units until there are at least ``slots`` (or nothing splits); each
    part stays next to its origin in the order."""
    units = list(units)
    while len(units) < slots:
        sizes = [len(u.indices if u.indices is not None else (u.names or [])) for u in units]
        if not units or max(sizes) <= 1:
            break
        i = max(range(len(units)), key=lambda j: (sizes[j], -j))
        part = units[i].split()
        if part is None:
            break
        units.insert(i + 1, part)
    return units
