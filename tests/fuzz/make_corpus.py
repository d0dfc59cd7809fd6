"""Writes the fuzz corpus (tests/fuzz/corpus/, committed): bad level files, each expected to
become an inventory row with a reason code (EXPECTED) — or, for the few the inventory accepts,
to fail or pass in the engine without crashing a stage. ``@OUTSIDE@`` in a file is replaced by
the test with an absolute folder outside the library root that holds ``secret.*`` sentinels.

python tests/fuzz/make_corpus.py   # rewrites the corpus (deterministic)
"""

from __future__ import annotations

import base64
import json
import struct
import sys
import zlib
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"

# one 40 m ground quad facing up (glTF is Y-up): POSITION, NORMAL, indices
_POS = [(-20, 0, -20), (20, 0, -20), (20, 0, 20), (-20, 0, 20)]
_NRM = [(0, 1, 0)] * 4
_IDX = [0, 2, 1, 0, 3, 2]
BIN = (b"".join(struct.pack("<3f", *p) for p in _POS) + b"".join(struct.pack("<3f", *n)
       for n in _NRM) + b"".join(struct.pack("<H", i) for i in _IDX))


def gltf(uri: str | None = None, **edit) -> dict:
    """A valid one-quad level; ``uri`` None: a data: URI of the real bytes."""
    doc = {
        "asset": {"version": "2.0", "generator": "wmforge fuzz corpus"},
        "scene": 0, "scenes": [{"nodes": [0, 1]}],
        "nodes": [{"name": "Ground", "mesh": 0},
                  {"name": "PlayerStart", "translation": [0, 0.5, 0]}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0, "NORMAL": 1},
                                    "indices": 2}]}],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3",
             "min": [-20, 0, -20], "max": [20, 0, 20]},
            {"bufferView": 1, "componentType": 5126, "count": 4, "type": "VEC3"},
            {"bufferView": 2, "componentType": 5123, "count": 6, "type": "SCALAR"}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": 48},
                        {"buffer": 0, "byteOffset": 48, "byteLength": 48},
                        {"buffer": 0, "byteOffset": 96, "byteLength": 12}],
        "buffers": [{"byteLength": len(BIN), "uri": uri or (
            "data:application/octet-stream;base64," + base64.b64encode(BIN).decode())}],
    }
    doc.update(edit)
    return doc


def glb(doc: dict, bin_chunk: bytes) -> bytes:
    js = json.dumps(doc).encode()
    js += b" " * (-len(js) % 4)
    bn = bin_chunk + b"\0" * (-len(bin_chunk) % 4)
    body = struct.pack("<I4s", len(js), b"JSON") + js + struct.pack("<I4s", len(bn),
                                                                      b"BIN\0") + bn
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


def _nodes(**kw) -> list:
    return [{"name": "Ground", "mesh": 0} | kw, {"name": "PlayerStart"}]


EGG = """<CoordinateSystem> { Z-Up }
<Group> ground {
  <VertexPool> g {
    <Vertex> 0 { -20 -20 0 } <Vertex> 1 { 20 -20 0 }
    <Vertex> 2 { 20 20 0 } <Vertex> 3 { -20 20 0 }
  }
  <Polygon> { <VertexRef> { 0 1 2 3 <Ref> { g } } }
}
<Group> start_point { <Transform> { <Translate> { 0 0 0.5 } } }
"""
OBJ = "v -20 -20 0\nv 20 -20 0\nv 20 20 0\nv -20 20 0\nf 1 2 3\nf 1 3 4\n"


def _textured_egg(ref: str) -> str:
    return EGG.replace("<Group> ground {", f'<Texture> tex {{ "{ref}" }}\n<Group> ground {{')


