"""A small asset library written in a test's folder: one level pack and one humanoid character,
with any names (names are data, never syntax) and an optional overrides.yaml."""

from __future__ import annotations

import json
from pathlib import Path

from stages.assetgen import characters
from stages.assetgen.levels import LevelBuilder
from stages.assetgen.primitives import box


def plain_level(name: str, start: tuple[float, float, float] | None = (0.0, 0.0, 0.0),
                seed: int = 0) -> bytes:
    """A 40 m walled yard with a few blocks to look at, lit, and a ``start_point`` node."""
    b = LevelBuilder(name, "day", 16, seed)
    b.part("Ground", box(40, 40, 0.5, 2.0, (0, 0, -0.5)), "grass")
    for i, (x, y) in enumerate(((8, 6), (-9, 7), (6, -8), (-7, -9))):
        b.part(f"Block_{i}", box(2.0, 2.0, 1.5, 1.0, (x, y, 0)), "brick")
    for name_, sx, sy, c in (("N", 40, 0.6, (0, 19.7, 0)), ("S", 40, 0.6, (0, -19.7, 0)),
                             ("E", 0.6, 40, (19.7, 0, 0)), ("W", 0.6, 40, (-19.7, 0, 0))):
        b.part(f"Wall_{name_}", box(sx, sy, 2.5, 1.0, c), "stone")
    if start is not None:
        b.g.node("start_point", translation=start)
    b.lights()
    return b.to_glb()


def build_small_library(root: Path, pack: str = "Yard", levels: dict[str, bytes] | None = None,
                        char_pack: str = "Folk", char_name: str = "Alex",
                        overrides: str = "") -> Path:
    """``root/<pack>/<level>.glb`` for each level, ``root/<char_pack>/<char_name>/`` holding
    the humanoid Alex's model under the given manifest name."""
    levels = levels if levels is not None else {"Plain": plain_level("Plain")}
    for lv, data in levels.items():
        p = root / pack / f"{lv}.glb"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    height, build, shirt, clips, _ = characters.HUMANOIDS["Alex"]
    cdir = root / char_pack / "Alex"
    cdir.mkdir(parents=True, exist_ok=True)
    (cdir / "Alex.glb").write_bytes(characters.humanoid("Alex", height, build, shirt, 3, 16,
                                                        clips))
    manifest = characters.humanoid_manifest("Alex") | {"name": char_name}
    (cdir / "character.json").write_text(json.dumps(manifest, ensure_ascii=False))
    if overrides:
        (root / "overrides.yaml").write_text(overrides, encoding="utf-8")
    return root
