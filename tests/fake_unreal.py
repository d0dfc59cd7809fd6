"""fake_unreal: a stand-in for Unreal Editor's ``unreal`` module — no Unreal runs here.

It implements just the calls the scripts in ``unreal/`` make (the same names the 5.6 stub and
the MRQ stub declare), backed by the embedded engine, and it is ticked like Slate:
:meth:`FakeEditor.run` executes a script as ``-ExecutePythonScript`` does, then, frame by frame,
ticks the PIE world (each character's movement input is resolved by the embedded engine's
Bullet character controller in the world tick, after the callback that gave it, as in Unreal)
and calls the Slate post-tick callbacks with the fixed step. Movie Render Queue "renders" each
camera by casting a grid of rays into the embedded engine's level from the pose the sequence's
keys give at that frame (a depth picture, not a shaded render).

Unreal behaviour it reproduces because the scripts depend on it: PIE starts and stops on the
frame after the request; runtime spawns need the PIE world; the capsule half-height is clamped
to the radius; without keep-alive the editor quits when the script returns; the PIE executor
refuses an unsaved level unless allowed; an auto-play sequence actor left in the level takes
every camera; setting a new skeletal mesh while the previous character still holds its mesh
crashes with a skeletal assertion (Table 2). Conversions are written here independently of
``unreal/ue_frame.py`` so that the tests check it rather than reuse it.
"""

from __future__ import annotations

import math
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

EDITOR: FakeEditor | None = None
SCRIPT_MODULES = ("ue_frame", "ue_paths", "ue_engine", "ue_publish", "ue_sequence")


def _ed() -> FakeEditor:
    assert EDITOR is not None, "no FakeEditor installed"
    return EDITOR


class FakeCrash(BaseException):
    """The fake engine crashed (the banner is in the log). Not an Exception: a script's
    ``except Exception`` cannot catch an engine crash any more than in Unreal."""


# ---------------------------------------------------------------- structs and enums

class Vector:
    def __init__(self, x: float = 0.0, y: float = 0.0, z: float = 0.0):
        self.x, self.y, self.z = float(x), float(y), float(z)

    def __repr__(self) -> str:
        return f"Vector({self.x:.3f}, {self.y:.3f}, {self.z:.3f})"


class Rotator:
    def __init__(self, roll: float = 0.0, pitch: float = 0.0, yaw: float = 0.0):
        self.roll, self.pitch, self.yaw = float(roll), float(pitch), float(yaw)


class FrameNumber:
    def __init__(self, value: int = 0):
        self.value = int(value)


class FrameRate:
    def __init__(self, numerator: int = 0, denominator: int = 1):
        self.numerator, self.denominator = numerator, denominator


class IntPoint:
    def __init__(self, x: int = 0, y: int = 0):
        self.x, self.y = int(x), int(y)


class SoftObjectPath:
    def __init__(self, path_string: str = ""):
        self.path = path_string


class DirectoryPath:
    def __init__(self, path: str = ""):
        self.path = path


class Text(str):
    pass


class Array(list):
    @classmethod
    def cast(cls, type_: type, obj: Any) -> list:
        return list(obj)


class _Enum:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


class TraceTypeQuery:
    TRACE_TYPE_QUERY1 = _Enum("TRACE_TYPE_QUERY1")
    TRACE_TYPE_QUERY2 = _Enum("TRACE_TYPE_QUERY2")


class DrawDebugTrace:
    NONE = _Enum("NONE")


class MovementMode:
    MOVE_WALKING = _Enum("MOVE_WALKING")
    MOVE_FLYING = _Enum("MOVE_FLYING")


class MovieSceneKeyInterpolation:
    LINEAR = _Enum("LINEAR")
    AUTO = _Enum("AUTO")


class MovieSceneTimeUnit:
    DISPLAY_RATE = _Enum("DISPLAY_RATE")


class HitResult:
    def __init__(self, *fields: Any):
        self._f = fields

    def to_tuple(self) -> tuple:
        return self._f


# ---------------------------------------------------------------- objects

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


class Actor(Object):
    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__()
        self.location = location or Vector()
        self.rotation = rotation or Rotator()
        self.velocity = Vector()
        self.label = self._name
        self.world: World | None = None
        self.origin, self.extent = Vector(), Vector()

    def get_actor_location(self) -> Vector:
        return self.location

    def get_actor_rotation(self) -> Rotator:
        return self.rotation

    def set_actor_rotation(self, r: Rotator, teleport_physics: bool) -> bool:
        self.rotation = r
        return True

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
        _ed().destroy(self)


