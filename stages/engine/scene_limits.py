"""What Stage II renders at most (``render.limits``, issue #30 "Bad input and faults"): a
level's triangle count, checked against ``max_triangles`` (a glTF's from its JSON before it is
loaded, any level's once loaded), and its textures, each brought within ``max_texture_px`` (and
the GL driver's own maximum) before it is made resident.

Both backends read the same Panda3D textures (the compute one copies their RAM images into its
texture table), so one downscale here serves both. A texture over the limit is halved, level
by level of its own mip chain (Panda3D's CPU mipmap filter: a 2x2 box, in linear light for
sRGB textures), until its longest side fits: the picture the GPU would sample at that distance
anyway, the same bytes in every process. Textures at or under the limit are left untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .stage2 import Stage2Failure

SCENE_OVER_LIMIT = "scene_over_limit"


class SceneOverLimit(Stage2Failure):
    """A level over ``render.limits.max_triangles`` (reason ``scene_over_limit``)."""

    def __init__(self, detail: str):
        super().__init__(SCENE_OVER_LIMIT, detail)


def gltf_triangles(path: Path) -> int | None:
    """The triangles a glTF level declares (its accessors' counts through the node tree, as
    the inventory counts them), read from the JSON alone: a GLB's first chunk, never its
    binary. None for other formats or a file the loader should judge."""
    from ..core.gltf import GltfError, read_gltf_doc
    from ..core.gltf_probe import probe_gltf_doc
    from ..core.model_record import ProbeError

    if path.suffix.lower() not in (".glb", ".gltf"):
        return None
    try:
        return int(probe_gltf_doc(read_gltf_doc(path), None).triangles)
    except (OSError, GltfError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            ProbeError):
        return None


def check_file(path: Path, max_triangles: int) -> None:
    """Refuse a glTF level over the limit before it is loaded (loading one costs ~1.7 KB of
    RAM a triangle at its peak: a level many times over the limit must not take the slot's
    memory to find out)."""
    n = gltf_triangles(path)
    over = None if n is None else over_triangle_limit(n, max_triangles)
    if over:
        raise SceneOverLimit(f"{path}: {over} (the glTF's accessors, not loaded)")


def count_triangles(root: Any) -> int:
    """Triangles the level draws: every polygon primitive of every Geom under ``root``, each
    instance of an instanced node counted (as the inventory's glTF count does)."""
    from panda3d.core import GeomEnums

    n = 0
    for gnp in root.findAllMatches("**/+GeomNode"):
        node = gnp.node()
        for i in range(node.getNumGeoms()):
            geom = node.getGeom(i)
            for k in range(geom.getNumPrimitives()):
                prim = geom.getPrimitive(k)
                if prim.getPrimitiveType() == GeomEnums.PT_polygons:
                    n += int(prim.getNumFaces())
    return n


def over_triangle_limit(triangles: int, limit: int) -> str | None:
    """The reason text for a level over ``render.limits.max_triangles`` (None when within)."""
    if triangles <= limit:
        return None
    return f"{triangles:,} triangles > render.limits.max_triangles {limit:,}"


def texture_limit(max_texture_px: int, driver_max: int) -> tuple[int, str]:
    """The longest side rendered at full size and the setting that sets it: the config's, or
    the GL driver's maximum where that is lower (0 or less: the driver names none)."""
    if 0 < driver_max < max_texture_px:
        return driver_max, f"the GL driver's maximum texture size {driver_max}"
    return max_texture_px, f"render.limits.max_texture_px {max_texture_px}"


def limit_textures(root: Any, limit: int, why: str) -> list[dict]:
    """Bring every texture under ``root`` whose longest side exceeds ``limit`` within it: a
    copy, halved until it fits, takes its place in the level's render states (the original
    stays as Panda3D's texture pool shares it, so another level or renderer in this process
    still gets the file's own size). Call before the textures are made resident. Returns one
    note per texture: its name, file, size before and after, and ``why`` (the setting that set
    the limit)."""
    from panda3d.core import Texture

    notes: list[dict] = []
    texs = root.findAllTextures()
    for tex in [texs.getTexture(i) for i in range(texs.getNumTextures())]:
        w, h = int(tex.getXSize()), int(tex.getYSize())
        if max(w, h) <= limit:
            continue
        note = {"texture": tex.getName(), "file": str(tex.getFullpath()), "from": [w, h],
                "limit": why}
        # a pool texture already uploaded once may have dropped its RAM image: reload it
        has_image = tex.hasRamImage() or bool(tex.getRamImage())
        small = tex.makeCopy() if has_image else None
        if small is None or (small.getRamImageCompression() != Texture.CM_off
                             and not small.uncompressRamImage()):
            # nothing to filter here: the driver reduces it at upload (Panda3D's mipmap bias)
            notes.append({**note, "to": None, "detail": "no image in RAM to downscale"})
            continue
        small.generateRamMipmapImages()
        k = 0
        while max(small.getExpectedMipmapXSize(k), small.getExpectedMipmapYSize(k)) > limit:
            k += 1
        nw, nh = int(small.getExpectedMipmapXSize(k)), int(small.getExpectedMipmapYSize(k))
        image = small.getRamMipmapImage(k)
        small.setXSize(nw)
        small.setYSize(nh)
        small.setRamImage(image)
        small.clearRamMipmapImages()  # the GPU (or the compute table) builds its own chain
        root.replaceTexture(tex, small)
        notes.append({**note, "to": [nw, nh]})
    notes.sort(key=lambda d: (d["file"], d["texture"]))
    return notes


def apply_limits(model: Any, path: Path, max_triangles: int, max_texture_px: int,
                 driver_max: int, log: Callable[[str], Any]) -> dict:
    """``render.limits`` on a loaded level (before it is made resident): over
    ``max_triangles`` it is a :class:`SceneOverLimit`; textures over ``max_texture_px`` (or
    the GL driver's maximum) are downscaled, each one logged. Returns the level report's
    ``triangles``, ``max_texture_px`` (longest side as rendered) and ``textures_downscaled``."""
    tris = count_triangles(model)
    over = over_triangle_limit(tris, max_triangles)
    if over:
        raise SceneOverLimit(f"{path}: {over}")
    limit, why = texture_limit(max_texture_px, driver_max)
    notes = limit_textures(model, limit, why)
    for n in notes:
        log(f"render: {path}: {describe_downscale(n)}")
        # meta.json names the image relative to the level's folder: the same bytes wherever
        # the pack is staged
        f, here = Path(n["file"]).resolve(), path.resolve().parent
        n["file"] = f.relative_to(here).as_posix() if f.is_relative_to(here) else f.name
    notes.sort(key=lambda d: (d["file"], d["texture"]))
    return {"triangles": tris, "max_texture_px": largest_texture_px(model),
            "textures_downscaled": notes}


def largest_texture_px(root: Any) -> int:
    """The longest side of any texture under ``root`` (0: none)."""
    texs = root.findAllTextures()
    return max((max(int(texs.getTexture(i).getXSize()), int(texs.getTexture(i).getYSize()))
                for i in range(texs.getNumTextures())), default=0)


def describe_downscale(note: dict) -> str:
    """One line of the render log for a :func:`limit_textures` note."""
    w, h = note["from"]
    to = f"{note['to'][0]}x{note['to'][1]}" if note["to"] else "left to the driver"
    return f"texture {note['texture']!r} ({note['file']}) {w}x{h} -> {to}: over {note['limit']}"
