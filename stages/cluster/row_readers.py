"""What a unit of work reads from the inventory's rows: the character specs, a level's overrides,
its interior flag, its folder name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..config import ConfigError
from ..core.engine_types import CharacterSpec
from ..core.model_probe import normalize_coordinate_system


def character_specs(chars: pd.DataFrame, library: Path, wanted: list[str],
                    max_slope_deg: float = 45.0) -> list[CharacterSpec]:
    """The usable characters of characters.parquet (only ``wanted`` ones when given, an unknown
    one a ConfigError), sorted by id, with model paths under ``library``."""
    ok = chars[chars["ok"].astype(bool)]
    if wanted:
        missing = sorted(set(wanted) - set(ok["character_id"]))
        if missing:
            raise ConfigError(f"trajectories.characters: unknown or unusable {missing}")
        ok = ok[ok["character_id"].isin(wanted)]
    specs = []
    for r in ok.sort_values("character_id").to_dict("records"):
        specs.append(CharacterSpec(
            character_id=str(r["character_id"]), capsule_radius=float(r["capsule_radius_m"]),
            capsule_half_height=float(r["capsule_half_height_m"]),
            visual_height=float(r["visual_height_m"]), walk_speed=float(r["walk_speed"]),
            step_height=float(r["step_height_m"]), locomotion=str(r["locomotion"]),
            height_offset=float(r["height_offset_m"]), max_slope_deg=max_slope_deg,
            scale=float(r["scale"]), yaw_correction_deg=float(r["yaw_correction_deg"]),
            model_path=str(library / str(r["model_path"])),
            up_axis=normalize_coordinate_system(r.get("up_axis")),
            footprint=optional_number(r.get("footprint_m")) or 0.0,
            animations=json.loads(str(r["animation_json"]))))
    if not specs:
        raise ConfigError("no usable character in characters.parquet")
    return specs


def optional_number(v: object) -> float | None:
    """A row's number, or None when it is missing, NaN or not a number."""
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if f == f else None  # NaN (a missing parquet value) is no override


def is_interior(row: dict) -> bool:
    """A level marked interior (its ``category`` in pack.json / the inventory, or its glTF's
    ``wmforge.lighting``): Stage I spawns under its roof, never under the sky."""
    return "interior" in (str(row.get("category") or "").lower(),
                          str(row.get("lighting") or "").lower())


def level_overrides(row: dict) -> dict:
    """The per-level overrides of an inventory row that shape Stage I and Stage II:
    ``walk_speed`` (m/s, replaces every character's), ``exposure_compensation`` (EV, Stage II),
    ``starts`` ([[x, y, z, yaw_deg], …] from overrides.yaml, tried after the level's own)."""
    try:
        starts = json.loads(str(row.get("override_starts_json") or "[]"))
    except ValueError:
        starts = []
    return {"walk_speed": optional_number(row.get("walk_speed")),
            "exposure_compensation": optional_number(row.get("exposure_compensation")),
            "starts": [[float(c) for c in s] for s in starts]}


def level_dir_name(level_id: str) -> str:
    """The folder of a level's trajectories (``scene/level`` → ``scene__level``)."""
    return level_id.replace("/", "__")
