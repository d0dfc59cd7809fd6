import json
import os
import struct
from pathlib import Path

import pandas as pd
import pytest

from stages.assetgen.levels import RECIPES
from stages.config import InventoryConfig, SampleLibraryConfig
from stages.inventory import main as inventory_main
from stages.inventory import run_inventory
from stages.shared.library_walk import walk_library

CFG = InventoryConfig()
UE_TAG = struct.pack("<I", 0x9E2A83C1)


def _by_id(df: pd.DataFrame) -> dict:
    return {r.level_id: r for r in df.itertuples()}


def _write(p: Path, data: bytes = b"") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


@pytest.fixture
def bad_library(tmp_path) -> Path:
    root = tmp_path / "lib"
    good = RECIPES["Courtyard"](1, 8, 16).to_glb()
    _write(root / "GoodPack/Maps/Yard.glb", good)
    _write(root / "GoodPack/Maps/Yard_Broken.glb", good[:500])
    _write(root / "GoodPack/Maps/Garbage.gltf", b"{not json")
    os.symlink("Missing.glb", root / "GoodPack/Maps/Gone.glb")  # dangling: unreadable
    os.mkfifo(root / "GoodPack/Maps/Pipe.glb")  # reading would block forever
    os.symlink("Loop_b", root / "GoodPack/Maps/Loop_a.glb")
    os.symlink("Loop_a.glb", root / "GoodPack/Maps/Loop_b")
    outside = _write(tmp_path / "secret/Outside.glb", good)
    os.symlink(outside, root / "GoodPack/Maps/Linked.glb")
    os.symlink(tmp_path / "secret", root / "GoodPack/LinkedDir")
    os.symlink("Yard.glb", root / "GoodPack/Maps/YardAlias.glb")  # inside: fine
    _write(root / "GoodPack/Maps/evil..name.glb", good)
    _write(Path(os.fsdecode(os.fsencode(str(root / "GoodPack/Maps")) + b"/caf\xe9.glb")), good)
    (root / "EmptyPack").mkdir()
    _write(root / "DocsOnly/readme.txt", b"no levels here")
    # an Unreal pack tree, placeholders only
    ue = root / "UEForest/ForestPack/Content/ForestPack"
    for m in ("Maps/Forest_Main", "Maps/Forest_Main_Lighting", "Maps/Forest_Audio",
              "Maps/Overview", "Maps/DemoMap_Night", "Maps/SL_Rocks", "Maps/OpenWorld"):
        _write(ue / f"{m}.umap", UE_TAG + b"\0" * 60)
        _write(ue / f"{m}_BuiltData.uasset", UE_TAG)
    _write(ue / "Meshes/SM_Rock.uasset", UE_TAG)
    ext = root / "UEForest/ForestPack/Content/__ExternalActors__/ForestPack/Maps/OpenWorld"
    for i in range(5):
        _write(ext / f"{i:X}/A{i}/actor{i}.uasset", UE_TAG)
    _write(root / "UEForest/ForestPack/Content/__ExternalObjects__/ForestPack/Maps/OpenWorld/"
           "1/obj.uasset", UE_TAG)
    return root


def test_bad_input_becomes_rows_with_reasons(bad_library):
    res = run_inventory(bad_library, CFG, "overrides.yaml")
    rows = _by_id(res.levels)
    assert rows["GoodPack/Yard"].kind == "persistent" and rows["GoodPack/Yard"].enabled
    assert rows["GoodPack/YardAlias"].kind == "persistent"  # in-root link is followed
    expect = {
        "GoodPack/Yard_Broken": "corrupt_file",
        "GoodPack/Garbage": "corrupt_file",
        "GoodPack/Gone.glb": "unreadable",
        "GoodPack/Pipe.glb": "not_a_regular_file",
        "GoodPack/Loop_a.glb": "symlink_loop",
        "GoodPack/Loop_b": "symlink_loop",
        "GoodPack/Linked.glb": "link_outside_root",
        "GoodPack/LinkedDir": "link_outside_root",
        "GoodPack/evil..name.glb": "unsafe_name",
        "GoodPack/caf\\xe9.glb": "non_utf8_name",
        "EmptyPack/": "empty_pack",
        "DocsOnly/": "no_level",
    }
    for lid, reason in expect.items():
        assert lid in rows, f"{lid} missing; have {sorted(rows)}"
        assert rows[lid].reason == reason, (lid, rows[lid].reason, rows[lid].detail)
        assert rows[lid].kind == "broken" and not rows[lid].enabled
    assert "Outside" not in " ".join(res.levels["level_id"])  # never read outside the root


