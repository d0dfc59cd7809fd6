"""Level kinds and the heuristics that assign them from the file system alone (paper §4.1).

Kinds: ``persistent`` (a complete level, production candidate), ``sublevel`` (partial on its own),
``showcase`` (asset preview / overview / demo layout), ``partitioned`` (open world relying on
partitioned loading: several files of one world), ``too_large`` (one file whose extent is above
``inventory.max_extent_m``, once a flat ground plane that dwarfs the rest is measured apart),
``broken`` (unreadable or corrupt).

Heuristics, in order (first match wins):

1. Unreal World Partition / One-File-Per-Actor: a folder named after the map under
   ``Content/__ExternalActors__/…/<Map>`` or ``Content/__ExternalObjects__/…/<Map>`` → partitioned.
   Embedded packs: a sibling ``<Level>_Cells/`` folder → partitioned; one file whose
   horizontal extent is above ``inventory.max_extent_m`` → too_large.
2. Showcase names: a name token (split on ``_``, ``-``, spaces and camelCase) in SHOWCASE_TOKENS
   (Showcase, Overview, Demo, Preview, Example, Gallery, Display, Exhibit, Lookdev, Template,
   Minimal, Untitled, Test) → showcase.
3. Sub-level names: a trailing token in SUBLEVEL_SUFFIXES (Sub, SubLevel, Lighting, Light,
   Audio, Sound, Foliage, FX, VFX, Geo, Geometry, Gameplay, BG, Background, Art, Props, Streaming,
   Nav)
   Embedded packs, by content: a level with lights but no geometry → sublevel.
4. Otherwise → persistent.

Standard library only.
"""

from __future__ import annotations

import re

KINDS = ("persistent", "sublevel", "showcase", "partitioned", "too_large", "broken")

SHOWCASE_TOKENS = frozenset({
    "showcase", "overview", "demo", "preview", "example", "examples", "gallery", "display",
    "exhibit", "lookdev", "template", "minimal", "untitled", "test", "testmap", "demonstration",
})
SUBLEVEL_SUFFIXES = frozenset({
    "sub", "sublevel", "lighting", "light", "lights", "audio", "sound", "foliage", "fx", "vfx",
    "geo", "geometry", "gameplay", "bg", "background", "art", "props", "streaming", "nav",
})
SUBLEVEL_PREFIXES = frozenset({"sl", "sub"})

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def name_tokens(name: str) -> list[str]:
    """``"SM_DemoMap_Lighting"`` → ``["sm", "demo", "map", "lighting"]``."""
    out: list[str] = []
    for part in re.split(r"[_\-\s.]+", name):
        out += [t.lower() for t in _CAMEL.findall(part)] or ([part.lower()] if part else [])
    return out


def classify_by_name(stem: str) -> str | None:
    """``showcase`` / ``sublevel`` from naming conventions, else None."""
    tokens = name_tokens(stem)
    if not tokens:
        return None
    if any(t in SHOWCASE_TOKENS for t in tokens):
        return "showcase"
    parts = [p.lower() for p in re.split(r"[_\-\s]+", stem) if p]
    if len(parts) > 1 and (parts[-1] in SUBLEVEL_SUFFIXES or parts[0] in SUBLEVEL_PREFIXES):
        return "sublevel"
    return None


def disabled_reason(kind: str) -> str | None:
    return {
        "sublevel": "partial_sublevel",
        "showcase": "showcase_layout",
        "partitioned": "partitioned_world",
        "too_large": "too_large",
    }.get(kind)


# file stems that say nothing about what the file holds: exporters' and stores' defaults
# (Sketchfab's scene.gltf, Godot's and Blender's scene/untitled, "room", "model", "export")
GENERIC_STEM_TOKENS = frozenset({
    "scene", "scenes", "level", "map", "model", "models", "mesh", "export", "exported",
    "untitled", "main", "world", "room", "default", "asset", "assets", "object", "file", "gltf",
    "glb", "fbx", "out", "output", "final", "new", "copy", "v", "lod", "character", "rig",
})


def is_generic_stem(stem: str) -> bool:
    """True when a file stem names no particular thing: every token is generic, or it ends in
    a generic word after one other word (``town_model``, ``room``, ``scene``, ``Untitled.001``)."""
    tokens = [t for t in name_tokens(stem) if not t.isdigit()]
    if not tokens:
        return True
    if all(t in GENERIC_STEM_TOKENS for t in tokens):
        return True
    return len(tokens) == 2 and tokens[-1] in GENERIC_STEM_TOKENS


def name_for(stem: str, folder: str, alone_in_folder: bool) -> str:
    """The name a user recognises: the folder's name when the file is the only model of its own
    folder and its stem is generic (``OcclusionRoom/room.glb`` → ``OcclusionRoom``,
    Sketchfab's ``Soldier/scene.gltf`` → ``Soldier``), else the stem."""
    if alone_in_folder and folder and is_generic_stem(stem):
        return folder
    return stem