class StaticMeshActor(Actor):
    pass


class PlayerStart(Actor):
    pass


class SkeletalMesh(Object):
    def __init__(self, path: str):
        super().__init__(path.rsplit("/", 1)[-1])
        self._path = path


class AnimSequence(Object):
    def __init__(self, path: str, root_motion: bool = True):
        super().__init__(path.rsplit("/", 1)[-1])
        self._path = path
        self._props = {"enable_root_motion": root_motion, "force_root_lock": False}


class SkeletalMeshComponent(SceneComponent):
    def __init__(self, owner: Actor):
        super().__init__()
        self.owner = owner
        self.asset: SkeletalMesh | None = None
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def set_skeletal_mesh_asset(self, new_mesh: SkeletalMesh | None) -> None:
        ed = _ed()
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


class CharacterMovementComponent(Object):
    def __init__(self, owner: Character):
        super().__init__()
        self.owner = owner
        self.max_walk_speed = 600.0
        self.max_step_height = 45.0
        self.gravity_scale = 1.0
        self.walkable_floor_angle = 44.765
        self.mode: _Enum = MovementMode.MOVE_WALKING

    def set_walkable_floor_angle(self, walkable_floor_angle: float) -> None:
        self.walkable_floor_angle = walkable_floor_angle

    def set_movement_mode(self, new_movement_mode: _Enum, new_custom_mode: int = 0) -> None:
        self.mode = new_movement_mode

    def is_moving_on_ground(self) -> bool:
        return self.owner.grounded


class Character(Actor):
    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__(location, rotation)
        self.capsule_component = CapsuleComponent()
        self.character_movement = CharacterMovementComponent(self)
        self.mesh = SkeletalMeshComponent(self)
        self.grounded = False
        self.input: list[tuple[float, float, float]] = []
        self.spawned_in_engine = False

    def add_movement_input(self, world_direction: Vector, scale_value: float = 1.0,
                           force: bool = False) -> None:
        self.input.append((world_direction.x * scale_value, world_direction.y * scale_value,
                           world_direction.z * scale_value))


class CameraFilmbackSettings:
    def __init__(self) -> None:
        self.sensor_width, self.sensor_height = 23.76, 13.365


class CineCameraComponent(SceneComponent):
    def __init__(self) -> None:
        super().__init__()
        self.filmback = CameraFilmbackSettings()
        self.current_focal_length = 35.0


class CineCameraActor(Actor):
    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__(location, rotation)
        self._cc = CineCameraComponent()

    def get_cine_camera_component(self) -> CineCameraComponent:
        return self._cc


class SkeletalMeshActor(Actor):
    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None):
        super().__init__(location, rotation)
        self.skeletal_mesh_component = SkeletalMeshComponent(self)


class MovieSceneSequencePlaybackSettings:
    def __init__(self, auto_play: bool = False):
        self.auto_play = auto_play


class LevelSequenceActor(Actor):
    def __init__(self, location: Vector | None = None, rotation: Rotator | None = None,
                 auto_play: bool = False, showcase: tuple[Vector, Rotator] | None = None):
        super().__init__(location, rotation)
        self.playback_settings = MovieSceneSequencePlaybackSettings(auto_play)
        self.showcase = showcase or (Vector(0, 0, 500), Rotator(0, -30, 0))


# ---------------------------------------------------------------- sequencer

class MovieSceneScriptingChannel(Object):
    pass


class MovieSceneScriptingDoubleChannel(MovieSceneScriptingChannel):
    def __init__(self, name: str):
        super().__init__(name)
        self.keys: dict[int, float] = {}
        self.interp: list[Any] = []

    def add_key(self, time: FrameNumber, new_value: float, sub_frame: float = 0.0,
                time_unit: Any = None, interpolation: Any = None) -> None:
        self.keys[time.value] = float(new_value)
        self.interp.append(interpolation)


class MovieSceneSection(Object):
    def __init__(self) -> None:
        super().__init__()
        self.range = (0, 0)

    def set_range(self, start_frame: int, end_frame: int) -> None:
        self.range = (start_frame, end_frame)


class MovieScene3DTransformSection(MovieSceneSection):
    NAMES = ("Location.X", "Location.Y", "Location.Z", "Rotation.X", "Rotation.Y",
             "Rotation.Z", "Scale.X", "Scale.Y", "Scale.Z")

    def __init__(self) -> None:
        super().__init__()
        self.channels = [MovieSceneScriptingDoubleChannel(n) for n in self.NAMES]

    def get_all_channels(self) -> list:
        return list(self.channels)


