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

A runner whose *process* dies (a Ray worker crash) is not a lost node: the actor restarts
(``cluster.runner_restarts`` times) on its node, and the driver tells the two apart by asking
Ray whether the node (its raylet) is alive and the restarted runner whether its disk is
readable. A process crash lets its leases go and the runner leases again, keeping its levels
and what its disk holds. The uploader is supervised (:mod:`.upload_supervisor`): restarted
after a crash, given up on after a crash it cannot get past; its death never stops the run, and
the run ends with what is still local listed, with the command that delivers it.
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
from .allocator_actor import ACTOR_NAME, NAMESPACE, get_allocator, run_identity
from .recovery import finished, level_parts
from .uploader import COMPLETION, eligible, parse_delivery_key

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


def finished_not_delivered(renders: Path, store: Any, prefix: str) -> list[str]:
    """Trajectories a node finished (progress lines) that no instance delivered."""
    keys = set(store.list_keys(prefix.strip("/") + "/"))
    delivered = {(r[0], r[1], r[2], r[3]) for r in map(parse_delivery_key, keys) if r}
    lost = []
    for prog in sorted(renders.glob("*/*/*/progress.log")):
        inst = prog.parent
        rel = inst.relative_to(renders).as_posix()
        scene, level = inst.parent.parent.name, inst.parent.name
        for traj, (_, key) in read_progress(inst).items():
            if (scene, level, traj, key) in delivered:
                continue
            if f"{prefix.strip('/')}/{rel}/{traj}/{COMPLETION}" not in keys:
                lost.append(f"{rel}/{traj}")
    return lost


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
                runner = runner_cls(self.cfg.node, self.node, self.log, slots=slots)
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
            try:
                self.round()
            except Exception as exc:  # noqa: BLE001 - a round that fails (the allocator
                # restarting, a disk that vanished) must not end the monitoring: next round
                self.rounds = (self.rounds + [{"node": self.node, "error": repr(exc)}])[-20:]
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


def _node_alive(nid: str) -> bool:
    import ray

    return any(n["NodeID"] == nid and n.get("Alive") for n in ray.nodes())


def classify_death(actor: Any, nid: str, wait_s: float, dead_s: float) -> str:
    """Why a runner actor's call failed: ``process`` (its worker process died; Ray restarted
    it on the node, whose raylet is alive and whose disk the new process reads), ``node`` (the
    raylet is gone, or the disk with it), or ``runner`` (the node lives but the runner will
    not come back: its restarts are used up, Ray has reported it dead for ``dead_s``)."""
    import ray

    deadline = time.monotonic() + wait_s
    dead_since: float | None = None
    while time.monotonic() < deadline:
        if not _node_alive(nid):
            return "node"
        try:
            ray.get(actor.ping.remote(), timeout=5)
            return "process" if ray.get(actor.disk_ok.remote(), timeout=30) else "node"
        except ray.exceptions.GetTimeoutError:
            continue  # restarting
        except ray.exceptions.ActorUnschedulableError:
            return "node"  # pinned to a node that is gone
        except ray.exceptions.ActorDiedError:
            # dead for good: because its node died (Ray may not know yet) or restarts ran out
            dead_since = time.monotonic() if dead_since is None else dead_since
            if time.monotonic() - dead_since > dead_s:
                return "runner"
            time.sleep(0.5)
        except ray.exceptions.RayActorError:
            time.sleep(0.5)  # unavailable while it restarts
        except ray.exceptions.RayError:
            dead_since = time.monotonic() if dead_since is None else dead_since
            if time.monotonic() - dead_since > dead_s:
                return "runner"
            time.sleep(0.5)
    return "node" if not _node_alive(nid) else "runner"


