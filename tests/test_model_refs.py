"""What a render reads of a level or character: its folder, and the files its model references
outside that folder (``cluster.model_refs``, ``AssetDigests.model``). On the real Panda3D sample
environment (an egg.pz whose textures were moved to a sibling ``../maps``) and the real
PyBullet samurai monastery (OBJ + MTL), and on a glTF referring to ``../Textures``."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

from stages.cluster.keys import AssetDigests
from stages.cluster.model_refs import referenced_files

SAMPLE = Path(__file__).resolve().parents[1] / "assets" / "sample"


def _egg_with_textures_outside(tmp: Path) -> tuple[Path, Path]:
    """The sample environment with ``maps/`` moved beside its folder: (egg, maps folder)."""
    src = SAMPLE / "Panda3DSamples" / "Content" / "Environment"
    env = tmp / "Pack" / "Content" / "Environment"
    env.mkdir(parents=True)
    shutil.copytree(src / "maps", tmp / "Pack" / "Content" / "maps")
    text = zlib.decompress((src / "environment.egg.pz").read_bytes())
    egg = env / "environment.egg.pz"
    egg.write_bytes(zlib.compress(text.replace(b'"maps/', b'"../maps/')))
    return egg, tmp / "Pack" / "Content" / "maps"


def test_an_eggs_textures_are_its_references():
    egg = SAMPLE / "Panda3DSamples" / "Content" / "Environment" / "environment.egg.pz"
    refs = referenced_files(egg)
    maps = sorted((egg.parent / "maps").iterdir())
    assert refs == [p.resolve() for p in maps] and len(refs) == 12


def test_an_objs_material_library_and_its_maps_are_its_references():
    obj = SAMPLE / "PyBulletData" / "Content" / "Maps" / "Stadium" / "stadium.obj"
    assert referenced_files(obj) == [obj.with_suffix(".mtl").resolve(),
                                     (obj.parent / "stadium_grass.jpg").resolve()]
    monastery = SAMPLE / "PyBulletData" / "Content" / "Maps" / "samurai_monastry.obj"
    assert referenced_files(monastery) == [monastery.with_suffix(".mtl").resolve()]  # no maps


def test_a_level_is_keyed_with_the_textures_outside_its_folder(tmp_path):
    egg, maps = _egg_with_textures_outside(tmp_path)
    d = AssetDigests()
    before = d.model(egg)
    assert before != d.tree(egg.parent)  # the folder alone misses ../maps
    tex = maps / "envir-rock1.jpg"
    tex.write_bytes(tex.read_bytes() + b"\0")  # new bytes in a texture beside the folder
    assert AssetDigests().model(egg) != before
    # a file in ../maps that the level does not use is not part of it
    after = AssetDigests().model(egg)
    (maps / "unused.png").write_bytes(b"x")
    assert AssetDigests().model(egg) == after


def test_a_level_with_everything_in_its_folder_keeps_its_folder_digest():
    """No reference outside: the key is the folder's digest, as before (no re-render)."""
    egg = SAMPLE / "Panda3DSamples" / "Content" / "Environment" / "environment.egg.pz"
    d = AssetDigests()
    assert d.model(egg) == d.tree(egg.parent)


def test_a_gltfs_buffers_and_images_outside_its_folder(tmp_path):
    maps, tex = tmp_path / "P" / "Maps", tmp_path / "P" / "Textures"
    maps.mkdir(parents=True)
    tex.mkdir()
    png = SAMPLE / "Panda3DSamples" / "Content" / "Environment" / "maps" / "envir-reeds.png"
    shutil.copy(png, tex / "reeds%20a.png".replace("%20", " "))
    (maps / "level.bin").write_bytes(b"\0" * 12)
    doc = {"asset": {"version": "2.0"}, "buffers": [{"uri": "level.bin", "byteLength": 12},
                                                    {"uri": "data:,abc", "byteLength": 3}],
           "images": [{"uri": "../Textures/reeds%20a.png"}, {"uri": "https://x.test/a.png"},
                      {"uri": "/etc/passwd"}, {"bufferView": 0, "mimeType": "image/png"}]}
    level = maps / "level.gltf"
    level.write_text(json.dumps(doc))
    assert referenced_files(level) == sorted([(maps / "level.bin").resolve(),
                                              (tex / "reeds a.png").resolve()])
    d = AssetDigests()
    k = d.model(level)
    (tex / "reeds a.png").write_bytes(b"other")
    assert AssetDigests().model(level) != k


def test_a_file_that_does_not_parse_references_nothing(tmp_path):
    for name, data in (("a.gltf", b"{not json"), ("b.glb", b"glTF\x02\0\0\0"),
                       ("c.egg.pz", b"pz\0\0garbage"), ("d.obj", b"mtllib missing.mtl\n")):
        p = tmp_path / name
        p.write_bytes(data)
        refs = referenced_files(p)
        assert refs == ([(tmp_path / "missing.mtl").resolve()] if name == "d.obj" else []), name
    assert referenced_files(tmp_path / "gone.gltf") == []
