"""``Object`` and the actors and components of the fake ``unreal`` module: what the scripts spawn,
read and set. They reach the running editor only through ``host`` (a destroyed actor, the
skeletal assertion of Table 2). A stand-in: no Unreal runs here."""

from __future__ import annotations

import copy
from typing import Any

from tests.fakes.unreal.host import running_editor
from tests.fakes.unreal.structs import (
    BoxSphereBounds,
    CameraFocusMethod,
    MovementMode,
    Rotator,
    Vector,
    _Enum,
)


class Object:
    _count = 0

    def __init__(self, name: str = ""):
        Object._count += 1
        self._name = name or f"{type(self).__name__}_{Object._count}"
        self._props: dict[str, Any] = {}

    @classmethod
    def static_class(cls) -> type:
        return cls

    def get_name(self) -> str:
        return self._name

    def get_path_name(self) -> str:
        return getattr(self, "_path", f"/Temp/{self._name}")

    def set_editor_property(self, name: str, value: Any, notify_mode: Any = None) -> None:
        self._props[name] = value

    def get_editor_property(self, name: str) -> Any:
        return self._props.get(name)


class Declared(Object):
    """An Object whose public class attributes are its defaults, as Unreal builds each object from
    its class default object: every instance starts with its own deep copy of them (a list, dict
    or struct is never shared; an enum value stays itself)."""

    def __init__(self, name: str = ""):
        super().__init__(name)
        for klass in reversed(type(self).__mro__):
            for k, v in vars(klass).items():
                if not k.startswith("_") and not callable(v) and not isinstance(
                        v, (classmethod, staticmethod, property)):
                    setattr(self, k, copy.deepcopy(v))


class World(Object):
    def __init__(self, name: str, pie: bool):
        super().__init__(name)
        self.pie = pie
        self.actors: list[Actor] = []


class SceneComponent(Object):
    def __init__(self) -> None:
        super().__init__()
        self.relative_location = Vector()
        self.relative_rotation = Rotator()
        self.relative_scale = Vector(1, 1, 1)

    def set_relative_location(self, v: Vector, sweep: bool = False, teleport: bool = False):
        self.relative_location = v

    def set_relative_rotation(self, r: Rotator, sweep: bool = False, teleport: bool = False):
        self.relative_rotation = r

    def set_relative_scale3d(self, v: Vector) -> None:
        self.relative_scale = v


class PrimitiveComponent(SceneComponent):
    """What the renderer asks of a drawn component: main pass (the picture) and shadows."""

    def __init__(self) -> None:
        super().__init__()
        self.render_in_main_pass = True
        self.cast_shadow = True
        self.owner_no_see = False

    def set_render_in_main_pass(self, value: bool) -> None:
        self.render_in_main_pass = bool(value)

    def get_editor_property(self, name: str) -> Any:
        if name in ("render_in_main_pass", "cast_shadow", "owner_no_see"):
            return getattr(self, name)
        return super().get_editor_property(name)

    def set_owner_no_see(self, new_owner_no_see: bool) -> None:
        self.owner_no_see = bool(new_owner_no_see)


class Actor(Object):
    """An actor whose transform is its root component's (Unreal: GetActorLocation is the root
    component's world location). Actors without a root component of their own keep it here."""

    root_component: SceneComponent | None = None

    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__()
        self._location = location or Vector()
        self._rotation = rotation or Rotator()
        self.hidden_in_game = False
        self.velocity = Vector()
        self.label = self._name
        self.world: World | None = None
        self.origin, self.extent = Vector(), Vector()

    @property
    def location(self) -> Vector:
        r = self.root_component
        return r.relative_location if r is not None else self._location

    @location.setter
    def location(self, v: Vector) -> None:
        r = self.root_component
        if r is not None:
            r.relative_location = v
        else:
            self._location = v

    @property
    def rotation(self) -> Rotator:
        r = self.root_component
        return r.relative_rotation if r is not None else self._rotation

    @rotation.setter
    def rotation(self, v: Rotator) -> None:
        r = self.root_component
        if r is not None:
            r.relative_rotation = v
        else:
            self._rotation = v

    def get_actor_forward_vector(self) -> Vector:
        import math

        p, y = math.radians(self.rotation.pitch), math.radians(self.rotation.yaw)
        return Vector(math.cos(p) * math.cos(y), math.cos(p) * math.sin(y), math.sin(p))

    def set_actor_hidden_in_game(self, new_hidden: bool) -> None:
        self.hidden_in_game = bool(new_hidden)

    def get_actor_location(self) -> Vector:
        return self.location

    def get_actor_rotation(self) -> Rotator:
        return self.rotation

    def set_actor_rotation(self, r: Rotator, teleport_physics: bool) -> bool:
        self.rotation = r
        return True

    def set_actor_location(self, new_location: Vector, sweep: bool, teleport: bool) -> None:
        self.location = new_location
        return None  # no sweep hit

    def get_velocity(self) -> Vector:
        return self.velocity

    def get_actor_bounds(self, only_colliding_components: bool,
                         include_from_child_actors: bool = False) -> tuple[Vector, Vector]:
        return self.origin, self.extent

    def get_actor_label(self) -> str:
        return self.label

    def set_actor_label(self, label: str, mark_dirty: bool = True) -> None:
        self.label = label

    def destroy_actor(self) -> None:
        running_editor().destroy(self)


