"""How many engine processes may run at once on each device, lowered on out-of-memory.

Each slot renders on a device — a GPU (its index) or, for CPU slots, the host — and every slot
also uses the host's memory. So a slot belongs to two groups: its device's (``gpu<i>`` or
``cpu``) and ``host`` (every slot of the node). Each group starts with as many running
processes allowed as it has slots. When a step ends with ``gpu_oom`` (its device's group) or
``host_oom`` (the ``host`` group) (:mod:`stages.core.device_faults`), the runner asks
:meth:`SlotLimits.on_oom`:

- if the step shared that memory with others at some point of its life (its *peak*: the most
  processes of the group alive together while it ran), the group's limit drops to half that
  peak (at least 1) and the step is retried once fewer than that many run — a retry that does
  not count against ``node.retries`` (the limit falls every time, so this ends);
- if it ran alone and still ran out, fewer slots cannot help: the failure is final.

A process starts only when each of its groups is under its limit. The limits hold for the
rest of the node's run — across the Ray service's lease batches too, which pass one
``SlotLimits`` to each runner they build — and are shown in ``slots.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .gpus import SlotPlan

HOST = "host"


def group_of(plan: SlotPlan) -> str:
    """The device a slot renders on: ``gpu<index>`` or ``cpu``."""
    return f"gpu{plan.gpu.index}" if plan.gpu is not None else "cpu"


def oom_group(plan: SlotPlan, reason: str) -> str:
    """The group whose memory ran out: the slot's device for gpu_oom, the host for host_oom."""
    return HOST if reason == "host_oom" else group_of(plan)


@dataclass
class SlotLimits:
    """Per-group limits on running processes, and each running step's peak sharing."""

    limit: dict[str, int] = field(default_factory=dict)
    running: dict[str, set[str]] = field(default_factory=dict)  # group -> running slot names
    peak: dict[tuple[str, str], int] = field(default_factory=dict)  # (slot, group) -> peak
    members: dict[str, set[str]] = field(default_factory=dict)  # group -> its slot names

    @classmethod
    def of(cls, plans: list[SlotPlan]) -> SlotLimits:
        lim = cls()
        lim.add(plans)
        return lim

    def add(self, plans: list[SlotPlan]) -> None:
        """Count these slots in (once each: a limit already lowered stays lowered)."""
        known = {s for ss in self.members.values() for s in ss}
        for p in plans:
            if p.slot in known:
                continue
            for g in (group_of(p), HOST):
                self.members.setdefault(g, set()).add(p.slot)
                self.limit[g] = self.limit.get(g, 0) + 1
                self.running.setdefault(g, set())

    def lowered(self) -> dict[str, str]:
        """Groups whose limit fell below their slot count: ``{"gpu0": "4 -> 1"}``."""
        return {g: f"{len(self.members[g])} -> {n}" for g, n in sorted(self.limit.items())
                if n < len(self.members.get(g, ()))}

    def may_start(self, plan: SlotPlan) -> bool:
        """Whether a process may start on this slot now (each of its groups under its limit)."""
        return all(len(self.running[g]) < self.limit[g] for g in (group_of(plan), HOST))

    def started(self, plan: SlotPlan) -> None:
        for g in (group_of(plan), HOST):
            self.running[g].add(plan.slot)
            n = len(self.running[g])
            for s in self.running[g]:
                self.peak[(s, g)] = max(self.peak.get((s, g), 0), n)

    def ended(self, plan: SlotPlan) -> dict[str, int]:
        """Forget the slot's process; returns its peak sharing per group (1: it ran alone)."""
        out = {}
        for g in (group_of(plan), HOST):
            self.running[g].discard(plan.slot)
            out[g] = self.peak.pop((plan.slot, g), 1)
        return out

    def on_oom(self, plan: SlotPlan, reason: str, peaks: dict[str, int]) -> str:
        """After an out-of-memory step with these peaks: ``""`` when it is final (it ran alone
        on the memory that ran out), else a line saying how that group's limit fell (the step
        is to be retried)."""
        g = oom_group(plan, reason)
        peak = peaks.get(g, 1)
        if peak <= 1:
            return ""
        old = self.limit[g]
        self.limit[g] = max(1, min(old, peak // 2))
        now = f"{old} -> {self.limit[g]}" if self.limit[g] != old else f"stay {old}"
        return (f"{g}: {peak} processes shared it when {plan.slot} ran out of memory; running "
                f"processes {now}, the step is retried")


__all__ = ["HOST", "SlotLimits", "group_of", "oom_group"]
