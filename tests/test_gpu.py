"""GPU paths (``-m gpu``; the default run skips them): run on the lent NVIDIA H200.

The slot's CUDA→EGL binding, the node runner on one GPU, the LAION scorer on CUDA."""

from __future__ import annotations

import json

import numpy as np
import pytest

from .conftest import small_render_cfg

pytestmark = pytest.mark.gpu


def _gpus():
    from stages.cluster.gpus import nvml_gpus

    g = nvml_gpus()
    if not g:
        pytest.fail("no GPU through NVML: run the gpu tests on a GPU machine")
    return g


def test_every_gpu_maps_to_exactly_one_egl_device():
    from stages.engine.device import egl_devices, egl_index_for_gpu

    gpus = _gpus()
    ids = egl_devices()
    idx = {g.index: egl_index_for_gpu(g.index, ids) for g in gpus}
    assert len(set(idx.values())) == len(gpus), (ids, idx)
    for g, i in idx.items():
        assert ids[i] == g


def test_node_runner_on_one_gpu_renders_on_that_gpu(trajs, tmp_path):
    """Two slots on GPU 0 render three trajectories; every renderer opened the NVIDIA device
    through the EGL index that maps to GPU 0 and says so in device.json."""
    import dataclasses

    from stages.cluster.lifecycle import render_trajectories
    from stages.config import load_params
    from stages.engine.device import egl_devices, egl_index_for_gpu

    gpu = _gpus()[0]
    cfg = load_params(overrides=["node.gpus=[0]", "node.slots_per_gpu=2",
                                 f"node.work_dir={tmp_path}/work",
                                 f"node.snapshot_dir={tmp_path}/snap"])
    cfg = dataclasses.replace(cfg, render=small_render_cfg())
    index, fails = render_trajectories(cfg, trajs, tmp_path / "r", cfg.render,
                                       library=trajs.parent)
    assert fails.empty, fails.to_string()
    assert len(index) == 3
    devs = [json.loads(p.read_text()) for p in (tmp_path / "r").rglob("device.json")]
    assert len(devs) == 2  # the level's three trajectories were split over the two slots
    want = egl_index_for_gpu(0, egl_devices())
    for d in devs:
        assert d["requested"]["gpu"] == 0 and d["requested"]["uuid"] == gpu.uuid
        assert d["egl_device_index"] == want
        assert "nvidia" in (d["gl_renderer"] + d["gl_vendor"]).lower(), d
        # the context's own device UUID (GL_EXT_memory_object) is GPU 0's, where exposed
        assert d["gl_device_uuid"] in (None, gpu.uuid), d


def test_real_cuda_oom_and_device_assert_through_the_node_runner(trajs, tmp_path,
                                                                 monkeypatch):
    """On the GPU the fault injection is real: torch's CUDA allocator, capped at a thousandth
    of the card, is asked for 1 GiB (``gpu_oom``: retried once fewer slots share GPU 0), and
    a kernel indexes out of range (a device-side assert: ``gpu_error``, only that process
    ends; retries as for any error)."""
    import dataclasses

    from stages.cluster.lifecycle import render_trajectories
    from stages.config import load_params

    _gpus()
    base = ["node.gpus=[0]", "node.slots_per_gpu=2", "node.retries=1"]
    once = tmp_path / "once.txt"
    runs = {}
    for name, fault in (("oom", {"oom": {"stage": "render", "level": "*", "times": 1,
                                           "count_file": str(once)}}),
                        ("err", {"gpu_error": {"stage": "render", "level": "*"}})):
        monkeypatch.setenv("WMFORGE_FAULT_INJECTION", json.dumps(fault))
        cfg = load_params(overrides=[*base, f"node.work_dir={tmp_path}/{name}/work",
                                     f"node.snapshot_dir={tmp_path}/{name}/snap"])
        cfg = dataclasses.replace(cfg, render=small_render_cfg())
        lines: list[str] = []
        runs[name] = (*render_trajectories(cfg, trajs, tmp_path / name / "r", cfg.render,
                                           library=trajs.parent, log=lines.append), lines)
    index, fails, lines = runs["oom"]
    assert fails.empty, fails.to_string()
    assert len(index) == 3 and len(once.read_text().split()) == 1
    assert any("gpu_oom" in m and "gpu0: 2 processes" in m and "running processes 2 -> 1" in m
               for m in lines)
    index, fails, lines = runs["err"]
    assert len(index) == 0 and set(fails["reason"]) == {"gpu_error"}
    assert "device-side assert triggered" in fails["detail"].iloc[0]
    assert "standin" not in " ".join(fails["detail"])


def test_laion_scorer_on_cuda_matches_the_cpu(tmp_path):
    torch = pytest.importorskip("torch")
    open_clip = pytest.importorskip("open_clip")
    from stages.quality.scorers import LaionAestheticScorer, laion_mlp

    assert torch.cuda.is_available()
    wd = tmp_path / "w"
    wd.mkdir()
    torch.manual_seed(0)
    clip = open_clip.create_model("ViT-L-14-quickgelu", pretrained=None)
    torch.save(clip.state_dict(), wd / "open_clip_pytorch_model.bin")
    torch.save(laion_mlp().state_dict(), wd / "mlp.pth")
    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 255, (270, 480, 3), dtype=np.uint8) for _ in range(6)]
    cpu = LaionAestheticScorer(wd, "open_clip_pytorch_model.bin", "mlp.pth", batch_size=4,
                               device="cpu").score(imgs)
    gpu = LaionAestheticScorer(wd, "open_clip_pytorch_model.bin", "mlp.pth", batch_size=4,
                               device="cuda", compile="false").score(imgs)
    # fp16 tower on CUDA against the fp32 CPU tower (GPU preprocessing too)
    assert gpu == pytest.approx(cpu, rel=0.02, abs=0.05)