def run_cluster(job: NodeJob, pools_rows: list[dict], log: Callable[[str], Any] = print
                ) -> dict:
    """Drive one run over every wmforge node of the connected Ray cluster; the summary."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .s3_store import S3Store, StoreUnreachable

    cfg = job.cfg
    # on the head node: removing a worker node must not take the allocator with it
    head = next((n["NodeID"] for n in ray.nodes() if n.get("Alive")
                 and "node:__internal_head__" in n.get("Resources", {})), None)
    up = cfg.upload
    identity = run_identity(pools_rows, cfg.cluster.passes, cfg.seed,
                            cfg.cluster.allocator_state,
                            f"{up.endpoint_url or 'aws'}/{up.bucket}/{up.prefix.strip('/')}")
    alloc = get_allocator(cfg.cluster.allocator_state, pools_rows, cfg.cluster.passes,
                          cfg.seed, cfg.cluster.lease_s, cfg.cluster.allocator_http_port,
                          node_id=head, identity=identity)
    ray.get(alloc.ping.remote())
    before = ray.get(alloc.state.remote())
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
                              max_restarts=cfg.cluster.runner_restarts,
                              scheduling_strategy=pin).remote(name, job)
        refs[actor.run.remote()] = name
        actors.append(actor)
        if job.monitor:
            mon = Mon.options(name=f"wmforge-monitor-{name}", namespace=NAMESPACE, num_cpus=0,
                              max_restarts=0, max_concurrency=2,
                              scheduling_strategy=pin).remote(name, job)
            mon.loop.remote()
            monitors.append(mon)
    results: dict[str, dict] = {}
    crashes: dict[str, int] = {}
    made: dict[str, dict] = {}  # node → units / trajectories over all of its runs
    by_name = dict(zip(sorted(nodes), actors, strict=True))

    def gone(name: str, why: str, label: str) -> None:
        moved = ray.get(alloc.leave.remote(name))
        lost: list[str] = []
        renders = node_paths(job.work_root, name)["renders"]
        if job.upload:
            try:
                lost = finished_not_delivered(renders, S3Store(cfg.upload), cfg.upload.prefix)
            except StoreUnreachable as exc:  # counted from its disk: every one not tombstoned
                lost = [d.relative_to(renders).as_posix() for d, _ in eligible(renders, 0.0)]
                log(f"cluster: store unreachable ({exc}): node {name}'s lost trajectories "
                    "counted from its disk")
        ray.get(alloc.report_lost.remote(name, len(lost)))
        # units it completed before its uploads were delivered go back (a re-run makes
        # only what the store lacks); nodes that already stopped take them up again
        reopened = ray.get(alloc.reopen.remote(
            sorted(set(moved) | {"/".join(p.split("/")[:2]) for p in lost})))
        results[name] = {"node": name, label: why, "lost": lost, "levels_moved": moved,
                         "units_reopened": reopened, "crashes": crashes.get(name, 0)}
        log(f"cluster: node {name} {label} ({why}); {len(moved)} levels moved to the "
            f"others; {len(lost)} finished trajectories not delivered, made again "
            f"elsewhere; {len(reopened)} completed units reopened")

    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1)
        name = refs.pop(ready[0])
        try:
            res = ray.get(ready[0])
            results[name] = {**res, "crashes": crashes.get(name, 0)}
            acc = made.setdefault(name, {"units": 0, "trajectories": 0})
            acc["units"] += int(res.get("units", 0))
            acc["trajectories"] += int(res.get("trajectories", 0))
            log(f"cluster: node {name} finished: {res}")
        except ray.exceptions.RayTaskError as exc:
            # a bug or a bad setting on that node: it leaves the run (its levels move), the
            # other nodes go on and deliver; the run reports it
            gone(name, str(exc).strip().splitlines()[-1][:300], "failed")
        except (ray.exceptions.RayActorError, ray.exceptions.NodeDiedError,
                ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError,
                ray.exceptions.ActorUnschedulableError) as exc:
            # ActorUnschedulableError: restarted, but pinned to a node that is gone
            kind = classify_death(by_name[name], nodes[name], cfg.cluster.death_check_s,
                                  cfg.cluster.dead_runner_s)
            if kind == "process":
                crashes[name] = crashes.get(name, 0) + 1
                back = ray.get(alloc.release.remote(name))
                log(f"cluster: node {name}: its runner process died ({type(exc).__name__}); "
                    f"the node is alive: runner restarted ({crashes[name]}), {len(back)} "
                    "lease(s) let go and taken again")
                refs[by_name[name].run.remote()] = name
                continue
            gone(name, type(exc).__name__ if kind == "node" else
                 f"runner process died {crashes.get(name, 0) + 1} times", "died")
        if not ray.get(alloc.state.remote())["finished"]:
            running = set(refs.values())
            for other, actor in by_name.items():
                r = results.get(other, {})
                if other not in running and r and not ({"died", "failed"} & set(r)):
                    log(f"cluster: node {other} runs again for the reopened work")
                    refs[actor.run.remote()] = other
    for mon in monitors:
        with contextlib.suppress(Exception):  # a monitor of a dead node is gone with it
            ray.get(mon.stop.remote(), timeout=10)
            ray.kill(mon)
    for actor in actors:  # each delivered (or listed) what it held: their names are free again
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
    state = ray.get(alloc.state.remote())
    undelivered = {n: {"trajectories": r["undelivered"], "why": r.get("why", ""),
                       "deliver_with": r.get("deliver_with", "")}
                   for n, r in results.items() if r.get("undelivered")}
    this_run = {"units": sum(m["units"] for m in made.values()),
                "trajectories": sum(m["trajectories"] for m in made.values()),
                "units_done_before": len(before.get("done", [])),
                "finished_before": bool(before.get("finished"))}
    return {"nodes": results, "allocator": state, "undelivered": undelivered,
            "this_run": this_run}
