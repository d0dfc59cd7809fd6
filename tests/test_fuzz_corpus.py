"""Bad input never crashes a stage, and nothing outside the library root is opened (issue 19,
point 5). The corpus (tests/fuzz/corpus/, written by tests/fuzz/make_corpus.py) holds glTF/GLB
with wrong types, missing keys, out-of-range indices, truncated buffers, data: URIs, buffer and
image URIs pointing outside the library root, cyclic node graphs, truncated egg/obj and
zero-byte files. Every one is an inventory row with its expected reason code; the inventory,
screening (Stage I, Stage II, the probe), and Stage I / Stage II forced onto the files that
point outside, all exit 0; every ``open``/``openat`` of every process is traced with strace
(not only Python's own reads), and none touches the sentinels outside the root or any other
file outside the library, the outputs, the program and the system."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from stages.core.asset_guard import REASONS
from tests.conftest import REPO
from tests.small_library import build_small_library

CORPUS = REPO / "tests/fuzz/corpus"
STRACE = shutil.which("strace")
pytestmark = pytest.mark.skipif(STRACE is None, reason="strace is not installed")
_OPEN = re.compile(r'\b(?:open|openat|openat2|creat)\((?:[^,"]+, )?"((?:[^"\\]|\\.)*)"')


def traced(cmd: list[str], run: Path, log: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(run / "home"), PYTHONPATH=str(REPO),
               XDG_CACHE_HOME=str(run / "home/.cache"), MPLCONFIGDIR=str(run / "home/mpl"))
    return subprocess.run([STRACE, "-f", "-qq", "-s", "4096", "-e",
                           "trace=open,openat,openat2,creat", "-o", str(log),
                           sys.executable, *cmd], cwd=run, env=env, capture_output=True,
                          text=True, timeout=600)


def opened(log: Path, cwd: Path) -> set[str]:
    out = set()
    for line in log.read_text(errors="replace").splitlines():
        m = _OPEN.search(line)
        if m:
            p = m.group(1).encode().decode("unicode_escape", "replace")
            out.add(os.path.normpath(p if p.startswith("/") else os.path.join(cwd, p)))
    return out


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    outside, lib, run = base / "outside", base / "lib", base / "run"
    outside.mkdir()
    for name in ("secret.bin", "secret.png", "secret.egg"):
        (outside / name).write_bytes(b"sentinel: must never be opened")
    shutil.copytree(CORPUS / "Fuzz", lib / "Fuzz")
    for f in (lib / "Fuzz").iterdir():
        data = f.read_bytes()
        if b"@OUTSIDE@" in data:
            f.write_bytes(data.replace(b"@OUTSIDE@", str(outside).encode()))
    build_small_library(lib, pack="Yard", levels={}, char_pack="Folk", char_name="Walker")
    (run / "home").mkdir(parents=True)
    return base, outside, lib, run


def allowed_roots(base: Path) -> list[str]:
    """Where a stage may open files: the library and its own outputs, the program (repo,
    interpreter, packages) and the system."""
    roots = [base / "lib", base / "run", REPO, Path(sys.prefix), Path(sys.base_prefix),
             Path(os.path.realpath(sys.executable)).parent.parent]
    roots = [os.path.realpath(r) for r in roots] + [str(r) for r in roots]
    return roots + ["/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev", "/bin", "/run"]


def check_trace(log: Path, base: Path, outside: Path) -> None:
    paths = opened(log, base / "run")
    assert paths, "strace recorded no open at all"
    ok = allowed_roots(base)
    leaked = sorted(p for p in paths if str(outside) in p or "secret." in p)
    assert not leaked, leaked
    stray = sorted(p for p in paths if not any(p == r or p.startswith(r.rstrip("/") + "/")
                                               for r in ok))
    assert not stray, stray


COMMON = ["--params", str(REPO / "params.yaml")]


def test_corpus_is_what_the_generator_writes(tmp_path):
    sys.path.insert(0, str(REPO / "tests/fuzz"))
    try:
        import make_corpus
    finally:
        sys.path.pop(0)
    make_corpus.write(tmp_path)
    for f in sorted((tmp_path / "Fuzz").iterdir()):
        assert f.read_bytes() == (CORPUS / "Fuzz" / f.name).read_bytes(), f.name


def test_every_bad_file_is_a_row_with_its_reason_and_nothing_outside_is_opened(fuzz):
    base, outside, lib, run = fuzz
    log = run / "inventory.trace"
    res = traced(["-m", "stages.inventory", "--library", str(lib), "--out", str(run / "inv"),
                  *COMMON], run, log)
    assert res.returncode == 0, res.stderr
    levels = pd.read_parquet(run / "inv/levels.parquet")
    rows = {Path(p).name: r for p, r in zip(levels["path"], levels.to_dict("records"),
                                            strict=True)}
    expected = json.loads((CORPUS / "EXPECTED.json").read_text())
    got = {n: (None if rows[n]["enabled"] else rows[n]["reason"]) for n in expected}
    assert got == expected
    for n, reason in expected.items():
        if reason:  # the detail names what is wrong
            assert rows[n]["kind"] == "broken" and str(rows[n]["detail"]).strip()
    assert set(REASONS) <= set(expected.values())
    check_trace(log, base, outside)


@pytest.mark.e2e
def test_screening_stage1_stage2_on_the_corpus_exit_0_and_stay_inside(fuzz):
    base, outside, lib, run = fuzz
    if not (run / "inv/levels.parquet").exists():  # run alone (-m e2e): make the inventory
        res = traced(["-m", "stages.inventory", "--library", str(lib), "--out",
                      str(run / "inv"), *COMMON], run, run / "inventory.trace")
        assert res.returncode == 0, res.stderr[-3000:]
    knobs = ["-S", f"library.root={lib}", "-S", f"node.work_dir={run / 'work'}",
             "-S", f"node.snapshot_dir={run / 'snap'}"]
    log = run / "screen.trace"
    res = traced(["-m", "stages.screen", "--inventory", str(run / "inv"), "--out",
                  str(run / "screen"), *COMMON, *knobs, "-S", "screen.clips=1",
                  "-S", "screen.clip_s=1.0", "-S", "screen.width=128", "-S", "screen.height=72",
                  "-S", f"screen.review_file={run / 'none.yaml'}"], run, log)
    assert res.returncode == 0, res.stderr[-3000:]
    screened = pd.read_parquet(run / "screen/levels.parquet")
    enabled = {f"Fuzz/{n.split('.')[0]}" for n, r in
               json.loads((CORPUS / "EXPECTED.json").read_text()).items() if r is None}
    assert set(screened["level_id"]) == enabled
    clips = pd.read_parquet(run / "screen/clips.parquet")
    # the truncated egg does not load: its engine's own words are kept
    egg = clips[clips["level_id"] == "Fuzz/egg_truncated"]
    assert egg["reasons"].tolist() == ["load_failure"] and egg["detail"].iloc[0]
    assert (screened.set_index("level_id").loc["Fuzz/ok_data_uri", "clips_rendered"]) == 1
    check_trace(log, base, outside)

    # Stage I forced onto the levels that point outside the root (the inventory refused them)
    inv = pd.read_parquet(run / "inv/levels.parquet")
    bad = inv["path"].str.contains("uri_parent_escape|egg_texture_outside|image_outside")
    forced = inv[bad].assign(enabled=True, kind="persistent", scale=1.0, up_axis="Z")
    (run / "inv_forced").mkdir()
    forced.to_parquet(run / "inv_forced/levels.parquet")
    shutil.copy(run / "inv/characters.parquet", run / "inv_forced/characters.parquet")
    log1 = run / "stage1.trace"
    res = traced(["-m", "stages.trajectories", "--inventory", str(run / "inv_forced"),
                  "--out", str(run / "traj"), *COMMON, *knobs,
                  "-S", "trajectories.frames=10"], run, log1)
    assert res.returncode == 0, res.stderr[-3000:]
    fails = pd.read_parquet(run / "traj/failures.parquet")
    assert len(fails) == 3 and set(fails["reason"]) == {"load_failed"}
    assert all("uri_outside_root" in d for d in fails["detail"]), fails["detail"].tolist()
    check_trace(log1, base, outside)

    # Stage II handed a trajectory whose recorded level points outside the root
    src = next((run / "screen/work/trajectories/Fuzz__ok_data_uri").glob("traj_*"))
    dst = run / "t2/Fuzz__ok_data_uri" / src.name
    shutil.copytree(src, dst)
    meta = json.loads((dst / "meta.json").read_text())
    meta["level"]["path"] = str(lib / "Fuzz/uri_parent_escape.gltf")
    (dst / "meta.json").write_text(json.dumps(meta))
    log2 = run / "stage2.trace"
    res = traced(["-m", "stages.render", "--trajectories", str(run / "t2"), "--out",
                  str(run / "r2"), *COMMON, *knobs, "-S", "render.width=64",
                  "-S", "render.height=36", "-S", "render.spatial_samples=1"], run, log2)
    assert res.returncode == 0, res.stderr[-3000:]
    rf = pd.read_parquet(run / "r2/failures.parquet")
    assert rf["reason"].tolist() == ["bad_asset"] and "uri_outside_root" in rf["detail"].iloc[0]
    check_trace(log2, base, outside)


def test_the_trace_check_catches_an_open_outside(fuzz):
    """Negative control: a child process that opens a sentinel through a C-level open (not a
    Python read) is caught by the same check."""
    base, outside, _, run = fuzz
    log = run / "control.trace"
    code = ("import ctypes, os, subprocess, sys; libc = ctypes.CDLL(None); "
            f"libc.open({str(outside / 'secret.bin').encode()!r}, os.O_RDONLY)")
    res = traced(["-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                        f"{code!r}], check=True)"], run, log)
    assert res.returncode == 0, res.stderr
    with pytest.raises(AssertionError, match="secret.bin"):
        check_trace(log, base, outside)
