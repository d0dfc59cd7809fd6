import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from stages.config import (
    CONF_DIR,
    PARAMS_PATH,
    SCHEMA_DEFAULTS_NAME,
    ConfigError,
    WmforgeConfig,
    composed_yaml,
    load_params,
    schema_defaults_yaml,
    validate,
)


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
    render = conf / "render" / "sample.yaml"
    render.write_text(render.read_text().replace("width: 320", "width: 160"))
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


@pytest.mark.parametrize("key,bad,says", [
    ("cluster.runner_restarts", "-1", "a count >= 0"),
    ("cluster.death_check_s", "0", "seconds > 0"),
    ("cluster.dead_runner_s", "90", "<= cluster.death_check_s (60.0)"),
    ("upload.restart_backoff_s", "0", "seconds > 0"),
    ("upload.poison_after", "0", "a count >= 1"),
    ("upload.stable_s", "-5", "seconds > 0"),
    ("upload.end_wait_s", "0", "seconds > 0"),
    ("monitor.backlog_alert_s", "0", "seconds > 0"),
])
def test_cluster_limits_are_config_keys_checked_at_start_up(key, bad, says):
    """The executor's limits (runner restarts, uploader poison, waits, the backlog alert) are
    keys of the one schema, in params.yaml, and an out-of-range value names the key."""
    group, name = key.split(".")
    default = getattr(getattr(WmforgeConfig(), group), name)
    assert OmegaConf.load(PARAMS_PATH)[group][name] == default
    assert getattr(getattr(load_params(PARAMS_PATH, [f"{key}=30"]), group), name) == 30
    with pytest.raises(ConfigError) as e:
        load_params(PARAMS_PATH, [f"{key}={bad}"])
    assert f"{key} " in str(e.value) and says in str(e.value), str(e.value)


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


def test_schema_defaults_file_is_generated_from_the_dataclasses():
    """conf/schema_defaults.yaml is the one YAML statement of every default, written from the
    dataclasses (plain Hydra, as in `dvc exp run`, reads it without importing stages)."""
    assert (CONF_DIR / SCHEMA_DEFAULTS_NAME).read_text(encoding="utf-8") == \
        schema_defaults_yaml(), f"conf/{SCHEMA_DEFAULTS_NAME} is stale: run `wmforge params`"


def _leaves(node, path):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from _leaves(v, (*path, str(k)))
    else:
        yield path, node


def _schema_default(schema: DictConfig, path: tuple[str, ...]):
    """(found, default) for a dotted key; a new key under a dict-typed field (monitor.remediation,
    trajectories.actions.weights) is found, with no default."""
    node = schema
    for i, part in enumerate(path):
        if not isinstance(node, DictConfig):
            return False, None
        if part not in node:
            # a plain dict field takes any key; a dataclass node only its fields
            return OmegaConf.get_type(node) is dict and i == len(path) - 1, None
        node = node[part]
    return True, OmegaConf.to_container(node) if OmegaConf.is_config(node) else node


def conf_default_problems(conf_dir: Path) -> list[str]:
    """Every hand-written leaf under conf/ that restates a dataclass default, names no key of the
    schema, or sets a value outside an option file. Option files are conf/<group>/<name>.yaml;
    base files (conf/config.yaml, conf/<group>/default.yaml) may hold no value at all, since every
    default is the dataclass's (a value there would be a second default)."""
    schema = OmegaConf.structured(WmforgeConfig)
    problems = []
    for f in sorted(conf_dir.rglob("*.yaml")):
        rel = f.relative_to(conf_dir)
        if rel == Path(SCHEMA_DEFAULTS_NAME):
            continue
        body = OmegaConf.to_container(OmegaConf.load(f)) or {}
        assert isinstance(body, dict), rel
        body.pop("defaults", None)
        base = len(rel.parts) == 1 or rel.name == "default.yaml"
        leaves = (leaf for k, v in body.items() for leaf in _leaves(v, (*rel.parts[:-1], k)))
        for path, value in leaves:
            key = ".".join(path)
            found, default = _schema_default(schema, path)
            if not found:
                problems.append(f"{rel}: {key} is not a key of the schema")
            elif value == default and isinstance(value, bool) == isinstance(default, bool):
                problems.append(f"{rel}: {key}: {value!r} restates the dataclass default")
            elif base:
                problems.append(f"{rel}: {key}: {value!r} contradicts the dataclass default "
                                f"{default!r} in a base file (change the dataclass, or move the "
                                "value to an option file)")
    return problems


def test_no_conf_leaf_restates_or_contradicts_a_default():
    """Each default is stated once, in its dataclass: a conf/ leaf states only what an option
    differs by."""
    assert conf_default_problems(CONF_DIR) == []


def test_restated_and_base_file_values_are_caught(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    render = conf / "render" / "sample.yaml"
    render.write_text(render.read_text() + "crf: 20\nx264_presset: slow\n")
    (conf / "inventory").mkdir()
    (conf / "inventory" / "default.yaml").write_text("max_extent_m: 900.0\n")
    with (conf / "config.yaml").open("a") as f:
        f.write("seed: 3\n")
    assert conf_default_problems(conf) == [
        "config.yaml: seed: 3 contradicts the dataclass default 0 in a base file (change the "
        "dataclass, or move the value to an option file)",
        "inventory/default.yaml: inventory.max_extent_m: 900.0 contradicts the dataclass default "
        "1000.0 in a base file (change the dataclass, or move the value to an option file)",
        "render/sample.yaml: render.crf: 20 restates the dataclass default",
        "render/sample.yaml: render.x264_presset is not a key of the schema",
    ]


def test_stream_timeout_is_a_spawn_key_checked_at_start_up():
    """Stage I's wait for a streamed world around a spawn (issue 29) is bounded by a key of
    the one schema; a bound that is no bound names the key."""
    assert OmegaConf.load(PARAMS_PATH)["trajectories"]["spawn"]["stream_timeout_s"] == 60.0
    assert load_params(PARAMS_PATH, ["trajectories.spawn.stream_timeout_s=5"]
                       ).trajectories.spawn.stream_timeout_s == 5.0
    with pytest.raises(ConfigError, match=r"trajectories\.spawn\.stream_timeout_s is 0\.0: "
                                          r"expected a number of seconds > 0"):
        load_params(PARAMS_PATH, ["trajectories.spawn.stream_timeout_s=0"])


def test_the_machines_work_dir_comes_from_the_environment_and_an_override_wins(monkeypatch):
    """WMFORGE_WORK_DIR is this machine's node.work_dir (over params.yaml's); -S wins over it;
    unset, params.yaml's value stands."""
    from stages.config.loading import WORK_DIR_ENV

    monkeypatch.setenv(WORK_DIR_ENV, "/scratch/wm")
    assert load_params().node.work_dir == "/scratch/wm"
    assert load_params(overrides=["node.work_dir=/else"]).node.work_dir == "/else"
    monkeypatch.delenv(WORK_DIR_ENV)
    assert load_params().node.work_dir == OmegaConf.load(PARAMS_PATH).node.work_dir
