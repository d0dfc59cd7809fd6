"""The pinned environment: constraints.txt (scripts/pin_env.py) names exactly the packages that
wmforge with its dev, ml and cluster extras needs, at the versions installed. scripts/setup.sh
installs with it, so a fresh clone gets the releases the project was tested with."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("pin_env", ROOT / "scripts" / "pin_env.py")
assert _spec is not None and _spec.loader is not None
pin_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pin_env)


def pins(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and name and version, f"{path.name}:{n}: expected name==version, got {line!r}"
        out[canonicalize_name(name)] = version.strip()
    return out


def test_constraints_pin_exactly_what_the_project_installs():
    pinned = pins(ROOT / "constraints.txt")
    installed = pin_env.closure()
    unpinned = sorted(set(installed) - set(pinned))
    stale = sorted(set(pinned) - set(installed))
    differ = sorted(f"{k}: installed {installed[k]}, pinned {pinned[k]}"
                    for k in set(installed) & set(pinned) if installed[k] != pinned[k])
    hint = (" (after a change to pyproject.toml's dependencies: pip install -e "
            "'.[dev,ml,cluster]', then python scripts/pin_env.py)")
    assert not unpinned, f"needed but not in constraints.txt: {unpinned}{hint}"
    assert not stale, f"in constraints.txt but needed by nothing: {stale}{hint}"
    assert not differ, f"constraints.txt and the environment disagree: {differ}{hint}"
    assert "wmforge" not in pinned and "pandas" in pinned and "av" in pinned


def test_the_closure_follows_extras_and_leaves_out_what_nothing_needs():
    full, base = pin_env.closure(), pin_env.closure(extras=set())
    assert "torch" in full and "torch" not in base  # the ml extra
    assert "ray" in full and "pytest" in full and "pandas" in base
    assert "pip" not in full  # installed in every venv, needed by nothing


def test_a_malformed_pin_is_named(tmp_path):
    bad = tmp_path / "constraints.txt"
    bad.write_text("# header\nnumpy==2.0.0\npandas>=2\n")
    try:
        pins(bad)
    except AssertionError as exc:
        assert "constraints.txt:3" in str(exc) and "pandas>=2" in str(exc)
    else:
        raise AssertionError("a pin that is not name==version must be refused")
