"""The Ray executor (DESIGN §6, paper §5.1): one node runner per Ray node, fed by the allocator.

Every wmforge node advertises one custom resource ``wmforge_node_<id>`` (and its GPUs). The
driver (:func:`run_cluster`) finds those nodes, creates the allocator (a detached named actor,
:mod:`stages.cluster.allocator_actor`) and starts one :class:`NodeRunnerService` actor on each,
pinned with ``NodeAffinitySchedulingStrategy(soft=False)`` so that it dies with its node. The
actor leases units from the allocator (one per slot), runs them with the unchanged
:class:`~stages.cluster.node_runner.NodeRunner` (its slots stay subprocesses of the actor),
renews its leases while they run and completes them after; its uploader is a process of its own.
A node that dies takes its leases with it: the driver removes it from the allocator (its levels
move to the others, its units are leased again), counts what it had finished but not delivered
(lost with its disk) and the units are made again elsewhere; nothing delivered is made again
(delivered trajectories are read from the store before each unit).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..config import WmforgeConfig
from ..core.progress import read_progress
from .allocator_actor import ACTOR_NAME, NAMESPACE, get_allocator
from .recovery import level_parts
from .uploader import COMPLETION

NODE_RES = "wmforge_node_"
RUNNER_PREFIX = "wmforge-node-"


def node_resource(node: str) -> str:
    return f"{NODE_RES}{node}"


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
    """(scene/level, traj, render key) of every trajectory with a completion object."""
    out: set[tuple[str, str, str]] = set()
    for lid in level_ids:
        scene, level = level_parts(lid)
        base = f"{prefix.strip('/')}/{scene}/{level}/"
        for key in store.list_keys(base):
            if key.endswith("/" + COMPLETION):
                rec = json.loads(store.get_bytes(key))
                out.add((f"{scene}/{level}", rec["trajectory"], rec["render_key"]))
    return out


def finished_not_delivered(renders: Path, store: Any, prefix: str) -> list[str]:
    """Trajectories a node finished (progress lines) with no completion object in the store."""
    keys = set(store.list_keys(prefix.strip("/") + "/"))
    lost = []
    for prog in sorted(renders.glob("*/*/*/progress.log")):
        inst = prog.parent
        rel = inst.relative_to(renders).as_posix()
        for traj in read_progress(inst):
            if f"{prefix.strip('/')}/{rel}/{traj}/{COMPLETION}" not in keys:
                lost.append(f"{rel}/{traj}")
    return lost


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
        self.uploader: subprocess.Popen | None = None
        self.units_done = 0
        self.trajectories = 0

    def log(self, msg: str) -> None:
        with open(self.log_path, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {msg}\n")

    def ping(self) -> int:
        return os.getpid()

    def progress(self) -> dict:
        """Finished trajectories per the progress logs on this node's disk."""
        n = sum(len(read_progress(pl.parent))
                for pl in self.paths["renders"].glob("*/*/*/progress.log"))
        return {"node": self.node, "finished": n, "units": self.units_done}

    def _start_uploader(self) -> None:
        from .lifetimes import spawn_group

        argv = [sys.executable, "-m", "stages.cluster.uploader", "--params", str(self.params),
                "--renders", str(self.paths["renders"]), "--snapshots",
                str(self.paths["snapshots"]), "--node", self.node]
        self.uploader = spawn_group(argv, dict(os.environ), self.paths["root"] / "uploader.log")

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
        if self.job.upload:
            self._start_uploader()
        recover_all(self.paths["renders"], self.log)
        slots = plan_slots(self.cfg.node)
        period = max(0.2, self.cfg.cluster.lease_s / 3)
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
            delivered = (delivered_in_store(store, self.cfg.upload.prefix,
                                            [x["level_id"] for x in leases])
                         if store is not None else set())
            units = [self._unit(ls, delivered) for ls in leases]
            self.log(f"leased {[u.unit_id for u in units]}")
            with _Renewer(alloc, self.node, leases, period):
                runner = NodeRunner(self.cfg.node, self.node, self.log, slots=slots)
                runner.run(units)
            for ls, unit in zip(leases, units, strict=True):
                # trajectories this unit made here (the stand-in: its progress lines; a level
                # unit: the trajectories its renders cover)
                n = len(getattr(unit, "finished", None) or getattr(unit, "wanted", []))
                ray.get(alloc.complete.remote(ls["lease_id"], self.node, n))
                self.trajectories += n
            self.units_done += len(leases)
        self._finish_uploads()
        return {"node": self.node, "units": self.units_done, "trajectories": self.trajectories,
                **self.progress()}

    def _finish_uploads(self, timeout_s: float = 600.0) -> None:
        """Wait until the uploader delivered everything finished here, then stop it."""
        from .uploader import eligible

        if self.uploader is None:
            return
        deadline = time.monotonic() + timeout_s
        while (time.monotonic() < deadline and self.uploader.poll() is None
               and eligible(self.paths["renders"], 0.0)):
            time.sleep(0.2)
        if self.uploader.poll() is None:
            os.killpg(self.uploader.pid, signal.SIGTERM)
            self.uploader.wait(timeout=30)
        elif self.uploader.returncode:
            raise RuntimeError(f"node {self.node}: uploader exited {self.uploader.returncode}: "
                               f"see {self.paths['root'] / 'uploader.log'}")


