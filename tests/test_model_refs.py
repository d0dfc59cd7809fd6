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


def _egg_with_textures_outside(sample: Path, tmp: Path) -> tuple[Path, Path]:
    """The sample environment with ``maps/`` moved beside its folder: (egg, maps folder)."""
    src = sample / "Panda3DSamples" / "Content" / "Environment"
    env = tmp / "Pack" / "Content" / "Environment"
    env.mkdir(parents=True)
    shutil.copytree(src / "maps", tmp / "Pack" / "Content" / "maps")
    text = zlib.decompress((src / "environment.egg.pz").read_bytes())
    egg = env / "environment.egg.pz"
    egg.write_bytes(zlib.compress(text.replace(b'"maps/', b'"../maps/')))
    return egg, tmp / "Pack" / "Content" / "maps"


def test_an_eggs_textures_are_its_references(sample_library):
    egg = sample_library / "Panda3DSamples" / "Content" / "Environment" / "environment.egg.pz"
    refs = referenced_files(egg)
    maps = sorted((egg.parent / "maps").iterdir())
    assert refs == [p.resolve() for p in maps] and len(refs) == 12


def test_an_objs_material_library_and_its_maps_are_its_references(sample_library):
    obj = sample_library / "PyBulletData" / "Content" / "Maps" / "Stadium" / "stadium.obj"
    assert referenced_files(obj) == [obj.with_suffix(".mtl").resolve(),
                                     (obj.parent / "stadium_grass.jpg").resolve()]
    monastery = sample_library / "PyBulletData" / "Content" / "Maps" / "samurai_monastry.obj"
    assert referenced_files(monastery) == [monastery.with_suffix(".mtl").resolve()]  # no maps


def test_a_level_is_keyed_with_the_textures_outside_its_folder(sample_library, tmp_path):
    egg, maps = _egg_with_textures_outside(sample_library, tmp_path)
    pack = tmp_path / "Pack"
    d = AssetDigests()
    before = d.model(egg, pack)
    assert before != d.tree(egg.parent)  # the folder alone misses ../maps
    assert d.model(egg) == d.tree(egg.parent)  # no pack given: nothing beyond its folder
    tex = maps / "envir-rock1.jpg"
    tex.write_bytes(tex.read_bytes() + b"\0")  # new bytes in a texture beside the folder
    assert AssetDigests().model(egg, pack) != before
    assert d.model(egg, pack) != before  # the same digests object (its cache) sees it too
    # a file in ../maps that the level does not use is not part of it
    after = AssetDigests().model(egg, pack)
    (maps / "unused.png").write_bytes(b"x")
    assert AssetDigests().model(egg, pack) == after


def test_references_are_cached_under_the_model_files_stamp(sample_library, tmp_path,
                                                           monkeypatch):
    import stages.cluster.model_refs as mr

    egg, _maps = _egg_with_textures_outside(sample_library, tmp_path)
    pack, cache = tmp_path / "Pack", tmp_path / "digests.json"
    d = AssetDigests(cache)
    first = d.references(egg, pack)
    d.save()
    kept = json.loads(cache.read_text())
    entry = next(v for k, v in kept.items() if k.startswith("refs:"))
    assert entry[-1] == mr.raw_references(egg) and len(first or []) == 12
    assert entry[-1][0].startswith("../maps/")  # as written: resolved at each call
    reads: list[Path] = []
    real = mr.raw_references
    monkeypatch.setattr(mr, "raw_references", lambda q: reads.append(q) or real(q))
    assert AssetDigests(cache).references(egg, pack) == first and reads == []  # a hit
    text = zlib.decompress(egg.read_bytes()).replace(b'"../maps/envir-rock1.jpg"',
                                                    b'"../maps/envir-rock2.jpg"')
    egg.write_bytes(zlib.compress(text))  # rewritten: its stamp changes, the list with it
    again = AssetDigests(cache).references(egg, pack) or []
    assert reads == [egg] and len(again) == 11
    assert not [q for q in again if q.name == "envir-rock1.jpg"]


