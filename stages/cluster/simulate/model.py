"""The cluster model: nodes of GPUs of slots, each slot taking leases and running the §5.3
lifecycle (load, Stage I, Stage II) on a shared GPU; per-node level caches; uploads; failures.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Generator
from typing import Any

import simpy

from .config import SimConfig
from .figures import figures
from .gpu_share import SharedGPU
from .profiles import CostProfile, profile
from .records import HOUR, WEEK, Failure, RunRecord, Stats
from .schedulers import Grant, PoolLeases, UniformLeases

Proc = Generator[Any, Any, None]  # a SimPy process

class LevelCache:
    """Levels a node has loaded (least recently used evicted at ``size``)."""

    def __init__(self, size: int):
        self.size, self.lru = size, OrderedDict[str, None]()

    def __contains__(self, level: str) -> bool:
        return level in self.lru

    def touch(self, level: str) -> None:
        self.lru[level] = None
        self.lru.move_to_end(level)
        while len(self.lru) > self.size:
            self.lru.popitem(last=False)


class Node:
    def __init__(self, sim: ClusterSim, name: str, index: int):
        self.sim, self.name, self.index = sim, name, index
        c = sim.cfg
        self.gpus = sim.host_gpus or [SharedGPU(sim.env, sim.prof.fps, sim.stats.window)
                                      for _ in range(c.gpus_per_node)]
        self.cache = LevelCache(c.cache_levels)
        self.alive = True
        self.epoch = 0
        self.procs: list[simpy.Process] = []
        self.current: dict[int, tuple[Grant, float]] = {}  # slot → (grant, started)
        self.backlog_mb = 0.0
        self.backlog_high_mb = 0.0
        self.uploaded_mb = 0.0
        self.drained = False
        self.down_since = 0.0
        self.phase: dict[int, tuple[str, float]] = {}  # slot → (what it does, since)
        self.rendering: dict[int, tuple[SharedGPU, simpy.Event, float, float, float]] = {}
        self.rng = random.Random(f"{c.seed}\0slots\0{name}")

    def start(self) -> None:
        env = self.sim.env
        if self.sim.cfg.barrier:
            self.procs = [env.process(self.batch_loop())]
        else:
            self.procs = [env.process(self.slot_loop(s)) for s in range(self.sim.slots)]

    def batch_loop(self) -> Proc:
        """The Ray executor's node: lease one unit per slot, run them, wait for all."""
        sim, env = self.sim, self.sim.env
        try:
            if env.now < sim.cfg.start_s:
                yield env.timeout(sim.cfg.start_s - env.now)
            while True:
                grants = []
                for _ in range(sim.slots):
                    g = sim.sched.lease(self.name, env.now)
                    if g is None:
                        break
                    grants.append(g)
                if not grants:
                    yield env.timeout(sim.cfg.poll_s)
                    continue
                kids = [env.process(self.slot_unit(s, g)) for s, g in enumerate(grants)]
                self.procs = [self.procs[0], *kids]
                yield env.all_of(kids)
        except simpy.Interrupt:
            return

    def slot_unit(self, slot: int, g: Grant) -> Proc:
        env = self.sim.env
        try:
            self.current[slot] = (g, env.now)
            yield from self.run_unit(slot, g, self.gpus[slot // self.sim.slots_per_gpu])
            del self.current[slot]
        except simpy.Interrupt:
            self.close_phases()

    def slot_loop(self, slot: int) -> Proc:
        sim, env = self.sim, self.sim.env
        gpu = self.gpus[slot // sim.slots_per_gpu]
        # a cluster that has been running: each slot starts part-way through its first unit
        resume = self.rng.random() if (sim.cfg.steady_start and env.now == 0) else 0.0
        try:
            if env.now < sim.cfg.start_s:
                yield env.timeout(sim.cfg.start_s - env.now)
            while True:
                g = sim.sched.lease(self.name, env.now)
                if g is None:
                    yield env.timeout(sim.cfg.poll_s)
                    continue
                self.current[slot] = (g, env.now)
                yield from self.run_unit(slot, g, gpu, resume)
                resume = 0.0
                del self.current[slot]
        except simpy.Interrupt:
            self.close_phases()
            return

    def _begin(self, slot: int, kind: str) -> None:
        self.phase[slot] = (kind, self.sim.env.now)

    def _end(self, slot: int) -> None:
        kind, since = self.phase.pop(slot)
        self.sim.stats.add(kind, since, self.sim.env.now)

    def run_unit(self, slot: int, g: Grant, gpu: SharedGPU, resume: float = 0.0) -> Proc:
        """Load, Stage I, Stage II of one lease; ``resume`` > 0: the slot was already that
        far through the unit's Stage II when the simulation starts."""
        sim, env, prof, st = self.sim, self.sim.env, self.sim.prof, self.sim.stats
        n = prof.trajectories_per_unit
        if not resume:
            warm = g.level_id in self.cache
            self._begin(slot, "load")
            yield env.timeout(prof.warm_load_s if warm else prof.cold_load_s)
            self._end(slot)
            if st.window[0] <= env.now <= st.window[1]:
                st.loads += 1
                st.cold_loads += 0 if warm else 1
            self._begin(slot, "stage1")
            yield env.timeout(prof.stage1_s_per_frame * prof.frames_per_trajectory * n)
            self._end(slot)
        self.cache.touch(g.level_id)
        skip = resume * n  # trajectories (and a fraction of one) already rendered
        # Stage II, trajectory by trajectory: a crash loses part of one and costs a warm reload
        # (fresh process); a hang costs the stall timeout first; retries, then the trajectory
        # is a failure row
        made, frames = int(skip), float(prof.frames_per_trajectory)
        fac = prof.level_factor.get(g.level_id, 1.0)  # this level's render cost (1: average)
        for i in range(int(skip), n):
            left = 1.0 - (skip - int(skip)) if i == int(skip) else 1.0
            for _attempt in range(sim.cfg.retries + 1):
                u = self.rng.random()
                bad = u < sim.cfg.crash_p + sim.cfg.hang_p
                part = frames * (self.rng.random() if bad else left)
                self._begin(slot, "render")
                t_r = env.now
                ev = gpu.render(part * fac)
                self.rendering[slot] = (gpu, ev, 0.0 if bad else part * fac, t_r, fac)
                left = 1.0
                try:
                    yield ev
                except simpy.Interrupt:
                    gpu.cancel(ev)
                    raise
                finally:
                    self.rendering.pop(slot, None)
                self._end(slot)
                if not bad:
                    made += 1
                    sim.trajectory_done(self, t_r, part / frames)
                    self.current[slot] = (g, env.now)  # lost work restarts here
                    break
                self._begin(slot, "stalled")
                if u >= sim.cfg.crash_p:  # a hang: silent until the stall timeout
                    yield env.timeout(sim.cfg.stall_timeout_s)
                yield env.timeout(prof.warm_load_s)
                self._end(slot)
            else:
                st.trajectories_failed += 1
        sim.unit_done(self, g, made)

    def close_phases(self) -> None:
        for slot in list(self.phase):
            self._end(slot)

    def credit_in_flight(self) -> None:
        """At the horizon: the rendered part of each good trajectory still on a GPU."""
        for gpu, ev, planned, t_r, fac in self.rendering.values():
            if planned > 0:
                gpu.flush()
                done = (planned - gpu.jobs.get(ev, 0.0)) / fac
                self.sim.trajectory_done(self, t_r, done / self.sim.prof.frames_per_trajectory,
                                         queue=False)


class ClusterSim:
    def __init__(self, cfg: SimConfig, prof: CostProfile | None = None):
        base = prof or profile(cfg.profile)
        kw: dict[str, object] = {}
        if cfg.trajectories_per_unit:
            kw["trajectories_per_unit"] = cfg.trajectories_per_unit
        if cfg.cold_load_s >= 0:
            kw["cold_load_s"] = cfg.cold_load_s
        if cfg.warm_load_s >= 0:
            kw["warm_load_s"] = cfg.warm_load_s
        self.prof = base.scaled(**kw) if kw else base
        self.cfg = cfg
        self.slots_per_gpu = cfg.slots_per_gpu or self.prof.default_slots_per_gpu
        self.slots = cfg.gpus_per_node * self.slots_per_gpu
        if self.slots_per_gpu > self.prof.max_slots_per_gpu:
            raise ValueError(f"slots_per_gpu {self.slots_per_gpu}: profile {self.prof.name} "
                             f"fits at most {self.prof.max_slots_per_gpu} per GPU "
                             f"({self.prof.gpu_mem_gb} GB / {self.prof.slot_gpu_mem_gb} GB)")
        self.env = simpy.Environment()
        self.stats = Stats((cfg.warmup_h * HOUR, cfg.horizon_h * HOUR))
        names = list(cfg.node_names) or [f"node{i:02d}" for i in range(cfg.nodes)]
        levels = list(cfg.level_ids) or [f"scene{i % 37:02d}/level{i:03d}"
                                         for i in range(cfg.levels)]
        self.sched: PoolLeases | UniformLeases = (
            PoolLeases(levels, names, cfg.passes, cfg.seed, cfg.lease_s)
            if cfg.scheduler == "pool" else UniformLeases(levels, names, cfg.seed))
        self.host_gpus = ([SharedGPU(self.env, self.prof.fps, self.stats.window)
                           for _ in range(cfg.gpus_per_node)] if cfg.one_host else [])
        self.all_done = self.env.event()
        self.nodes = [Node(self, n, i) for i, n in enumerate(names)]
        self.failures: list[Failure] = []
        self.rng = random.Random(f"{cfg.seed}\0failures")

    # ------------------------------------------------------------------ events

    def trajectory_done(self, node: Node, t_start: float, fraction: float,
                        queue: bool = True) -> None:
        """A trajectory's videos are on the node's disk: queued for upload, and counted for
        the part of its render time inside the window (smooth figures over short windows)."""
        mins = self.prof.five_view_min_per_trajectory * fraction
        now = self.env.now
        lo, hi = self.stats.window
        if now > t_start:
            self.stats.minutes += mins * max(0.0, min(now, hi) - max(t_start, lo)) / (
                now - t_start)
        if not queue:
            return
        node.backlog_mb += mins * self.prof.output_mb_per_five_view_min
        node.backlog_high_mb = max(node.backlog_high_mb, node.backlog_mb)
        self._check_disk(node)

    def unit_done(self, node: Node, g: Grant, made: int) -> None:
        now = self.env.now
        self.sched.complete(g, node.name, now, made)
        if self.stats.window[0] <= now <= self.stats.window[1]:
            self.stats.units += 1
        self.stats.completions.append((now, node.name, made))
        if (self.cfg.finite and isinstance(self.sched, PoolLeases)
                and self.sched.policy.finished() and not self.all_done.triggered):
            self.all_done.succeed()
        for f in self.failures:
            if f._pending and (g.level_id, g.pass_index) in f._pending:
                f._pending.discard((g.level_id, g.pass_index))
                if not f._pending:
                    f.recovered_at_s = now

    def node_down(self, node: Node, kind: str) -> None:
        env, now = self.env, self.env.now
        f = Failure(kind, node.name, now, units_in_flight=len(node.current))
        for g, started in node.current.values():
            f.slot_s_lost += now - started
            f._pending.add((g.level_id, g.pass_index))
            self.sched.abandon(g)
        if kind == "node_loss":
            f.backlog_min_lost = node.backlog_mb / self.prof.output_mb_per_five_view_min
            node.backlog_mb = 0.0
            node.cache = LevelCache(self.cfg.cache_levels)
        node.alive = False
        node.down_since = now
        node.epoch += 1
        for p in node.procs:
            if p.is_alive:
                p.interrupt()
        node.current.clear()
        self.sched.node_died(node.name, now)
        self.failures.append(f)
        back = self.cfg.node_return_s if kind == "node_loss" else self.cfg.rebuild_s
        env.process(self._detect_and_return(node, node.epoch, f, back))

    def _detect_and_return(self, node: Node, epoch: int, f: Failure, back: float) -> Proc:
        env = self.env
        if self.cfg.detection_s < 0:  # never declared dead: only its leases run out
            if back < 0:
                return
            yield env.timeout(back)
        elif back < 0 or back > self.cfg.detection_s:
            yield env.timeout(self.cfg.detection_s)
            f.levels_moved = len(self.sched.leave(node.name, env.now))
            if back < 0:
                return
            yield env.timeout(back - self.cfg.detection_s)
        else:
            yield env.timeout(back)
        if node.epoch != epoch:
            return
        self.stats.add("down", node.down_since, env.now, self.slots)
        node.alive = True
        self.sched.join(node.name, env.now)
        node.start()

    def _failures(self, node: Node, kind: str, per_week: float) -> Proc:
        if per_week <= 0:
            return
        rng = random.Random(f"{self.cfg.seed}\0{kind}\0{node.name}")
        while True:
            yield self.env.timeout(rng.expovariate(per_week / WEEK))
            if node.alive:
                self.node_down(node, kind)

    def _scripted(self, node: Node, at_s: float) -> Proc:
        yield self.env.timeout(at_s)
        if node.alive:
            self.node_down(node, "node_loss")

    def _uploads(self) -> Proc:
        c, env = self.cfg, self.env
        while True:
            yield env.timeout(c.upload_tick_s)
            busy = [n for n in self.nodes if n.alive and n.backlog_mb > 0]
            if busy:
                rate = min(c.upload_mb_s, c.store_mb_s / len(busy))
                for n in busy:
                    sent = min(n.backlog_mb, rate * c.upload_tick_s)
                    n.backlog_mb -= sent
                    n.uploaded_mb += sent
            for n in self.nodes:
                self._check_disk(n)

    def _check_disk(self, n: Node) -> None:
        """The disk monitor: drain a node whose outputs fill its disk (no new lease; what its
        slots hold still lands), undrain once uploads have freed a tenth of it."""
        c = self.cfg
        full = (c.disk_gb - c.drain_free_gb) * 1000.0
        if not n.drained and n.backlog_mb >= full:
            n.drained = True
            self.stats.disk_drains += 1
            self.sched.drain(n.name, "disk")
        elif n.drained and n.backlog_mb < 0.9 * full:
            n.drained = False
            self.sched.undrain(n.name)

    # ------------------------------------------------------------------ run

    def run(self) -> dict:
        env, c = self.env, self.cfg
        for n in self.nodes:
            n.start()
            env.process(self._failures(n, "node_loss", c.node_loss_per_week))
            env.process(self._failures(n, "gpu_lost", c.gpu_lost_per_week))
        for idx, at in c.kill:
            env.process(self._scripted(self.nodes[int(idx)], float(at)))
        env.process(self._uploads())
        env.run(until=self.all_done if c.finite else c.horizon_h * HOUR)
        for n in self.nodes:
            n.credit_in_flight()
            n.close_phases()
            if not n.alive:
                self.stats.add("down", n.down_since, env.now, self.slots)
        for g in {id(g): g for n in self.nodes for g in n.gpus}.values():
            g.flush()
        return self.figures()

    def figures(self) -> dict:
        gpus = {id(g): g for n in self.nodes for g in n.gpus}.values()  # a host's shared once
        return figures(RunRecord(
            cfg=self.cfg, prof=self.prof, stats=self.stats, failures=self.failures,
            slots=self.slots, slots_per_gpu=self.slots_per_gpu,
            duplicate_units=self.sched.duplicates, gpu_busy_s=[g.busy_s for g in gpus],
            backlog_high_mb=[n.backlog_high_mb for n in self.nodes],
            backlog_mb=[n.backlog_mb for n in self.nodes],
            uploaded_mb=[n.uploaded_mb for n in self.nodes]))