class MovieSceneSkeletalAnimationParams:
    def __init__(self) -> None:
        self.animation: AnimSequence | None = None


class MovieSceneSkeletalAnimationSection(MovieSceneSection):
    def __init__(self) -> None:
        super().__init__()
        self.params = MovieSceneSkeletalAnimationParams()


class MovieSceneCameraCutSection(MovieSceneSection):
    def __init__(self) -> None:
        super().__init__()
        self.camera: Any = None

    def set_camera_binding_id(self, camera_binding_id: Any) -> None:
        self.camera = camera_binding_id


class MovieSceneTrack(Object):
    SECTION: type = MovieSceneSection

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[MovieSceneSection] = []

    def add_section(self) -> MovieSceneSection:
        s = self.SECTION()
        self.sections.append(s)
        return s


class MovieScene3DTransformTrack(MovieSceneTrack):
    SECTION = MovieScene3DTransformSection


class MovieSceneSkeletalAnimationTrack(MovieSceneTrack):
    SECTION = MovieSceneSkeletalAnimationSection


class MovieSceneCameraCutTrack(MovieSceneTrack):
    SECTION = MovieSceneCameraCutSection


class MovieSceneBindingProxy(Object):
    def __init__(self, obj: Actor):
        super().__init__()
        self.object = obj
        self.tracks: list[MovieSceneTrack] = []

    def add_track(self, track_type: type) -> MovieSceneTrack:
        t = track_type()
        self.tracks.append(t)
        return t

    def transform(self) -> MovieScene3DTransformSection:
        return next(t for t in self.tracks if isinstance(t, MovieScene3DTransformTrack)
                    ).sections[0]  # type: ignore[return-value]


class LevelSequence(Object):
    def __init__(self, name: str, path: str):
        super().__init__(name)
        self._path = path
        self.display_rate = self.tick_resolution = FrameRate(0, 1)
        self.start = self.end = 0
        self.bindings: list[MovieSceneBindingProxy] = []
        self.tracks: list[MovieSceneTrack] = []

    def set_display_rate(self, display_rate: FrameRate) -> None:
        self.display_rate = display_rate

    def set_tick_resolution(self, tick_resolution: FrameRate) -> None:
        self.tick_resolution = tick_resolution

    def set_playback_start(self, start_frame: int) -> None:
        self.start = start_frame

    def set_playback_end(self, end_frame: int) -> None:
        self.end = end_frame

    def add_possessable(self, object_to_possess: Actor) -> MovieSceneBindingProxy:
        b = MovieSceneBindingProxy(object_to_possess)
        self.bindings.append(b)
        return b

    def add_track(self, track_type: type) -> MovieSceneTrack:
        t = track_type()
        self.tracks.append(t)
        return t

    def get_binding_id(self, binding: MovieSceneBindingProxy) -> MovieSceneBindingProxy:
        return binding


class LevelSequenceFactoryNew(Object):
    pass


class AssetTools(Object):
    def create_asset(self, asset_name: str, package_path: str, asset_class: type,
                     factory: Any, calling_context: str = "None") -> Object:
        path = f"{package_path}/{asset_name}.{asset_name}"
        ed = _ed()
        if path in ed.assets:
            raise RuntimeError(f"asset {path} already exists")
        seq = asset_class(asset_name, path)
        ed.assets[path] = ed.sequences[path] = seq
        return seq


class AssetToolsHelpers:
    @classmethod
    def get_asset_tools(cls) -> AssetTools:
        return AssetTools()


# ---------------------------------------------------------------- Movie Render Queue

class MoviePipeline(Object):
    pass


class MoviePipelineSetting(Object):
    pass


class MoviePipelineOutputSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.output_directory = DirectoryPath("")
        self.file_name_format = "{sequence_name}.{frame_number}"
        self.output_resolution = IntPoint(1920, 1080)
        self.zero_pad_frame_numbers = 4
        self.use_custom_frame_rate = False
        self.output_frame_rate = FrameRate(24, 1)
        self.override_existing_output = False
        self.flush_disk_writes_per_shot = False


class MoviePipelineAntiAliasingSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()  # MRQ's defaults (FACTS: Unreal)
        self.spatial_sample_count = 1
        self.temporal_sample_count = 1
        self.render_warm_up_count = 32
        self.engine_warm_up_count = 0
        self.use_camera_cut_for_warm_up = False
        self.render_warm_up_frames = False


class MoviePipelineCameraSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.render_all_cameras = False


class MoviePipelineDeferredPassBase(MoviePipelineSetting):
    pass


