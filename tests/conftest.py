from __future__ import annotations

import os
from pathlib import Path

import pytest

from stages.config import SampleLibraryConfig
from stages.sample_library import build_sample_library

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("DVC_NO_ANALYTICS", "1")


@pytest.fixture(scope="session")
def sample_library(tmp_path_factory) -> Path:
    """The real sample library, built once per session with the default config."""
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
    from stages.config import load_params
    from stages.inventory import run_inventory
    from stages.trajectories import run_trajectories

    cfg = load_params(overrides=[
        "trajectories.per_level=3", f"trajectories.frames={RENDER_FRAMES}",
        "trajectories.levels=[NatureValley/AlpineMeadow]",
        "trajectories.characters=[CharacterPack/Alex]"])
    inv = run_inventory(sample_library, cfg.inventory, "overrides.yaml")
    out = tmp_path_factory.mktemp("traj")
    fails = run_trajectories(cfg, inv.levels, inv.characters, sample_library, out)
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
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
            here = os.readlink(d / "cwd") if cwd is not None else ""
        except (OSError, IndexError):
            continue
        if marker in cmd and state not in ("Z", "X") and (cwd is None or here == str(cwd)):
            out.append(int(d.name))
    return out
