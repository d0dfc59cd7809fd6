"""What a simulated run records: the failures it injects, the statistics of its measuring
window, and the finished run as its figures read it (:class:`RunRecord`). The model
(:mod:`.model`) fills them in and hands the finished run to :mod:`.figures`, which imports only
this module: the two do not import each other."""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import SimConfig
from .profiles import CostProfile

HOUR = 3600.0
WEEK = 168 * HOUR


@dataclass
class Failure:
    kind: str  # node_loss | gpu_lost
    node: str
    at_s: float
    units_in_flight: int = 0
    slot_s_lost: float = 0.0  # slot time since each slot's last finished trajectory
    backlog_min_lost: float = 0.0  # finished five-view minutes not yet uploaded (lost disk)
    levels_moved: int = 0
    recovered_at_s: float = -1.0  # every unit it had in flight completed again elsewhere
    _pending: set = field(default_factory=set, repr=False)


@dataclass
class Stats:
    window: tuple[float, float]
    minutes: float = 0.0  # five-view minutes completed inside the window
    units: int = 0
    trajectories_failed: int = 0
    loads: int = 0
    cold_loads: int = 0
    disk_drains: int = 0  # nodes drained because their disk filled (uploads lagging)
    slot_s: dict[str, float] = field(default_factory=lambda: {
        "render": 0.0, "load": 0.0, "stage1": 0.0, "stalled": 0.0, "down": 0.0})
    completions: list[tuple[float, str, int]] = field(default_factory=list)  # (t, node, traj)

    def add(self, kind: str, a: float, b: float, times: int = 1) -> None:
        lo, hi = self.window
        self.slot_s[kind] += times * max(0.0, min(b, hi) - max(a, lo))


@dataclass(frozen=True)
class RunRecord:
    """A finished run, as its figures need it (per-node and per-GPU numbers in list order)."""

    cfg: SimConfig
    prof: CostProfile  # the profile the run used (after the config's scaling)
    stats: Stats
    failures: list[Failure]
    slots: int  # per node
    slots_per_gpu: int
    duplicate_units: int  # completions of a unit already done (made twice)
    gpu_busy_s: list[float]  # per GPU (a host's shared GPUs once)
    backlog_high_mb: list[float]  # per node: the highest upload backlog
    backlog_mb: list[float]  # per node: the upload backlog at the end
    uploaded_mb: list[float]  # per node