class MoviePipelineImageSequenceOutput_PNG(MoviePipelineSetting):  # noqa: N801
    pass


class MoviePipelineImageSequenceOutput_EXR(MoviePipelineSetting):  # noqa: N801
    pass


class MoviePipelineGameOverrideSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.flush_streaming_managers = False


class MoviePipelineConsoleVariableSetting(MoviePipelineSetting):
    def __init__(self) -> None:
        super().__init__()
        self.cvars: dict[str, float] = {}

    def add_or_update_console_variable(self, name: str, value: float) -> bool:
        self.cvars[name] = float(value)
        return True


class MoviePipelinePrimaryConfig(Object):
    def __init__(self) -> None:
        super().__init__()
        self.settings: dict[type, MoviePipelineSetting] = {}

    def find_or_add_setting_by_class(self, class_: type) -> Any:
        if class_ not in self.settings:
            self.settings[class_] = class_()
        return self.settings[class_]


class MoviePipelineExecutorJob(Object):
    def __init__(self) -> None:
        super().__init__()
        self.job_name = ""
        self.map = SoftObjectPath()
        self.sequence = SoftObjectPath()
        self.config = MoviePipelinePrimaryConfig()

    def get_configuration(self) -> MoviePipelinePrimaryConfig:
        return self.config


class MoviePipelineQueue(Object):
    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[MoviePipelineExecutorJob] = []

    def allocate_new_job(self, job_type: type) -> MoviePipelineExecutorJob:
        j = job_type()
        self.jobs.append(j)
        return j

    def delete_all_jobs(self) -> None:
        self.jobs = []

    def get_jobs(self) -> list:
        return list(self.jobs)


class _Delegate:
    def __init__(self) -> None:
        self.fns: list[Callable] = []

    def add_callable(self, callable: Callable) -> None:
        self.fns.append(callable)

    def broadcast(self, *args: Any) -> None:
        for fn in self.fns:
            fn(*args)


class MoviePipelineExecutorBase(Object):
    def __init__(self) -> None:
        super().__init__()
        self.on_executor_finished_delegate = _Delegate()
        self.on_executor_errored_delegate = _Delegate()


class MoviePipelinePIEExecutor(MoviePipelineExecutorBase):
    def __init__(self) -> None:
        super().__init__()
        self.allow_unsaved = False

    def set_allow_using_unsaved_levels(self, should_allow: bool) -> None:
        self.allow_unsaved = should_allow


# ---------------------------------------------------------------- subsystems and libraries

class EditorSubsystem(Object):
    pass


class LevelEditorSubsystem(EditorSubsystem):
    def load_level(self, asset_path: str) -> bool:
        return _ed().open_map(asset_path)

    def editor_request_begin_play(self) -> None:
        _ed().requests.append("begin_play")

    def editor_request_end_play(self) -> None:
        _ed().requests.append("end_play")

    def is_in_play_in_editor(self) -> bool:
        return _ed().pie_world is not None


class UnrealEditorSubsystem(EditorSubsystem):
    def get_game_world(self) -> World | None:
        return _ed().pie_world

    def get_editor_world(self) -> World:
        return _ed().editor_world


class EditorActorSubsystem(EditorSubsystem):
    def get_all_level_actors(self) -> list:
        return list(_ed().editor_world.actors)

    def destroy_actor(self, actor_to_destroy: Actor) -> bool:
        _ed().destroy(actor_to_destroy)
        return True

    def spawn_actor_from_class(self, actor_class: type, location: Vector,
                               rotation: Rotator | None = None, transient: bool = False) -> Actor:
        ed = _ed()
        if ed.pie_world is not None:
            raise RuntimeError("editor spawn during PIE")  # the editor refuses (FACTS)
        a = actor_class(location, rotation)
        ed.add_actor(ed.editor_world, a)
        return a


class MoviePipelineQueueSubsystem(EditorSubsystem):
    def __init__(self) -> None:
        super().__init__()
        self.queue = MoviePipelineQueue()

    def get_queue(self) -> MoviePipelineQueue:
        return self.queue

    def is_rendering(self) -> bool:
        return _ed().render is not None

    def render_queue_with_executor_instance(self, executor: MoviePipelineExecutorBase) -> None:
        _ed().start_render(self.queue, executor)


def get_editor_subsystem(subsystem: type) -> Any:
    return _ed().subsystems.get(subsystem)


def register_slate_post_tick_callback(callable: Callable[[float], None]) -> object:
    ed = _ed()
    ed.callbacks.append(callable)
    ed.calls.append("register_slate_post_tick_callback")
    return callable


