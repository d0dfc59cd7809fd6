"""Issue 28, point 7: Godot's exporter writes EXT_texture_webp and percent-escaped URIs. Panda3D
reads no WebP: a texture pointing at a .webp stopped panda3d-gltf's load of the whole level
('failed to load texture'). Now the fallback image is used, or the texture is left off, with a
note on the model root; percent-escaped URIs load."""

from __future__ import annotations

import pytest
from PIL import Image

from ..rigs import write_level


def _note(np_) -> str:
    tagged = [np_, *np_.findAllMatches("**/=wmforge_texture_notes")]
    return " ".join(n.getTag("wmforge_texture_notes") for n in tagged)


def _level(tmp_path, images, textures):
    d = tmp_path / "Meadow"
    (d / "textures").mkdir(parents=True)
    Image.new("RGB", (4, 4), (10, 200, 10)).save(d / "textures/grass blade.png")
    Image.new("RGB", (4, 4), (10, 200, 10)).save(d / "textures/grass blade.webp", "WEBP")
    return write_level(d / "meadow.glb", [((0, 0, 0), (40, 1, 40))],
                       extensions_used=["EXT_texture_webp"], images=images, textures=textures)


def test_webp_textures_fall_back_or_are_left_off(tmp_path):
    import gltf

    from stages.engine.models import load_model

    webp_only = _level(tmp_path / "a", [{"uri": "textures%2Fgrass%20blade.webp"}],
                       [{"source": 0, "extensions": {"EXT_texture_webp": {"source": 0}}}])
    with pytest.raises(RuntimeError, match="failed to load texture"):
        gltf.load_model(str(webp_only))  # panda3d-gltf on its own
    np_ = load_model(str(webp_only))
    assert "only a WebP image" in _note(np_)
    fallback = _level(tmp_path / "b", [{"uri": "textures%2Fgrass%20blade.webp"},
                                       {"uri": "textures/grass%20blade.png"}],
                      [{"source": 1, "extensions": {"EXT_texture_webp": {"source": 0}}}])
    np_ = load_model(str(fallback))
    assert "its fallback image 1 used" in _note(np_)
    assert not np_.getTightBounds()[0].isNan()
