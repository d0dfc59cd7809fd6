"""Real DVC on a throw-away clone of this repository: repro, no-op repro, exp run -S."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(cmd, cwd, env):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{cmd}: {r.stdout[-1500:]}\n{r.stderr[-1500:]}"
    return r.stdout + r.stderr


# long: real `dvc repro` of the whole pipeline, several times; .ci/run runs them after make test
pytestmark = pytest.mark.e2e


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
    # the same pipeline on shorter, smaller clips, so the whole chain runs in a few minutes:
    # edit conf/ (dvc exp run recomposes params.yaml from it) and recompose
    for rel, old, new in (("conf/trajectories/sample.yaml", "frames: 150", "frames: 45"),
                          ("conf/render/sample.yaml", "width: 320", "width: 160"),
                          ("conf/render/sample.yaml", "height: 180", "height: 90"),
                          ("conf/render/sample.yaml", "spatial_samples: 2", "spatial_samples: 1"),
                          ("conf/render/sample.yaml", "temporal_samples: 2",
                           "temporal_samples: 1"),
                          ("conf/screen/sample.yaml", "clip_s: 2.0", "clip_s: 1.0"),
                          ("conf/score/sample.yaml", "clip_s: 2.0", "clip_s: 1.0")):
        text = (work / rel).read_text()
        assert old in text, (rel, old)
        (work / rel).write_text(text.replace(old, new))
    _run([os.sys.executable, "-m", "stages.cli", "params"], work, env)
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


def _git_commit(work, env, msg):
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], work, env)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", msg,
          "--allow-empty"], work, env)


def test_sweep_queue_shows_retained_levels_per_threshold(clone):
    """The README's sweep: dvc exp run --queue -S 'select.brisque_max=…' then dvc queue start;
    dvc exp show lists the retained-level count per threshold."""
    work, env = clone
    _run(["dvc", "repro"], work, env)
    _git_commit(work, env, "pipeline outputs for the sweep")
    # a stricter threshold that retains fewer levels than the committed 70 but some: read off
    # the pipeline's own scores (they move with the renderer and the sample assets), so the
    # sweep must reproduce exactly what select computes for it
    from stages.config import load_params
    from stages.select import select_levels

    views = pd.read_parquet(work / "data/score/views.parquet")
    screen = pd.read_parquet(work / "data/screen/levels.parquet")
    scfg = load_params(str(work / "params.yaml")).select

    def kept(t: float) -> int:
        scfg.brisque_max = t
        return int(select_levels(views, screen, scfg, "brisque")["retained"].sum())
    at70 = kept(70.0)
    strict = next(t for t in range(69, 0, -1) if 0 < kept(float(t)) < at70)
    want = kept(float(strict))
    _run(["dvc", "exp", "run", "--queue", "-S", f"select.brisque_max={strict},70"], work, env)
    _run(["dvc", "queue", "start", "-j", "1"], work, env)
    deadline = time.time() + 900
    while time.time() < deadline:
        status = _run(["dvc", "queue", "status"], work, env)
        if "Queued" not in status and "Running" not in status:
            break
        time.sleep(5)
    assert "Failed" not in status, status
    # a threshold re-runs select and what follows, never screening or scoring
    names = [ln.split()[0] for ln in status.splitlines()[1:] if "Success" in ln]
    assert len(names) == 2, status
    logs = [_run(["dvc", "queue", "logs", name], work, env) for name in names]
    # brisque_max=70 is the committed value: nothing to do; the stricter one re-runs select
    # onwards (some level passes it: a threshold rejecting every level stops select)
    assert sum("Running stage 'select'" in log for log in logs) == 1, logs
    for log in logs:
        assert "Stage 'screen' didn't change" in log and "Stage 'score' didn't change" in log
        for stage in ("sample_library", "inventory", "screen", "score"):
            assert f"Running stage '{stage}'" not in log, stage
    shown = json.loads(_run(["dvc", "exp", "show", "--json"], work, env))
    retained = {}

    def walk(node):
        if isinstance(node, dict):
            data = node.get("data") or {}
            params = ((data.get("params") or {}).get("params.yaml") or {}).get("data") or {}
            metrics = ((data.get("metrics") or {}).get("data/select/metrics.json") or {}
                       ).get("data") or {}
            if params and metrics and (node.get("name") or node.get("rev")) != "workspace":
                retained[params["select"]["brisque_max"]] = metrics["retained"]
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(shown)
    assert float(strict) in retained and 70.0 in retained, retained
    assert retained[float(strict)] == want and retained[70.0] == at70
    assert 0 < retained[float(strict)] < retained[70.0]


def test_exp_run_set_param_changes_output(clone):
    work, env = clone
    _run(["dvc", "repro"], work, env)
    before = pd.read_parquet(work / "data/inventory/levels.parquet").set_index("level_id")
    assert before.loc["OpenWorldMega/Continent", "kind"] == "too_large"  # one 2 km file (issue 28)
    _run(["dvc", "exp", "run", "-S", "inventory.max_extent_m=5000"], work, env)
    after = pd.read_parquet(work / "data/inventory/levels.parquet").set_index("level_id")
    assert after.loc["OpenWorldMega/Continent", "kind"] == "persistent"
    assert bool(after.loc["OpenWorldMega/Continent", "enabled"])
    assert "max_extent_m: 5000" in (work / "params.yaml").read_text()


def _procs(cwd: Path, marker: str) -> list[int]:
    from .conftest import live_processes

    return live_processes(marker, cwd)


def _instances(work: Path) -> set[str]:
    return {p.name for p in (work / "data/renders").glob("*/*/*") if p.is_dir()}


def test_engine_code_change_rerenders_and_an_unchanged_repro_renders_nothing(clone):
    work, env = clone
    _run(["dvc", "repro"], work, env)
    before = _instances(work)
    index = pd.read_parquet(work / "data/renders/index.parquet")
    assert len(index) > 0
    # forced, unchanged: the stage runs and its skip keys say everything is done
    out = _run(["dvc", "repro", "-f", "-s", "render"], work, env)
    assert "Running stage 'render'" in out and _instances(work) == before
    # a fix in an engine source: Stage I and Stage II outputs are made again, nothing cleared
    src = work / "stages/engine/replay_render.py"
    src.write_text(src.read_text() + "\n# a code fix\n")
    out = _run(["dvc", "repro"], work, env)
    assert "Running stage 'trajectories'" in out and "Running stage 'render'" in out
    after = pd.read_parquet(work / "data/renders/index.parquet")
    assert len(after) == len(index)
    assert not set(after["instance"]) & before  # every trajectory from a new instance
    assert set(after["path"]) != set(index["path"])


def test_kill_9_of_dvc_repro_leaves_no_engine_and_the_next_repro_finishes(clone):
    work, env = clone
    _run(["dvc", "repro"], work, env)
    want = len(pd.read_parquet(work / "data/renders/index.parquet"))
    shutil.rmtree(work / "data/renders")
    dvc = subprocess.Popen(["dvc", "repro", "-f", "-s", "render"], cwd=work, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while time.time() < deadline and not _procs(work, "stages.engine.render_worker"):
        time.sleep(0.05)
    assert _procs(work, "stages.engine.render_worker"), "no renderer started"
    dvc.kill()
    dvc.wait()
    t0 = time.time()
    while time.time() - t0 < 8 and (_procs(work, "stages.engine.render_worker")
                                    or _procs(work, "stages.render")):
        time.sleep(0.1)
    assert not _procs(work, "stages.engine.render_worker"), "a renderer outlived dvc repro"
    assert not _procs(work, "stages.render"), "the render stage outlived dvc repro"
    _run(["dvc", "repro", "-f", "-s", "render"], work, env)
    assert len(pd.read_parquet(work / "data/renders/index.parquet")) == want
