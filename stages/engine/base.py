"""The Stage I protocol both engine adapters satisfy (DESIGN §4), and the lazy factory that
picks one. The Stage II protocol is :mod:`stages.engine.stage2`.

All values crossing this boundary are in the contract frame: right-handed, Z up, metres,
seconds, yaw in degrees counter-clockwise about +Z from +X. Each adapter converts at its edge.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..core.engine_types import CharacterSpec, CharacterState, LevelInfo, RayHit, Vec3


@runtime_checkable
class Engine(Protocol):
    name: str
    version: str

    def load_level(self, path: str, level_id: str, scale: float = 1.0,
                   up_axis: str | None = None) -> LevelInfo:
        """Load a level: visual scene + collision. Replaces any loaded level. ``up_axis``
        overrides the file's declared coordinate system (None: as declared)."""
        ...

    def load_character(self, spec: CharacterSpec) -> Any:
        """Load the character's model and animations; called once per task per character."""
        ...

    def spawn_character(self, spec: CharacterSpec, position: Vec3, yaw_deg: float) -> None:
        """Place the character's collision capsule with its feet at ``position``."""
        ...

    def apply_input(self, move_world: tuple[float, float], yaw_deg: float, dt: float) -> None:
        """Advance one tick: move along the unit world direction ``move_world`` (0,0 = idle)
        at the character's speed, face ``yaw_deg``, resolve collisions, gravity, props."""
        ...

    def character_state(self) -> CharacterState:
        ...

    def observed_capsule(self) -> tuple[float, float]:
        """(radius, half cylinder height), m, of the collision shape the engine really built
        for the spawned character, read back from the physics shape (§7.2): it differs from the
        request when the engine clamps it. Stage I records these values."""
        ...

    def raycast(self, start: Vec3, end: Vec3) -> RayHit | None:
        """Closest static-geometry hit on the segment, or None."""
        ...

    def raycast_all(self, start: Vec3, end: Vec3) -> list[RayHit]:
        """Every static-geometry surface crossed on the segment, nearest first (the cameras
        look past thin occluders and check that they end outside geometry)."""
        ...

    def world_ready(self, point: Vec3) -> bool:
        """Whether the world under and around ``point`` is loaded and collides (an engine that
        streams its level, like Unreal's World Partition, starts bringing it in when asked).
        Stage I asks each frame before searching a spawn's floor and while the character
        settles (optional: an adapter without it is ready at once)."""
        ...

    def prop_transforms(self) -> list[tuple[str, Vec3, tuple[float, float, float, float]]]:
        """(name, pivot position, quaternion w x y z) per dynamic prop, recorded each frame so
        Stage II can replay pushed props (trajectory contract v2, props.parquet)."""
        ...

    def close(self) -> None:
        ...


class EngineUnavailable(RuntimeError):
    """The engine named in config is not installed on this machine."""


def make_engine(cfg: Any) -> Engine:
    """Build the adapter named by ``cfg.name`` ("embedded" or "unreal"), importing it lazily."""
    name = getattr(cfg, "name", cfg)
    if name == "embedded":
        try:
            import panda3d  # noqa: F401
            import panda3d.bullet  # noqa: F401
        except ImportError as exc:
            raise EngineUnavailable(
                "engine 'embedded' needs Panda3D with Bullet: `pip install panda3d==1.10.16` "
                f"(or run scripts/setup.sh); import failed: {exc}") from None
        from .embedded import EmbeddedEngine

        return EmbeddedEngine(cfg)
    if name == "unreal":
        raise EngineUnavailable(
            "engine 'unreal' runs inside Unreal Editor (unreal/ scripts); it cannot be driven "
            "from this process on a machine without Unreal Engine")
    raise EngineUnavailable(f"engine.name is {name!r}; expected 'embedded' or 'unreal'")
