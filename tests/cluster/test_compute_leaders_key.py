"""``render.compute_leaders`` (issue #30): the compute backend's leaders path is a config key.
A choice other than auto enters the render settings, and so the render key (the kernel and
the torch graph may differ by a step of a stored code on a GPU); auto, and any value on the
gl backend, leave the key as it was. Bad values are refused where they are read, naming the
key."""

from __future__ import annotations

import json

import pytest

from stages.cluster.keys import render_key, render_settings
from stages.config import ConfigError, load_params
from stages.engine.publish import TRAJ_FILES
from stages.engine.render_settings import RenderSettings, RenderSettingsError


def _settings(*overrides: str) -> RenderSettings:
    return render_settings(load_params(overrides=list(overrides)).render, 30)


def test_a_chosen_leaders_path_enters_the_render_key(tmp_path) -> None:
    traj = tmp_path / "traj_0000"
    traj.mkdir()
    for name in (*TRAJ_FILES, "meta.json"):  # stand-in bytes: only the key is computed
        (traj / name).write_text(json.dumps({"file": name}))
    keys = {}
    for value in ("auto", "torch", "triton", "triton:168"):
        s = _settings("render.backend=compute", f"render.compute_leaders={value}")
        assert s.compute_leaders == value
        assert ("compute_leaders" in s.as_dict()) == (value != "auto")
        keys[value] = render_key(traj, s, "code")
    assert len(set(keys.values())) == 4  # every choice its own key
    # auto: the key of an instance.json written before the setting existed (no such key)
    d = _settings("render.backend=compute", "render.compute_leaders=torch").as_dict()
    del d["compute_leaders"]
    assert render_key(traj, RenderSettings.from_dict(d), "code") == keys["auto"]
    # normalised: the same key
    s = _settings("render.backend=compute", "render.compute_leaders=triton:0168")
    assert s.compute_leaders == "triton:168" and render_key(traj, s, "code") == keys["triton:168"]
    # the gl backend ignores it: no key change
    gl = {_settings(f"render.compute_leaders={v}").as_dict().get("compute_leaders")
          for v in ("auto", "torch", "triton")}
    assert gl == {None}
    # instance.json round trip
    s = _settings("render.backend=compute", "render.compute_leaders=torch")
    assert RenderSettings.from_dict(json.loads(json.dumps(s.as_dict()))) == s


def test_bad_values_are_refused_naming_the_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match="render.compute_leaders is 'trition'; expected auto, "
                       "triton, torch or triton:<registers a lane, 64 to 255>"):
        load_params(overrides=["render.compute_leaders=trition"])
    with pytest.raises(ConfigError, match="render.compute_leaders is 'triton:32'"):
        load_params(overrides=["render.compute_leaders=triton:32"])
    d = _settings("render.backend=compute").as_dict()
    d["compute_leaders"] = "fast"
    with pytest.raises(RenderSettingsError, match="instance.json: compute_leaders is 'fast'"):
        RenderSettings.from_dict(d, "instance.json")
