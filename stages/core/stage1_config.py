"""The settings a Stage I controller runs under (paper §6.2): action sampling, spawning.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .actions import ACTIONS


@dataclass
class ActionConfig:
    # probability of each of the nine actions at a decision point (must sum to 1)
    weights: dict[str, float] = field(default_factory=lambda: {
        "W": 0.40, "A": 0.07, "S": 0.07, "D": 0.07, "WA": 0.09, "WD": 0.09, "SA": 0.04,
        "SD": 0.04, "IDLE": 0.13})
    # hold length, frames: uniform between min and max
    hold_min_frames: int = 15
    hold_max_frames: int = 60
    # "character" (paper §6.2) or "camera" (§9: forward = deeper into the image)
    coordinates: str = "character"
    # point-of-interest guidance: max turn rate toward the POI, deg/s; re-target period, s
    poi_turn_rate_deg_s: float = 25.0
    poi_retarget_s: float = 8.0
    # camera-relative mode: how fast the character turns toward its movement, deg/s
    face_turn_rate_deg_s: float = 240.0
    # camera-relative mode: how fast the reference (camera) yaw follows the character, 1/s
    ref_follow_rate: float = 1.0
    # dead end: moving input but under min_progress_m over window_frames
    deadend_window_frames: int = 20
    deadend_min_progress_m: float = 0.15
    # escape: rotate by at least this angle, deg; respawn after this many failed escapes
    escape_min_deg: float = 100.0
    escape_turn_rate_deg_s: float = 360.0
    max_escapes: int = 3
    # an escape has worked once the character gets this far from where it got stuck, m
    escape_clear_m: float = 3.0


@dataclass
class SpawnConfig:
    # candidate attempts before the level is declared to have no walkable region
    max_attempts: int = 24
    # drop height above the surface, m; time allowed to settle, s; frames of stable contact
    drop_height_m: float = 0.6
    settle_timeout_s: float = 3.0
    settle_frames: int = 8
    # max speed considered at rest, m/s
    rest_speed: float = 0.05
    # warm-up frames after settling, not recorded
    warmup_frames: int = 10
    # respawn when the character falls this far below the level's lowest point, m
    fall_limit_m: float = 5.0
    # share of trajectories (and respawns) that begin at a start (the level's start nodes, then
    # overrides.yaml starts) when the level has any; the rest, and any start that fails, try
    # sampled floors (1.0: starts first, always)
    start_share: float = 1.0
    # a sampled surface narrower than this many capsule diameters (a wall top) is not a floor
    min_floor_width_caps: float = 3.0
    # an engine that streams its world (Unreal World Partition) must have the world around a
    # spawn point loaded before its floor is searched and while the character settles; after
    # this many seconds of engine frames (1/fps each) without it the trajectory fails
    # (streaming_timeout). An engine whose level is all loaded (embedded) never waits
    stream_timeout_s: float = 60.0


def validate_action_config(cfg: ActionConfig, key: str = "trajectories.actions") -> None:
    """Raise ValueError naming the key for a bad action distribution."""
    unknown = sorted(set(cfg.weights) - set(ACTIONS))
    if unknown:
        raise ValueError(f"{key}.weights: unknown action(s) {unknown}; expected {ACTIONS}")
    neg = {a: w for a, w in cfg.weights.items() if w < 0}
    if neg:
        raise ValueError(f"{key}.weights: negative weight(s) {neg}")
    total = sum(cfg.weights.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"{key}.weights: weights sum to {total:.6g}, expected 1")
    if not 1 <= cfg.hold_min_frames <= cfg.hold_max_frames:
        raise ValueError(f"{key}.hold_min_frames/hold_max_frames: need 1 <= min <= max")
    if cfg.coordinates not in ("character", "camera"):
        raise ValueError(f"{key}.coordinates: {cfg.coordinates!r}; expected character|camera")
