"""Level kinds and the heuristics that assign them from the file system alone (paper §4.1).

Kinds: ``persistent`` (a complete level, production candidate), ``sublevel`` (partial on its own),
``showcase`` (asset preview / overview / demo layout), ``partitioned`` (open world relying on
partitioned loading), ``broken`` (unreadable or corrupt).

Heuristics, in order (first match wins):

1. Unreal World Partition / One-File-Per-Actor: a folder named after the map under
   ``Content/__ExternalActors__/…/<Map>`` or ``Content/__ExternalObjects__/…/<Map>`` → partitioned.
   Embedded packs: a sibling ``<Level>_Cells/`` folder, or a horizontal extent above
   ``inventory.max_extent_m`` → partitioned.
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

KINDS = ("persistent", "sublevel", "showcase", "partitioned", "broken")

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
    }.get(kind)