# file name → (bytes, expected inventory reason; None = accepted as a level)
def corpus() -> dict[str, tuple[bytes, str | None]]:
    j = lambda d: json.dumps(d, indent=1).encode()  # noqa: E731
    out: dict[str, tuple[bytes, str | None]] = {
        "ok_data_uri.gltf": (j(gltf()), None),
        "ok_external.gltf": (j(gltf("ok_external.bin")), None),
        "ok.glb": (glb(gltf(**{"buffers": [{"byteLength": len(BIN)}]}), BIN), None),
        "nodes_is_object.gltf": (j(gltf(nodes={"0": {"mesh": 0}})), "bad_structure"),
        "children_is_string.gltf": (j(gltf(nodes=_nodes(children="1"))), "bad_structure"),
        "mesh_out_of_range.gltf": (j(gltf(nodes=_nodes(mesh=99))), "bad_structure"),
        "matrix_three_numbers.gltf": (j(gltf(nodes=_nodes(matrix=[1, 0, 0]))),
                                      "bad_structure"),
        "translation_strings.gltf": (j(gltf(nodes=_nodes(translation=["0", "0", "0"]))),
                                     "bad_structure"),
        "scene_out_of_range.gltf": (j(gltf(scene=5)), "bad_structure"),
        "accessor_count_string.gltf": (j(gltf(accessors=[
            {"bufferView": 0, "componentType": 5126, "count": "four", "type": "VEC3"}])),
            "bad_structure"),
        "position_out_of_range.gltf": (j(gltf(meshes=[{"primitives": [
            {"attributes": {"POSITION": 7}}]}])), "bad_structure"),
        "missing_asset_key.gltf": (j({k: v for k, v in gltf().items() if k != "asset"}),
                                   "corrupt_file"),
        "top_level_array.gltf": (b"[1, 2, 3]", "corrupt_file"),
        "not_utf8.gltf": (b"\xff\xfe\x00garbage", "corrupt_file"),
        "cyclic_nodes.gltf": (j(gltf(nodes=[{"name": "A", "mesh": 0, "children": [1]},
                                            {"name": "B", "children": [0]}])), "cyclic_nodes"),
        "self_parent.gltf": (j(gltf(nodes=[{"name": "A", "mesh": 0, "children": [0]}],
                                    scenes=[{"nodes": [0]}])), "cyclic_nodes"),
        "view_past_buffer.gltf": (j(gltf(bufferViews=[
            {"buffer": 0, "byteOffset": 0, "byteLength": 4096}])), "truncated_buffer"),
        "data_uri_short.gltf": (j(gltf(buffers=[{"byteLength": 4096, "uri":
            "data:application/octet-stream;base64," + base64.b64encode(BIN).decode()}])),
            "truncated_buffer"),
        "data_uri_garbage.gltf": (j(gltf("data:application/octet-stream;base64,@@not base64")),
                                  "bad_data_uri"),
        "glb_bin_truncated.glb": (glb(gltf(**{"buffers": [{"byteLength": len(BIN)}]}),
                                      BIN[:40]), "truncated_buffer"),
        "glb_cut_in_half.glb": (glb(gltf(**{"buffers": [{"byteLength": len(BIN)}]}),
                                    BIN)[:90], "corrupt_file"),
        "uri_parent_escape.gltf": (j(gltf("../../outside/secret.bin")), "uri_outside_root"),
        "uri_absolute.gltf": (j(gltf("@OUTSIDE@/secret.bin")), "uri_outside_root"),
        "uri_file_scheme.gltf": (j(gltf("file://@OUTSIDE@/secret.bin")), "uri_outside_root"),
        "uri_http.gltf": (j(gltf("http://127.0.0.1:9/secret.bin")), "uri_outside_root"),
        "image_outside.gltf": (j(gltf(images=[{"uri": "../../outside/secret.png"}])),
                               "uri_outside_root"),
        "zero.gltf": (b"", "empty_file"),
        "zero.glb": (b"", "empty_file"),
        "zero.egg": (b"", "empty_file"),
        "zero.obj": (b"", "empty_file"),
        "egg_texture_outside.egg": (_textured_egg("../../outside/secret.png").encode(),
                                    "uri_outside_root"),
        "egg_texture_absolute.egg": (_textured_egg("@OUTSIDE@/secret.png").encode(),
                                     "uri_outside_root"),
        "egg_truncated.egg": (EGG[: len(EGG) // 2].encode(), None),  # the engine decides
        "egg_pz_garbage.egg.pz": (b"pz\x00\x00" + b"not zlib at all", "corrupt_file"),
        "egg_ok.egg.pz": (zlib.compress(EGG.encode(), 9), None),
        "obj_truncated_line.obj": (OBJ[:14].encode(), "corrupt_file"),  # "v -20 -20 0\nv 2"
        "obj_truncated_faces.obj": (OBJ[: OBJ.index("f 1 3")].encode() + b"f 1 3", None),
        "not_a_model.glb": (b"PK\x03\x04 this is a zip file", "corrupt_file"),
    }
    return out


def write(dest: Path = CORPUS) -> None:
    pack = dest / "Fuzz"
    pack.mkdir(parents=True, exist_ok=True)
    for old in pack.iterdir():
        old.unlink()
    expected = {}
    for name, (data, reason) in sorted(corpus().items()):
        (pack / name).write_bytes(data)
        expected[name] = reason
    (pack / "ok_external.bin").write_bytes(BIN)
    (dest / "EXPECTED.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS)