def test_never_reads_outside_root(bad_library, monkeypatch):
    root = bad_library.resolve()
    opened = []
    real_read = Path.read_bytes

    def spy(self):
        opened.append(Path(os.path.realpath(self)))
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", spy)
    run_inventory(bad_library, CFG, "overrides.yaml")
    assert opened and all(root in p.parents for p in opened)


def test_unreal_tree_kinds(bad_library):
    rows = _by_id(run_inventory(bad_library, CFG, "overrides.yaml").levels)
    kinds = {k.split("/", 1)[1]: (r.kind, r.reason if isinstance(r.reason, str) else None)
             for k, r in rows.items()
             if k.startswith("UEForest/")}
    assert kinds == {
        "Forest_Main": ("persistent", None),
        "Forest_Main_Lighting": ("sublevel", "partial_sublevel"),
        "Forest_Audio": ("sublevel", "partial_sublevel"),
        "SL_Rocks": ("sublevel", "partial_sublevel"),
        "Overview": ("showcase", "showcase_layout"),
        "DemoMap_Night": ("showcase", "showcase_layout"),
        "OpenWorld": ("partitioned", "partitioned_world"),
    }
    main = rows["UEForest/Forest_Main"]
    assert main.content_dir == "UEForest/ForestPack/Content"
    assert rows["UEForest/OpenWorld"].file_count >= 6


def test_walk_is_finite_on_loops(bad_library):
    os.symlink("..", bad_library / "GoodPack/Maps/up")  # directory loop inside the root
    entries = list(walk_library(bad_library))
    assert len(entries) < 200


def test_sample_library_kinds(sample_library):
    res = run_inventory(sample_library, CFG, "overrides.yaml")
    rows = _by_id(res.levels)
    persistent = {k for k, r in rows.items() if r.kind == "persistent" and r.enabled}
    generated = {"NatureValley/AlpineMeadow", "UrbanBlocks/Downtown", "InteriorKit/Apartment",
                 "SciFiOutpost/Outpost", "CastleCourtyard/Courtyard", "DesertCanyon/Canyon"}
    real = {"Panda3DSamples/environment", "PyBulletData/samurai_monastry",
            "PyBulletData/stadium", "PyBulletData/terrain"}
    # built to fail renderability screening: the inventory (file system + model headers)
    # cannot tell them from good levels; only the engine can (tests/test_curation.py)
    traps = {"QATraps/InvisibleFloor", "QATraps/GhostHedges", "QATraps/SpikeField",
             "QATraps/MissingBuffers"}
    assert persistent == generated | real | traps
    assert {rows[k].category for k in generated} >= {"nature", "urban", "interior", "scifi",
                                                       "historical"}
    for k in generated:
        r = rows[k]
        assert min(r.extent_x_m, r.extent_y_m) >= 40, k
        assert r.player_starts >= 1 and r.pois >= 2 and r.dynamic_props >= 3 and r.lights >= 1
    assert {rows[k].lighting for k in generated} >= {"day", "dusk", "interior"}
    assert rows["NatureValley/Valley_Foliage"].kind == "sublevel"
    assert rows["InteriorKit/Apartment_Lighting"].kind == "sublevel"
    assert rows["UrbanBlocks/Showcase_Props"].kind == "showcase"
    assert rows["OpenWorldMega/Continent"].kind == "too_large"  # one file, 2 km: not partitioned
    assert "2000 x 2000" in rows["OpenWorldMega/Continent"].detail
    assert rows["CorruptRuins/Ruins"].reason == "corrupt_file"
    assert rows["TextureKit/"].reason == "no_level"
    assert rows["NatureValley/AlpineMeadow"].content_dir == "NatureValley/NatureValley/Content"
    assert rows["InteriorKit/Apartment"].content_dir == "InteriorKit/Scenes"
    assert rows["PyBulletData/samurai_monastry"].triangles > 120_000
    assert "BSD" in rows["Panda3DSamples/environment"].license
    assert "zlib" in rows["PyBulletData/stadium"].license
    # overrides.yaml (user-edited) lands in the rows
    assert rows["InteriorKit/Apartment"].walk_speed == pytest.approx(1.2)
    assert rows["DesertCanyon/Canyon"].exposure_compensation == pytest.approx(-0.3)


