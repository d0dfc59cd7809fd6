"""stages/core/gltf.py is the one glTF/GLB reader: a broken GLB is a GltfError with the reason
code the inventory row gets (truncated, bad magic, wrong version, a JSON chunk that does not
parse, a BIN chunk past the end), the same for the probe (inventory), the clips (Stage II) and
the pre-load check; accessors are read through their views' offsets and strides; the permissive
reader that engine/clips.py had is gone and no other module parses a GLB container."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import stages.engine.clips as clips
from stages.core.asset_guard import AssetInputError, check_model_file
from stages.core.gltf import GltfError, parse_glb, read_accessor, read_gltf
from stages.core.model_probe import ProbeError, probe_model
from tests.conftest import REPO

DOC = {"asset": {"version": "2.0"}, "scenes": [{"nodes": []}], "scene": 0}


def glb(doc: dict | bytes = DOC, bin_chunk: bytes | None = None, *, magic: bytes = b"glTF",
        version: int = 2, length_delta: int = 0, chunk: bytes = b"JSON") -> bytes:
    js = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    js += b" " * (-len(js) % 4)
    body = struct.pack("<I4s", len(js), chunk) + js
    if bin_chunk is not None:
        body += struct.pack("<I4s", len(bin_chunk), b"BIN\0") + bin_chunk
    return struct.pack("<4sII", magic, version, 12 + len(body) + length_delta) + body


GOOD = glb(bin_chunk=b"\1\2\3\4")


def _bin_chunk_says(n: int) -> bytes:
    """GOOD with its BIN chunk's length field set to ``n`` (the file's length unchanged)."""
    data = bytearray(GOOD)
    struct.pack_into("<I", data, 20 + struct.unpack_from("<I", GOOD, 12)[0], n)
    return bytes(data)


BROKEN = {  # name: (bytes, reason code, words in the detail)
    "truncated": (GOOD[: len(GOOD) // 2], "corrupt_file", "header says"),
    "shorter_than_header": (GOOD[:16], "corrupt_file", "shorter than its header"),
    "bad_magic": (glb(magic=b"gLTF"), "corrupt_file", "magic"),
    "version_1": (glb(version=1), "unsupported_format", "version 1"),
    "bad_json": (glb(b'{"asset": '), "corrupt_file", "JSON chunk does not parse"),
    "not_utf8_json": (glb(b'{"asset": "\xff"}'), "corrupt_file", "JSON chunk does not parse"),
    "first_chunk_not_json": (glb(chunk=b"BIN\0"), "corrupt_file", "complete JSON chunk"),
    "bin_past_end": (_bin_chunk_says(64), "corrupt_file", "BIN chunk runs past the end"),
}


def test_a_good_glb_gives_its_document_and_bin_chunk():
    doc, binary = parse_glb(GOOD)
    assert doc == DOC and binary is not None and bytes(binary) == b"\1\2\3\4"
    assert parse_glb(glb())[1] is None  # no BIN chunk


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_glb_is_its_reason_code_for_every_reader(tmp_path, name):
    data, reason, words = BROKEN[name]
    with pytest.raises(GltfError) as err:
        parse_glb(data)
    assert err.value.reason == reason and words in err.value.detail, err.value
    f = tmp_path / f"{name}.glb"
    f.write_bytes(data)
    with pytest.raises(ProbeError) as probe_err:  # the inventory's row
        probe_model(f)
    assert (probe_err.value.reason, probe_err.value.detail) == (reason, err.value.detail)
    with pytest.raises(ValueError, match=reason):  # Stage II's clips and level lighting
        read_gltf(f)
    with pytest.raises(ValueError, match=reason):
        clips.read_gltf_clips(f)
    with pytest.raises(AssetInputError) as guard_err:  # before an engine loads it
        check_model_file(f)
    assert guard_err.value.reason == reason and f.name in guard_err.value.detail


def test_accessors_are_read_through_offset_and_stride_from_an_external_buffer(tmp_path):
    """A .gltf's first buffer is the file its uri names; interleaved VEC3 floats (stride 16)
    and a MAT4 come back as stored."""
    vec = [(1.0, 2.0, 3.0), (4.0, 5.0, 6.0)]
    interleaved = b"".join(struct.pack("<3f", *v) + b"\0" * 4 for v in vec)
    mat = tuple(float(k) for k in range(16))
    raw = b"\0" * 8 + interleaved + struct.pack("<16f", *mat) + struct.pack("<3H", 7, 8, 9)
    doc = {"asset": {"version": "2.0"},
           "buffers": [{"uri": "data.bin", "byteLength": len(raw)}],
           "bufferViews": [{"buffer": 0, "byteOffset": 8, "byteLength": 32, "byteStride": 16},
                           {"buffer": 0, "byteOffset": 40, "byteLength": 64},
                           {"buffer": 0, "byteOffset": 104, "byteLength": 6}],
           "accessors": [{"bufferView": 0, "componentType": 5126, "count": 2, "type": "VEC3"},
                         {"bufferView": 1, "componentType": 5126, "count": 1, "type": "MAT4"},
                         {"bufferView": 2, "byteOffset": 2, "componentType": 5123, "count": 2,
                          "type": "SCALAR"}]}
    (tmp_path / "data.bin").write_bytes(raw)
    (tmp_path / "m.gltf").write_text(json.dumps(doc))
    got_doc, binary = read_gltf(tmp_path / "m.gltf")
    assert got_doc == doc and binary == raw
    assert read_accessor(got_doc, binary, 0) == vec
    assert read_accessor(got_doc, binary, 1) == [mat]
    assert read_accessor(got_doc, binary, 2) == [(8,), (9,)]
    with pytest.raises(struct.error):  # a view past the end of the buffer
        read_accessor(got_doc, binary[:20], 0)


def test_the_permissive_reader_is_gone_and_only_core_gltf_parses_a_glb():
    assert not hasattr(clips, "_read_gltf") and not hasattr(clips, "_accessor")
    readers = sorted(str(p.relative_to(REPO)) for p in (REPO / "stages").rglob("*.py")
                     if 'b"glTF"' in p.read_text() or "b'glTF'" in p.read_text())
    # the writer packs the magic; only the reader checks it
    assert readers == ["stages/assetgen/gltf_writer.py", "stages/core/gltf.py"], readers
    assert Path(clips.__file__).read_text().count("json.loads") == 0


def test_the_json_alone_reader_matches_the_whole_reader_on_real_files(tmp_path):
    """``read_gltf_doc`` (used before loading a level to count its triangles) gives the same
    document as ``read_gltf`` without reading a GLB's binary, and refuses what it refuses."""
    import pytest

    from stages.core.gltf import GltfError, read_gltf, read_gltf_doc

    real = sorted((REPO / "tests" / "data" / "real_assets").rglob("*.gl[bt]*"))
    assert len(real) >= 6
    for f in real:
        assert read_gltf_doc(f) == read_gltf(f)[0], f
    glb = next(f for f in real if f.suffix == ".glb")
    data = glb.read_bytes()
    (tmp_path / "cut.glb").write_bytes(data[:40])
    with pytest.raises(GltfError, match="complete JSON chunk"):
        read_gltf_doc(tmp_path / "cut.glb")
    (tmp_path / "bad.glb").write_bytes(b"gLTF" + data[4:])
    with pytest.raises(GltfError, match="magic"):
        read_gltf_doc(tmp_path / "bad.glb")
