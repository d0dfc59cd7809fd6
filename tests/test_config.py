import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from stages.config import CONF_DIR, PARAMS_PATH, ConfigError, composed_yaml, load_params, validate


def test_params_yaml_matches_conf():
    """params.yaml is committed and must be exactly what conf/ composes to."""
    assert PARAMS_PATH.read_text(encoding="utf-8") == composed_yaml(), (
        "params.yaml is stale: run `wmforge params`")


def test_staleness_check_fails_when_conf_changes_alone(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    params = tmp_path / "params.yaml"
    params.write_text(composed_yaml(conf_dir=conf), encoding="utf-8")
    assert params.read_text() == composed_yaml(conf_dir=conf)
    inv = conf / "inventory" / "default.yaml"
    inv.write_text(inv.read_text().replace("max_extent_m: 1000.0", "max_extent_m: 900.0"))
    assert params.read_text() != composed_yaml(conf_dir=conf)


def test_cli_check_reports_stale(tmp_path):
    stale = tmp_path / "params.yaml"
    stale.write_text(PARAMS_PATH.read_text().replace("seed: 0", "seed: 1"))
    cmd = [sys.executable, "-m", "stages.cli", "params", "--check", "--out", str(stale)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 1 and "stale" in r.stderr
    ok = subprocess.run(cmd[:-1] + [str(PARAMS_PATH)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_wrong_key_names_the_key():
    raw = OmegaConf.load(PARAMS_PATH)
    raw.inventory["max_extnt_m"] = 5
    with pytest.raises(ConfigError, match=r"inventory\.max_extnt_m"):
        validate(raw, "params.yaml")


def test_wrong_type_names_the_key():
    with pytest.raises(ConfigError, match=r"inventory\.capsule_safety"):
        load_params(PARAMS_PATH, ["inventory.capsule_safety=lots"])


def test_shadow_taps_must_be_a_power_of_two_up_to_8():
    """The shader cycles a pixel's taps with a bit mask over its samples."""
    assert load_params(PARAMS_PATH, ["render.shadow_pcf_taps=8"]).render.shadow_pcf_taps == 8
    with pytest.raises(ConfigError, match=r"render\.shadow_pcf_taps is 3; expected 1, 2, 4 or 8"):
        load_params(PARAMS_PATH, ["render.shadow_pcf_taps=3"])


def test_shading_is_auto_deferred_or_forward():
    assert load_params(PARAMS_PATH, []).render.shading == "auto"
    assert load_params(PARAMS_PATH, ["render.shading=forward"]).render.shading == "forward"
    with pytest.raises(ConfigError, match=r"render\.shading is 'fast'; expected auto, deferred"):
        load_params(PARAMS_PATH, ["render.shading=fast"])


def test_wrong_key_in_conf_fails_composition(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "engine" / "embedded.yaml").write_text("name: embedded\nfsp: 30\n")
    with pytest.raises(ConfigError, match=r"engine\.fsp"):
        composed_yaml(conf_dir=conf)


def test_stage_refuses_bad_params_before_work(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text(PARAMS_PATH.read_text().replace("capsule_safety: 1.1", "capsule_safty: 1.1"))
    out = tmp_path / "inv"
    r = subprocess.run([sys.executable, "-m", "stages.inventory", "--params", str(bad),
                        "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 2
    assert "inventory.capsule_safty" in r.stderr
    assert not Path(out).exists()
