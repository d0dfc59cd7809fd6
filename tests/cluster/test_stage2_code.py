"""Stage II's code identity in the render key: the operator's choice of the compute backend's
leaders path (``WMFORGE_COMPUTE_LEADERS``, issue #30), where it is not the default, keeps
renders of the two paths under different keys."""

from __future__ import annotations

import json

import pytest

from stages.cluster.keys import STAGE2_SOURCES, code_version, render_key, stage2_code
from stages.engine.publish import TRAJ_FILES
from stages.engine.render_settings import LEADERS_ENV


def test_a_chosen_leaders_path_enters_the_render_key(tmp_path, monkeypatch) -> None:
    traj = tmp_path / "traj_0000"
    traj.mkdir()
    for name in (*TRAJ_FILES, "meta.json"):  # stand-in bytes: only the key is computed
        (traj / name).write_text(json.dumps({"file": name}))
    settings = {"width": 64, "height": 36, "backend": "compute"}
    keys = {}
    for value in (None, "", "auto", "torch", "triton", "triton:168"):
        if value is None:
            monkeypatch.delenv(LEADERS_ENV, raising=False)
        else:
            monkeypatch.setenv(LEADERS_ENV, value)
        code = stage2_code()
        assert code.startswith(code_version(STAGE2_SOURCES))
        keys[value] = render_key(traj, settings, code)
    # the default (unset, empty, auto): today's key, unchanged
    assert keys[None] == keys[""] == keys["auto"]
    assert stage2_code().endswith("+leaders=triton:168")
    # every choice its own key
    assert len({keys[v] for v in (None, "torch", "triton", "triton:168")}) == 4
    monkeypatch.setenv(LEADERS_ENV, "triton:0168")  # normalised: the same key
    assert render_key(traj, settings, stage2_code()) == keys["triton:168"]
    monkeypatch.setenv(LEADERS_ENV, "trition")  # a typo is refused, naming the variable
    with pytest.raises(ValueError, match="WMFORGE_COMPUTE_LEADERS='trition'; expected auto"):
        stage2_code()
