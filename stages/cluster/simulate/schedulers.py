"""How the simulated nodes get work: the real allocator policy, or the paper's naive baseline.

:class:`PoolLeases` is a thin adapter around :class:`AllocatorPolicy` (imported as is): it
passes the simulated clock and renews live leases lazily — a lease is renewed just before the
policy would see it expire, which is what the node's renewer thread does every ``lease_s / 3``
as far as the policy can tell, at a fraction of the calls. A dead node renews nothing.
:class:`UniformLeases` is §5.2's naive scheduler: every slot draws a level uniformly from the
global list; it binds nothing, so it has no pools to move.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from ..allocator_policy import AllocatorPolicy


@dataclass
class Grant:
    lease_id: str
    level_id: str
    pass_index: int


class PoolLeases:
    def __init__(self, levels: list[str], nodes: list[str], passes: int, seed: int,
                 lease_s: float):
        self.policy = AllocatorPolicy(list(levels), list(nodes), passes, seed, lease_s)
        self.lease_s = lease_s
        self._due: list[tuple[float, str]] = []  # (expires, lease_id) of live holders
        self._holder: dict[str, str] = {}  # lease_id → node, while its holder renews
        self.duplicates = 0  # completions of a unit already done (made twice)

    def _renew_due(self, now: float) -> None:
        pol = self.policy
        while self._due and self._due[0][0] <= now:
            exp, lid = heapq.heappop(self._due)
            node = self._holder.get(lid)
            ls = pol.leases.get(lid)
            if node is None or ls is None or ls.expires != exp:
                continue
            t = exp - 1e-6  # just before it would expire: expires no other live lease
            pol.renew(lid, node, t)
            heapq.heappush(self._due, (pol.leases[lid].expires, lid))

    def lease(self, node: str, now: float) -> Grant | None:
        self._renew_due(now)
        ls = self.policy.lease(node, now)
        if ls is None:
            return None
        self._holder[ls.lease_id] = node
        heapq.heappush(self._due, (ls.expires, ls.lease_id))
        return Grant(ls.lease_id, ls.level_id, ls.pass_index)

    def complete(self, g: Grant, node: str, now: float, trajectories: int) -> bool:
        self._renew_due(now)
        self._holder.pop(g.lease_id, None)
        first = self.policy.complete(g.lease_id, node, now, trajectories)
        if not first:
            self.duplicates += 1
        return first

    def node_died(self, node: str, now: float) -> None:
        """The node's renewer stops: its leases run out ``lease_s`` after the last renewal."""
        self._renew_due(now)
        for lid, n in list(self._holder.items()):
            if n == node:
                del self._holder[lid]

    def abandon(self, g: Grant) -> None:
        """The holder gave the unit up (its slot died); the lease runs out on its own."""
        self._holder.pop(g.lease_id, None)

    def leave(self, node: str, now: float) -> list[str]:
        self._renew_due(now)
        return self.policy.leave(node, now)

    def join(self, node: str, now: float) -> list[str]:
        self._renew_due(now)
        return self.policy.join(node)

    def drain(self, node: str, reason: str) -> None:
        self.policy.drain(node, reason)

    def undrain(self, node: str) -> None:
        self.policy.undrain(node)

    def pool_sizes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.policy.owner.values():
            out[n] = out.get(n, 0) + 1
        return out


class UniformLeases:
    """Each lease a level drawn uniformly from the global list (with replacement)."""

    def __init__(self, levels: list[str], nodes: list[str], seed: int):
        self.levels = list(levels)
        self.rng = random.Random(f"uniform\0{seed}")
        self.drained: set[str] = set()
        self.dead: set[str] = set()
        self.seq = 0
        self.duplicates = 0

    def lease(self, node: str, now: float) -> Grant | None:
        if node in self.drained or node in self.dead:
            return None
        self.seq += 1
        return Grant(f"U{self.seq:07d}", self.rng.choice(self.levels), 0)

    def complete(self, g: Grant, node: str, now: float, trajectories: int) -> bool:
        return True

    def node_died(self, node: str, now: float) -> None:
        self.dead.add(node)

    def abandon(self, g: Grant) -> None:
        pass

    def leave(self, node: str, now: float) -> list[str]:
        return []

    def join(self, node: str, now: float) -> list[str]:
        self.dead.discard(node)
        return []

    def drain(self, node: str, reason: str) -> None:
        self.drained.add(node)

    def undrain(self, node: str) -> None:
        self.drained.discard(node)

    def pool_sizes(self) -> dict[str, int]:
        return {}
