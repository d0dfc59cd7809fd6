"""A slot's staged copy of a level's pack is what its keys name (paper §5.3): a pack edited
while it is copied is copied again, and one edited in the library after staging is staged
again before Stage II, whose render keys hold the library's bytes (a render of the old copy
under the new key would look current). On the real PyBullet stadium (OBJ, MTL, JPEG)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stages.cluster import node_context
from stages.cluster.keys import AssetDigests
from stages.cluster.level_unit import LevelUnit
from stages.cluster.node_context import NodeContext
from stages.config import load_params

REL = Path("PyBulletData/Content/Maps/Stadium")


@pytest.fixture
def lib(sample_library, tmp_path) -> Path:
    out = tmp_path / "lib"
    shutil.copytree(sample_library / "PyBulletData", out / "PyBulletData")
    return out


def _unit(lib: Path, tmp: Path) -> LevelUnit:
    cfg = load_params()
    ctx = NodeContext(cfg, lib, tmp / "traj", tmp / "renders", cfg.render,
                      digests=AssetDigests())
    row = {"level_id": "PyBulletData/stadium", "path": str(REL / "stadium.obj")}
    return LevelUnit(ctx, row, None, True, char_dirs=[])


def test_a_pack_edited_after_staging_is_staged_again_before_stage_two(lib, tmp_path):
    unit, slot = _unit(lib, tmp_path), tmp_path / "slot"
    unit.stage(slot)
    staged = slot / "assets" / REL / "stadium_grass.jpg"
    first = staged.stat().st_ino
    assert unit.next_step(None, slot, "i1") is None  # type: ignore[arg-type] # nothing to render
    assert staged.stat().st_ino == first  # unchanged library: not copied again
    src = lib / REL / "stadium_grass.jpg"
    src.write_bytes(src.read_bytes() + b"edited")
    unit.phase = "render"
    assert unit.next_step(None, slot, "i2") is None  # type: ignore[arg-type]
    assert staged.read_bytes() == src.read_bytes()
    assert unit.staged[str(unit.pack)] == AssetDigests().tree(unit.pack)


def test_a_pack_edited_while_it_is_copied_is_copied_again(lib, tmp_path, monkeypatch):
    real = shutil.copytree
    src = lib / REL / "stadium_grass.jpg"
    calls: list[Path] = []

    def copy_then_edit(a, b, *k, **kw):  # the edit lands during the first copy
        out = real(a, b, *k, **kw)
        if Path(a) != lib / "PyBulletData":
            return out  # copytree's own calls for the subfolders
        calls.append(Path(b))
        if len(calls) == 1:
            src.write_bytes(src.read_bytes() + b"mid-copy")
        return out

    monkeypatch.setattr(node_context.shutil, "copytree", copy_then_edit)
    unit, slot = _unit(lib, tmp_path), tmp_path / "slot"
    unit.stage(slot)
    assert len(calls) == 2
    assert (slot / "assets" / REL / "stadium_grass.jpg").read_bytes() == src.read_bytes()
    assert unit.staged[str(unit.pack)] == AssetDigests().tree(unit.pack)


def test_a_pack_that_keeps_changing_is_not_staged_and_is_named(lib, tmp_path, monkeypatch):
    real = shutil.copytree
    src = lib / REL / "stadium_grass.jpg"

    def copy_then_edit(a, b, *k, **kw):
        out = real(a, b, *k, **kw)
        if Path(a) == lib / "PyBulletData":
            src.write_bytes(src.read_bytes() + b"x")
        return out

    monkeypatch.setattr(node_context.shutil, "copytree", copy_then_edit)
    unit, slot = _unit(lib, tmp_path), tmp_path / "slot"
    with pytest.raises(OSError, match="PyBulletData changed while it was copied, 3 times"):
        unit.stage(slot)
    assert not (slot / "assets" / "PyBulletData").exists()
