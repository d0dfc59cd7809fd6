"""The node runner's settings (config group ``node``): how this machine runs its engine
processes. Kept apart from the data settings in :mod:`stages.config`: they never change an
output byte."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NodeConfig:
    """The node runner (DESIGN §6, paper §5.3): slots of this machine and their lifecycle.
    Execution settings only: they never change output bytes, so DVC does not track them."""

    # GPU ids (NVML / CUDA PCI order) to run slots on; empty = every GPU NVML finds (none on a
    # machine without an NVIDIA driver, which then runs cpu_slots)
    gpus: list[int] = field(default_factory=list)
    # engine processes per GPU (§5.3: one process does not saturate a GPU)
    slots_per_gpu: int = 4
    # slots on a machine without a GPU (2 measured fastest on the 2-core development machine)
    cpu_slots: int = 2
    # a slot whose progress log and outputs have not advanced for this long is killed, s
    stall_timeout_s: float = 300.0
    # Stage I of one level in one process: killed past this, s (0 = no limit)
    stage1_timeout_s: float = 3600.0
    # a failed unit (a level's Stage I or Stage II) is retried in a fresh process this often
    retries: int = 2
    # slot working folders (work/slots/<slot>/), locks and the node's character cache
    work_dir: str = "work"
    # failure snapshots: <snapshot_dir>/<node>/<instance>/ (engine log, exit, reason, ...)
    snapshot_dir: str = "work/snapshots"
    # copy each level's pack into the slot before running it (§5.3); characters are copied
    # once into a node cache and symlinked into slots (§12)
    stage_assets: bool = True
    # live slot view: "auto" (a table on a terminal, plain lines otherwise), "plain", "off"
    display: str = "auto"


def validate_node(nd: NodeConfig) -> None:
    """Raise ValueError naming the ``node.*`` key that is out of range."""
    if nd.slots_per_gpu < 1 or nd.cpu_slots < 1:
        raise ValueError("node.slots_per_gpu and node.cpu_slots must be >= 1")
    if nd.retries < 0 or nd.stall_timeout_s <= 0 or nd.stage1_timeout_s < 0:
        raise ValueError("node.retries >= 0, node.stall_timeout_s > 0 and "
                         "node.stage1_timeout_s >= 0 expected")
    if any(g < 0 for g in nd.gpus):
        raise ValueError(f"node.gpus {nd.gpus}: expected GPU ids >= 0")
    if nd.display not in ("auto", "plain", "off"):
        raise ValueError(f"node.display {nd.display!r}: expected auto, plain or off")
