"""The compute backend opens no GL context (issue #30: a GL-free scene holder): the scene,
cameras and tile layout come from ``scene_targets.SceneTargets``, the level's textures are
read from RAM. So it renders where no EGL vendor can be found — a GPU container exposing only
CUDA's compute capabilities, made real here by pointing libglvnd at no vendor file — with no GL
library loaded at all, to the bytes it renders with GL present; the GL backend in that
environment stops with a clear error. The render worker checks torch's device instead of a GL
context's and says so in ``device.json``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stages.cluster.keys import render_settings
from stages.config import load_params
from stages.core.trajectory import VIEWS
from stages.engine.device import DeviceBindingError, SlotDevice, check_compute_device
from tests.conftest import make_trajectories

REPO = Path(__file__).resolve().parents[3]
FRAMES = 4
NO_GL = {"__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/no_vendor.json"}
OVERRIDES = ["render.width=96", "render.height=54", "render.spatial_samples=1",
             "render.temporal_samples=1", "render.mask_scale=1", "render.warmup_frames=1",
             "render.shadow_map_size=512", "render.preview=false"]

# renders one trajectory through the InstanceRenderer, then lists the GL libraries mapped
DRIVER = """
import json, sys
from pathlib import Path
from stages.cluster.keys import render_settings
from stages.config import load_params
from stages.engine.instance_render import InstanceRenderer
out, traj, backend = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
rcfg = load_params(overrides=json.loads(sys.argv[4]) + [f"render.backend={backend}"]).render
out.mkdir(parents=True)
ir = InstanceRenderer(out, render_settings(rcfg, 30), "p3headlessgl", Path.cwd())
try:
    meta = ir.render(traj, "traj_0000", "k" * 16)
finally:
    ir.close()
names = {ln.split()[-1].rsplit("/", 1)[-1] for ln in open("/proc/self/maps") if ".so" in ln}
gl = sorted(n for n in names if any(k in n.lower() for k in
                                    ("egl", "libgl", "gallium", "headlessgl", "glx")))