class StaticMeshActor(Actor):
    pass


class PlayerStart(Actor):
    pass


class SkeletalMesh(Object):
    """A skeletal mesh asset. The fake draws it as an upright cylinder of ``radius_cm`` x
    ``height_cm`` from ``base_cm`` above its origin (0: the origin at the feet, as most
    characters are imported; a flying model is often centred on its origin, base -height/2),
    its front (local +X) marked, so where it stands, where it faces and which views see it
    show in pictures."""

    def __init__(self, path: str, radius_cm: float = 30.0, height_cm: float = 180.0,
                 base_cm: float = 0.0):
        super().__init__(path.rsplit("/", 1)[-1])
        self._path = path
        self.radius_cm, self.height_cm, self.base_cm = radius_cm, height_cm, base_cm

    def get_imported_bounds(self) -> BoxSphereBounds:
        h = self.height_cm / 2
        return BoxSphereBounds(Vector(0.0, 0.0, self.base_cm + h),
                               Vector(self.radius_cm, self.radius_cm, h),
                               (self.radius_cm ** 2 + h * h) ** 0.5)

    def get_bounds(self) -> BoxSphereBounds:
        return self.get_imported_bounds()


class AnimSequence(Object):
    def __init__(self, path: str, root_motion: bool = True):
        super().__init__(path.rsplit("/", 1)[-1])
        self._path = path
        self._props = {"enable_root_motion": root_motion, "force_root_lock": False}


class SkeletalMeshComponent(PrimitiveComponent):
    def __init__(self, owner: Actor):
        super().__init__()
        self.owner = owner
        self.asset: SkeletalMesh | None = None
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def set_skeletal_mesh_asset(self, new_mesh: SkeletalMesh | None) -> None:
        ed = running_editor()
        if new_mesh is not None:
            stale = [a for a in ed.pie_characters() if a is not self.owner and a.mesh.asset
                     is not None and a.mesh.asset is not new_mesh]
            if stale:  # Table 2: the previous model's skeletal state meets the new model
                ed.crash("Assertion failed: RequiredBones.IsValid() [File:./Runtime/Engine/"
                         "Private/Animation/AnimInstanceProxy.cpp] [Line: 1142]",
                         "USkeletalMeshComponent::TickAnimation(float, bool)")
        self.asset = new_mesh


class CapsuleComponent(SceneComponent):
    def __init__(self) -> None:
        super().__init__()
        self.radius, self.half_height = 34.0, 88.0

    def set_capsule_size(self, radius: float, half_height: float,
                         update_overlaps: bool = True) -> None:
        self.radius = max(0.0, radius)
        self.half_height = max(self.radius, half_height)  # Unreal's clamp

    def get_scaled_capsule_radius(self) -> float:
        return self.radius * self.relative_scale.x

    def get_scaled_capsule_half_height(self) -> float:
        return self.half_height * self.relative_scale.z


class Controller(Actor):
    pass


class PlayerController(Controller):
    """Player 0's controller in PIE: a World Partition streaming source (its defaults:
    enabled, activating, blocking on slow streaming) at its view point, which the camera
    manager updates in the world tick (``world_partition.view_point``)."""

    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__(location, rotation)
        self.view_target: Actor | None = None
        self.enable_streaming_source = True
        # bStreamingSourceShouldActivate / ...BlockOnSlowStreaming: editor properties whose
        # Python names are taken by the UFUNCTIONs of the same name (below)
        self._props.update({"streaming_source_should_activate": True,
                            "streaming_source_should_block_on_slow_streaming": True})
        self.source_location, self.source_rotation = self.location, Rotator()

    def streaming_source_should_activate(self) -> bool:
        return bool(self._props["streaming_source_should_activate"])

    def streaming_source_should_block_on_slow_streaming(self) -> bool:
        return bool(self._props["streaming_source_should_block_on_slow_streaming"])

    def get_streaming_source_location_and_rotation(self) -> tuple[Vector, Rotator]:
        return self.source_location, self.source_rotation

    def set_view_target_with_blend(self, new_view_target: Actor, blend_time: float = 0.0,
                                   *a: Any, **k: Any) -> None:
        self.view_target = new_view_target


class CameraActor(Actor):
    pass


class Landscape(Actor):
    """A landscape: collides, but is not a StaticMeshActor."""


class Info(Actor):
    pass


class Volume(Actor):
    pass


