"""Issue 28 on a real rigged character made in Blender: Minetest Game's player model
(``player_api/models/character.b3d``, CC BY-SA 3.0, from Debian's minetest-data; converted to
glb by assimp 5.2.5 — tests/data/real_assets/SOURCE.md). Six joints (Body, Head, Arm_Left,
Arm_Right, Leg_Left, Leg_Right), one 220-frame clip ``anim`` holding every motion (the frame
ranges — stand 0-79, walk 168-187 — live in the game's Lua, not in the file), 17 units tall:
Minetest models are 10 units to the metre, so a person who knows the game reads 1.7 m.

What a person reads from the file itself, and what the inventory writes:
- kind humanoid; facing: the face's texels (the skin's head-front square) lie on triangles
  whose normal is glTF -Z, +Y in the contract frame, so the yaw correction is -90;
- no clip can be mapped (``anim`` names no action): every action static, said in the row;
- size: 1.7 m; a skeleton that says humanoid is first held to a person's height, and of the
  units tried only decimetres give one (inches, the first unit that used to fit, gave 0.43 m);
  the sidecar line ``"scale": 0.1`` says the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stages.config import InventoryConfig
from stages.core.gltf import read_accessor, read_gltf
from stages.inventory import run_inventory

GLB = Path(__file__).parent / "data" / "real_assets" / "minetest_character" / "character.glb"


def _row(tmp_path: Path, sidecar: dict | None):
    pack = tmp_path / "lib" / "Minetest" / "player_api"
    pack.mkdir(parents=True)
    shutil.copy(GLB, pack / "character.glb")
    if sidecar is not None:
        (pack / "character.json").write_text(json.dumps(sidecar))
    res = run_inventory(tmp_path / "lib", InventoryConfig(), "overrides.yaml")
    assert len(res.characters) == 1 and res.levels.empty
    return res.characters.iloc[0]


def test_minetest_player_without_a_sidecar(tmp_path):
    r = _row(tmp_path, None)
    assert r.ok and r.kind == "humanoid"
    assert "kind humanoid: joint names: two arms, two legs and a head" in r.guesses
    assert r.yaw_correction_deg == -90.0
    assert "Arm_Left / Arm_Right" in r.guesses  # facing from the skeleton's left/right pairs
    assert json.loads(r.model_clips) == ["anim"]
    assert "clip 'anim' not mapped (no action word in its name)" in r.guesses
    assert set(json.loads(r.animation_json).values()) == {None}
    # 17 units: a humanoid skeleton is held to a person's height first, so decimetres
    # (Minetest's 10 units to the metre), not inches (0.43 m)
    assert r.scale == pytest.approx(0.1)
    assert r.visual_height_m == pytest.approx(1.7, rel=0.1)
    assert "model is 17 units tall, read as decimetres" in r.guesses


def _face_direction() -> tuple[float, float]:
    """Where the face looks, in the contract frame (x, y): the outward normal of the head's
    triangles whose texels are the skin's head-front square (pixels 8-16 x 8-16 of 64 x 32)."""
    doc, binary = read_gltf(GLB)
    prim = doc["meshes"][0]["primitives"][0]
    pos = read_accessor(doc, binary, prim["attributes"]["POSITION"])
    uv = read_accessor(doc, binary, prim["attributes"]["TEXCOORD_0"])
    idx = [int(i[0]) for i in read_accessor(doc, binary, prim["indices"])]
    found = []
    for k in range(0, len(idx), 3):
        a, b, c = (pos[i] for i in idx[k:k + 3])
        u = sum(uv[i][0] for i in idx[k:k + 3]) / 3
        v = sum(uv[i][1] for i in idx[k:k + 3]) / 3
        if (a[1] + b[1] + c[1]) / 3 > 13 and 0.125 < u < 0.25 and 0.25 < v < 0.5:
            e1 = [b[i] - a[i] for i in range(3)]
            e2 = [c[i] - a[i] for i in range(3)]
            n = (e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2])
            found.append((n[0], -(e1[0] * e2[1] - e1[1] * e2[0])))  # glTF (x, z) -> (x, -z)
    assert found
    x, y = sum(f[0] for f in found), sum(f[1] for f in found)
    norm = (x * x + y * y) ** 0.5
    return (round(x / norm, 3), round(y / norm, 3))


def test_minetest_player_with_its_scale_is_1_7_m_and_faces_as_its_face(tmp_path):
    r = _row(tmp_path, {"model": "character.glb", "scale": 0.1})
    assert r.ok and r.kind == "humanoid" and r.scale == pytest.approx(0.1)
    assert r.visual_height_m == pytest.approx(1.7, rel=0.1)
    # the face looks along +Y (contract frame): a yaw correction of -90 turns it to +X
    assert _face_direction() == (0.0, 1.0)
    assert r.yaw_correction_deg == -90.0
    assert r.ground_offset_m == pytest.approx(0.0, abs=0.01)
