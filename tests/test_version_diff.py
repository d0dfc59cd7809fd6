"""`wmforge diff` on a real git + DVC repository whose data lives only in a DVC remote: the local
cache is emptied before the diff, so every manifest is fetched from the remote."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from stages.inventory import write_parquet

GIT = ["git", "-c", "user.name=wmforge-test", "-c", "user.email=test@wmforge.invalid"]


def _run(cmd, cwd, env):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{cmd}: {r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r.stdout


def _levels(rows):
    return pd.DataFrame(rows, columns=["level_id", "kind", "enabled", "reason"])


def _index(rows):
    return pd.DataFrame(rows, columns=["key", "shard", "level_id", "category", "trajectory",
                                       "frames", "duration_s", "fps", "width", "height"])


def _version(repo: Path, levels, index, shares, params, env, tag):
    write_parquet(levels, repo / "data/inventory/levels.parquet")
    write_parquet(index, repo / "data/shards/index.parquet")
    (repo / "data/report").mkdir(parents=True, exist_ok=True)
    (repo / "data/report/metrics.json").write_text(json.dumps(
        {"action_share": shares, "non_forward_share": 1 - shares["W"] - shares["IDLE"]}))
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    _run([sys.executable, "-m", "dvc", "add", "data/inventory", "data/shards"], repo, env)
    _run(GIT + ["add", "-A"], repo, env)
    _run(GIT + ["commit", "-qm", tag], repo, env)
    _run(GIT + ["tag", tag], repo, env)
    _run([sys.executable, "-m", "dvc", "push", "-q"], repo, env)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    base = tmp_path_factory.mktemp("diff")
    repo, remote = base / "repo", base / "remote"
    repo.mkdir()
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    _run(GIT + ["init", "-q", "-b", "main"], repo, env)
    _run([sys.executable, "-m", "dvc", "init", "-q"], repo, env)
    _run([sys.executable, "-m", "dvc", "remote", "add", "-d", "store", str(remote)], repo, env)
    shares_a = {"W": 0.5, "A": 0.1, "D": 0.1, "S": 0.1, "WA": 0.0, "WD": 0.0, "SA": 0.0,
                "SD": 0.0, "IDLE": 0.2}
    shares_b = dict(shares_a, W=0.4, WA=0.1)
    _version(repo, _levels([("P/Alpha", "persistent", True, None),
                            ("P/Beta", "persistent", True, None),
                            ("P/Gamma", "persistent", True, None)]),
             _index([("P__Alpha__traj_0000__c000", "shard-000000.tar", "P/Alpha", "nature",
                      "traj_0000", 150, 5.0, 30, 320, 180),
                     ("P__Beta__traj_0000__c000", "shard-000000.tar", "P/Beta", "urban",
                      "traj_0000", 150, 5.0, 30, 320, 180)]),
             shares_a, {"clips": {"clip_s": 0.0}, "render": {"preset": "540p"}}, env, "vA")
    _version(repo, _levels([("P/Alpha", "persistent", True, None),
                            ("P/Beta", "broken", False, "load_failed"),
                            ("P/Delta", "persistent", True, None)]),
             _index([("P__Alpha__traj_0000__c000", "shard-000000.tar", "P/Alpha", "nature",
                      "traj_0000", 150, 5.0, 30, 320, 180),
                     ("P__Alpha__traj_0001__c000", "shard-000000.tar", "P/Alpha", "nature",
                      "traj_0001", 300, 10.0, 30, 1280, 720),
                     ("P__Delta__traj_0000__c000", "shard-000000.tar", "P/Delta", "scifi",
                      "traj_0000", 300, 10.0, 30, 1280, 720)]),
             shares_b, {"clips": {"clip_s": 2.0}, "render": {"preset": "720p"}}, env, "vB")
    # nothing local any more: the cache and the working copies of the data are gone
    shutil.rmtree(repo / ".dvc" / "cache")
    shutil.rmtree(repo / "data" / "inventory")
    shutil.rmtree(repo / "data" / "shards")
    return repo, env


def test_diff_json_fetches_from_the_remote_and_reports_every_change(repo):
    repo_dir, env = repo
    out = _run([sys.executable, "-m", "stages.cli", "diff", "vA", "vB", "--json"], repo_dir,
               dict(env, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    d = json.loads(out)
    assert d["levels"]["added"] == ["P/Delta"] and d["levels"]["removed"] == ["P/Gamma"]
    assert d["levels"]["verdict_changed"] == {
        "P/Beta": {"a": "enabled", "b": "disabled:load_failed"}}
    assert d["totals"]["a"]["clips"] == 2 and d["totals"]["b"]["clips"] == 3
    res = d["by_resolution"]
    assert res["320x180"]["clips_change"] == -1
    assert res["1280x720"]["b"] == {"clips": 2, "hours": pytest.approx(20 / 3600, abs=1e-6)}
    cat = d["by_category"]
    assert cat["urban"]["clips_change"] == -1 and cat["scifi"]["clips_change"] == 1
    assert d["action_share"]["W"]["change"] == pytest.approx(-0.1)
    assert d["action_share"]["WA"]["change"] == pytest.approx(0.1)
    assert d["params_changed"] == {"clips.clip_s": {"a": 0.0, "b": 2.0},
                                   "render.preset": {"a": "540p", "b": "720p"}}
    # nothing came from a local cache: it is still empty, the data was streamed from the remote
    assert not [p for p in (repo_dir / ".dvc" / "cache").rglob("*") if p.is_file()]


def test_diff_needs_the_remote_when_the_cache_is_empty(repo):
    repo_dir, env = repo
    remote = repo_dir.parent / "remote"
    remote.rename(repo_dir.parent / "remote-away")
    try:
        r = subprocess.run([sys.executable, "-m", "stages.cli", "diff", "vA", "vB"],
                           cwd=repo_dir, capture_output=True, text=True,
                           env=dict(env, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    finally:
        (repo_dir.parent / "remote-away").rename(remote)
    assert r.returncode == 2 and "vA" in r.stderr


def test_diff_table_is_readable(repo):
    repo_dir, env = repo
    out = _run([sys.executable, "-m", "stages.cli", "diff", "vA", "vB"], repo_dir,
               dict(env, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert "+ P/Delta" in out and "- P/Gamma" in out
    assert "~ P/Beta: enabled → disabled:load_failed" in out
    assert "render.preset: '540p' → '720p'" in out
    assert "1280x720" in out and "scifi" in out


def test_diff_names_a_revision_that_does_not_exist(repo):
    repo_dir, env = repo
    r = subprocess.run([sys.executable, "-m", "stages.cli", "diff", "vA", "no-such-rev"],
                       cwd=repo_dir, capture_output=True, text=True,
                       env=dict(env, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert r.returncode == 2 and "no-such-rev" in r.stderr
