"""A slot's staged copy of a level's pack is what its keys name (paper §5.3): a pack edited
while it is copied is copied again, and one edited in the library after staging is staged
again before Stage II, whose render keys hold the library's bytes (a render of the old copy
under the new key would look current). On the real PyBullet stadium (OBJ, MTL, JPEG)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from stages.cluster import node_context
from stages.cluster.gpus import SlotPlan
from stages.cluster.keys import AssetDigests
from stages.cluster.level_unit import LevelUnit
from stages.cluster.node_context import NodeContext
from stages.config import load_params

REL = Path("PyBulletData/Content/Maps/Stadium")
CPU_SLOT = SlotPlan("c0", None)


@pytest.fixture
def lib(sample_library, tmp_path) -> Path:
    out = tmp_path / "lib"
    shutil.copytree(sample_library / "PyBulletData", out / "PyBulletData")
    return out


def _unit(lib: Path, tmp: Path, chars: list[Path] | None = None,
          indices: list[int] | None = None, overrides: tuple[str, ...] = ()) -> LevelUnit:
    cfg = load_params(overrides=[f"node.work_dir={tmp / 'work'}", *overrides])
    ctx = NodeContext(cfg, lib, tmp / "traj", tmp / "renders", cfg.render,
                      digests=AssetDigests(), char_packs=list(chars or []))
    row = {"level_id": "PyBulletData/stadium", "path": str(REL / "stadium.obj"), "scale": 1.0,
           "up_axis": "Z"}
    return LevelUnit(ctx, row, indices, True, char_dirs=list(chars or []))


def test_a_pack_edited_after_staging_is_staged_again_before_stage_two(lib, tmp_path):
    unit, slot = _unit(lib, tmp_path), tmp_path / "slot"
    unit.stage(slot)
    staged = slot / "assets" / REL / "stadium_grass.jpg"
    first = staged.stat().st_ino
    assert unit.next_step(CPU_SLOT, slot, "i1") is None  # nothing to render
    assert staged.stat().st_ino == first  # unchanged library: not copied again
    src = lib / REL / "stadium_grass.jpg"
    src.write_bytes(src.read_bytes() + b"edited")
    unit.phase = "render"
    assert unit.next_step(CPU_SLOT, slot, "i2") is None
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


def test_a_character_pack_edited_after_staging_is_linked_anew(lib, sample_library, tmp_path):
    shutil.copytree(sample_library / "CharacterPack", lib / "CharacterPack")
    pack = lib / "CharacterPack"
    unit, slot = _unit(lib, tmp_path, [pack]), tmp_path / "slot"
    unit.stage(slot)
    link = next((slot / "characters").iterdir())
    first = link.resolve()
    f = next(p for p in sorted(pack.rglob("*")) if p.is_file())
    f.write_bytes(f.read_bytes() + b"edited")
    assert unit.next_step(CPU_SLOT, slot, "i1") is None
    again = next((slot / "characters").iterdir()).resolve()
    assert again != first and (again / f.relative_to(pack)).read_bytes() == f.read_bytes()
    assert again.name.endswith(AssetDigests().tree(pack)[:12])


def test_trajectories_made_on_the_old_pack_are_made_again_before_stage_two(lib, tmp_path):
    unit, slot = _unit(lib, tmp_path, indices=[0]), tmp_path / "slot"
    unit.stage(slot)
    old = unit.chash
    unit.phase = "render"  # as after its Stage I
    src = lib / REL / "stadium_grass.jpg"
    src.write_bytes(src.read_bytes() + b"edited")
    step = unit.next_step(CPU_SLOT, slot, "i1")
    assert step is not None and step.kind == "stage1" and unit.chash != old
    assert (slot / "assets" / REL / "stadium_grass.jpg").read_bytes() == src.read_bytes()


def test_a_failed_restaging_fails_the_unit_naming_the_library_pack(lib, tmp_path, monkeypatch):
    from stages.cluster.steps import StagingError

    unit, slot = _unit(lib, tmp_path), tmp_path / "slot"
    unit.stage(slot)
    src = lib / REL / "stadium_grass.jpg"
    src.write_bytes(src.read_bytes() + b"edited")
    real = shutil.copytree

    def copy_then_edit(a, b, *k, **kw):  # every copy sees the pack change under it
        out = real(a, b, *k, **kw)
        if Path(a) == lib / "PyBulletData":
            src.write_bytes(src.read_bytes() + b"x")
        return out

    monkeypatch.setattr(node_context.shutil, "copytree", copy_then_edit)
    with pytest.raises(StagingError) as err:
        unit.next_step(CPU_SLOT, slot, "i1")
    assert err.value.stage == "render" and str(lib / "PyBulletData") in err.value.detail
    assert str(slot) not in err.value.detail and "changed while it was copied" in err.value.detail


def test_a_linked_pack_is_the_root_of_its_references(lib, tmp_path):
    """A library whose pack folder is a symbolic link: the pack is the link, as written."""
    real_pack = tmp_path / "elsewhere" / "PyBulletData"
    real_pack.parent.mkdir()
    (lib / "PyBulletData").rename(real_pack)
    (lib / "PyBulletData").symlink_to(real_pack)
    unit = _unit(lib, tmp_path)
    level = lib / REL / "stadium.obj"
    assert unit._pack_of(level) == Path(os.path.abspath(lib / "PyBulletData"))


class _RestageFails:
    """A unit whose staging again before Stage II fails (the runner's side of it)."""

    unit_id = level_id = "Pack/Level"

    def __init__(self) -> None:
        self.cleaned = 0

    def stage(self, slot_dir: Path) -> None:
        (slot_dir / "assets").mkdir(parents=True, exist_ok=True)

    def next_step(self, slot, slot_dir: Path, instance: str):
        from stages.cluster.steps import StagingError

        raise StagingError("render", "lib/Pack: staging again after a change in the library "
                           "failed: no space left on device")

    def step_ended(self, result) -> None:
        raise AssertionError("no step ran")

    def recover(self, step) -> None:
        pass

    def cleanup(self, slot_dir: Path) -> None:
        self.cleaned += 1


def test_the_runner_fails_a_unit_whose_restaging_fails_and_goes_on(tmp_path):
    from stages.cluster.node_runner import NodeRunner
    from stages.cluster.steps import UnitFailure

    cfg = load_params(overrides=[f"node.work_dir={tmp_path / 'work'}", "node.cpu_slots=1",
                                 "node.gpus=[]"])
    units = [_RestageFails(), _RestageFails()]
    r = NodeRunner(cfg.node, log=lambda m: None)
    try:
        fails = r.run(units)  # type: ignore[arg-type]
    finally:
        r.release()
    want = UnitFailure("Pack/Level", "Pack/Level", "render", "staging_failed",
                       "lib/Pack: staging again after a change in the library failed: no "
                       "space left on device", 1, "")
    assert fails == [want, want] and [u.cleaned for u in units] == [1, 1]


def test_render_backend_auto_is_resolved_for_the_slot_before_the_key(lib, tmp_path, monkeypatch):
    """The render step's settings and keys name the backend that will draw: compute on a GPU
    slot an MPS daemon serves, gl on a CPU slot (``auto`` never reaches a key)."""
    import json

    from stages.cluster.gpus import GpuInfo
    from stages.engine.compute import backend
    from stages.engine.publish import TRAJ_FILES

    monkeypatch.setattr(backend, "mps_serves", lambda: True)
    gpu_slot = SlotPlan("g0s0", GpuInfo(0, "GPU-0", "NVIDIA H100 80GB HBM3"))
    specs = {}
    for name, slot in (("gpu", gpu_slot), ("cpu", CPU_SLOT)):
        unit = _unit(lib, tmp_path / name, overrides=("render.backend=auto",))
        tdir = unit.out / "traj_0000"
        tdir.mkdir(parents=True)
        for f in (*TRAJ_FILES, "meta.json"):
            (tdir / f).write_text("{}")
        unit.phase = "render"
        step = unit.next_step(slot, tmp_path / name / "slot", f"i_{name}")
        assert step is not None and step.kind == "render"
        specs[name] = json.loads((step.folder / "instance.json").read_text())
    assert specs["gpu"]["settings"]["backend"] == "compute"
    assert "backend" not in specs["cpu"]["settings"]  # gl: the gl key, as render.backend=gl
    assert specs["gpu"]["jobs"][0]["key"] != specs["cpu"]["jobs"][0]["key"]