def test_sample_characters(sample_library):
    ch = run_inventory(sample_library, CFG, "overrides.yaml").characters.set_index("name")
    assert ch["ok"].all(), ch[["reason", "animation_notes"]]
    humanoids = ch[ch["kind"] == "humanoid"]
    assert len(humanoids) >= 3
    for name, r in humanoids.iterrows():
        amap = json.loads(r.animation_json)
        assert set(amap) == {"W", "A", "S", "D", "WA", "WD", "SA", "SD", "IDLE"}
        assert amap["W"] and amap["IDLE"], name
        assert 1.5 < r.visual_height_m < 2.1
        assert r.capsule_radius_m * 2 + r.capsule_half_height_m * 2 == pytest.approx(
            max(r.visual_height_m * CFG.capsule_safety, CFG.min_capsule_height_m))
    assert json.loads(ch.loc["Bea", "animation_json"])["A"] == "walk"  # fallback A → W
    bat = ch.loc["Bat"]
    assert bat.capsule_clamped and bat.visual_height_m < 0.1
    assert bat.visual_height_m < 0.2 * (2 * (bat.capsule_radius_m + bat.capsule_half_height_m))
    assert ch.loc["Drone", "locomotion"] == "fly" and ch.loc["Drone", "height_offset_m"] > 0
    assert json.loads(ch.loc["Panda", "animation_json"])["W"] == "panda-walk4.egg.pz"


def test_bad_character_manifest_is_a_row(tmp_path):
    root = tmp_path / "lib"
    _write(root / "Chars/Ghost/character.json", b'{"name": "Ghost"}')
    _write(root / "Chars/Blob/character.json", b'{"name": "Blob", "model": "blob.glb"}')
    _write(root / "Chars/Blob/blob.glb", b"glTF garbage")
    _write(root / "Chars/Fish/character.json", b'{"model": "f.glb", "locomotion": "teleport"}')
    ch = run_inventory(root, CFG, "overrides.yaml").characters.set_index("path")
    assert ch.loc["Chars/Ghost/character.json", "reason"] == "bad_manifest"
    assert "model" in ch.loc["Chars/Ghost/character.json", "animation_notes"]
    assert ch.loc["Chars/Blob/character.json", "reason"] == "model_corrupt_file"
    assert "teleport" in ch.loc["Chars/Fish/character.json", "animation_notes"]


def test_param_changes_output(sample_library, tmp_path):
    out = tmp_path / "inv"
    rc = inventory_main(["--library", str(sample_library), "--out", str(out),
                         "--params", "/nonexistent", "-S", "inventory.max_extent_m=5000"])
    assert rc == 0
    lv = pd.read_parquet(out / "levels.parquet").set_index("level_id")
    assert lv.loc["OpenWorldMega/Continent", "kind"] == "persistent"


def test_overrides_with_unknown_key_is_a_config_error(sample_library, tmp_path):
    import shutil

    lib = tmp_path / "lib"
    shutil.copytree(sample_library, lib)
    (lib / "overrides.yaml").write_text("InteriorKit/Apartment:\n  walkspeed: 1\n")
    with pytest.raises(ValueError, match="walkspeed"):
        run_inventory(lib, CFG, "overrides.yaml")


def test_sample_library_is_deterministic(tmp_path):
    from stages.sample_library import build_sample_library

    cfg = SampleLibraryConfig(include_wheel_assets=False, terrain_cells=16, texture_size=32)
    a, b = tmp_path / "a", tmp_path / "b"
    build_sample_library(a, cfg)
    build_sample_library(b, cfg)
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert fa == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in fa:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