class MonitorService:
    """The monitors of one node, as an actor of their own (separate from the runner)."""

    def __init__(self, node: str, job: NodeJob):
        self.node, self.job = node, job
        self.paths = node_paths(job.work_root, node)
        self.rounds: list[dict] = []
        self._stop = threading.Event()

    def round(self) -> dict:
        import ray

        from .monitors import monitor_once

        alloc = ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
        self.paths["work"].mkdir(parents=True, exist_ok=True)
        r = monitor_once(self.node, self.job.cfg.monitor, self.paths["work"],
                         self.paths["renders"], alloc, call=ray.get)
        self.rounds = (self.rounds + [r])[-20:]
        return r

    def loop(self) -> int:
        n = 0
        while not self._stop.wait(0 if n == 0 else self.job.cfg.monitor.interval_s):
            self.round()
            n += 1
        return n

    def stop(self) -> None:
        self._stop.set()


def wmforge_nodes() -> dict[str, str]:
    """Live Ray nodes that advertise ``wmforge_node_<id>``: id → Ray node id."""
    import ray

    out = {}
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        for res in n.get("Resources", {}):
            if res.startswith(NODE_RES):
                out[res[len(NODE_RES):]] = n["NodeID"]
    return out


def run_cluster(job: NodeJob, pools_rows: list[dict], log: Callable[[str], Any] = print
                ) -> dict:
    """Drive one run over every wmforge node of the connected Ray cluster; the summary."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .s3_store import S3Store

    cfg = job.cfg
    # on the head node: removing a worker node must not take the allocator with it
    head = next((n["NodeID"] for n in ray.nodes() if n.get("Alive")
                 and "node:__internal_head__" in n.get("Resources", {})), None)
    alloc = get_allocator(cfg.cluster.allocator_state, pools_rows, cfg.cluster.passes,
                          cfg.seed, cfg.cluster.lease_s, cfg.cluster.allocator_http_port,
                          node_id=head)
    ray.get(alloc.ping.remote())
    nodes = wmforge_nodes()
    for name in nodes:  # a run after `cluster down` (which drained every node) resumes
        ray.get(alloc.undrain.remote(name, ("cluster_down",)))
    if not nodes:
        raise RuntimeError("no Ray node advertises a wmforge_node_<id> resource: start nodes "
                           "with `wmforge cluster up --address HOST:PORT --node ID`")
    log(f"cluster: {len(nodes)} node(s) {sorted(nodes)}")
    Actor: Any = ray.remote(NodeRunnerService)  # noqa: N806 - a class
    Mon: Any = ray.remote(MonitorService)  # noqa: N806 - a class
    refs: dict[Any, str] = {}
    monitors, actors = [], []
    for name, nid in sorted(nodes.items()):
        pin = NodeAffinitySchedulingStrategy(nid, soft=False)
        actor = Actor.options(name=f"{RUNNER_PREFIX}{name}", namespace=NAMESPACE, num_cpus=0,
                              max_restarts=0, scheduling_strategy=pin).remote(name, job)
        refs[actor.run.remote()] = name
        actors.append(actor)
        if job.monitor:
            mon = Mon.options(name=f"wmforge-monitor-{name}", namespace=NAMESPACE, num_cpus=0,
                              max_restarts=0, max_concurrency=2,
                              scheduling_strategy=pin).remote(name, job)
            mon.loop.remote()
            monitors.append(mon)
    results: dict[str, dict] = {}
    by_name = dict(zip(sorted(nodes), actors, strict=True))
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1)
        name = refs.pop(ready[0])
        try:
            results[name] = ray.get(ready[0])
            log(f"cluster: node {name} finished: {results[name]}")
        except ray.exceptions.RayTaskError as exc:  # a bug or a bad setting: stop everything
            for a in [*actors, *monitors]:
                ray.kill(a, no_restart=True)
            raise RuntimeError(f"node {name}: its runner failed: {exc}") from None
        except (ray.exceptions.RayActorError, ray.exceptions.NodeDiedError,
                ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError) as exc:
            moved = ray.get(alloc.leave.remote(name))
            lost: list[str] = []
            if job.upload:
                lost = finished_not_delivered(node_paths(job.work_root, name)["renders"],
                                              S3Store(cfg.upload), cfg.upload.prefix)
            ray.get(alloc.report_lost.remote(name, len(lost)))
            # units it completed before its uploads were delivered go back (a re-run makes
            # only what the store lacks); nodes that already stopped take them up again
            reopened = ray.get(alloc.reopen.remote(
                sorted(set(moved) | {"/".join(p.split("/")[:2]) for p in lost})))
            results[name] = {"node": name, "died": type(exc).__name__, "lost": lost,
                             "levels_moved": moved, "units_reopened": reopened}
            log(f"cluster: node {name} died ({type(exc).__name__}); {len(moved)} levels moved "
                f"to the others; {len(lost)} finished trajectories lost with its disk, made "
                f"again elsewhere; {len(reopened)} completed units reopened")
            if not ray.get(alloc.state.remote())["finished"]:
                running = set(refs.values())
                for other, actor in by_name.items():
                    if other not in running and "died" not in results.get(other, {"died": 1}):
                        log(f"cluster: node {other} runs again for the reopened work")
                        refs[actor.run.remote()] = other
    for mon in monitors:
        with contextlib.suppress(Exception):  # a monitor of a dead node is gone with it
            ray.get(mon.stop.remote(), timeout=10)
            ray.kill(mon)
    state = ray.get(alloc.state.remote())
    return {"nodes": results, "allocator": state}
