"""How many of a device's slots may run engine processes at once, lowered on out-of-memory.

Slots are grouped by the device they share: a GPU (its index) or the host (CPU slots). Each
group starts with as many running processes allowed as it has slots. When a step ends with
``gpu_oom`` or ``host_oom`` (:mod:`stages.core.device_faults`), the runner asks
:meth:`SlotLimits.on_oom`:

- if the step shared its device with others at some point of its life (its *peak*: the most
  processes of its group alive together while it ran), the group's limit drops to half that
  peak (at least 1) and the step is retried once fewer than that many run — a retry that does
  not count against ``node.retries`` (the limit falls every time, so this ends);
- if it ran alone and still ran out, fewer slots cannot help: the failure is final.

The limit holds for the rest of the run (and is shown in ``slots.json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .gpus import SlotPlan


def group_of(plan: SlotPlan) -> str:
    """The device a slot renders on: ``gpu<index>`` or ``cpu``."""
    return f"gpu{plan.gpu.index}" if plan.gpu is not None else "cpu"


@dataclass
class SlotLimits:
    """Per-device limits on running processes, and each running step's peak sharing."""

    limit: dict[str, int] = field(default_factory=dict)
    running: dict[str, set[str]] = field(default_factory=dict)  # group -> running slot names
    peak: dict[str, int] = field(default_factory=dict)  # slot -> peak of its running step

    @classmethod
    def of(cls, plans: list[SlotPlan]) -> SlotLimits:
        lim = cls()
        for p in plans:
            g = group_of(p)
            lim.limit[g] = lim.limit.get(g, 0) + 1
            lim.running.setdefault(g, set())
        return lim

    def may_start(self, plan: SlotPlan) -> bool:
        """Whether a process may start on this slot now (its device is under its limit)."""
        g = group_of(plan)
        return len(self.running[g]) < self.limit[g]

    def started(self, plan: SlotPlan) -> None:
        g = group_of(plan)
        self.running[g].add(plan.slot)
        n = len(self.running[g])
        for s in self.running[g]:
            self.peak[s] = max(self.peak.get(s, 0), n)

    def ended(self, plan: SlotPlan) -> int:
        """Forget the slot's process; returns its peak sharing (1: it ran alone)."""
        self.running[group_of(plan)].discard(plan.slot)
        return self.peak.pop(plan.slot, 1)

    def on_oom(self, plan: SlotPlan, peak: int) -> str:
        """After an out-of-memory step with this peak: ``""`` when it is final (it ran alone),
        else a line saying how the device's limit fell (the step is to be retried)."""
        g = group_of(plan)
        if peak <= 1:
            return ""
        old = self.limit[g]
        self.limit[g] = max(1, min(old, peak // 2))
        now = (f"{old} -> {self.limit[g]}" if self.limit[g] != old else f"stay {old}")
        return (f"{g}: {peak} processes shared it when {plan.slot} ran out of memory; running "
                f"slots {now}, the step is retried")


__all__ = ["SlotLimits", "group_of"]
