"""Plain records exchanged with an engine adapter (contract frame: Z up, metres, degrees).

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class CharacterSpec:
    character_id: str
    capsule_radius: float  # m
    capsule_half_height: float  # m, half the cylinder part (total = 2 * (r + hh))
    visual_height: float  # m, for camera framing (may be far below the capsule: flat bats)
    walk_speed: float = 1.6  # m/s
    step_height: float = 0.45  # m
    locomotion: str = "walk"  # walk | fly | swim
    height_offset: float = 0.0  # m above ground for fly/swim; spawn lift otherwise
    max_slope_deg: float = 45.0  # walkable-slope limit
    scale: float = 1.0
    yaw_correction_deg: float = 0.0
    model_path: str = ""
    # the sidecar's override of the model file's declared coordinate system (None: as declared)
    up_axis: str | None = None
    footprint: float = 0.0  # m, largest horizontal extent of the visual bounds (0: unknown)
    animations: dict[str, str | None] = field(default_factory=dict)

    @property
    def total_height(self) -> float:
        return 2 * (self.capsule_radius + self.capsule_half_height)


@dataclass
class CharacterState:
    position: Vec3  # feet (bottom of the capsule), m
    yaw_deg: float
    velocity: Vec3  # m/s
    grounded: bool
    ground_normal: Vec3 = (0.0, 0.0, 1.0)


@dataclass
class RayHit:
    position: Vec3
    normal: Vec3
    fraction: float


@dataclass
class LevelInfo:
    level_id: str
    bounds_min: Vec3
    bounds_max: Vec3
    player_starts: list[tuple[Vec3, float]] = field(default_factory=list)  # (position, yaw)
    pois: list[Vec3] = field(default_factory=list)
    large_objects: list[Vec3] = field(default_factory=list)  # centres of big static parts
    triangles: int = 0
    dynamic_props: int = 0
    removed: list[str] = field(default_factory=list)  # cameras/animations disabled on load