def unregister_slate_post_tick_callback(handle: object) -> None:
    ed = _ed()
    ed.callbacks = [c for c in ed.callbacks if c is not handle]
    ed.calls.append("unregister_slate_post_tick_callback")


def log(text: str) -> None:
    _ed().write_log("LogPython", "", text)


def log_warning(text: str) -> None:
    _ed().write_log("LogPython", "Warning: ", text)


def log_error(text: str) -> None:
    _ed().write_log("LogPython", "Error: ", text)


class EditorPythonScripting:
    @classmethod
    def set_keep_python_script_alive(cls, new_keep_alive: bool) -> None:
        _ed().keep_alive = new_keep_alive
        _ed().calls.append("set_keep_python_script_alive")


class SystemLibrary:
    @classmethod
    def get_engine_version(cls) -> str:
        return "5.6.0-fake+embedded"

    @classmethod
    def quit_editor(cls) -> None:
        _ed().quit_requested = True
        _ed().calls.append("quit_editor")

    @classmethod
    def line_trace_single(cls, world_context_object: Object, start: Vector, end: Vector,
                          trace_channel: Any, trace_complex: bool, actors_to_ignore: list,
                          draw_debug_type: Any, ignore_self: bool = True, *a: Any,
                          **k: Any) -> HitResult | None:
        ed = _ed()
        assert trace_channel is TraceTypeQuery.TRACE_TYPE_QUERY2, "camera channel expected"
        hit = ed.engine.raycast(_m(start), _m(end))
        if hit is None:
            return None
        loc, n = _ue(hit.position), _ue(hit.normal, 1.0)
        d = math.dist(_m(start), hit.position) * 100
        return HitResult(True, False, hit.fraction, d, loc, loc, n, n, None, None, None,
                         "None", "None", 0, 0, 0, start, end)


class GameplayStatics:
    @classmethod
    def get_all_actors_of_class(cls, world_context_object: World, actor_class: type) -> list:
        return [a for a in world_context_object.actors if isinstance(a, actor_class)]


class AIHelperLibrary:
    @classmethod
    def spawn_ai_from_class(cls, world_context_object: World, pawn_class: type,
                            behavior_tree: Any, location: Vector,
                            rotation: Rotator | None = None, no_collision_fail: bool = False,
                            owner: Any = None) -> Character | None:
        ed = _ed()
        if ed.pie_world is None or world_context_object is not ed.pie_world:
            return None  # runtime spawns need the PIE world
        a = pawn_class(location, rotation)
        ed.add_actor(ed.pie_world, a)
        return a


class EditorAssetLibrary:
    @classmethod
    def load_asset(cls, asset_path: str) -> Object | None:
        return _ed().assets.get(asset_path)

    @classmethod
    def load_blueprint_class(cls, asset_path: str) -> type | None:
        return _ed().assets.get(asset_path)  # type: ignore[return-value]

    @classmethod
    def delete_loaded_asset(cls, asset_to_delete: Object) -> bool:
        ed = _ed()
        path = asset_to_delete.get_path_name()
        ed.deleted.append(path)
        return ed.assets.pop(path, None) is not None

    @classmethod
    def save_loaded_asset(cls, asset_to_save: Object, only_if_is_dirty: bool = True) -> bool:
        _ed().saved.append(asset_to_save.get_path_name())
        return True


# ---------------------------------------------------------------- frame conversion (own code)

def _m(v: Vector) -> tuple[float, float, float]:
    """Unreal cm, left-handed → metres, right-handed."""
    return (v.x / 100.0, -v.y / 100.0, v.z / 100.0)


def _ue(p: tuple[float, float, float], k: float = 100.0) -> Vector:
    return Vector(p[0] * k, -p[1] * k, p[2] * k)


