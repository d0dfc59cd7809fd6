"""GPU discovery, the slot plan and the CUDA→EGL mapping, fed device lists the tests make; and
the real check on this CPU machine: a slot asked to render on a GPU that EGL does not have fails
with an error naming it, never silently on another device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stages.cluster.gpus import GpuInfo, plan_slots, slot_env
from stages.config import ConfigError, NodeConfig
from stages.engine.device import (
    DeviceBindingError,
    SlotDevice,
    check_device,
    egl_devices,
    egl_index_for_gpu,
)

REPO = Path(__file__).resolve().parent.parent
H200 = [GpuInfo(i, f"GPU-{i:04d}", "NVIDIA H200") for i in range(4)]


def test_slots_interleave_gpus_and_fall_back_to_cpu_slots():
    cfg = NodeConfig(slots_per_gpu=2)
    assert [(p.slot, p.gpu.index if p.gpu else None) for p in plan_slots(cfg, H200[:2])] == [
        ("g0s0", 0), ("g1s0", 1), ("g0s1", 0), ("g1s1", 1)]
    assert [p.slot for p in plan_slots(NodeConfig(gpus=[3, 1], slots_per_gpu=1), H200)] == [
        "g3s0", "g1s0"]
    assert [(p.slot, p.gpu) for p in plan_slots(NodeConfig(cpu_slots=3), [])] == [
        ("c0", None), ("c1", None), ("c2", None)]
    with pytest.raises(ConfigError, match=r"node.gpus \[5\].*GPU\(s\) \[5\] not found"):
        plan_slots(NodeConfig(gpus=[5]), H200)


def test_slot_environment_binds_exactly_one_gpu():
    env = slot_env(plan_slots(NodeConfig(gpus=[2], slots_per_gpu=1), H200)[0],
                   {"PATH": "/bin", "WMFORGE_GPU": "0", "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env["WMFORGE_GPU"] == "2"
    assert env["WMFORGE_GPU_UUID"] == "GPU-0002" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    cpu = slot_env(plan_slots(NodeConfig(cpu_slots=1), [])[0], {"WMFORGE_GPU": "1"})
    assert "WMFORGE_GPU" not in cpu and cpu["WMFORGE_SLOT"] == "c0"
    assert SlotDevice.from_env(env) == SlotDevice(2, "GPU-0002", "NVIDIA H200")
    assert SlotDevice.from_env(cpu).gpu is None


def test_egl_devices_are_matched_by_cuda_id_not_by_position():
    # EGL enumerates a software device first and the GPUs in reverse (as seen on real hosts)
    ids = [None, 3, 2, 1, 0]
    assert [egl_index_for_gpu(g, ids) for g in range(4)] == [4, 3, 2, 1]
    # a driver that honours CUDA_VISIBLE_DEVICES=2 reports the visible GPU as CUDA device 0
    assert egl_index_for_gpu(2, [None, None, 0, None], cuda_visible=[2]) == 2
    with pytest.raises(DeviceBindingError, match=r"GPU 7: no EGL device.*\[None, 3, 2, 1, 0\]"):
        egl_index_for_gpu(7, ids)
    with pytest.raises(DeviceBindingError, match="all report"):
        egl_index_for_gpu(1, [1, 1])


def test_the_opened_context_is_checked_against_the_request():
    gpu = SlotDevice(1, "GPU-0001", "NVIDIA H200")
    ok = check_device(gpu, 3, "NVIDIA H200/PCIe/SSE2", "NVIDIA Corporation")
    assert ok["egl_device_index"] == 3
    with pytest.raises(DeviceBindingError, match="llvmpipe.*not the NVIDIA GPU"):
        check_device(gpu, 0, "llvmpipe (LLVM 15.0.6, 256 bits)", "Mesa")
    with pytest.raises(DeviceBindingError, match="another device"):
        check_device(gpu, 0, "NVIDIA A100-SXM4-80GB/PCIe/SSE2", "NVIDIA Corporation")
    with pytest.raises(DeviceBindingError, match="opened a context on device GPU-0000"):
        check_device(gpu, 3, "NVIDIA H200/PCIe/SSE2", "NVIDIA Corporation", gl_uuid="GPU-0000")
    assert check_device(gpu, 3, "NVIDIA H200/PCIe/SSE2", "NVIDIA Corporation",
                        gl_uuid="gpu-0001")["gl_device_uuid"] == "gpu-0001"
    with pytest.raises(DeviceBindingError, match="NVML lists this process on GPU 0"):
        check_device(gpu, 3, "NVIDIA H200/PCIe/SSE2", "NVIDIA Corporation", nvml_gpu_of_pid=0)
    cpu = check_device(SlotDevice(None), -1, "llvmpipe (LLVM 15.0.6, 256 bits)", "Mesa")
    assert cpu["requested"]["gpu"] is None


def test_a_gpu_slot_on_a_machine_without_that_gpu_fails_naming_it(trajs, tmp_path):
    """The real renderer process, bound to GPU 0 on this CPU machine (Mesa's EGL)."""
    assert all(c is None for c in egl_devices())  # no EGL device here has a CUDA id
    inst = tmp_path / "S" / "L" / "local-20990101T000000Z-0003"
    inst.mkdir(parents=True)
    from stages.cluster.keys import render_settings

    from .conftest import small_render_cfg

    (inst / "instance.json").write_text(json.dumps(
        {"level_id": "NatureValley/AlpineMeadow", "settings": render_settings(
            small_render_cfg(), 30).as_dict(), "base": os.getcwd(), "jobs": [
            {"name": "traj_0000", "key": "0" * 16,
             "traj_dir": str(trajs / "NatureValley__AlpineMeadow" / "traj_0000")}]}))
    env = dict(os.environ, WMFORGE_GPU="0", WMFORGE_GPU_NAME="NVIDIA H200",
               CUDA_VISIBLE_DEVICES="0")
    r = subprocess.run([sys.executable, "-m", "stages.engine.render_worker", str(inst)],
                       env=env, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode != 0
    assert "DeviceBindingError: GPU 0: no EGL device reports EGL_CUDA_DEVICE_NV=0" in r.stderr
    assert not (inst / "COMPLETE").exists() and not list(inst.rglob("*.mp4"))
