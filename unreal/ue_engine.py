"""The engine protocol (stages/engine/base.py) implemented inside Unreal Editor's PIE world, for
the Stage I controller (stages.core.stage1, unchanged).

Every Unreal call here was checked against the editor-generated 5.6 API stub (``wmforge lint``
type-checks this file against it). All values crossing the protocol are contract values; the
conversion lives in :mod:`ue_frame` only.

Getting a character into PIE (there is no deferred spawn from Python and editor spawn calls
refuse to run during PIE): ``AIHelperLibrary.spawn_ai_from_class``. It spawns any pawn class at a
chosen transform at run time and gives it an AI controller in one call, so the character's
movement component runs (it does nothing without a controller) and ``add_movement_input`` drives
it. A pre-placed auto-possessed pawn would mean editing every third-party level and fixing one
model per level; ``GameModeBase.spawn_default_pawn_at_transform`` spawns the game mode's default
pawn class, not the character of the trajectory.

PIE keeps the level's GameMode: its default pawn stands on the first PlayerStart (a spawn
candidate) with collision. :meth:`UnrealPieEngine.remove_foreign_pawns` destroys every pawn
that is not ours before the first spawn; the player controller stays (World Partition streams
around it) and its view target follows our character (:meth:`spawn_character`), so the cells
around the character are the ones loaded. The recorded yaw is the body's: the pawn does not take
the controller's yaw and does not turn toward its movement (Blueprint characters often do).

World Partition (:meth:`UnrealPieEngine.world_ready`): the player controller is the streaming
source (its view point). Before a spawn candidate's floor is searched the controller is moved
there and viewed; after the spawn the character is its view target. A point is ready once the
source's location (``get_streaming_source_location_and_rotation``) is over it and the world's
``WorldPartitionSubsystem`` reports every cell within the grids' loading range of it activated
(``is_streaming_completed``). The 5.6 Python API has no world-subsystem getter: the subsystem
is the live ``WorldPartitionSubsystem`` object whose world is the PIE world.
"""

from __future__ import annotations

import math
from typing import Any

import ue_frame
import ue_paths

import unreal
from stages.core.engine_types import CharacterSpec, CharacterState, LevelInfo, RayHit, Vec3

# the camera trace channel (ECC_Camera is TraceTypeQuery2 in a default project's channel table)
CAMERA_CHANNEL = unreal.TraceTypeQuery.TRACE_TYPE_QUERY2
LARGE_OBJECTS = 24  # centres of the largest static meshes, spawn candidates (§6.1)
SOURCE_REACH_CM = 100.0  # the streaming source is "at" a point within this horizontal distance


