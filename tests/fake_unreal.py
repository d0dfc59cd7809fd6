"""fake_unreal: a stand-in for Unreal Editor's ``unreal`` module — no Unreal runs here.

It implements just the calls the scripts in ``unreal/`` make (the same names the 5.6 stub and
the MRQ stub declare), backed by the embedded engine, and it is ticked like Slate:
``FakeEditor.run`` (tests/fake_unreal_world.py) executes a script as ``-ExecutePythonScript``
does, then, frame by frame, ticks the PIE world (each character's movement input is resolved by
the embedded engine's Bullet character controller in the world tick after the callback that
gave it, as in Unreal) and calls the Slate post-tick callbacks with the fixed step. Movie Render
Queue "renders" each camera by casting a grid of rays into the embedded engine's level from the
pose the sequence's keys give at that frame (a depth picture, not a shaded render).

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
from collections.abc import Callable
from typing import Any

from tests.fake_unreal_base import (  # noqa: F401 - the unreal namespace
    SCRIPT_MODULES,
    Actor,
    AnimSequence,
    Array,
    CameraFilmbackSettings,
    CapsuleComponent,
    Character,
    CharacterMovementComponent,
    CineCameraActor,
    CineCameraComponent,
    DirectoryPath,
    DrawDebugTrace,
    FakeCrash,
    FrameNumber,
    FrameRate,
    HitResult,
    IntPoint,
    LevelSequenceActor,
    MovementMode,
    MovieSceneKeyInterpolation,
    MovieSceneSequencePlaybackSettings,
    MovieSceneTimeUnit,
    Object,
    PlayerStart,
    Rotator,
    SceneComponent,
    SkeletalMesh,
    SkeletalMeshActor,
    SkeletalMeshComponent,
    SoftObjectPath,
    StaticMeshActor,
    Text,
    TraceTypeQuery,
    Vector,
    World,
    _ed,
    _Enum,
)
from tests.fake_unreal_movie import (  # noqa: F401 - the unreal namespace
    AssetTools,
    AssetToolsHelpers,
    LevelSequence,
    LevelSequenceFactoryNew,
    MoviePipeline,
    MoviePipelineAntiAliasingSetting,
    MoviePipelineCameraSetting,
    MoviePipelineConsoleVariableSetting,
    MoviePipelineDeferredPassBase,
    MoviePipelineExecutorBase,
    MoviePipelineExecutorJob,
    MoviePipelineGameOverrideSetting,
    MoviePipelineImageSequenceOutput_EXR,
    MoviePipelineImageSequenceOutput_PNG,
    MoviePipelineOutputSetting,
    MoviePipelinePIEExecutor,
    MoviePipelinePrimaryConfig,
    MoviePipelineQueue,
    MoviePipelineSetting,
    MovieScene3DTransformSection,
    MovieScene3DTransformTrack,
    MovieSceneBindingProxy,
    MovieSceneCameraCutSection,
    MovieSceneCameraCutTrack,
    MovieSceneScriptingChannel,
    MovieSceneScriptingDoubleChannel,
    MovieSceneSection,
    MovieSceneSkeletalAnimationParams,
    MovieSceneSkeletalAnimationSection,
    MovieSceneSkeletalAnimationTrack,
    MovieSceneTrack,
    _Delegate,
)

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
