"""Issue 29, World Partition: Stage I does not let a character go until the world under and
around its spawn has streamed in. The fake's World Partition map streams its collision by cells
around player 0's view point, some frames after it arrives (``tests/fakes/unreal/
world_partition.py``); before the fix a spawn far from the loaded cells found no floor there and
the controller settled for places near where the last character stood."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from stages.core.progress import COMPLETE, read_progress
from tests.engine.course import build_course
from tests.fakes.unreal import namespace as fu
from tests.fakes.unreal.editor import FakeEditor
from tests.test_unreal_fake import ANIMS, MAP, MESHES, SCRIPTS, stage1_spec


def editor(course: Path, **kw) -> FakeEditor:
    """The course upright (its glTF's own Y-up), as a map of the fake editor."""
    assets = {p: fu.SkeletalMesh(p, height_cm=180.0) for p in MESHES}
    assets.update({p: fu.AnimSequence(p) for p in ANIMS})
    return FakeEditor({MAP: {"file": str(course), "level_id": "test/course", "up_axis": None}},
                      assets, **kw)


def run(root: Path, course: Path, timeout_s: float | None = None, **kw) -> dict:
    folder = root / "inst"
    folder.mkdir(parents=True)
    spec = stage1_spec(folder, root / "traj", course)
    spec["spawn"]["start_share"] = 0.0  # sampled spawns: anywhere in the level
    if timeout_s is not None:
        spec["spawn"]["stream_timeout_s"] = timeout_s
    (folder / "spec.json").write_text(json.dumps(spec))
    ed = editor(course, **kw)
    cells = []  # the streaming cells of the PIE world, kept past its end
    begin = ed._begin_play

    def keep() -> None:
        begin()
        cells.append(ed.partition)
    ed._begin_play = keep  # type: ignore[method-assign]
    rc = ed.run(SCRIPTS / "stage1_pie.py", {"WMFORGE_SPEC": str(folder / "spec.json")}, MAP)
    fl = folder / "failures.jsonl"
    return {"rc": rc, "ed": ed, "folder": folder, "out": root / "traj", "spec": spec,
            "cells": cells[0] if cells else None, "driver": ed.script_globals.get("DRIVER"),
            "failures": [json.loads(x) for x in fl.read_text().splitlines()] if fl.exists()
            else []}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return build_course(tmp_path_factory.mktemp("wp") / "course.glb")


def spawns(r: dict) -> list[list]:
    return [json.loads((r["out"] / n / "meta.json").read_text())["spawns"]
            for n in sorted(read_progress(r["folder"]))]


def test_a_far_spawn_waits_for_its_cells_and_stands_where_a_loaded_level_puts_it(
        course, tmp_path):
    """The same World Partition map with a loading range over the whole level (every cell
    loaded from the start) and with cells streaming around the view point: the same spawns and
    the same frames. Before the fix the far spawn's column was empty (its cells unloaded), so
    the streamed map spawned elsewhere, near where the view point had been."""
    loaded = run(tmp_path / "loaded", course, world_partition=True, wp_range_m=1000.0)
    wp = run(tmp_path / "wp", course, world_partition=True)
    assert loaded["rc"] == wp["rc"] == 0 and (wp["folder"] / COMPLETE).exists()
    assert not wp["failures"] and len(read_progress(wp["folder"])) == 2
    cells = wp["cells"]
    first = spawns(loaded)[0][0]["position"]
    # the test is about streaming: the first spawn is far from the cells loaded at PIE start
    assert cells.cell_of(first) not in cells.initial, (first, sorted(cells.initial))
    got, want = spawns(wp), spawns(loaded)
    assert [[s["kind"] for s in t] for t in got] == [[s["kind"] for s in t] for t in want]
    for t_got, t_want in zip(got, want, strict=True):
        for a, b in zip(t_got, t_want, strict=True):
            assert a["position"] == pytest.approx(b["position"], abs=1e-4), (got, want)
    assert "stream" in wp["driver"].ctrl_states  # it waited for the cells
    for n in sorted(read_progress(wp["folder"])):
        a = pd.read_parquet(wp["out"] / n / "frames.parquet")
        b = pd.read_parquet(loaded["out"] / n / "frames.parquet")
        assert a["action"].tolist() == b["action"].tolist()
        for c in ("pos_x", "pos_y", "pos_z"):
            assert a[c].tolist() == pytest.approx(b[c].tolist(), abs=1e-3), (n, c)


def test_a_cell_that_never_streams_in_fails_the_trajectory_naming_level_and_spawn(
        course, tmp_path):
    """Streaming stalls after PIE starts: the far spawn's cells never activate. The trajectory
    fails after trajectories.spawn.stream_timeout_s with a row that names the level, the spawn
    and what World Partition reported; the editor still quits cleanly."""
    r = run(tmp_path, course, timeout_s=2.0, world_partition=True, wp_stalls=True)
    assert r["rc"] == 0 and (r["folder"] / COMPLETE).exists()
    assert not read_progress(r["folder"])
    assert [f["reason"] for f in r["failures"]] == ["streaming_timeout"] * 2, r["failures"]
    d = r["failures"][0]["detail"]
    assert "level test/course" in d and "sampled spawn at (" in d, d
    assert "did not finish streaming in 60 frames" in d and "stream_timeout_s" in d, d
    assert "not all activated" in d, d
    # the spawn it names lies in a cell that was never loaded
    x, y = (float(v) for v in d.split("spawn at (")[1].split(",")[:2])
    assert r["cells"].cell_of((x, y, 0.0)) not in r["cells"].initial
