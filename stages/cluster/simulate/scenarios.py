"""The runs behind the 25 × 8 report: each a named SimConfig (the report's inputs)."""

from __future__ import annotations

from dataclasses import replace

from .config import SimConfig
from .profiles import profile

EMB, UE = "embedded-h200", "unreal-paper"
# simulated hours and warm-up per profile: the embedded engine's loads take seconds (steady at
# once), Unreal's first pass loads every level cold (~2 h)
HORIZON = {EMB: (0.6, 0.1), UE: (6.0, 2.0)}
# node losses per node-week in the runs that measure what a loss costs: ~9 losses expected over
# the cluster and horizon (the answer scales the cost to 1 per node-week)
ELEVATED_LOSS_PER_WEEK = {EMB: 150.0, UE: 8.0}


def base(prof: str, seed: int, quick: bool) -> SimConfig:
    h, w = HORIZON[prof]
    c = SimConfig(profile=prof, seed=seed, horizon_h=h, warmup_h=w)
    if quick:  # the tests' report: a small cluster, same code paths
        c = replace(c, nodes=4, gpus_per_node=2, levels=60)
    return c


def scenarios(seed: int = 0, quick: bool = False) -> dict[str, SimConfig]:
    out: dict[str, SimConfig] = {}
    for prof in (EMB, UE):
        b = base(prof, seed, quick)
        p = profile(prof)
        for sched in ("pool", "uniform"):
            out[f"{prof}/main/{sched}"] = replace(b, scheduler=sched)
        top = min(p.max_slots_per_gpu, 16)
        slot_counts = [s for s in ((1, 2, 4, 8, 16) if prof == EMB else (1, 2, 3, 4))
                       if s <= top]
        for s in slot_counts:
            if s == p.default_slots_per_gpu:
                continue
            for sched in (("pool",) if prof == EMB else ("pool", "uniform")):
                out[f"{prof}/slots={s}/{sched}"] = replace(b, scheduler=sched, slots_per_gpu=s)
        # what a node loss costs (scaled to 1 per node-week in the answers)
        out[f"{prof}/node_loss/pool"] = replace(
            b, node_loss_per_week=ELEVATED_LOSS_PER_WEEK[prof] * (4 if quick else 1))
        if prof == UE:  # the other failure kinds together (one profile: the report's time)
            out[f"{prof}/faults/pool"] = replace(b, crash_p=0.01, hang_p=0.002,
                                                 gpu_lost_per_week=1.0)
    b = base(UE, seed, quick)
    for cold in (0.0, 300.0, 1200.0):  # gain of pools against the cold-load cost
        for sched in ("pool", "uniform"):
            out[f"{UE}/cold={cold:g}/{sched}"] = replace(b, scheduler=sched, cold_load_s=cold,
                                                         warm_load_s=0.4 * cold)
    for sched in ("pool", "uniform"):  # one trajectory per lease: loads weigh more
        out[f"{UE}/traj_per_lease=1/{sched}"] = replace(b, scheduler=sched,
                                                        trajectories_per_unit=1)
    # lease timeout, and node deaths never detected (only leases run out)
    for lease, det in ((300.0, 60.0), (3600.0, 60.0), (3600.0, -1.0)):
        out[f"{UE}/lease={lease:g}/detect={det:g}"] = replace(
            b, lease_s=lease, detection_s=det, node_loss_per_week=ELEVATED_LOSS_PER_WEEK[UE])
    return out
