"""Real DVC on a throw-away clone of this repository: repro, no-op repro, exp run -S."""

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(cmd, cwd, env):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{cmd}: {r.stdout[-1500:]}\n{r.stderr[-1500:]}"
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if shutil.which("dvc") is None and not (Path(os.sys.executable).parent / "dvc").exists():
        pytest.skip("dvc not installed")
    work = tmp_path_factory.mktemp("clone") / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (work / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, work / f)
    env = dict(os.environ, DVC_NO_ANALYTICS="1",
               PATH=f"{Path(os.sys.executable).parent}:{os.environ['PATH']}")
    _run(["git", "init", "-q", "-b", "main"], work, env)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], work, env)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], work, env)
    # the remote is a local folder next to the clone (../dvc-remote-wmforge)
    return work, env


def test_repro_twice_then_noop(clone):
    work, env = clone
    _run(["dvc", "repro"], work, env)
    lv = pd.read_parquet(work / "data/inventory/levels.parquet")
    assert (lv["kind"] == "persistent").sum() >= 10
    assert (work / "data/inventory/characters.parquet").exists()
    out = _run(["dvc", "repro"], work, env)
    assert "Data and pipelines are up to date" in out
    _run(["dvc", "push"], work, env)
    assert any((work.parent / "dvc-remote-wmforge").rglob("*"))


def test_exp_run_set_param_changes_output(clone):
    work, env = clone
    _run(["dvc", "repro"], work, env)
    before = pd.read_parquet(work / "data/inventory/levels.parquet").set_index("level_id")
    assert before.loc["OpenWorldMega/Continent", "kind"] == "partitioned"
    _run(["dvc", "exp", "run", "-S", "inventory.max_extent_m=5000"], work, env)
    after = pd.read_parquet(work / "data/inventory/levels.parquet").set_index("level_id")
    assert after.loc["OpenWorldMega/Continent", "kind"] == "persistent"
    assert bool(after.loc["OpenWorldMega/Continent", "enabled"])
    assert "max_extent_m: 5000" in (work / "params.yaml").read_text()
