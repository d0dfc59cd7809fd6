"""The generated levels carry standard glTF 2.0 metallic-roughness PBR materials (albedo with
variation, a metallicRoughness texture, a normal map and the tangents it needs) on terrain,
ground, walls and floors, and props that are more than boxes."""

import io

import numpy as np
from PIL import Image

from stages.config import SampleLibraryConfig
from stages.core.gltf import read_accessor, read_gltf

LEVELS = {
    "AlpineMeadow": "NatureValley/NatureValley/Content/Maps/AlpineMeadow.glb",
    "Downtown": "UrbanBlocks/Content/Levels/Downtown.glb",
    "Apartment": "InteriorKit/Scenes/Apartment.glb",
    "Outpost": "SciFiOutpost/Content/SciFi/Maps/Outpost.glb",
    "Courtyard": "CastleCourtyard/Worlds/Courtyard.glb",
    "Canyon": "DesertCanyon/Content/Maps/Canyon.glb",
}
SURFACES = ("Terrain", "Ground", "Wall", "Ceiling", "Plaza", "Platform", "Corridor", "Keep",
            "Building", "Sidewalk")


def _image(doc, binary, tex_index: int) -> np.ndarray:
    img = doc["images"][doc["textures"][tex_index]["source"]]
    view = doc["bufferViews"][img["bufferView"]]
    data = binary[view.get("byteOffset", 0): view.get("byteOffset", 0) + view["byteLength"]]
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(float)


def _positions(doc, binary, prim) -> np.ndarray:
    return np.array(read_accessor(doc, binary, prim["attributes"]["POSITION"]), np.float32)


def test_level_surfaces_have_pbr_maps(sample_library):
    size = SampleLibraryConfig().texture_size
    for level, rel in LEVELS.items():
        doc, binary = read_gltf(sample_library / rel)
        surfaces = [n for n in doc["nodes"] if "mesh" in n
                    and n["name"].startswith(SURFACES)]
        assert surfaces, level
        for node in surfaces:
            for prim in doc["meshes"][node["mesh"]]["primitives"]:
                mat = doc["materials"][prim["material"]]
                pbr = mat["pbrMetallicRoughness"]
                assert {"baseColorTexture", "metallicRoughnessTexture"} <= set(pbr), (level, mat)
                assert "normalTexture" in mat, (level, mat["name"])
                assert "TANGENT" in prim["attributes"], (level, node["name"])
        for mat in doc["materials"]:
            pbr = mat["pbrMetallicRoughness"]
            albedo = _image(doc, binary, pbr["baseColorTexture"]["index"])
            mr = _image(doc, binary, pbr["metallicRoughnessTexture"]["index"])
            nrm = _image(doc, binary, mat["normalTexture"]["index"]) / 255 * 2 - 1
            assert albedo.shape == mr.shape == nrm.shape == (size, size, 3)
            assert albedo.mean(axis=2).std() > 3, (level, mat["name"])  # varies
            rough = mr[..., 1] / 255
            assert 0.1 <= rough.mean() <= 1.0 and rough.std() > 0.005, (level, mat["name"])
            # unit normals leaning away from flat: a real bump map
            assert np.allclose(np.linalg.norm(nrm, axis=2), 1, atol=0.03)
            assert np.hypot(nrm[..., 0], nrm[..., 1]).mean() > 0.02, (level, mat["name"])
            assert (nrm[..., 2] > 0).all()
            metal = mr[..., 2].mean() / 255 * pbr["metallicFactor"]
            assert (metal > 0.9) == mat["name"].startswith("metal"), (level, mat["name"], metal)
            assert pbr["roughnessFactor"] == 1.0  # the map's roughness is used as it is


def test_props_are_more_than_boxes(sample_library):
    """Trees, rocks, barrels, bins, jars, chairs and crates: every vertex of a box lies on a
    side (x or y extreme) of its bounding box; these are round, bevelled or built of parts,
    so few do."""
    seen = set()
    for level, rel in LEVELS.items():
        doc, binary = read_gltf(sample_library / rel)
        for node in doc["nodes"]:
            kind = node["name"].split("_")[0]
            if "mesh" not in node or kind not in ("Tree", "Rock", "Boulder", "Barrel", "Bin",
                                                  "Jar", "Chair", "Crate", "Table", "Well",
                                                  "Tower", "Beacon"):
                continue
            p = np.concatenate([_positions(doc, binary, prim)
                                for prim in doc["meshes"][node["mesh"]]["primitives"]])
            lo, hi = p.min(0), p.max(0)
            flat = [0, 2]  # glTF is Y up: x and z are the horizontal axes
            side = (np.isclose(p[:, flat], lo[flat], atol=1e-4)
                    | np.isclose(p[:, flat], hi[flat], atol=1e-4)).any(1)
            assert side.mean() < 0.3, (level, node["name"], side.mean())
            assert len(np.unique(p.round(4), axis=0)) > 24, (level, node["name"])
            seen.add(kind)
    assert {"Tree", "Rock", "Boulder", "Barrel", "Bin", "Jar", "Chair", "Crate"} <= seen
