"""Type-check the editor scripts in ``unreal/`` against Unreal's own API (`wmforge lint`).

The stub is the editor-generated Python API of UE 5.6 shipped by the ``unreal-stub`` 0.3 wheel.
As shipped it is not valid Python (one default value that is not an expression, FACTS: Unreal).
:func:`prepare_stub` rewrites every ``def`` line that does not parse into a catch-all
``(self, *args, **kwargs)`` signature, appends this project's Movie Render Queue stub
(``unreal/typing/movie_render_queue.pyi``: the wheel was generated with that plugin off) and
writes the result as ``unreal.pyi`` in a cache folder keyed by the inputs' digests. mypy then
checks ``unreal/*.py`` with errors inside the stub ignored, so a misspelled Unreal attribute or
a wrong argument fails the lint.
"""

from __future__ import annotations

import ast
import hashlib
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MRQ_STUB = "typing/movie_render_queue.pyi"


class StubUnavailable(RuntimeError):
    """The unreal-stub wheel is not installed."""


def stub_source() -> Path:
    try:
        dist = metadata.distribution("unreal-stub")
    except metadata.PackageNotFoundError:
        raise StubUnavailable("the Unreal API stub is missing: pip install 'unreal-stub==0.3' "
                              "(pyproject extra 'dev')") from None
    return Path(str(dist.locate_file("unreal/unreal.py")))


def patch_stub(text: str) -> tuple[str, list[int]]:
    """Replace every ``def`` line that is not valid Python by a catch-all signature; returns the
    text and the 1-based numbers of the lines replaced."""
    lines = text.splitlines()
    bad = []
    for i, line in enumerate(lines):
        s = line.lstrip()
        if not (s.startswith("def ") and s.endswith(":")):
            continue
        try:
            ast.parse(s + "\n    ...\n")
        except SyntaxError:
            indent = line[: len(line) - len(s)]
            name = s[4:s.index("(")]
            lines[i] = f"{indent}def {name}(self, *args: Any, **kwargs: Any) -> None:"
            bad.append(i + 1)
    return "\n".join(lines) + "\n", bad


def prepare_stub(scripts: Path, cache: Path | None = None) -> Path:
    """The folder holding the patched ``unreal.pyi`` (made once per input digest)."""
    src = stub_source()
    mrq = scripts / MRQ_STUB
    h = hashlib.sha256(src.read_bytes())
    h.update(mrq.read_bytes())
    out = (cache or ROOT / ".cache" / "unreal-stub") / h.hexdigest()[:16]
    pyi = out / "unreal.pyi"
    if not pyi.exists():
        text, _bad = patch_stub(src.read_text(encoding="utf-8-sig"))
        out.mkdir(parents=True, exist_ok=True)
        tmp = pyi.with_suffix(".tmp")
        tmp.write_text(text + "\n# ---- Movie Render Queue (unreal/" + MRQ_STUB + ")\n"
                       + mrq.read_text(), encoding="utf-8")
        tmp.rename(pyi)
    return out


TYPED_SHARE_FLOOR = 0.947  # mypy's any-exprs report on unreal/ before issue 29: 94.7 %


def typed_share(scripts: Path | None = None, cache: Path | None = None) -> float:
    """The share of typed expressions in ``<scripts>/*.py`` (mypy's any-exprs report, total
    line): what keeps the stub check meaningful — an expression of type Any is not checked."""
    import tempfile

    scripts = (scripts or ROOT / "unreal").resolve()
    stub_dir = prepare_stub(scripts, cache)
    cfg = stub_dir / "mypy-any.ini"
    cfg.write_text("[mypy]\npython_version = 3.11\ncheck_untyped_defs = True\n"
                   "ignore_missing_imports = True\n"
                   f"mypy_path = {stub_dir}:{ROOT}\n"
                   f"cache_dir = {stub_dir / 'mypy_cache'}\n"
                   "[mypy-unreal]\nignore_errors = True\n")
    files = sorted(str(p) for p in scripts.glob("*.py"))
    with tempfile.TemporaryDirectory() as rep:
        subprocess.call([sys.executable, "-m", "mypy", "--config-file", str(cfg),
                         "--any-exprs-report", rep, *files], cwd=str(ROOT),
                        stdout=subprocess.DEVNULL)
        total = next(line for line in (Path(rep) / "any-exprs.txt").read_text().splitlines()
                     if line.split()[:1] == ["Total"])
    anys, exprs = (int(x) for x in total.split()[1:3])
    return 1.0 - anys / exprs


def mypy_unreal(scripts: Path | None = None, cache: Path | None = None) -> int:
    """mypy on ``<scripts>/*.py`` against the stub; returns mypy's exit code."""
    scripts = (scripts or ROOT / "unreal").resolve()
    try:
        stub_dir = prepare_stub(scripts, cache)
    except StubUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cfg = stub_dir / "mypy.ini"
    cfg.write_text("[mypy]\npython_version = 3.11\ncheck_untyped_defs = True\n"
                   "warn_unused_ignores = True\nno_implicit_optional = True\n"
                   "ignore_missing_imports = True\n"
                   f"mypy_path = {stub_dir}:{ROOT}\n"
                   f"cache_dir = {stub_dir / 'mypy_cache'}\n"
                   "[mypy-unreal]\nignore_errors = True\n")
    files = sorted(str(p) for p in scripts.glob("*.py"))
    return subprocess.call([sys.executable, "-m", "mypy", "--config-file", str(cfg), *files],
                           cwd=str(ROOT))