print("RESULT " + json.dumps({"frames": meta["frame_count"], "gl_libs": gl}))
"""


@pytest.fixture(scope="module")
def traj(sample_library, tmp_path_factory) -> Path:
    out = make_trajectories(sample_library, tmp_path_factory.mktemp("traj_glfree"), 1, FRAMES)
    return out / "NatureValley__AlpineMeadow" / "traj_0000"


def _run(out: Path, traj: Path, backend: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", DRIVER, str(out), str(traj), backend,
                           json.dumps(OVERRIDES)],
                          capture_output=True, text=True, cwd=REPO, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


def _result(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, p.stderr[-3000:]
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def _digests(d: Path) -> dict[str, str]:
    return {v: hashlib.sha256((d / f"{v}.mp4").read_bytes()).hexdigest() for v in VIEWS}


def test_compute_renders_without_any_gl_library(traj, tmp_path):
    """No EGL vendor: compute renders every frame with no EGL, GL, Mesa or Panda3D GL module
    mapped in the process, to the same MP4 bytes as with GL available; GL itself cannot start
    there (the environment really has no GL) and says why; with GL available the GL backend
    does map them (the check sees them)."""
    without = _result(_run(tmp_path / "nogl", traj, "compute", NO_GL))
    assert without == {"frames": FRAMES, "gl_libs": []}
    with_gl = _result(_run(tmp_path / "gl_present", traj, "compute", {}))
    assert with_gl["gl_libs"] == []  # compute never loads them, GL present or not
    assert _digests(tmp_path / "nogl" / "traj_0000") == \
        _digests(tmp_path / "gl_present" / "traj_0000")
    gl = _run(tmp_path / "gl_nogl", traj, "gl", NO_GL)
    assert gl.returncode != 0 and "could not create an offscreen GL context" in gl.stderr
    control = _result(_run(tmp_path / "gl", traj, "gl", {}))
    assert any("libEGL" in n for n in control["gl_libs"]), control


def test_the_render_worker_checks_torchs_device_for_compute(traj, tmp_path):
    """The production path (``python -m stages.engine.render_worker``) without GL: the
    trajectory is rendered and finished, and ``device.json`` records the compute backend and
    torch's device (a CPU slot here) instead of a GL context."""
    rcfg = load_params(overrides=OVERRIDES + ["render.backend=compute"]).render
    inst = tmp_path / "inst"
    inst.mkdir()
    (inst / "instance.json").write_text(json.dumps({
        "settings": render_settings(rcfg, 30).as_dict(), "base": str(REPO), "readback": "pbo",
        "jobs": [{"name": "traj_0000", "key": "0" * 16, "traj_dir": str(traj)}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WMFORGE_GPU")}
    p = subprocess.run([sys.executable, "-m", "stages.engine.render_worker", str(inst)],
                       capture_output=True, text=True, cwd=REPO, timeout=900,
                       env={**env, "PYTHONPATH": str(REPO), **NO_GL})
    assert p.returncode == 0, p.stderr[-3000:]
    dev = json.loads((inst / "device.json").read_text())
    assert dev["backend"] == "compute" and dev["torch_device"] == "cpu"
    assert dev["requested"]["gpu"] is None and "gl_renderer" not in dev
    meta = json.loads((inst / "traj_0000" / "meta.json").read_text())
    assert meta["backend"] == "compute" and meta["frame_count"] == FRAMES
    assert all((inst / "traj_0000" / f"{v}.mp4").stat().st_size > 0 for v in VIEWS)


def test_compute_device_check_names_a_wrong_device():
    cpu_slot = SlotDevice(None)
    assert check_compute_device(cpu_slot, "cpu", "cpu", None)["backend"] == "compute"
    h200 = SlotDevice(1, "GPU-aaaa-1111", "NVIDIA H200")
    rec = check_compute_device(h200, "cuda", "NVIDIA H200", "GPU-AAAA-1111")
    assert rec["cuda_name"] == "NVIDIA H200"
    with pytest.raises(DeviceBindingError, match=r"GPU 1 \(NVIDIA H200\) but the compute "
                                                 r"backend runs on 'cpu': torch sees no CUDA"):
        check_compute_device(h200, "cpu", "cpu", None)
    with pytest.raises(DeviceBindingError, match="torch's CUDA device is 'NVIDIA H100 80GB"):
        check_compute_device(h200, "cuda", "NVIDIA H100 80GB HBM3", "GPU-aaaa-1111")
    with pytest.raises(DeviceBindingError, match="torch's CUDA device is GPU-bbbb-2222"):
        check_compute_device(h200, "cuda", "NVIDIA H200", "GPU-bbbb-2222")


def test_a_gpu_slot_binds_no_egl_device_for_compute(traj, tmp_path):
    """A GPU slot (``WMFORGE_GPU`` set) running the compute backend where no EGL vendor is
    (the compute-only container): the worker looks for no EGL device (there is none to bind,
    and compute opens no GL context); it checks torch's device against the slot. This
    machine has no CUDA, so that check is what stops it, and says so."""
    rcfg = load_params(overrides=OVERRIDES + ["render.backend=compute"]).render
    inst = tmp_path / "inst"
    inst.mkdir()
    (inst / "instance.json").write_text(json.dumps({
        "settings": render_settings(rcfg, 30).as_dict(), "base": str(REPO),
        "jobs": [{"name": "traj_0000", "key": "0" * 16, "traj_dir": str(traj)}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WMFORGE_GPU")}
    gpu = {"WMFORGE_GPU": "0", "WMFORGE_GPU_NAME": "NVIDIA H200", "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, "-m", "stages.engine.render_worker", str(inst)],
                       capture_output=True, text=True, cwd=REPO, timeout=900,
                       env={**env, "PYTHONPATH": str(REPO), **NO_GL, **gpu})
    assert p.returncode != 0
    assert "the compute backend runs on 'cpu': torch sees no CUDA device" in p.stderr, \
        p.stderr[-2000:]
    assert "EGL" not in p.stderr