def camera_basis(r: Rotator) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Contract-frame (forward, right, up) of an Unreal camera rotator: forward from yaw and
    pitch; right and up turned about it by roll."""
    p, y, ro = math.radians(r.pitch), math.radians(r.yaw), math.radians(r.roll)
    f_ue = (math.cos(p) * math.cos(y), math.cos(p) * math.sin(y), math.sin(p))
    right0 = (-math.sin(y), math.cos(y), 0.0)  # Unreal's right for roll 0
    up0 = (-math.sin(p) * math.cos(y), -math.sin(p) * math.sin(y), math.cos(p))
    right = tuple(math.cos(ro) * a - math.sin(ro) * b for a, b in zip(right0, up0,
                                                                       strict=True))
    up = tuple(math.sin(ro) * a + math.cos(ro) * b for a, b in zip(right0, up0, strict=True))

    def flip(v: tuple[float, ...]) -> tuple[float, ...]:
        return (v[0], -v[1], v[2])

    return flip(f_ue), flip(right), flip(up)


# ---------------------------------------------------------------- the editor

class FakeEditor:
    """One fake editor process: maps, assets, an embedded engine, the frame loop."""

    def __init__(self, maps: dict[str, dict], assets: dict[str, Any] | None = None,
                 fps: int = 30, fixed_step: bool = True, level_actors: list[Actor] | None = None,
                 crash_after_jobs: int | None = None, stdout: Any = None):
        from stages.engine.embedded import EmbeddedEngine

        self.maps, self.fps, self.fixed_step = maps, fps, fixed_step
        self.assets: dict[str, Any] = dict(assets or {})
        self.engine = EmbeddedEngine()
        self.editor_world = World("EditorWorld", pie=False)
        self.pie_world: World | None = None
        self.level: Any = None
        self.map = ""
        self.dirty = False
        self.subsystems: dict[type, Any] = {c: c() for c in (
            LevelEditorSubsystem, UnrealEditorSubsystem, EditorActorSubsystem,
            MoviePipelineQueueSubsystem)}
        self.callbacks: list[Callable[[float], None]] = []
        self.requests: list[str] = []
        self.calls: list[str] = []
        self.keep_alive = False
        self.quit_requested = False
        self.frame = 0
        self.log_lines: list[str] = []
        self.pie_log: list[tuple[int, str]] = []
        self.render: dict | None = None
        self.renders: list[tuple[list, Any]] = []  # (jobs, executor) of each render started
        self.world_ticks: list[tuple[int, tuple[float, float], tuple[float, ...]]] = []
        self.rendered_jobs = 0
        self.crash_after_jobs = crash_after_jobs
        self.saved: list[str] = []
        self.deleted: list[str] = []
        self.sequences: dict[str, Any] = {}  # every sequence made, deleted or not
        self.destroyed: list[str] = []
        self.level_actors = level_actors or []
        self.stdout = stdout

    # ---- logging in Unreal's format
    def write_log(self, category: str, verbosity: str, text: str) -> None:
        line = f"[2025.01.01-00.00.00:000][{self.frame:3d}]{category}: {verbosity}{text}"
        self.log_lines.append(line)
        if self.stdout is not None:
            print(line, file=self.stdout, flush=True)

    def crash(self, assertion: str, frame_fn: str) -> None:
        self.write_log("LogCore", "Error: ", f"appError called: {assertion}")
        self.write_log("LogCore", "", "=== Critical error: ===")
        self.log_lines.append(f"0x00007f1c2b2e9c02 libUnrealEditor-Engine.so!{frame_fn}")
        self.write_log("LogCore", "", "Fatal error!")
        raise FakeCrash(assertion)

    # ---- world
    def open_map(self, path: str) -> bool:
        if path not in self.maps:
            return False
        m = self.maps[path]
        self.map = path
        self.level = self.engine.load_level(m["file"], m["level_id"], m.get("scale", 1.0),
                                            m.get("up_axis", "Z"))
        self.editor_world = World(path, pie=False)
        for a in self.level_actors:
            self.add_actor(self.editor_world, a)
        self.dirty = False
        return True

    def add_actor(self, world: World, a: Actor) -> None:
        a.world = world
        world.actors.append(a)
        if not world.pie:
            self.dirty = True

    def destroy(self, a: Actor) -> None:
        if a.world is not None and a in a.world.actors:
            a.world.actors.remove(a)
            if not a.world.pie:
                self.dirty = True
        self.destroyed.append(a.get_name())

    def pie_characters(self) -> list[Character]:
        w = self.pie_world
        return [a for a in w.actors if isinstance(a, Character)] if w else []

    def _begin_play(self) -> None:
        """The PIE world: the level's static meshes and player starts as actors."""
        info = self.level
        w = World(f"UEDPIE_0_{self.map}", pie=True)
        n = len(info.large_objects)
        for i, c in enumerate(info.large_objects):  # larger first, as the engine listed them
            a = StaticMeshActor()
            a.origin, a.extent = _ue(c), Vector((n - i), (n - i), (n - i))
            self.add_actor(w, a)
        for corner in (info.bounds_min, info.bounds_max):
            a = StaticMeshActor()
            a.origin, a.extent = _ue(corner), Vector(0, 0, 0)
            self.add_actor(w, a)
        for pos, yaw in info.player_starts:
            self.add_actor(w, PlayerStart(_ue(pos), Rotator(0, 0, -yaw)))
        self.pie_world = w
        self.pie_log.append((self.frame, "begin"))

    def _end_play(self) -> None:
        self.pie_world = None
        self.pie_log.append((self.frame, "end"))

    def _tick_world(self, dt: float) -> None:
        from stages.core.engine_types import CharacterSpec

        for ch in self.pie_characters():
            cap, mv = ch.capsule_component, ch.character_movement
            hh_cm = cap.get_scaled_capsule_half_height()
            if not ch.spawned_in_engine:
                r = cap.get_scaled_capsule_radius() / 100.0
                spec = CharacterSpec(
                    ch.get_name(), r, max(0.0, hh_cm / 100.0 - r), 2 * hh_cm / 100.0,
                    walk_speed=mv.max_walk_speed / 100.0, step_height=mv.max_step_height / 100.0,
                    locomotion="fly" if mv.mode is MovementMode.MOVE_FLYING else "walk",
                    max_slope_deg=mv.walkable_floor_angle)
                c = _m(ch.location)
                self.engine.spawn_character(spec, (c[0], c[1], c[2] - hh_cm / 100.0),
                                            -ch.rotation.yaw)
                ch.spawned_in_engine = True
            move = (0.0, 0.0)
            if ch.input:
                x = sum(v[0] for v in ch.input)
                y = sum(v[1] for v in ch.input)
                n = math.hypot(x, y)
                if n > 1e-9:
                    move = (x / n, -y / n)
            ch.input = []
            self.engine.apply_input(move, -ch.rotation.yaw, dt)
            st = self.engine.character_state()
            self.world_ticks.append((self.frame, move, st.position))
            ch.location = _ue((st.position[0], st.position[1], st.position[2] + hh_cm / 100.0))
            ch.velocity = _ue(st.velocity)
            ch.grounded = bool(st.grounded)

    # ---- Movie Render Queue
    def start_render(self, queue: MoviePipelineQueue, executor: MoviePipelineExecutorBase) -> None:
        self.render = {"queue": queue, "executor": executor, "job": 0, "frame": None}
        self.renders.append((list(queue.jobs), executor))

    def _tick_render(self) -> None:
        r = self.render
        assert r is not None
        ex = r["executor"]
        jobs = r["queue"].jobs
        if r["job"] >= len(jobs):
            self.write_log("LogMovieRenderPipeline", "", "MoviePipelineLinearExecutorBase "
                           f"finished {len(jobs)} jobs in +00:00:01.000.")
            self.render = None
            ex.on_executor_finished_delegate.broadcast(ex, True)
            return
        job = jobs[r["job"]]
        if r["frame"] is None:
            self.write_log("LogMovieRenderPipeline", "",
                           f"MoviePipelineLinearExecutorBase starting {len(jobs)} jobs.")
            if self.dirty and not getattr(ex, "allow_unsaved", False):
                ex.on_executor_errored_delegate.broadcast(
                    ex, MoviePipeline(), True, Text("the level has unsaved changes"))
                self.render = None
                ex.on_executor_finished_delegate.broadcast(ex, False)
                return
            r["frame"] = 0
            r["seq"] = self.assets[job.sequence.path]
        seq: LevelSequence = r["seq"]
        k = r["frame"]
        if k >= seq.end:
            self.write_log("LogMovieRenderPipeline", "", "Finished rendering last shot. "
                           "Moving to Finalize to finish writing items to disk.")
            self.rendered_jobs += 1
            r["job"] += 1
            r["frame"] = None
            return
        if (self.crash_after_jobs is not None and self.rendered_jobs >= self.crash_after_jobs
                and k == 5):  # mid-render of the next job
            self.write_log("LogCore", "Error: ", "Caught signal 11 Segmentation fault")
            raise FakeCrash("signal 11 during MRQ")
        self._render_frame(job, seq, k)
        r["frame"] = k + 1

    def _render_frame(self, job: MoviePipelineExecutorJob, seq: LevelSequence, k: int) -> None:
        import numpy as np
        from PIL import Image

        cfg = job.config.settings
        out: MoviePipelineOutputSetting = cfg[MoviePipelineOutputSetting]
        cams = cfg.get(MoviePipelineCameraSetting)
        cut = next(t for t in seq.tracks if isinstance(t, MovieSceneCameraCutTrack))
        primary = cut.sections[0].camera  # type: ignore[attr-defined]
        bindings = [b for b in seq.bindings if isinstance(b.object, CineCameraActor)]
        if not (cams and cams.render_all_cameras):
            bindings = [primary]
        W, H = out.output_resolution.x, out.output_resolution.y
        takeover = next((a for a in self.editor_world.actors if isinstance(a, LevelSequenceActor)
                         and a.playback_settings.auto_play), None)
        for b in bindings:
            if takeover is not None:  # the level's own sequence owns the camera now
                loc, rot = takeover.showcase
            else:
                ch = {c.get_name(): c.keys for c in b.transform().channels}
                loc = Vector(ch["Location.X"][k], ch["Location.Y"][k], ch["Location.Z"][k])
                rot = Rotator(ch["Rotation.X"][k], ch["Rotation.Y"][k], ch["Rotation.Z"][k])
            cc = b.object.get_cine_camera_component()
            hfov = 2 * math.atan(cc.filmback.sensor_width / (2 * cc.current_focal_length))
            img = self._depth_picture(loc, rot, hfov, W, H)
            name = out.file_name_format.replace("{camera_name}", b.object.label).replace(
                "{frame_number}", f"{k:0{out.zero_pad_frame_numbers}d}")
            path = Path(out.output_directory.path) / f"{name}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.ascontiguousarray(img)).save(path)

    def _depth_picture(self, loc: Vector, rot: Rotator, hfov: float, W: int, H: int) -> Any:
        import numpy as np

        f, rt, up = camera_basis(rot)
        o = _m(loc)
        th, tv = math.tan(hfov / 2), math.tan(hfov / 2) * H / W
        img = np.zeros((H, W, 3), np.uint8)
        step = 2  # one ray per 2x2 pixels
        for j in range(0, H, step):
            v = 1 - 2 * (j + 0.5) / H
            for i in range(0, W, step):
                u = 2 * (i + 0.5) / W - 1
                d = tuple(f[a] + u * th * rt[a] + v * tv * up[a] for a in range(3))
                end = tuple(o[a] + 60.0 * d[a] for a in range(3))
                hit = self.engine.raycast(o, end)  # type: ignore[arg-type]
                g = 0 if hit is None else int(255 * (1 - hit.fraction))
                n = (0.0, 0.0, 1.0) if hit is None else hit.normal
                img[j:j + step, i:i + step] = (g, int(g * (0.5 + 0.5 * abs(n[2]))),
                                               int(g * (0.5 + 0.5 * abs(n[0]))))
        return img

    # ---- running a script like -ExecutePythonScript
    def run(self, script: Path, env: dict[str, str], map_path: str = "",
            max_frames: int = 100_000) -> int:
        """Like ``UnrealEditor-Cmd <project> [map] -ExecutePythonScript=<script>``: 0 after
        quit_editor; 1 for a Python error in the script; 139 for a crash; 124 past
        ``max_frames``. The script's globals are kept in ``self.script_globals``."""
        global EDITOR
        EDITOR = self
        me = sys.modules[__name__]
        old_mod = sys.modules.get("unreal")
        sys.modules["unreal"] = me
        for m in SCRIPT_MODULES:  # scripts imported against another fake are imported again
            if getattr(sys.modules.get(m), "unreal", me) is not me:
                sys.modules.pop(m, None)
        old_env = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        self.script_globals: dict[str, Any] = {}
        try:
            if map_path and not self.open_map(map_path):
                self.write_log("LogInit", "Error: ", f"map {map_path} not found")
                return 1
            try:
                self.script_globals = runpy.run_path(str(script), run_name="__main__")
            except Exception as exc:  # noqa: BLE001 - the editor logs it and carries on
                self.write_log("LogPython", "Error: ", f"{type(exc).__name__}: {exc}")
                return 1
            if not self.keep_alive:
                return 0  # the script returned and nothing keeps it: the editor exits
            dt = 1.0 / self.fps if self.fixed_step else 0.0123
            while not self.quit_requested and self.frame < max_frames:
                self.frame += 1
                for req in self.requests:
                    self._begin_play() if req == "begin_play" else self._end_play()
                self.requests = []
                try:
                    if self.pie_world is not None:
                        self._tick_world(dt)
                    if self.render is not None:
                        self._tick_render()
                    for cb in list(self.callbacks):
                        cb(dt)
                except FakeCrash:
                    return 139
            return 0 if self.quit_requested else 124
        finally:
            for k, v in old_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            for m in SCRIPT_MODULES:
                sys.modules.pop(m, None)
            if old_mod is not None:
                sys.modules["unreal"] = old_mod
            else:
                sys.modules.pop("unreal", None)
            self.engine.close()
