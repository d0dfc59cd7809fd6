"""The editor subsystems, static libraries, logging and Slate callbacks of the fake ``unreal``
module: the calls that load maps, start and stop PIE, spawn actors, trace rays into the level,
load and save assets and start a render, each served by the running editor (``host``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tests.fakes.unreal.frame import _m, _ue
from tests.fakes.unreal.host import running_editor
from tests.fakes.unreal.movie_pipeline import MoviePipelineExecutorBase, MoviePipelineQueue
from tests.fakes.unreal.objects import Actor, Character, Object, Pawn, PlayerController, World
from tests.fakes.unreal.structs import Box, HitResult, Rotator, TraceTypeQuery, Vector


class EditorSubsystem(Object):
    pass


class LevelEditorSubsystem(EditorSubsystem):
    def load_level(self, asset_path: str) -> bool:
        return running_editor().open_map(asset_path)

    def editor_request_begin_play(self) -> None:
        running_editor().requests.append("begin_play")

    def editor_request_end_play(self) -> None:
        running_editor().requests.append("end_play")

    def is_in_play_in_editor(self) -> bool:
        return running_editor().pie_world is not None


class UnrealEditorSubsystem(EditorSubsystem):
    def get_game_world(self) -> World | None:
        return running_editor().pie_world

    def get_editor_world(self) -> World:
        return running_editor().editor_world


class EditorActorSubsystem(EditorSubsystem):
    def get_all_level_actors(self) -> list:
        return list(running_editor().editor_world.actors)

    def destroy_actor(self, actor_to_destroy: Actor) -> bool:
        running_editor().destroy(actor_to_destroy)
        return True

    def spawn_actor_from_class(self, actor_class: type, location: Vector,
                               rotation: Rotator | None = None, transient: bool = False) -> Actor:
        ed = running_editor()
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
        return running_editor().render is not None

    def render_queue_with_executor_instance(self, executor: MoviePipelineExecutorBase) -> None:
        running_editor().start_render(self.queue, executor)


def get_editor_subsystem(subsystem: type) -> Any:
    return running_editor().subsystems.get(subsystem)


def register_slate_post_tick_callback(callable: Callable[[float], None]) -> object:
    ed = running_editor()
    ed.callbacks.append(callable)
    ed.calls.append("register_slate_post_tick_callback")
    return callable


def unregister_slate_post_tick_callback(handle: object) -> None:
    ed = running_editor()
    ed.callbacks = [c for c in ed.callbacks if c is not handle]
    ed.calls.append("unregister_slate_post_tick_callback")


def log(text: str) -> None:
    running_editor().write_log("LogPython", "", text)


def log_warning(text: str) -> None:
    running_editor().write_log("LogPython", "Warning: ", text)


def log_error(text: str) -> None:
    running_editor().write_log("LogPython", "Error: ", text)


class EditorPythonScripting:
    @classmethod
    def set_keep_python_script_alive(cls, new_keep_alive: bool) -> None:
        running_editor().keep_alive = new_keep_alive
        running_editor().calls.append("set_keep_python_script_alive")


class SystemLibrary:
    @classmethod
    def get_engine_version(cls) -> str:
        return "5.6.0-fake+embedded"

    @classmethod
    def quit_editor(cls) -> None:
        running_editor().quit_requested = True
        running_editor().calls.append("quit_editor")

    @classmethod
    def line_trace_single(cls, world_context_object: Object, start: Vector, end: Vector,
                          trace_channel: Any, trace_complex: bool, actors_to_ignore: list,
                          draw_debug_type: Any, ignore_self: bool = True, *a: Any,
                          **k: Any) -> HitResult | None:
        ed = running_editor()
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

    @classmethod
    def get_player_controller(cls, world_context_object: World, player_index: int
                              ) -> PlayerController | None:
        return next((a for a in world_context_object.actors
                     if isinstance(a, PlayerController)), None)

    @classmethod
    def get_world_delta_seconds(cls, world_context_object: World) -> float:
        """The world's step (with -UseFixedTimeStep the fixed 1/FPS; else wall-clock), not
        Slate's: Slate's post-tick callback always gets the wall-clock delta."""
        return running_editor().world_dt


class AIHelperLibrary:
    @classmethod
    def spawn_ai_from_class(cls, world_context_object: World, pawn_class: type,
                            behavior_tree: Any, location: Vector,
                            rotation: Rotator | None = None, no_collision_fail: bool = False,
                            owner: Any = None) -> Character | None:
        ed = running_editor()
        if ed.pie_world is None or world_context_object is not ed.pie_world:
            return None  # runtime spawns need the PIE world
        a = pawn_class(location, rotation)
        ed.add_actor(ed.pie_world, a)
        ed.pawns_at_spawn.append([type(p).__name__ for p in ed.pie_world.actors
                                  if isinstance(p, Pawn)])
        return a


class EditorAssetLibrary:
    @classmethod
    def load_asset(cls, asset_path: str) -> Object | None:
        return running_editor().assets.get(asset_path)

    @classmethod
    def load_blueprint_class(cls, asset_path: str) -> type | None:
        return running_editor().assets.get(asset_path)  # type: ignore[return-value]

    @classmethod
    def delete_loaded_asset(cls, asset_to_delete: Object) -> bool:
        ed = running_editor()
        path = asset_to_delete.get_path_name()
        if getattr(ed, "assets_in_use", False):  # still referenced (e.g. by the MRQ job)
            return False
        ed.deleted.append(path)
        ed.disk.pop(path, None)
        return ed.assets.pop(path, None) is not None

    @classmethod
    def save_loaded_asset(cls, asset_to_save: Object, only_if_is_dirty: bool = True) -> bool:
        ed = running_editor()
        path = asset_to_save.get_path_name()
        ed.saved.append(path)
        ed.disk[path] = asset_to_save  # on disk: the next editor finds it
        return True

    @staticmethod
    def _object_path(asset_path: str) -> str:
        """``/Game/A/B`` or ``/Game/A/B.B`` → ``/Game/A/B.B``."""
        last = asset_path.rsplit("/", 1)[-1]
        return asset_path if "." in last else f"{asset_path}.{last}"

    @classmethod
    def does_asset_exist(cls, asset_path: str) -> bool:
        ed = running_editor()
        p = cls._object_path(asset_path)
        return p in ed.assets or p in ed.disk

    @classmethod
    def delete_asset(cls, asset_path_to_delete: str) -> bool:
        ed = running_editor()
        p = cls._object_path(asset_path_to_delete)
        found = p in ed.assets or p in ed.disk
        ed.assets.pop(p, None)
        ed.disk.pop(p, None)
        if found:
            ed.deleted.append(p)
        return found


class WorldPartitionBlueprintLibrary:
    @classmethod
    def get_runtime_world_bounds(cls) -> Box:
        """The bounds of every actor descriptor of a World Partition map, loaded or not; an
        invalid box for a map without World Partition."""
        return running_editor().world_partition_bounds or Box()
