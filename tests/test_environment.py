"""The pinned environment: constraints.txt (scripts/pin_env.sh) names exactly the packages that
wmforge with its dev, ml and cluster extras needs, at the versions installed. scripts/setup.sh
installs with it, so a fresh clone gets the releases the project was tested with."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


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


def closure(root: str, extras: set[str]) -> dict[str, str]:
    """Installed name -> version for ``root`` and everything it requires (markers evaluated
    here, extras followed)."""
    seen: dict[str, set[str]] = {}
    versions: dict[str, str] = {}
    todo = [(root, extras)]
    while todo:
        name, want = todo.pop()
        key = canonicalize_name(name)
        if key in seen and want <= seen[key]:
            continue
        seen[key] = seen.get(key, set()) | want
        dist = md.distribution(name)
        versions[key] = dist.version
        for r in dist.requires or []:
            req = Requirement(r)
            if req.marker is None or any(req.marker.evaluate({"extra": e})
                                         for e in seen[key] | {""}):
                todo.append((req.name, set(req.extras)))
    return versions


def test_constraints_pin_exactly_what_the_project_installs():
    pinned = pins(ROOT / "constraints.txt")
    installed = closure("wmforge", {"dev", "ml", "cluster"})
    installed.pop("wmforge")
    unpinned = sorted(set(installed) - set(pinned))
    stale = sorted(set(pinned) - set(installed))
    differ = sorted(f"{k}: installed {installed[k]}, pinned {pinned[k]}"
                    for k in set(installed) & set(pinned) if installed[k] != pinned[k])
    hint = " (after a change to pyproject.toml's dependencies run scripts/pin_env.sh)"
    assert not unpinned, f"needed but not in constraints.txt: {unpinned}{hint}"
    assert not stale, f"in constraints.txt but needed by nothing: {stale}{hint}"
    assert not differ, f"constraints.txt and the environment disagree: {differ}{hint}"


def test_a_malformed_pin_is_named(tmp_path):
    bad = tmp_path / "constraints.txt"
    bad.write_text("# header\nnumpy==2.0.0\npandas>=2\n")
    try:
        pins(bad)
    except AssertionError as exc:
        assert "constraints.txt:3" in str(exc) and "pandas>=2" in str(exc)
    else:
        raise AssertionError("a pin that is not name==version must be refused")
