"""What a model probe reports: the :class:`ModelProbe` record of a usable file, or a
:class:`ProbeError` with a reason code. Standard library only."""

from __future__ import annotations

from dataclasses import dataclass, field


class ProbeError(Exception):
    """A file that cannot be used; ``reason`` is a short reason code for the inventory row."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class ModelProbe:
    format: str
    triangles: int = 0
    meshes: int = 0
    nodes: int = 0
    bounds_min: tuple[float, float, float] | None = None
    bounds_max: tuple[float, float, float] | None = None
    # marker nodes found by name/extras (world positions, Z up)
    player_starts: list[tuple[float, float, float]] = field(default_factory=list)
    pois: list[tuple[float, float, float]] = field(default_factory=list)
    lights: int = 0
    cameras: int = 0
    animations: list[str] = field(default_factory=list)
    dynamic_props: int = 0
    extras: dict = field(default_factory=dict)
    # the coordinate system the bounds were converted from, and where it came from
    coordinate_system: str = "z-up"
    coordinate_system_source: str = "default"
    # skinned (egg joints / glTF skins): a character candidate; an egg holding only animation
    # tables (<Bundle> without vertices) is an animation clip file
    skinned: bool = False
    animation_only: bool = False
    # glTF skeleton (joint → world position, contract frame, model units; joint → parent),
    # bind-pose vertices (sampled, for pictures), each clip's root travel, and what else the
    # file animates without a skin ("morph targets", "node transforms")
    joints: dict = field(default_factory=dict)
    joint_parents: dict = field(default_factory=dict)
    bind_points: list = field(default_factory=list)
    root_motion: dict = field(default_factory=dict)
    unskinned_animation: str | None = None
    # images the file declares: (uri or "<embedded>", mime or extension); notes on them
    images: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    # a flat ground plane that dwarfs the rest, measured apart (levels)
    ground_plane: dict | None = None

    @property
    def extent(self) -> tuple[float, float, float]:
        if self.bounds_min is None or self.bounds_max is None:
            return (0.0, 0.0, 0.0)
        return tuple(b - a for a, b in zip(self.bounds_min, self.bounds_max, strict=True))  # type: ignore[return-value]