class PostProcessVolume(Volume):
    """Its brush overlaps (collision enabled, query only): counted by colliding bounds."""


class Pawn(Actor):
    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__(location, rotation)
        self.use_controller_rotation_yaw = True  # APawn's default for a Character
        self.controller_yaw = self._rotation.yaw  # an AI controller keeps its spawn rotation
        self.wanted_yaw: float | None = None

    def set_actor_rotation(self, r: Rotator, teleport_physics: bool) -> bool:
        self.wanted_yaw = r.yaw
        return super().set_actor_rotation(r, teleport_physics)


class DefaultPawn(Pawn):
    """The GameMode's default pawn (a sphere with collision), spawned for player 0 in PIE."""


class CharacterMovementComponent(Object):
    def __init__(self, owner: Character):
        super().__init__()
        self.owner = owner
        self.max_walk_speed = 600.0
        self.max_step_height = 45.0
        self.gravity_scale = 1.0
        self.walkable_floor_angle = 44.765
        self.mode: _Enum = MovementMode.MOVE_WALKING
        self.orient_rotation_to_movement = False

    def set_walkable_floor_angle(self, walkable_floor_angle: float) -> None:
        self.walkable_floor_angle = walkable_floor_angle

    def set_movement_mode(self, new_movement_mode: _Enum, new_custom_mode: int = 0) -> None:
        self.mode = new_movement_mode

    def is_moving_on_ground(self) -> bool:
        return self.owner.grounded


class Character(Pawn):
    ORIENT_TO_MOVEMENT = False  # a Blueprint character (ThirdPerson template) turns it on

    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__(location, rotation)
        self.capsule_component = CapsuleComponent()
        self.character_movement = CharacterMovementComponent(self)
        self.mesh = SkeletalMeshComponent(self)
        self.grounded = False
        self.input: list[tuple[float, float, float]] = []
        self.spawned_in_engine = False
        self.character_movement.orient_rotation_to_movement = self.ORIENT_TO_MOVEMENT


    def add_movement_input(self, world_direction: Vector, scale_value: float = 1.0,
                           force: bool = False) -> None:
        self.input.append((world_direction.x * scale_value, world_direction.y * scale_value,
                           world_direction.z * scale_value))


class BlueprintCharacter(Character):
    """A Character Blueprint as third-party packs ship them: it turns toward its movement."""

    ORIENT_TO_MOVEMENT = True


class CameraFilmbackSettings:
    def __init__(self) -> None:
        self.sensor_width, self.sensor_height = 23.76, 13.365


class CameraFocusSettings:
    def __init__(self) -> None:
        # a CineCamera's defaults: manual focus, i.e. depth of field at its aperture (f/2.8)
        self.focus_method: _Enum = CameraFocusMethod.MANUAL
        self.manual_focus_distance = 100000.0


class CineCameraComponent(SceneComponent):
    def __init__(self) -> None:
        super().__init__()
        self.filmback = CameraFilmbackSettings()
        self.focus_settings = CameraFocusSettings()
        self.current_focal_length = 35.0
        self.current_aperture = 2.8


class CineCameraActor(CameraActor):
    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__(location, rotation)
        self._cc = CineCameraComponent()

    def get_cine_camera_component(self) -> CineCameraComponent:
        return self._cc


class SkeletalMeshActor(Actor):
    """Unreal's SkeletalMeshActor: its root component IS its SkeletalMeshComponent, so the
    actor's transform (and a transform track keyed on it) is the mesh component's."""

    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__(location, rotation)
        self.skeletal_mesh_component = SkeletalMeshComponent(self)
        self.skeletal_mesh_component.relative_location = self._location
        self.skeletal_mesh_component.relative_rotation = self._rotation
        self.root_component = self.skeletal_mesh_component

    def get_actor_bounds(self, only_colliding_components: bool,
                         include_from_child_actors: bool = False) -> tuple[Vector, Vector]:
        """The drawn cylinder's box: from the mesh's lowest point (``base_cm`` above its
        origin) up."""
        c = self.skeletal_mesh_component
        if c.asset is None:
            return Vector(), Vector()
        r = c.asset.radius_cm * abs(c.relative_scale.x)
        h = c.asset.height_cm * abs(c.relative_scale.z)
        loc = c.relative_location
        base = c.asset.base_cm * abs(c.relative_scale.z)
        return Vector(loc.x, loc.y, loc.z + base + h / 2), Vector(r, r, h / 2)


class MovieSceneSequencePlaybackSettings:
    def __init__(self, auto_play: bool = False):
        self.auto_play = auto_play


class LevelSequenceActor(Actor):
    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None,
                 auto_play: bool = False, showcase: tuple[Vector, Rotator] | None = None):
        super().__init__(location, rotation)
        self.playback_settings = MovieSceneSequencePlaybackSettings(auto_play)
        self.showcase = showcase or (Vector(0, 0, 500), Rotator(0, -30, 0))
