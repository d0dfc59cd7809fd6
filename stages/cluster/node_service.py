"""The node runner of one Ray node as an actor (DESIGN §6, paper §5.1, §8.3): it leases units
from the allocator (one per slot), runs them with the unchanged
:class:`~stages.cluster.node_runner.NodeRunner` (its slots stay subprocesses of the actor),
renews its leases while they run and completes them after; its uploader is a process of its own
under a :class:`~.upload_supervisor.Supervisor`. Trajectories already delivered (read from the
store before each unit) or finished on this disk are not made again; a store that does not
answer stops neither the node nor the run. At the end it waits for its uploads
(``upload.end_wait_s``) and returns what is still local, why, and the command that delivers it.
The driver that starts one per node is :mod:`.ray_executor`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..config import WmforgeConfig
from ..core.progress import read_progress
from .allocator_actor import ACTOR_NAME, NAMESPACE
from .recovery import finished, level_parts
from .slot_limits import SlotLimits
from .uploader import COMPLETION, eligible, parse_delivery_key


@dataclass
class NodeJob:
    """What every node runner gets (picklable)."""

    cfg: WmforgeConfig
    work_root: str  # each node's folders: <work_root>/<node>/ (on a cluster, its own disk)
    # "level" (Stage I + II, real engine), or "module:function": a factory of the units instead,
    # as a stand-in renderer for tests (see unit_factory); every worker must import that module
    unit_kind: str = "level"
    inventory: str = ""  # level: folder with levels.parquet and characters.parquet
    library: str = ""
    unit_options: dict[str, Any] = field(default_factory=dict)  # the factory's own arguments
    upload: bool = True
    poll_s: float = 0.5
    monitor: bool = True  # a monitor actor per node (monitor.interval_s between rounds)


def unit_factory(path: str) -> Callable[..., Any]:
    """The unit factory a ``module:function`` path names: ``factory(lease, cfg, renders,
    delivered, **unit_options)`` returns the unit of a lease. Imported on the worker, by path, so
    that no production module imports a test's stand-in."""
    module, sep, name = path.partition(":")
    if not (sep and module and name):
        raise ValueError(f"unit kind {path!r}: 'level', or a factory as 'module:function'")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"unit factory {path!r}: {exc} (is the folder holding {module} on "
                         "the workers' PYTHONPATH?)") from None


def node_paths(work_root: str | Path, node: str) -> dict[str, Path]:
    root = Path(work_root) / node
    return {"root": root, "renders": root / "renders", "trajectories": root / "trajectories",
            "work": root / "work", "snapshots": root / "snapshots"}


def delivered_in_store(store: Any, prefix: str, level_ids: list[str]
                       ) -> set[tuple[str, str, str]]:
    """(scene/level, traj, render key) of every delivered trajectory: its delivery record
    (and, for deliveries made before those existed, an instance's completion object)."""
    out: set[tuple[str, str, str]] = set()
    for lid in level_ids:
        scene, level = level_parts(lid)
        base = f"{prefix.strip('/')}/{scene}/{level}/"
        for key in store.list_keys(base):
            rec = parse_delivery_key(key)
            if rec is not None:
                out.add((f"{rec[0]}/{rec[1]}", rec[2], rec[3]))
            elif key.endswith("/" + COMPLETION):
                done = json.loads(store.get_bytes(key))
                out.add((f"{scene}/{level}", done["trajectory"], done["render_key"]))
    return out


def made_here(unit: Any, renders: Path, had: set[tuple[str, str, str]]) -> int:
    """Trajectories a unit made on this node: the stand-in's finished set (empty is 0); a
    level unit's wanted trajectories finished on this disk that were not there before."""
    made = getattr(unit, "finished", None)
    if made is not None:
        return len(made)
    done = finished(renders)
    return sum(1 for _, lvl, traj, key in getattr(unit, "wanted", [])
               if (lvl, traj, key) in done and (lvl, traj, key) not in had)


class _Renewer:
    """Renews the held leases every ``period`` s while the units run."""

    def __init__(self, alloc: Any, node: str, leases: list[dict], period: float):
        self.alloc, self.node, self.leases, self.period = alloc, node, leases, period
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import ray

        while not self.stop.wait(self.period):
            for ls in self.leases:
                # the allocator restarting: try again next period
                with contextlib.suppress(Exception):
                    ray.get(self.alloc.renew.remote(ls["lease_id"], self.node), timeout=30)

    def __enter__(self) -> _Renewer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


