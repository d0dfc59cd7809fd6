"""The allocator's policy (paper §5.1–5.2) as a plain class: no Ray, no I/O, time passed in.

It holds the level → node binding (from ``pools.parquet``: one persistent pool per node) and
hands out work as leases on units ``(level, pass)`` that expire unless renewed (at-least-once;
outputs are idempotent by key). A node consumes its pool pass by pass, each pass in its own
shuffled order; a node whose pool is exhausted starts its next pass at once. A node that leaves
gives its levels to the others by rendezvous hashing and a node that joins takes only the levels
it wins, so a minimal share moves; a restart from :meth:`to_dict` state never reshuffles. A
drained node (disk pressure, lost GPU, ``cluster down``) gets no new lease.

The Ray actor (:mod:`stages.cluster.allocator_actor`) wraps it; the simulator imports it as is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .pool_plan import assign, pass_order

# Schema of the allocator's state file (``cluster.allocator_state``), written by
# :mod:`.allocator_actor` from :meth:`AllocatorPolicy.to_dict`.
# Version 2: the file names the run it belongs to (``identity``: pools hash, passes, seed, the
# state file, the store; :func:`.allocator_actor.run_identity`), null before a run set it.
# Migration from version 1 (no ``identity``; the policy's keys are the same): a version-1 file
# is read when its levels, their binding to nodes, passes and seed are this run's pools, and
# written back as version 2 with this run's identity; otherwise it is refused, naming the file
# (remove it to start over, or set ``cluster.allocator_state`` to a new file). A version-1
# file that already holds an ``identity`` (written between the two versions) is checked by it.
STATE_VERSION = 2
READABLE_VERSIONS = (1, 2)


@dataclass
class Lease:
    lease_id: str
    node: str
    level_id: str
    pass_index: int
    expires: float  # wall-clock seconds
    attempt: int = 1  # 1 + how often this unit's earlier leases expired
    granted: float = 0.0  # wall-clock seconds it was handed out


@dataclass
class NodeCounts:
    leases_given: int = 0
    completed: int = 0
    expired: int = 0  # leases that ran out on this node (its unit went back)
    trajectories: int = 0  # reported by completions
    lost: int = 0  # finished here but never delivered (the node left with its disk)


EXPIRED_KEPT = 10_000  # expired leases remembered for late completions


@dataclass
class AllocatorPolicy:
    levels: list[str]
    nodes: list[str]  # live nodes, in join order
    passes: int = 1
    seed: int = 0
    lease_s: float = 120.0
    owner: dict[str, str] = field(default_factory=dict)  # level → node
    done: set[tuple[str, int]] = field(default_factory=set)
    leases: dict[str, Lease] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)  # "level#pass" → leases so far
    drained: dict[str, str] = field(default_factory=dict)  # node → reason
    counts: dict[str, NodeCounts] = field(default_factory=dict)
    seq: int = 0
    # leases that expired, kept so a late completion still counts (the last EXPIRED_KEPT)
    expired: dict[str, Lease] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.owner and self.nodes:
            self.owner = assign(self.levels, self.nodes)
        for n in self.nodes:
            self.counts.setdefault(n, NodeCounts())

    @classmethod
    def from_pools(cls, rows: list[dict], passes: int, seed: int, lease_s: float
                   ) -> AllocatorPolicy:
        """From ``pools.parquet`` rows (level_id, node, pass, position): its binding, as is."""
        owner = {str(r["level_id"]): str(r["node"]) for r in rows if int(r["pass"]) == 0}
        nodes = sorted(set(owner.values()))
        return cls(sorted(owner), nodes, passes, seed, lease_s, owner=owner)

    # -------------------------------------------------------------- membership

    def join(self, node: str) -> list[str]:
        """Add a node; returns the levels it takes (only those it wins by rendezvous)."""
        if node in self.nodes:
            return []
        self.nodes.append(node)
        self.counts.setdefault(node, NodeCounts())
        new = assign(self.levels, self.nodes)
        moved = [lv for lv in self.levels if new[lv] == node]
        for lv in moved:
            self.owner[lv] = node
        return moved

    def leave(self, node: str, now: float) -> list[str]:
        """Remove a node (gone, not drained): its levels go to the others; its leases expire
        now. Returns the levels that moved."""
        if node not in self.nodes:
            return []
        self.nodes.remove(node)
        for ls in list(self.leases.values()):
            if ls.node == node:
                ls.expires = min(ls.expires, now)
        self.expire(now)
        if not self.nodes:
            return []
        mine = [lv for lv in self.levels if self.owner.get(lv) == node]
        new = assign(mine, self.nodes)
        for lv in mine:
            self.owner[lv] = new[lv]
        return mine

    def release(self, node: str, now: float) -> list[str]:
        """Let every lease of ``node`` go now (its runner process died; the node stays and
        leases again). Returns the units that went back."""
        for ls in self.leases.values():
            if ls.node == node:
                ls.expires = min(ls.expires, now)
        return [f"{ls.level_id}#{ls.pass_index}" for ls in self.expire(now)]

    def drain(self, node: str, reason: str) -> None:
        self.drained[node] = reason

    def undrain(self, node: str, only: tuple[str, ...] = ()) -> None:
        """Lift a drain (only one for these reasons, when given: a monitor never lifts
        ``cluster down``'s)."""
        if not only or self.drained.get(node) in only:
            self.drained.pop(node, None)

    # -------------------------------------------------------------- leases

    def _busy(self) -> set[tuple[str, int]]:
        return {(ls.level_id, ls.pass_index) for ls in self.leases.values()}

    def pool(self, node: str) -> list[str]:
        return sorted(lv for lv in self.levels if self.owner.get(lv) == node)

    def lease(self, node: str, now: float) -> Lease | None:
        """The node's next unit, or None (drained, or every pass of its pool done/leased)."""
        self.expire(now)
        if node not in self.nodes:
            self.join(node)
        if node in self.drained:
            return None
        busy = self._busy()
        mine = self.pool(node)
        for p in range(max(1, self.passes)):
            for lv in pass_order(mine, node, p, self.seed):
                unit = (lv, p)
                if unit in self.done or unit in busy:
                    continue
                self.seq += 1
                uid = f"{lv}#{p}"
                self.attempts[uid] = self.attempts.get(uid, 0) + 1
                ls = Lease(f"L{self.seq:06d}", node, lv, p, now + self.lease_s,
                           self.attempts[uid], now)
                self.leases[ls.lease_id] = ls
                self.counts[node].leases_given += 1
                return ls
        return None

    def renew(self, lease_id: str, node: str, now: float) -> bool:
        """Extend a live lease of ``node``; False when it expired (the unit went back)."""
        self.expire(now)
        ls = self.leases.get(lease_id)
        if ls is None or ls.node != node:
            return False
        ls.expires = now + self.lease_s
        return True

    def complete(self, lease_id: str, node: str, now: float, trajectories: int = 0) -> bool:
        """Mark a lease's unit done. A late completion of an expired lease still counts (its
        outputs are keyed: idempotent); True when the unit was not done before."""
        ls = self.leases.pop(lease_id, None) or self.expired.pop(lease_id, None)
        if ls is None:
            return False
        self.counts.setdefault(node, NodeCounts()).completed += 1
        self.counts[node].trajectories += trajectories
        first = (ls.level_id, ls.pass_index) not in self.done
        self.done.add((ls.level_id, ls.pass_index))
        return first

    def expire(self, now: float) -> list[Lease]:
        gone = [ls for ls in self.leases.values() if ls.expires <= now]
        for ls in gone:
            del self.leases[ls.lease_id]
            self.counts.setdefault(ls.node, NodeCounts()).expired += 1
            self.expired[ls.lease_id] = ls
        while len(self.expired) > EXPIRED_KEPT:  # oldest first (insertion order)
            del self.expired[next(iter(self.expired))]
        return gone

    def report_lost(self, node: str, n: int) -> None:
        self.counts.setdefault(node, NodeCounts()).lost += n

    def reopen(self, levels: list[str]) -> list[tuple[str, int]]:
        """Put the done units of ``levels`` back (a node left with its disk after completing
        them, before its uploads were delivered): they are leased again, and a unit makes only
        what the store does not hold yet (outputs are keyed). Returns the units reopened."""
        wanted = set(levels)
        back = sorted(u for u in self.done if u[0] in wanted)
        self.done.difference_update(back)
        return back

    def finished(self) -> bool:
        return len(self.done) >= len(self.levels) * max(1, self.passes)

    # -------------------------------------------------------------- state

    def balance(self) -> dict[str, dict]:
        """Per node: pool size, units done / leased / left (the paper's pool balance)."""
        busy = self._busy()
        out = {}
        for n in sorted(set(self.nodes) | set(self.counts)):
            mine = self.pool(n)
            units = [(lv, p) for p in range(max(1, self.passes)) for lv in mine]
            out[n] = {"pool": len(mine), "done": sum(u in self.done for u in units),
                      "leased": sum(u in busy for u in units),
                      "left": sum(u not in self.done and u not in busy for u in units),
                      "live": n in self.nodes, "drained": self.drained.get(n, ""),
                      **asdict(self.counts.get(n, NodeCounts()))}
        return out

    def to_dict(self) -> dict:
        return {"version": STATE_VERSION, "levels": self.levels, "nodes": self.nodes,
                "passes": self.passes, "seed": self.seed, "lease_s": self.lease_s,
                "owner": self.owner, "done": sorted([lv, p] for lv, p in self.done),
                "leases": [asdict(x) for x in self.leases.values()],
                "expired": [asdict(x) for x in self.expired.values()],
                "attempts": self.attempts, "drained": self.drained,
                "counts": {n: asdict(c) for n, c in self.counts.items()}, "seq": self.seq}

    @classmethod
    def from_dict(cls, d: dict) -> AllocatorPolicy:
        if d.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"allocator state version {d.get('version')!r}: expected one of "
                             f"{READABLE_VERSIONS}")
        return cls(list(d["levels"]), list(d["nodes"]), int(d["passes"]), int(d["seed"]),
                   float(d["lease_s"]), owner=dict(d["owner"]),
                   done={(str(lv), int(p)) for lv, p in d["done"]},
                   leases={x["lease_id"]: Lease(**x) for x in d["leases"]},
                   attempts=dict(d["attempts"]), drained=dict(d["drained"]),
                   counts={n: NodeCounts(**c) for n, c in d["counts"].items()},
                   seq=int(d["seq"]),
                   expired={x["lease_id"]: Lease(**x) for x in d.get("expired", [])})


__all__ = ["AllocatorPolicy", "Lease", "NodeCounts"]