def test_a_retargeted_link_is_another_level_though_the_file_is_unchanged(sample_library,
                                                                        tmp_path):
    egg, maps = _egg_with_textures_outside(sample_library, tmp_path)
    pack = tmp_path / "Pack"
    other = tmp_path / "Pack" / "Content" / "maps2"
    shutil.copytree(maps, other)
    (other / "envir-rock1.jpg").write_bytes(b"another rock")
    moved = tmp_path / "Pack" / "Content" / "maps1"
    maps.rename(moved)
    maps.symlink_to("maps1")
    d = AssetDigests()
    before = d.model(egg, pack)
    maps.unlink()
    maps.symlink_to("maps2")  # the egg's bytes and stamp unchanged, its textures not
    assert d.model(egg, pack) != before


def test_a_model_too_large_to_read_is_keyed_with_its_whole_pack(sample_library, tmp_path,
                                                                monkeypatch):
    import stages.cluster.model_refs as mr

    egg, _maps = _egg_with_textures_outside(sample_library, tmp_path)
    pack = tmp_path / "Pack"
    monkeypatch.setattr(mr, "MAX_READ", 100)  # the egg is larger: its references unknown
    assert mr.referenced_files(egg, pack) is None
    d = AssetDigests()
    k = d.model(egg, pack)
    assert k not in (d.tree(egg.parent), d.tree(pack))
    (pack / "README.txt").write_text("any file of the pack")
    assert AssetDigests().model(egg, pack) != k  # the safe side: the whole pack


def test_a_level_with_everything_in_its_folder_keeps_its_folder_digest(sample_library):
    """No reference outside: the key is the folder's digest, as before (no re-render)."""
    egg = sample_library / "Panda3DSamples" / "Content" / "Environment" / "environment.egg.pz"
    d = AssetDigests()
    assert d.model(egg) == d.tree(egg.parent)


def test_a_gltfs_buffers_and_images_outside_its_folder(sample_library, tmp_path):
    maps, tex = tmp_path / "P" / "Maps", tmp_path / "P" / "Textures"
    maps.mkdir(parents=True)
    tex.mkdir()
    png = sample_library / "Panda3DSamples" / "Content" / "Environment" / "maps"
    png = png / "envir-reeds.png"
    shutil.copy(png, tex / "reeds%20a.png".replace("%20", " "))
    (maps / "level.bin").write_bytes(b"\0" * 12)
    doc = {"asset": {"version": "2.0"}, "buffers": [{"uri": "level.bin", "byteLength": 12},
                                                    {"uri": "data:,abc", "byteLength": 3}],
           "images": [{"uri": "../Textures/reeds%20a.png"}, {"uri": "https://x.test/a.png"},
                      {"uri": "/etc/passwd"}, {"bufferView": 0, "mimeType": "image/png"}]}
    level = maps / "level.gltf"
    level.write_text(json.dumps(doc))
    assert referenced_files(level, tmp_path / "P") == sorted([(maps / "level.bin").resolve(),
                                                             (tex / "reeds a.png").resolve()])
    assert referenced_files(level) == [(maps / "level.bin").resolve()]  # root: its folder
    d = AssetDigests()
    k = d.model(level, tmp_path / "P")
    (tex / "reeds a.png").write_bytes(b"other")
    assert AssetDigests().model(level, tmp_path / "P") != k


