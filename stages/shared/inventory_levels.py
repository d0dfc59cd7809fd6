"""Level rows of the inventory (paper §4.1): every candidate level of an asset library, with its
pack's content directory, kind, ``enabled``, reason, sizes, counts, per-level overrides.

The kind heuristics are ``stages.core.levels``; model files beside a ``character.json``, under
``Characters/``, ``Animations/`` or ``__ExternalActors__/`` folders, or claimed by a discovered
character are never level candidates. A problem (unreadable file, empty pack) is a row with a
reason code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pandas as pd

from ..config import InventoryConfig
from ..core.levels import classify_by_name, disabled_reason, name_for
from ..core.model_probe import ProbeError, model_format, unreal_package_problem
from .inventory_characters import probe_file
from .library_walk import Entry, group_by_pack, walk_library

LEVEL_COLUMNS = [
    "level_id", "pack", "content_dir", "path", "format", "kind", "enabled", "reason", "detail",
    "category", "license", "size_bytes", "file_count", "triangles", "meshes", "nodes", "lights",
    "cameras", "animations", "dynamic_props", "player_starts", "pois", "extent_x_m",
    "extent_y_m", "extent_z_m", "bounds_json", "player_starts_json", "pois_json", "lighting",
    "up_axis", "coordinate_system", "coordinate_system_source", "scale", "walk_speed",
    "exposure_compensation", "camera_scale", "override_note", "override_starts_json",
]


def _pack_meta(pack_dir: Path) -> dict:
    f = pack_dir / "pack.json"
    try:
        return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {"_error": "pack.json does not parse"}


def _level_stem(name: str) -> str:
    fmt = model_format(Path(name)) or ""
    return name[: -(len(fmt) + 1)] if fmt else name


def _content_dir(pack: str, level_rels: list[str]) -> str:
    if not level_rels:
        return pack
    parts_list = [Path(r).parts for r in level_rels]
    for parts in parts_list:
        if "Content" in parts:
            return str(Path(*parts[: parts.index("Content") + 1]))
    common = os.path.commonpath([str(Path(*p[:-1])) for p in parts_list])
    return common


def _unreal_partition_index(files: list[Entry]) -> dict[str, int]:
    """Map lower-case map name → count of external actor/object files (World Partition)."""
    counts: dict[str, int] = {}
    for e in files:
        parts = Path(e.rel).parts
        for marker in ("__ExternalActors__", "__ExternalObjects__"):
            if marker in parts:
                i = parts.index(marker)
                # __ExternalActors__/<path to map>/<MapName>/<hash dirs>/<actor>.uasset
                for name in parts[i + 1 : -1]:
                    counts[name.lower()] = counts.get(name.lower(), 0) + 1
    return counts


# a glTF that animates without a skin (morph targets, node transforms) and is smaller than
# this is an animated model, not a level: it goes to the skipped table with its reason
ANIMATED_MODEL_MAX_M = 5.0

NON_LEVEL_FOLDERS = frozenset({"characters", "character", "animations", "anims",
                               "__externalactors__", "__externalobjects__"})


def _is_character_asset(rel: Path, char_dirs: set[Path]) -> bool:
    """Model files beside a character.json, or under Characters/Animations folders, are not
    level candidates."""
    if any(d == rel.parent or d in rel.parents for d in char_dirs):
        return True
    return any(p.lower() in NON_LEVEL_FOLDERS for p in rel.parts[:-1])


def _lighting(extras: dict) -> str | None:
    ours = extras.get("wmforge")
    v = ours.get("lighting") if isinstance(ours, dict) else None
    return str(v) if v is not None else None


def _empty_level_row(**kw: Any) -> dict:
    row: dict[str, Any] = {c: None for c in LEVEL_COLUMNS}
    row.update(kw)
    return row


def inventory_levels(root: Path, cfg: InventoryConfig, overrides: dict | None = None,
                     entries: list[Entry] | None = None,
                     character_files: set[Path] | None = None) -> pd.DataFrame:
    """The pure core: rows for every candidate level (and every problem) under ``root``.
    ``character_files`` (absolute paths: discovered character models and clips) are never
    level candidates."""
    root = root.resolve()
    overrides = overrides or {}
    entries = entries if entries is not None else list(walk_library(root))
    character_files = character_files or set()
    by_pack, loose_root = group_by_pack(root, entries)
    rows: list[dict] = []
    for e in loose_root:
        if e.problem:
            rows.append(_empty_level_row(level_id=e.rel, pack="", path=e.rel, kind="broken",
                                         enabled=False, reason=e.problem, detail=e.detail))
    for pack, files in sorted(by_pack.items()):
        meta = _pack_meta(root / pack)
        level_meta = meta.get("levels", {}) if isinstance(meta.get("levels"), dict) else {}
        char_dirs = {Path(e.rel).parent for e in files if Path(e.rel).name == "character.json"}
        levels = [e for e in files if e.path is not None and model_format(e.path) is not None
                  and not _is_character_asset(Path(e.rel), char_dirs)
                  and e.path not in character_files]
        has_characters = bool(char_dirs) or any(e.path in character_files for e in files)
        problems = [e for e in files if e.problem]
        level_rels = [str(Path(*Path(e.rel).parts[1:])) for e in levels]
        content = _content_dir(pack, [e.rel for e in levels])
        partition_index = _unreal_partition_index(files)
        common = {"pack": pack, "content_dir": content, "license": meta.get("license"),
                  "category": meta.get("category")}
        for e in problems:
            rows.append(_empty_level_row(**common, level_id=f"{pack}/{Path(e.rel).name}",
                                         path=e.rel, kind="broken", enabled=False,
                                         reason=e.problem, detail=e.detail))
        if not levels and has_characters:
            continue  # a character pack: its rows are in characters.parquet
        if not levels:
            rows.append(_empty_level_row(
                **common, level_id=f"{pack}/", path=pack, kind="broken", enabled=False,
                reason="empty_pack" if not files else "no_level",
                detail="pack folder is empty" if not files else
                f"no level file ({', '.join(('glb', 'gltf', 'egg', 'bam', 'obj', 'umap'))})"
                f" among {len(files)} files"))
            continue
        stems = [_level_stem(Path(r).name) for r in level_rels]
        folders = [str(Path(r).parent) for r in level_rels]
        # a generic stem alone in its folder is named after the folder (OcclusionRoom/room.glb)
        names = [name_for(st, Path(e.rel).parent.name, folders.count(fo) == 1)
                 for st, fo, e in zip(stems, folders, levels, strict=True)]
        for e, rel_in_pack, stem, name in zip(levels, level_rels, stems, names, strict=True):
            assert e.path is not None
            unique = names.count(name) == 1 and (name == stem or name not in stems)
            lid = f"{pack}/{name}" if unique else f"{pack}/{_level_stem(rel_in_pack)}"
            lm = level_meta.get(rel_in_pack, {})
            up_axis = lm.get("up_axis")  # an override of the file's declaration (or None)
            scale = float(lm.get("scale", 1.0))
            row = _empty_level_row(**common, level_id=lid, path=e.rel, format=model_format(e.path),
                                   up_axis=None if up_axis is None else str(up_axis),
                                   scale=scale)
            row["category"] = lm.get("category", meta.get("category", "uncategorized"))
            folder_files = [f for f in files if Path(f.rel).parent == Path(e.rel).parent]
            row["file_count"] = len(folder_files)
            try:
                row["size_bytes"] = e.path.stat().st_size
                bad_package = unreal_package_problem(e.path)
                if bad_package:
                    raise ProbeError(*bad_package)
                probe = probe_file(e.path, cfg.max_probe_bytes, up_axis, scale,
                                   root / pack)  # references stay inside the pack
            except ProbeError as exc:
                row.update(kind="broken", enabled=False, reason=exc.reason, detail=exc.detail)
                rows.append(row)
                continue
            except OSError as exc:
                row.update(kind="broken", enabled=False, reason="unreadable", detail=str(exc))
                rows.append(row)
                continue
            if (probe.unskinned_animation and not probe.skinned
                    and max(probe.extent) < ANIMATED_MODEL_MAX_M):
                continue  # an animated model, not a level: in the skipped table
            ext = probe.extent
            notes = list(probe.notes)
            gp = probe.ground_plane
            if gp is not None:
                ext = tuple(b - a for a, b in zip(gp["rest_min"], gp["rest_max"], strict=True))
                notes.append(f"flat ground plane '{gp['node']}' {gp['size_m'][0]:.0f} x "
                             f"{gp['size_m'][1]:.0f} m measured apart; the rest is "
                             f"{ext[0]:.0f} x {ext[1]:.0f} m")
            declared, missing = _declared_images(e.path, probe.images, folder_files, root / pack)
            row["file_count"] = len(folder_files) + declared
            if missing:
                notes.append(f"{len(missing)} declared image(s) missing: {missing[:3]}")
            row.update(
                triangles=probe.triangles, meshes=probe.meshes, nodes=probe.nodes,
                lights=probe.lights, cameras=probe.cameras, animations=len(probe.animations),
                dynamic_props=probe.dynamic_props, player_starts=len(probe.player_starts),
                pois=len(probe.pois), extent_x_m=ext[0], extent_y_m=ext[1], extent_z_m=ext[2],
                bounds_json=json.dumps({"min": probe.bounds_min, "max": probe.bounds_max}
                                       if gp is None else
                                       {"min": gp["rest_min"], "max": gp["rest_max"],
                                        "ground_plane": gp}),
                player_starts_json=json.dumps([list(p) for p in probe.player_starts]),
                pois_json=json.dumps([list(p) for p in probe.pois]),
                lighting=_lighting(probe.extras),
                coordinate_system=probe.coordinate_system,
                coordinate_system_source=probe.coordinate_system_source,
            )
            kind = "persistent"
            name_lower = stem.lower()
            if probe.format == "umap":
                n_ext = partition_index.get(name_lower, 0)
                row["file_count"] = len(folder_files) + n_ext
                if n_ext:
                    kind = "partitioned"
                    row["detail"] = f"{n_ext} external actor/object files (World Partition/OFPA)"
            elif (e.path.parent / f"{stem}_Cells").is_dir():
                kind = "partitioned"
                row["detail"] = f"cells in {stem}_Cells/: one world in several files"
            elif max(ext[0], ext[1]) > cfg.max_extent_m:
                kind = "too_large"
                row["detail"] = (f"one file of {ext[0]:.0f} x {ext[1]:.0f} x {ext[2]:.0f} m: "
                                 f"extent {max(ext[0], ext[1]):.0f} m > inventory.max_extent_m "
                                 f"{cfg.max_extent_m:.0f} m")
            if kind == "persistent":
                kind = classify_by_name(stem) or kind
            if kind == "persistent" and probe.format == "gltf" and probe.triangles == 0:
                kind = "sublevel"
                row["detail"] = "no geometry: partial on its own"
            enabled = kind == "persistent" or (kind == "showcase" and cfg.enable_showcase) or (
                kind == "sublevel" and cfg.enable_sublevels)
            reason = None if enabled else disabled_reason(kind)
            ov = overrides.get(lid, {})
            if "enabled" in ov:
                if not bool(ov["enabled"]) and enabled:
                    reason = "disabled_by_override"
                elif bool(ov["enabled"]) and not enabled:
                    reason = None
                enabled = bool(ov["enabled"])
            if notes:
                row["detail"] = "; ".join(([row["detail"]] if row["detail"] else []) + notes)
            row.update(kind=kind, enabled=enabled, reason=reason,
                       walk_speed=ov.get("walk_speed"),
                       exposure_compensation=ov.get("exposure_compensation"),
                       camera_scale=ov.get("camera_scale"),
                       override_note=ov.get("note"),
                       override_starts_json=json.dumps([[*p, yaw] for p, yaw in
                                                        ov.get("starts", [])]))
            rows.append(row)
    df = pd.DataFrame(rows, columns=LEVEL_COLUMNS)
    return df.sort_values("level_id", kind="stable").reset_index(drop=True)


def _declared_images(path: Path, images: list, folder_files: list[Entry], pack_dir: Path
                     ) -> tuple[int, list[str]]:
    """(declared image files outside the level's folder listing that exist, declared image
    files that do not): URIs are percent-decoded (``textures%2Fgrass.webp``) and must stay in
    the pack; embedded images are not files."""
    listed = {os.path.realpath(f.path) for f in folder_files if f.path is not None}
    seen: set[str] = set()
    extra, missing = 0, []
    for uri, _ in images:
        if uri == "<embedded>":
            continue
        target = os.path.realpath(path.parent / unquote(uri))
        if target in seen or not target.startswith(os.path.realpath(pack_dir) + os.sep):
            continue
        seen.add(target)
        if not os.path.isfile(target):
            missing.append(uri)
        elif target not in listed:
            extra += 1
    return extra, missing