class UnrealPieEngine:
    """Stage I inside the PIE world: the character is an AI-controlled ``Character``."""

    name = "unreal"

    def __init__(self, pawn_class_path: str = "", log: Any = print):
        self.version = unreal.SystemLibrary.get_engine_version()
        self._pawn_class_path = pawn_class_path
        self._log = log
        self._world: unreal.World | None = None
        self._pawn: unreal.Character | None = None
        self._spec: CharacterSpec | None = None
        self._meshes: dict[str, unreal.SkeletalMesh] = {}
        self.capsule_used: dict[str, tuple[float, float]] = {}  # character → (r, hh) m
        self.half_height_cm = 0.0
        self.destroyed: list[str] = []  # character actors destroyed between trajectories
        # the PIE world's WorldPartitionSubsystem (None: not a World Partition map), per world
        self._partition: tuple[unreal.World, unreal.WorldPartitionSubsystem | None] | None = None
        self._streaming = ""  # why the last world_ready was False

    # ------------------------------------------------------------------ world

    def world(self) -> unreal.World:
        w = unreal.get_editor_subsystem(unreal.UnrealEditorSubsystem)
        world = w.get_game_world() if w is not None else None
        if world is None:
            raise RuntimeError("no PIE world: Stage I runs only while Play-In-Editor is active")
        self._world = world
        return world

    def load_level(self, path: str, level_id: str, scale: float = 1.0,
                   up_axis: str | None = None) -> LevelInfo:
        """The map was opened by the editor and PIE started by the driver; read what Stage I
        needs from the running world: bounds, player starts, the largest colliding actors.

        Every actor with colliding components counts (static meshes, Landscape, instanced
        foliage and Blueprint actors alike; pawns, cameras, volumes and info actors do not).
        In a World Partition map only the loaded cells have actors; its runtime bounds (from
        the actor descriptors, loaded or not) are added."""
        world = self.world()
        lo = [math.inf] * 3
        hi = [-math.inf] * 3
        big: list[tuple[float, Vec3]] = []
        tris = 0
        for actor in unreal.GameplayStatics.get_all_actors_of_class(
                world, unreal.Actor.static_class()):
            if isinstance(actor, (unreal.Pawn, unreal.CameraActor, unreal.Controller,
                                  unreal.PlayerStart, unreal.Volume, unreal.Info)):
                continue  # not level geometry (volumes' brushes overlap: a post-process
                #           volume can be far larger than the level)
            origin, extent = actor.get_actor_bounds(True)
            if not any((origin.x, origin.y, origin.z, extent.x, extent.y, extent.z)):
                continue  # nothing that collides (an empty box)
            c = ue_frame.from_ue_location((origin.x, origin.y, origin.z))
            e = ue_frame.from_ue_extent((extent.x, extent.y, extent.z))
            for k in range(3):
                lo[k] = min(lo[k], c[k] - e[k])
                hi[k] = max(hi[k], c[k] + e[k])
            big.append((e[0] * e[1] * e[2], c))
            tris += 1
        wp = unreal.WorldPartitionBlueprintLibrary.get_runtime_world_bounds()
        if wp.is_valid:
            for corner in (wp.min, wp.max):
                p = ue_frame.from_ue_location((corner.x, corner.y, corner.z))
                for k in range(3):
                    lo[k], hi[k] = min(lo[k], p[k]), max(hi[k], p[k])
        if not big:
            raise RuntimeError(f"level {level_id}: no colliding actors in the PIE world")
        starts = []
        for ps in unreal.GameplayStatics.get_all_actors_of_class(world,
                                                              unreal.PlayerStart.static_class()):
            loc = ps.get_actor_location()
            rot = ps.get_actor_rotation()
            starts.append((ue_frame.from_ue_location((loc.x, loc.y, loc.z)),
                           ue_frame.from_ue_yaw(rot.yaw)))
        big.sort(key=lambda t: -t[0])
        return LevelInfo(level_id, (lo[0], lo[1], lo[2]), (hi[0], hi[1], hi[2]),
                         player_starts=starts, large_objects=[c for _, c in big[:LARGE_OBJECTS]],
                         triangles=tris)

    def remove_foreign_pawns(self) -> list[str]:
        """Destroy the pawns PIE brought (the GameMode's default pawn on the first PlayerStart);
        returns their names."""
        world = self.world()
        gone = []
        for p in unreal.GameplayStatics.get_all_actors_of_class(world,
                                                             unreal.Pawn.static_class()):
            if p is self._pawn:
                continue
            gone.append(p.get_name())
            p.destroy_actor()
        if gone:
            self._log(f"wmforge: stage1: removed the level's pawns from PIE: {gone}")
        return gone

    # ------------------------------------------------------------------ character

    def load_character(self, spec: CharacterSpec) -> unreal.SkeletalMesh:
        """Load the skeletal mesh once per task (§6.1: models cached within a task)."""
        if spec.character_id not in self._meshes:
            path = ue_paths.object_path(spec.model_path)
            mesh = unreal.EditorAssetLibrary.load_asset(path)
            if not isinstance(mesh, unreal.SkeletalMesh):
                raise RuntimeError(f"character {spec.character_id}: {path} is not a "
                                   "SkeletalMesh asset")
            self._meshes[spec.character_id] = mesh
        return self._meshes[spec.character_id]

    def _pawn_class(self) -> unreal.Class:
        if self._pawn_class_path:
            cls = unreal.EditorAssetLibrary.load_blueprint_class(self._pawn_class_path)
            if cls is None:
                raise RuntimeError(f"pawn class {self._pawn_class_path} did not load")
            return cls
        return unreal.Character.static_class()

    def clear_character(self) -> None:
        """Destroy the previous character and clear its skeletal state first (Table 2: a
        skeletal assertion after a character switch came from the previous model's state)."""
        pawn = self._pawn
        self._pawn = None
        if pawn is None:
            return
        mesh = pawn.mesh
        if mesh is not None:
            mesh.stop()
            mesh.set_skeletal_mesh_asset(None)  # type: ignore[arg-type]
        self.destroyed.append(pawn.get_name())
        pawn.destroy_actor()

    def spawn_character(self, spec: CharacterSpec, position: Vec3, yaw_deg: float) -> None:
        self.clear_character()
        world = self.world()
        r_cm, hh_cm = ue_frame.ue_capsule_request(spec.capsule_radius, spec.capsule_half_height)
        c = ue_frame.ue_center_from_feet(position, max(hh_cm, r_cm))
        roll, pitch, yaw = ue_frame.character_rotator(yaw_deg)
        pawn = unreal.AIHelperLibrary.spawn_ai_from_class(
            world, self._pawn_class(), None, unreal.Vector(*c),  # type: ignore[arg-type]
            unreal.Rotator(roll, pitch, yaw), True)
        if not isinstance(pawn, unreal.Character):
            raise RuntimeError(f"character {spec.character_id}: spawn_ai_from_class returned "
                               f"{pawn!r}, expected a Character")
        pawn.capsule_component.set_capsule_size(r_cm, hh_cm)
        # the yaw we set is the body's: not the controller's, not toward the movement
        pawn.use_controller_rotation_yaw = False
        move = pawn.character_movement
        move.orient_rotation_to_movement = False
        move.max_walk_speed = ue_frame.to_ue_length(spec.walk_speed)
        move.max_step_height = ue_frame.to_ue_length(spec.step_height)
        move.set_walkable_floor_angle(spec.max_slope_deg)
        if spec.locomotion != "walk":
            move.gravity_scale = 0.0
            move.set_movement_mode(unreal.MovementMode.MOVE_FLYING)
        # what the engine really uses (§7.2): it clamps the half-height to the radius
        cap = pawn.capsule_component
        self.half_height_cm = cap.get_scaled_capsule_half_height()
        self.capsule_used[spec.character_id] = ue_frame.contract_capsule(
            cap.get_scaled_capsule_radius(), self.half_height_cm)
        # the model: scaled and turned inside the capsule, its lowest point at the bottom;
        # the capsule itself keeps the inventory's (already scaled) size
        mesh = pawn.mesh
        asset = self.load_character(spec)
        mesh.set_skeletal_mesh_asset(asset)
        mesh.set_relative_scale3d(unreal.Vector(spec.scale, spec.scale, spec.scale))
        bounds = asset.get_imported_bounds()  # the model's lowest point stands on the feet
        lift = ue_frame.lift_to_lowest_point_cm(bounds.origin.z - bounds.box_extent.z,
                                                spec.scale)
        mesh.set_relative_location(unreal.Vector(0.0, 0.0, -self.half_height_cm + lift),
                                   False, False)
        mesh.set_relative_rotation(unreal.Rotator(0.0, 0.0, ue_frame.to_ue_yaw(
            spec.yaw_correction_deg)), False, False)
        self._pawn, self._spec = pawn, spec
        # World Partition streams around the player controller's view point: make it ours
        pc = unreal.GameplayStatics.get_player_controller(world, 0)
        if pc is not None:
            pc.set_view_target_with_blend(pawn, 0.0)

    # ------------------------------------------------------------------ World Partition

    def partition(self) -> unreal.WorldPartitionSubsystem | None:
        """The PIE world's World Partition subsystem; None for a map without World Partition
        (the subsystem is created only for partitioned worlds; the class default object has
        no world)."""
        world = self.world()
        if self._partition is None or self._partition[0] != world:
            found = None
            for obj in unreal.ObjectIterator(unreal.WorldPartitionSubsystem):
                if isinstance(obj, unreal.WorldPartitionSubsystem) and obj.get_world() == world:
                    found = obj
                    break
            self._partition = (world, found)
        return self._partition[1]

    def world_ready(self, point: Vec3) -> bool:
        """Whether the world under and around ``point`` (contract frame) is streamed in and
        collides. Moves player 0's streaming source there first: the character once it stands
        at the point (its view target since the spawn), else the controller itself."""
        wps = self.partition()
        if wps is None:
            return True  # the whole level is loaded with the map
        world = self.world()
        pc = unreal.GameplayStatics.get_player_controller(world, 0)
        if pc is None:
            raise RuntimeError("World Partition map without a player controller in PIE: "
                               "nothing streams its cells")
        # APlayerController's defaults, set again against a project's controller class: a
        # source that activates cells and, while the character walks, blocks the game thread
        # rather than let it into cells not yet loaded. The last two share their Python names
        # with UFUNCTIONs (the stub lists both): set as editor properties, not attributes.
        pc.enable_streaming_source = True
        pc.set_editor_property("streaming_source_should_activate", True)
        pc.set_editor_property("streaming_source_should_block_on_slow_streaming", True)
        want = ue_frame.to_ue_location(point)
        pawn = self._pawn
        if pawn is not None and _apart(pawn.get_actor_location(), want) <= SOURCE_REACH_CM:
            pc.set_view_target_with_blend(pawn, 0.0)
        else:
            pc.set_actor_location(unreal.Vector(*want), False, True)
            pc.set_view_target_with_blend(pc, 0.0)
        at, _ = pc.get_streaming_source_location_and_rotation()
        if _apart(at, want) > SOURCE_REACH_CM:  # the camera manager updates in the next tick
            self._streaming = (f"player 0's streaming source is at {_m(at)} m, "
                               f"{_apart(at, want) / 100.0:.1f} m from the spawn")
            return False
        query = unreal.WorldPartitionStreamingQuerySource(
            location=at, use_grid_loading_range=True, spatial_query=True)
        done = wps.is_streaming_completed(
            unreal.WorldPartitionRuntimeCellState.ACTIVATED,
            unreal.Array.cast(unreal.WorldPartitionStreamingQuerySource, [query]), False)
        self._streaming = "" if done else (
            f"cells within the loading range of the streaming source at {_m(at)} m are not "
            "all activated")
        return bool(done)

    def world_status(self) -> str:
        """Why the last :meth:`world_ready` answered False (for the failure row)."""
        return self._streaming

    def observed_capsule(self) -> tuple[float, float]:
        """(radius, half cylinder height), m, of the capsule the engine really uses for the
        spawned character (read back after set_capsule_size, which clamps; §7.2)."""
        spec = self._spec
        assert spec is not None, "no character spawned"
        r, hh = self.capsule_used[spec.character_id]
        return (float(r), float(hh))

    def apply_input(self, move_world: tuple[float, float], yaw_deg: float, dt: float) -> None:
        """Face ``yaw_deg`` and push movement input; the engine resolves it in its next tick
        (the driver writes the state read after that tick as this frame's, see stage1_pie)."""
        pawn = self._require()
        roll, pitch, yaw = ue_frame.character_rotator(yaw_deg)
        pawn.set_actor_rotation(unreal.Rotator(roll, pitch, yaw), False)
        if move_world[0] or move_world[1]:
            d = ue_frame.to_ue_vector((move_world[0], move_world[1], 0.0))
            n = math.hypot(d[0], d[1])
            pawn.add_movement_input(unreal.Vector(d[0] / n, d[1] / n, 0.0), 1.0, False)

    def character_state(self) -> CharacterState:
        pawn = self._require()
        loc = pawn.get_actor_location()
        vel = pawn.get_velocity()
        rot = pawn.get_actor_rotation()
        grounded = pawn.character_movement.is_moving_on_ground()
        return CharacterState(
            ue_frame.feet_from_ue_center((loc.x, loc.y, loc.z), self.half_height_cm),
            ue_frame.from_ue_yaw(rot.yaw), ue_frame.from_ue_vector((vel.x, vel.y, vel.z)),
            bool(grounded))

    def raycast(self, start: Vec3, end: Vec3) -> RayHit | None:
        """Closest hit on the camera channel, the character ignored."""
        world = self.world()
        a, b = ue_frame.to_ue_location(start), ue_frame.to_ue_location(end)
        ignore = unreal.Array.cast(unreal.Actor, [self._pawn] if self._pawn is not None else [])
        hit = unreal.SystemLibrary.line_trace_single(
            world, unreal.Vector(*a), unreal.Vector(*b), CAMERA_CHANNEL, True, ignore,
            unreal.DrawDebugTrace.NONE, True)
        if hit is None:
            return None
        t = hit.to_tuple()  # blocking_hit, initial_overlap, time, distance, location, ...,
        if not t[0]:  #      normal (index 6)
            return None
        loc, normal, time = t[4], t[6], t[2]
        if not (isinstance(loc, unreal.Vector) and isinstance(normal, unreal.Vector)
                and isinstance(time, float)):
            raise RuntimeError(f"HitResult.to_tuple(): unexpected layout {t!r}")
        return RayHit(ue_frame.from_ue_location((loc.x, loc.y, loc.z)),
                      ue_frame._mirror((normal.x, normal.y, normal.z)), time)

    def prop_transforms(self) -> list[tuple[str, Vec3, tuple[float, float, float, float]]]:
        return []  # pushed props are not replayed on Unreal (contract v2 allows zero rows)

    def close(self) -> None:
        self.clear_character()

    def _require(self) -> unreal.Character:
        if self._pawn is None:
            raise RuntimeError("no character spawned")
        return self._pawn


def _apart(a: unreal.Vector, b: tuple[float, float, float]) -> float:
    """Horizontal distance, cm, between an Unreal location and a point in Unreal cm."""
    return math.hypot(a.x - b[0], a.y - b[1])


def _m(v: unreal.Vector) -> str:
    p = ue_frame.from_ue_location((v.x, v.y, v.z))
    return f"({p[0]:.2f}, {p[1]:.2f}, {p[2]:.2f})"
