"""The asset library's settings: where it lives, how the sample one is generated, and how
``inventory`` reads it (config groups ``library``, ``sample_library``, ``inventory``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LibraryConfig:
    # asset library root that `inventory` scans (relative paths are relative to the repo root)
    root: str = "assets/sample"
    # user-edited per-level overrides (walk speed, exposure, enabled); relative to `root`
    overrides_file: str = "overrides.yaml"


@dataclass
class SampleLibraryConfig:
    # seed of the procedural sample-asset generator: same seed, same bytes
    seed: int = 7
    # grid cells per side of generated terrain heightfields (triangles = 2 * cells^2)
    terrain_cells: int = 48
    # side of generated square textures, pixels (power of two)
    texture_size: int = 128
    # copy the real third-party assets shipped in installed wheels (panda3d models, pybullet_data)
    include_wheel_assets: bool = True


@dataclass
class InventoryConfig:
    # levels whose horizontal extent exceeds this are treated as partitioned open worlds, metres
    max_extent_m: float = 1000.0
    # collision capsule = model bounding box x this safety factor (slightly above 1)
    capsule_safety: float = 1.1
    # minimum capsule radius, metres (clamp for thin or flat characters)
    min_capsule_radius_m: float = 0.2
    # minimum capsule total height, metres
    min_capsule_height_m: float = 0.6
    # default walking speed when neither character nor level override sets one, m/s
    default_walk_speed: float = 1.6
    # enable showcase / preview layouts for production (the paper excludes them)
    enable_showcase: bool = False
    # enable sub-levels that are partial on their own (the paper excludes them)
    enable_sublevels: bool = False
    # per-file read limit, bytes; larger files are inventoried by size only
    max_probe_bytes: int = 256_000_000
    # find characters without a character.json: skinned models (egg joints, glTF skins) and
    # their clip files; every inferred value is recorded in characters.parquet's `guesses`
    discover_characters: bool = True
