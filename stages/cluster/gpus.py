"""GPUs of this machine (NVML) and the slot plan: GPUs × slots per GPU, or CPU slots."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ConfigError, NodeConfig


@dataclass(frozen=True)
class GpuInfo:
    index: int  # NVML index (PCI bus order, the order of CUDA_DEVICE_ORDER=PCI_BUS_ID)
    uuid: str
    name: str
    memory_total: int = 0


@dataclass(frozen=True)
class SlotPlan:
    slot: str  # "g<gpu>s<k>" or "c<k>": also the slot's folder name under work/slots/
    gpu: GpuInfo | None


def nvml_gpus() -> list[GpuInfo]:
    """Every GPU the NVIDIA driver reports; empty without a driver (or without nvidia-ml-py)."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no GPUs
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid, name = pynvml.nvmlDeviceGetUUID(h), pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total
            out.append(GpuInfo(i, uuid if isinstance(uuid, str) else uuid.decode(),
                               name if isinstance(name, str) else name.decode(), int(mem)))
        return out
    finally:
        pynvml.nvmlShutdown()


def plan_slots(cfg: NodeConfig, found: list[GpuInfo] | None = None) -> list[SlotPlan]:
    """The node's slots: for each configured GPU (every GPU found when ``cfg.gpus`` is empty)
    ``slots_per_gpu`` slots, interleaved so that the first slots spread over the GPUs; on a
    machine without GPUs, ``cpu_slots`` CPU slots."""
    found = nvml_gpus() if found is None else found
    by_id = {g.index: g for g in found}
    if cfg.gpus:
        missing = [g for g in cfg.gpus if g not in by_id]
        if missing:
            raise ConfigError(f"node.gpus {cfg.gpus}: GPU(s) {missing} not found (NVML lists "
                              f"{sorted(by_id)})")
        gpus = [by_id[g] for g in cfg.gpus]
    else:
        gpus = sorted(found, key=lambda g: g.index)
    if not gpus:
        return [SlotPlan(f"c{k}", None) for k in range(cfg.cpu_slots)]
    return [SlotPlan(f"g{g.index}s{k}", g) for k in range(cfg.slots_per_gpu) for g in gpus]


def slot_env(plan: SlotPlan, base: dict[str, str]) -> dict[str, str]:
    """The environment of an engine process in this slot: its GPU only."""
    env = dict(base)
    for k in ("WMFORGE_GPU", "WMFORGE_GPU_UUID", "WMFORGE_GPU_NAME"):
        env.pop(k, None)
    env["WMFORGE_SLOT"] = plan.slot
    if plan.gpu is not None:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = str(plan.gpu.index)
        env["WMFORGE_GPU"] = str(plan.gpu.index)
        env["WMFORGE_GPU_UUID"] = plan.gpu.uuid
        env["WMFORGE_GPU_NAME"] = plan.gpu.name
    return env
