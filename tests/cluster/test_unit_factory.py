"""The stand-in renderer's test-only entry point: the Ray executor resolves a unit factory from
its ``module:function`` path (what ``cluster run --standin`` names), and the engine process of
its step imports the stand-in from any working directory."""

from __future__ import annotations

import os
import random
import subprocess
from types import SimpleNamespace

import pytest

from stages.cluster.cluster_cli import STANDIN_UNITS
from stages.cluster.ray_executor import unit_factory
from stages.core.progress import COMPLETE, read_progress
from tests.fakes.engine_standin import STANDIN, standin_unit, traj_render_key


def test_the_stand_in_is_found_by_its_path_and_the_cli_names_it() -> None:
    assert unit_factory(STANDIN) is standin_unit
    assert STANDIN_UNITS == STANDIN


@pytest.mark.parametrize("path, said", [
    ("fake_engine_standin", "'module:function'"),
    ("tests.fakes.no_such_module:standin_unit", "on the workers' PYTHONPATH"),
    ("tests.fakes.engine_standin:no_such_factory", "no_such_factory"),
])
def test_a_bad_unit_factory_path_says_what_is_wrong(path, said) -> None:
    with pytest.raises(ValueError, match=said):
        unit_factory(path)


def test_its_engine_process_runs_from_any_working_directory(tmp_path) -> None:
    cfg = SimpleNamespace(trajectories=SimpleNamespace(per_level=2))
    journal = tmp_path / "journal"
    unit = standin_unit({"level_id": "Pack/Level", "pass_index": 1}, cfg,  # type: ignore[arg-type]
                        tmp_path / "renders", set(), str(journal), frame_s=0.0)
    step = unit.next_step(None, tmp_path, "n1-inst")  # type: ignore[arg-type]
    assert step is not None and step.argv[1:3] == ["-m", "tests.fakes.engine_standin"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    (tmp_path / "elsewhere").mkdir()
    r = subprocess.run(step.argv, env={**env, **step.env}, cwd=tmp_path / "elsewhere",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    inst = tmp_path / "renders" / "Pack" / "Level" / "n1-inst"
    assert (inst / COMPLETE).exists() and sorted(read_progress(inst)) == ["traj_0002", "traj_0003"]
    key = traj_render_key("Pack/Level", 1, "traj_0002")
    assert (inst / "traj_0002" / "back.mp4").read_bytes() == random.Random(key).randbytes(200_000)
    assert len(journal.read_text().splitlines()) == 2
