"""scripts/import_graph.py: it finds an import cycle, also through a lazy import; the test
stand-ins under tests/fakes/ have none."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "scripts" / "import_graph.py"


def graph(*paths: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *paths], cwd=cwd, text=True,
                          capture_output=True, timeout=60)


def test_a_cycle_through_a_lazy_import_is_found(tmp_path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from .c import g\n")
    (pkg / "c.py").write_text("import os\nimport pkg.a\n")
    (pkg / "d.py").write_text("from pkg.a import nothing\n")
    r = graph("pkg", cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    assert "CYCLE: pkg.a <-> pkg.b <-> pkg.c" in r.stdout
    assert "pkg.d -> pkg.a" in r.stdout and r.stdout.count("CYCLE") == 1



def test_the_stand_ins_have_no_import_cycle_and_the_unreal_calls_never_reach_the_editor() -> None:
    r = graph("tests/fakes")
    assert r.returncode == 0 and " 0 cycles" in r.stdout, r.stdout
    edges = {m: set(rest.split(", ")) for m, _, rest in
             (ln.partition(" -> ") for ln in r.stdout.splitlines() if " -> " in ln)}
    seen, todo = set(), ["tests.fakes.unreal.namespace"]
    while todo:  # everything the module a script gets as `unreal` imports, transitively
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += [x for x in edges.get(m, ()) if x in edges]
    assert "tests.fakes.unreal.structs" in seen
    assert not seen & {"tests.fakes.unreal.editor", "tests.fakes.unreal.mrq_render"}


def test_no_production_module_imports_a_stand_in() -> None:
    """stages/ and unreal/ never import tests/ (the stand-in renderer is named by a path and
    imported by the Ray workers only)."""
    r = graph("stages", "unreal", "tests/fakes")
    up = [ln for ln in r.stdout.splitlines() if not ln.startswith("tests.") and " -> " in ln
          and "tests." in ln.partition(" -> ")[2]]
    assert "stages.cluster.ray_executor -> " in r.stdout and not up, up


def test_stages_have_no_import_cycle_and_the_helpers_below_them_import_no_stage() -> None:
    """No cycle over stages/ (the simulate model and its figures share simulate/records.py);
    nothing in stages/core or stages/shared reaches a stage module (one that dvc.yaml runs),
    directly or through what it imports."""
    r = graph("stages")
    assert r.returncode == 0 and " 0 cycles" in r.stdout, r.stdout
    edges = {m: set(rest.split(", ")) for m, _, rest in
             (ln.partition(" -> ") for ln in r.stdout.splitlines() if " -> " in ln)}
    stage_modules = set(re.findall(r"python -m (stages\.\w+)", (REPO / "dvc.yaml").read_text()))
    assert {"stages.inventory", "stages.screen", "stages.render"} <= stage_modules
    helpers = [m for m in edges if m.startswith(("stages.core", "stages.shared"))]
    assert "stages.shared.library_walk" in helpers and "stages.core.gltf" in helpers
    for start in helpers:
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += [x for x in edges.get(m, ()) if x in edges]
        assert not seen & stage_modules, (start, sorted(seen & stage_modules))
