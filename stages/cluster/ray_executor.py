"""The Ray executor (DESIGN §6, paper §5.1): the driver of a run, one node runner per Ray node,
fed by the allocator.

Every wmforge node advertises one custom resource ``wmforge_node_<id>`` (and its GPUs). The
driver (:func:`run_cluster`) finds those nodes, creates the allocator (a detached named actor,
:mod:`stages.cluster.allocator_actor`) and starts one runner actor
(:class:`~.node_service.NodeRunnerService`) and one monitor actor on each, pinned with
``NodeAffinitySchedulingStrategy(soft=False)`` so that they die with their node. A node that
dies takes its leases with it: the driver removes it from the allocator (its levels move to the
others, its units are leased again), counts what it had finished but not delivered (lost with
its disk) and the units are made again elsewhere; nothing delivered is made again.

A runner whose *process* dies (a Ray worker crash) is not a lost node: the actor restarts
(``cluster.runner_restarts`` times) on its node, and the driver tells the two apart by asking
Ray whether the node (its raylet) is alive and the restarted runner whether its disk is
readable. A process crash lets its leases go and the runner leases again, keeping its levels
and what its disk holds. An uploader's death never stops the run (see :mod:`.node_service`),
and the run ends with what is still local listed, with the command that delivers it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.progress import read_progress
from .allocator_actor import ACTOR_NAME, NAMESPACE, get_allocator, run_identity
from .node_service import (
    NodeJob,
    NodeRunnerService,
    delivered_in_store,
    made_here,
    node_paths,
    unit_factory,
)
from .uploader import COMPLETION, eligible, parse_delivery_key

# NodeJob, node_paths, unit_factory: the executor's interface, defined with the runner actor
__all__ = ["NAMESPACE", "NodeJob", "NodeRunnerService", "classify_death", "delivered_in_store",
           "finished_not_delivered", "made_here", "node_paths", "node_resource", "run_cluster",
           "unit_factory", "wmforge_nodes"]

NODE_RES = "wmforge_node_"
RUNNER_PREFIX = "wmforge-node-"


def node_resource(node: str) -> str:
    return f"{NODE_RES}{node}"


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