def test_nothing_outside_the_pack_is_followed(tmp_path):
    """The asset guard refuses these before a load; the keys never read or hash them."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"s" * 64)
    pack, maps = tmp_path / "P", tmp_path / "P" / "Maps"
    maps.mkdir(parents=True)
    doc = {"asset": {"version": "2.0"},
           "buffers": [{"uri": "../../secret.bin", "byteLength": 64},
                       {"uri": "%2F" + str(secret).lstrip("/").replace("/", "%2F"),
                        "byteLength": 64}],
           "images": [{"uri": "file:///etc/passwd"}, {"uri": "..%2F..%2Fsecret.bin"}]}
    (maps / "l.gltf").write_text(json.dumps(doc))
    (maps / "l.obj").write_text("mtllib ../../secret.bin\nmtllib /etc/passwd\n")
    for name in ("l.gltf", "l.obj"):
        assert referenced_files(maps / name, pack) == [], name
        assert AssetDigests().model(maps / name, pack) == AssetDigests().tree(maps)


def test_mtl_maps_with_options_spaces_and_quotes(tmp_path):
    pack, maps, tex = tmp_path / "P", tmp_path / "P" / "Maps", tmp_path / "P" / "Tex"
    maps.mkdir(parents=True)
    tex.mkdir()
    for n in ("my tex.png", "bump.png", "spec.png", "a%20b.png", "d.png"):
        (tex / n).write_bytes(n.encode())
    (maps / "lib one.mtl").write_text(
        "newmtl a\n"
        "map_Kd -bm 0.5 -o 0.1 0.2 ../Tex/my tex.png\n"
        "bump -imfchan l -clamp on ../Tex/bump.png\n"
        "map_Ks \"../Tex/spec.png\"\n"
        "map_d\n"
        "newmtl b\n"
        "map_Ka ../Tex/a%20b.png\n"
        "map_d -s 1 1 1 -o 0 0 0 ../Tex/d.png\r\n")
    (maps / "l.obj").write_text("mtllib lib one.mtl\nv 0 0 0\n")
    got = referenced_files(maps / "l.obj", pack)
    want = [maps / "lib one.mtl", tex / "my tex.png", tex / "bump.png", tex / "spec.png",
            tex / "a%20b.png", tex / "d.png"]  # no unquoting outside glTF
    assert got == sorted(p.resolve() for p in want), got
    assert not [p for p in got if p.name in ("b", "tex.png")]  # no word of another line


def test_an_eggs_alpha_file_any_case_and_quoted_names_are_references(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "m").mkdir()
    egg = tmp_path / "m" / "a.egg"
    egg.write_text('<Texture> leaf {\r\n  "../t/leaf.png"\r\n  <Scalar> alpha-file { '
                   '"../t/leaf_a.png" }\r\n}\r\n<texture> b { "../t/b.png" }\n'
                   '<TEXTURE> "my tex" { "../t/my tex.png" }\n')
    assert referenced_files(egg, tmp_path) == sorted(
        (tmp_path / "t" / n).resolve() for n in ("leaf.png", "leaf_a.png", "b.png", "my tex.png"))


def test_a_file_that_does_not_parse_references_nothing(tmp_path):
    for name, data in (("a.gltf", b"{not json"), ("b.glb", b"glTF\x02\0\0\0"),
                       ("c.egg.pz", b"pz\0\0garbage"), ("d.obj", b"mtllib missing.mtl\n"),
                       ("e.fbx", b"Kaydara FBX Binary  \0")):
        p = tmp_path / name
        p.write_bytes(data)
        refs = referenced_files(p)
        assert refs == ([(tmp_path / "missing.mtl").resolve()] if name == "d.obj" else []), name
    assert referenced_files(tmp_path / "gone.gltf") == []


def test_a_glb_is_read_only_up_to_its_json(tmp_path, monkeypatch):
    import stages.cluster.model_refs as mr

    body = json.dumps({"asset": {"version": "2.0"}, "images": [{"uri": "t.png"}]}).encode()
    body += b" " * (-len(body) % 4)
    binary = b"\0" * 1024
    total = 28 + len(body) + len(binary)
    glb = (b"glTF" + (2).to_bytes(4, "little") + total.to_bytes(4, "little")
           + len(body).to_bytes(4, "little") + b"JSON" + body
           + len(binary).to_bytes(4, "little") + b"BIN\0" + binary)
    (tmp_path / "a.glb").write_bytes(glb)
    monkeypatch.setattr(mr, "MAX_READ", 256)  # smaller than the file, larger than its JSON
    assert len(body) < 256 < len(glb)
    assert referenced_files(tmp_path / "a.glb") == [(tmp_path / "t.png").resolve()]
