"""The simulation's settings: one dataclass, a comment per field (``--set key=value``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass
class SimConfig:
    profile: str = "embedded-h200"  # cost profile: embedded-h200 (measured) | unreal-paper
    scheduler: str = "pool"  # pool: the real allocator policy | uniform: §5.2's naive baseline
    nodes: int = 25  # paper Table 1
    gpus_per_node: int = 8  # paper Table 1
    slots_per_gpu: int = 0  # engine processes per GPU; 0: the profile's default
    levels: int = 429  # production levels (paper Table 1)
    passes: int = 10000  # allocator passes (enough never to run dry within the horizon)
    seed: int = 0
    node_names: list[str] = field(default_factory=list)  # empty: node00, node01, ...
    level_ids: list[str] = field(default_factory=list)  # empty: made-up ids (levels of them)
    horizon_h: float = 12.0  # simulated hours
    warmup_h: float = 2.0  # figures count from here (steady state, caches filled)
    lease_s: float = 3600.0  # the allocator's lease, renewed while a unit runs (the report's
    #                          sweep: no figure depends on it while node deaths are detected)
    barrier: bool = False  # a node leases one unit per slot and waits for all (the Ray
    #                        executor's batches) instead of each slot leasing when it is free
    one_host: bool = False  # every node's slots share one host's throughput (the test
    #                         cluster: several Ray nodes on one machine)
    steady_start: bool = True  # slots start part-way through a first unit (a cluster that
    #                            has been running), not all at once at a level's load
    finite: bool = False  # run until every unit (levels x passes) is done, not to the horizon
    poll_s: float = 30.0  # a slot with nothing to lease asks again after this long
    cache_levels: int = 40  # levels a node keeps warm (least recently used evicted)
    trajectories_per_unit: int = 0  # trajectories a lease makes; 0: the profile's
    cold_load_s: float = -1.0  # override the profile's cold load (-1: keep)
    warm_load_s: float = -1.0  # override the profile's warm load (-1: keep)
    # failures
    node_loss_per_week: float = 0.0  # node losses per node-week (exponential)
    detection_s: float = 60.0  # until the cluster declares a lost node dead (Ray health check);
    #                           < 0: never (the allocator sees only its leases run out)
    node_return_s: float = 3600.0  # a lost node is replaced (empty disk) after; < 0: never
    gpu_lost_per_week: float = 0.0  # containers losing their GPUs, per node-week
    rebuild_s: float = 900.0  # container rebuild (disk and caches kept)
    crash_p: float = 0.0  # an engine crash, per trajectory attempt
    hang_p: float = 0.0  # an engine hang (silent until the stall timeout), per attempt
    stall_timeout_s: float = 600.0  # node.stall_timeout_s
    retries: int = 2  # node.retries: attempts after the first, per trajectory
    kill: list[list[float]] = field(default_factory=list)  # scripted losses [[node, at_s]]
    start_s: float = 0.0  # a node leases its first unit this long after the run starts (Ray
    # schedules its runner actor, which starts and imports; measured on the test cluster)
    # uploads and disk
    upload_mb_s: float = 125.0  # per node (1 Gbit/s)
    store_mb_s: float = 2500.0  # the object store, all nodes together (20 Gbit/s)
    upload_tick_s: float = 60.0  # the upload model's step
    disk_gb: float = 2000.0  # output disk per node
    drain_free_gb: float = 100.0  # free space below which the node is drained (monitor)

    def __post_init__(self) -> None:
        problems = []
        if self.scheduler not in ("pool", "uniform"):
            problems.append(f"scheduler {self.scheduler!r}: expected pool or uniform")
        for k in ("nodes", "gpus_per_node", "levels", "passes"):
            if getattr(self, k) < 1:
                problems.append(f"{k} {getattr(self, k)}: expected >= 1")
        if not 0 <= self.warmup_h < self.horizon_h:
            problems.append(f"warmup_h {self.warmup_h}: expected 0 <= warmup_h < horizon_h "
                            f"({self.horizon_h})")
        for k in ("crash_p", "hang_p"):
            if not 0 <= getattr(self, k) < 1:
                problems.append(f"{k} {getattr(self, k)}: expected a probability in [0, 1)")
        if self.lease_s <= 0 or self.cache_levels < 0 or self.slots_per_gpu < 0:
            problems.append("lease_s > 0, cache_levels >= 0, slots_per_gpu >= 0 expected")
        if self.node_names and len(self.node_names) != self.nodes:
            problems.append(f"node_names: {len(self.node_names)} names for nodes {self.nodes}")
        if self.level_ids and len(self.level_ids) != self.levels:
            problems.append(f"level_ids: {len(self.level_ids)} ids for levels {self.levels}")
        if problems:
            raise ValueError("simulation config: " + "; ".join(problems))


def apply_sets(cfg: SimConfig, sets: list[str]) -> SimConfig:
    """``key=value`` settings (typed by the field), e.g. ``nodes=3``; a clear error otherwise."""
    import json
    from dataclasses import asdict

    types = {f.name: f.type for f in fields(SimConfig)}
    d = asdict(cfg)
    for s in sets:
        key, sep, val = s.partition("=")
        if not sep or key not in types:
            raise ValueError(f"setting {s!r}: expected key=value with key one of "
                             f"{sorted(types)}")
        cur = d[key]
        try:
            if isinstance(cur, bool):
                if val.lower() not in ("true", "false"):
                    raise ValueError(val)
                d[key] = val.lower() == "true"
            elif isinstance(cur, int):
                d[key] = int(val)
            elif isinstance(cur, float):
                d[key] = float(val)
            elif isinstance(cur, list):
                d[key] = json.loads(val)
            else:
                d[key] = val
        except ValueError as exc:
            raise ValueError(f"setting {key}={val!r}: expected a {type(cur).__name__}") from exc
    return SimConfig(**d)