class NodeRunnerService:
    """The node runner of one Ray node (run as an actor pinned to that node)."""

    def __init__(self, node: str, job: NodeJob):
        from omegaconf import OmegaConf

        self.node, self.job = node, job
        self.paths = p = node_paths(job.work_root, node)
        for d in p.values():
            d.mkdir(parents=True, exist_ok=True)
        cfg = job.cfg
        self.cfg = replace(cfg, node=replace(cfg.node, work_dir=str(p["work"]),
                                             snapshot_dir=str(p["snapshots"]), display="plain"),
                           render=replace(cfg.render, node_id=node))
        self.params = p["root"] / "params.yaml"
        self.params.write_text(OmegaConf.to_yaml(OmegaConf.structured(self.cfg)))
        self.log_path = p["root"] / "node.log"
        self.uploader: Any = None  # its Supervisor
        self.units_done = 0
        self.trajectories = 0
        self.starts = self._count_start()
        # trajectories the store said were delivered (read before each lease); used while the
        # store does not answer (delivered ones are never undelivered)
        self.delivered_seen: set[tuple[str, str, str]] = set()
        # the node's running limits per device, lowered on out-of-memory: one for all the
        # lease batches' runners, so a device that ran out keeps its lower limit
        self.limits = SlotLimits()

    def _count_start(self) -> int:
        """How often this runner's process started (Ray reruns __init__ after a crash)."""
        f = self.paths["root"] / "runner.json"
        try:
            n = int(json.loads(f.read_text()).get("starts", 0)) + 1
        except (OSError, ValueError):
            n = 1
        f.write_text(json.dumps({"starts": n, "pid": os.getpid(), "at": time.time()}))
        if n > 1:
            self.log(f"runner process started again (start {n}, pid {os.getpid()})")
        return n

    def log(self, msg: str) -> None:
        with open(self.log_path, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {msg}\n")

    def ping(self) -> int:
        return os.getpid()

    def disk_ok(self) -> bool:
        """This node's disk is there and writable (a node lost with its disk is not)."""
        probe = self.paths["root"] / f".probe.{os.getpid()}"
        try:
            probe.write_text("ok")
            ok = probe.read_text() == "ok" and self.paths["renders"].is_dir()
            probe.unlink()
            return ok
        except OSError:
            return False

    def progress(self) -> dict:
        """Finished trajectories per the progress logs on this node's disk."""
        n = sum(len(read_progress(pl.parent))
                for pl in self.paths["renders"].glob("*/*/*/progress.log"))
        return {"node": self.node, "finished": n, "units": self.units_done}

    def _upload_argv(self) -> list[str]:
        return [sys.executable, "-m", "stages.cluster.uploader", "--params", str(self.params),
                "--renders", str(self.paths["renders"]), "--snapshots",
                str(self.paths["snapshots"]), "--node", self.node]

    def deliver_command(self) -> str:
        """The command that delivers what this node still holds (from this node)."""
        return " ".join([*self._upload_argv(), "--once"])

    def _start_uploader(self) -> None:
        from .upload_supervisor import Supervisor

        if self.uploader is not None and not self.uploader.gave_up:
            self.uploader.stop()
        ucfg = self.cfg.upload
        self.uploader = Supervisor(
            self._upload_argv(), dict(os.environ), self.paths["root"] / "uploader.log",
            self.paths["root"] / "uploader.json",
            backoff_s=min(ucfg.restart_backoff_s, ucfg.backoff_max_s),
            backoff_max_s=ucfg.backoff_max_s, poison_after=ucfg.poison_after,
            stable_s=ucfg.stable_s, note=self.log).start()

    def _unit(self, ls: dict, delivered: set) -> Any:
        if self.job.unit_kind != "level":
            make = unit_factory(self.job.unit_kind)
            return make(ls, self.cfg, self.paths["renders"], delivered, **self.job.unit_options)
        import pandas as pd

        from .lifecycle import _context, stage1_units

        inv = Path(self.job.inventory)
        levels = pd.read_parquet(inv / "levels.parquet")
        chars = pd.read_parquet(inv / "characters.parquet")
        ctx = _context(self.cfg, Path(self.job.library), self.paths["trajectories"],
                       self.paths["renders"], chars, self.cfg.render)
        ctx.delivered = delivered
        units = stage1_units(ctx, levels, [(ls["level_id"], int(ls["pass_index"]))], True)
        if not units:
            raise ValueError(f"lease {ls['lease_id']}: level {ls['level_id']!r} is not in "
                             f"{inv / 'levels.parquet'}")
        return units[0]

    def run(self) -> dict:
        """Lease, run, complete until the allocator has nothing left for anyone."""
        import ray

        from .gpus import plan_slots
        from .node_runner import NodeRunner
        from .recovery import recover_all
        from .s3_store import S3Store

        alloc = ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
        ray.get(alloc.join.remote(self.node))
        store = S3Store(self.cfg.upload) if self.job.upload else None
        # recovery first: the uploader never races it for an interrupted instance's files
        recover_all(self.paths["renders"], self.log)
        if self.job.upload:
            self._start_uploader()
        units_before, made_before = self.units_done, self.trajectories
        try:
            self._lease_loop(ray, alloc, store, plan_slots(self.cfg.node), NodeRunner)
        finally:
            # whatever ended the loop, what is finished here is delivered (or listed)
            report = self._finish_uploads()
        return {"node": self.node, "units": self.units_done - units_before,
                "trajectories": self.trajectories - made_before, "starts": self.starts,
                **report, **self.progress()}

    def _lease_loop(self, ray: Any, alloc: Any, store: Any, slots: list, runner_cls: Any
                    ) -> None:
        period = max(0.2, self.cfg.cluster.lease_s / 3)
        renders = self.paths["renders"]
        while True:
            leases = []
            for _ in slots:
                ls = ray.get(alloc.lease.remote(self.node))
                if ls is None:
                    break
                leases.append(ls)
            if not leases:
                st = ray.get(alloc.state.remote())
                if st["finished"]:
                    break
                time.sleep(self.job.poll_s)
                continue
            delivered = self._delivered(store, [x["level_id"] for x in leases])
            # what this disk already holds (finished, not delivered yet) is not made again
            have = delivered | set(finished(renders))
            units = [self._unit(ls, have) for ls in leases]
            self.log(f"leased {[u.unit_id for u in units]}")
            with _Renewer(alloc, self.node, leases, period):
                runner = runner_cls(self.cfg.node, self.node, self.log, slots=slots,
                                    limits=self.limits)
                runner.run(units)
            for ls, unit in zip(leases, units, strict=True):
                n = made_here(unit, renders, have)
                ray.get(alloc.complete.remote(ls["lease_id"], self.node, n))
                self.trajectories += n
            self.units_done += len(leases)

    def _delivered(self, store: Any, level_ids: list[str]) -> set[tuple[str, str, str]]:
        """What the store holds of these levels. A store that does not answer stops neither
        the node nor the run: the units run on what is known (delivered as last read, and what
        this disk finished), their trajectories wait on this disk for the uploader (the disk
        monitor drains the node before the disk fills), and a copy the store already had is
        found by delivery-exactly-once and never written twice."""
        from .s3_store import StoreUnreachable

        if store is None:
            return set()
        try:
            got = delivered_in_store(store, self.cfg.upload.prefix, level_ids)
        except StoreUnreachable as exc:
            self.log(f"store unreachable ({exc}); running {level_ids} on what this node knows")
            return set(self.delivered_seen)
        self.delivered_seen |= got
        return got

    def _finish_uploads(self, timeout_s: float | None = None) -> dict:
        """Wait until the uploader delivered everything finished here (or gave up; at most
        ``upload.end_wait_s``), then stop it. Never raises: what is still local is returned,
        with why and the command that delivers it."""
        if self.uploader is None:
            return {}
        timeout_s = self.cfg.upload.end_wait_s if timeout_s is None else timeout_s
        renders = self.paths["renders"]
        deadline = time.monotonic() + timeout_s
        while (time.monotonic() < deadline and not self.uploader.gave_up
               and eligible(renders, 0.0)):
            time.sleep(0.2)
        self.uploader.stop()
        st = self.uploader.state()
        left = [d.relative_to(renders).as_posix() for d, _ in eligible(renders, 0.0)]
        out: dict[str, Any] = {"uploader": st}
        if left:
            why = (f"uploader {st['status']}: {st['error']}" if self.uploader.gave_up
                   else f"not delivered within {timeout_s:.0f} s (see "
                   f"{self.paths['root'] / 'uploader.log'})")
            out.update(undelivered=left, why=why, deliver_with=self.deliver_command())
            self.log(f"{len(left)} finished trajectories still local: {why}; deliver with: "
                     f"{self.deliver_command()}")
        return out
