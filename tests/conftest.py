from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from stages.config import SampleLibraryConfig
from stages.engine.process_tree import all_pids, command_line, is_running
from stages.sample_library import build_sample_library

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("DVC_NO_ANALYTICS", "1")


def pytest_configure(config):
    """Each test process (each xdist worker: `make test` runs two) gets a node work folder of
    its own (slot folders and their locks), never the checkout's work/ that `make demo` uses:
    two runners sharing one would find every slot taken (stages.config.loading.WORK_DIR_ENV)."""
    from stages.config.loading import WORK_DIR_ENV

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if getattr(config.option, "numprocesses", None) and not worker:
        return  # xdist's controller: its workers (which inherit its environment) make theirs
    # in a folder of its own, inside the caller's WMFORGE_WORK_DIR where one is set
    base = os.environ.get(WORK_DIR_ENV) or None
    if base:
        os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f"wmforge-work-{worker or 'main'}-", dir=base)
    os.environ[WORK_DIR_ENV] = work
    config._wmforge_work = work


def pytest_unconfigure(config):
    work = getattr(config, "_wmforge_work", None)
    if work:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def sample_library(tmp_path_factory) -> Path:
    """The real sample library, built once per test process with the default config."""
    out = tmp_path_factory.mktemp("lib") / "sample"
    build_sample_library(out, SampleLibraryConfig())
    return out


RENDER_FRAMES = 24


def small_render_cfg(**kw):
    """Stage II settings small enough for llvmpipe on two cores (192x108, 2x2 samples)."""
    from stages.config import load_params

    over = ["render.width=192", "render.height=108", "render.spatial_samples=2",
            "render.temporal_samples=2", "render.mask_scale=1", "render.warmup_frames=2"]
    return load_params(overrides=over + [f"render.{k}={v}" for k, v in kw.items()]).render


@pytest.fixture(scope="session")
def trajs(sample_library, tmp_path_factory) -> Path:
    """Three short Stage I trajectories on AlpineMeadow with the humanoid Alex."""
    return make_trajectories(sample_library, tmp_path_factory.mktemp("traj"), 3, RENDER_FRAMES)


def make_trajectories(library: Path, out: Path, per_level: int, frames: int,
                      levels: tuple[str, ...] = ("NatureValley/AlpineMeadow",)) -> Path:
    """Stage I on the sample library: ``per_level`` trajectories of ``frames`` frames on
    ``levels`` (AlpineMeadow) with the humanoid Alex, into ``out``."""
    from stages.config import load_params
    from stages.inventory import run_inventory
    from stages.trajectories import run_trajectories

    cfg = load_params(overrides=[
        f"trajectories.per_level={per_level}", f"trajectories.frames={frames}",
        f"trajectories.levels=[{','.join(levels)}]",
        "trajectories.characters=[CharacterPack/Alex]"])
    inv = run_inventory(library, cfg.inventory, "overrides.yaml")
    fails = run_trajectories(cfg, inv.levels, inv.characters, library, out,
                             log=lambda *_: None)
    assert fails.empty
    return out


@pytest.fixture(scope="session")
def rendered(trajs, tmp_path_factory):
    """Those trajectories rendered by the real Stage II: (root, index, failures)."""
    from stages.render import run_render

    root = tmp_path_factory.mktemp("renders")
    from stages.inventory import write_parquet

    index, fails = run_render(small_render_cfg(), trajs, root)
    write_parquet(index, root / "index.parquet")  # as the render stage's main() does
    write_parquet(fails, root / "failures.parquet")
    return root, index, fails


def live_processes(marker: str, cwd: Path | None = None) -> list[int]:
    """pids of live (non-zombie) processes, other than this one, whose command line contains
    ``marker`` (and whose working directory is ``cwd``, when given)."""
    out = []
    for pid in all_pids(exclude=os.getpid()):
        try:
            cmd = command_line(pid)
            here = os.readlink(f"/proc/{pid}/cwd") if cwd is not None else ""
        except OSError:
            continue
        if marker in cmd and is_running(pid) and (cwd is None or here == str(cwd)):
            out.append(pid)
    return out


def gone_within(pid: int, timeout_s: float) -> bool:
    """Whether process ``pid`` is gone (or a zombie) within ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while is_running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
