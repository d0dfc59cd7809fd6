"""Both embedded engines draw opaque geometry in scene-graph order.

Panda3D's default opaque bin is state-sorted: it orders draws by comparing RenderState and
vertex-data pointers, so where two opaque surfaces tie in depth the pixel followed the heap
layout of the process (docs/known-issues.md: one pixel of a sample render in about one loaded
render in five; 4 of 20 heap layouts gave the other pixel). Each engine process configures
Panda3D once, so each is checked in a fresh process. The behaviour itself is held by
tests/test_node_runner.py (renders byte for byte across processes) and counted by
scripts/render_determinism.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys
from panda3d.core import CullBinManager
if sys.argv[1] == "render":
    from stages.engine.replay_render import ReplayRenderer
    from tests.looks import look
    ReplayRenderer(32, 18, 1, 1, "p3headlessgl", 1, look=look())
else:
    from stages.engine.models import _configure_panda
    _configure_panda()
bins = CullBinManager.getGlobalPtr()
print(bins.getBinType(bins.findBin("opaque")) == CullBinManager.BT_unsorted)
"""


@pytest.mark.parametrize("engine", ["render", "stage1"])
def test_opaque_geometry_is_drawn_in_scene_order(engine):
    out = subprocess.run([sys.executable, "-c", CHECK, engine], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "True"
