"""World Partition streaming in the fake PIE world, as the scripts depend on it: the level's
collision is split into grid cells, and a cell exists (collides, is hit by traces) only once
player 0's streaming source — its view point: the view target's location, a pawn's eyes 64 cm
above it — has been within the loading range of it for some frames (loaded after half of them,
activated with collision after all). Cells out of range unload. ``WorldPartitionSubsystem.
is_streaming_completed`` answers from those states, as UWorldPartitionStreamingPolicy does: every
cell a query covers must have reached the queried state. A stand-in: no Unreal runs here."""

from __future__ import annotations

import math
from typing import Any

from tests.fakes.unreal.frame import _m, _ue
from tests.fakes.unreal.host import running_editor
from tests.fakes.unreal.objects import Object, Pawn, PlayerController
from tests.fakes.unreal.structs import Rotator, Vector, _Enum

EYE_HEIGHT_CM = 64.0  # APawn::BaseEyeHeight: a pawn view target's view point is above it


class WorldPartitionRuntimeCellState:
    UNLOADED = _Enum("UNLOADED")
    LOADED = _Enum("LOADED")
    ACTIVATED = _Enum("ACTIVATED")


_RANK = {"UNLOADED": 0, "LOADED": 1, "ACTIVATED": 2}


class WorldPartitionStreamingQuerySource:
    def __init__(self, location: Vector | None = None, radius: float = 0.0,
                 use_grid_loading_range: bool = False, data_layers: Any = (),
                 data_layers_only: bool = False, spatial_query: bool = False):
        self.location = location or Vector()
        self.radius, self.use_grid_loading_range = float(radius), bool(use_grid_loading_range)
        self.data_layers, self.data_layers_only = list(data_layers), bool(data_layers_only)
        self.spatial_query = bool(spatial_query)


class WorldPartitionSubsystem(Object):
    """One per partitioned game world (the class default object has no world)."""

    def __init__(self, world: Any = None, cells: StreamingCells | None = None):
        super().__init__()
        self._world, self._cells = world, cells

    def get_world(self) -> Any:
        return self._world

    def is_streaming_completed(self, query_state: _Enum, query_sources: list,
                               exact_state: bool) -> bool:
        cells = self._cells
        assert cells is not None, "the class default object answers nothing"
        want = _RANK[query_state.name]
        for q in query_sources:
            if not q.spatial_query:
                continue  # only always-loaded cells: the fake has none
            r = cells.range_m if q.use_grid_loading_range else q.radius / 100.0
            for k in cells.covering(_m(q.location), r):
                got = _RANK[cells.state(k)]
                if got != want if exact_state else got < want:
                    return False
        return True

    def is_all_streaming_completed(self) -> bool:
        return self._cells is None or self._cells.settled()


_CDO = WorldPartitionSubsystem()


class ObjectIterator:
    """Live objects of a class: the running editor's world partition subsystems (and the
    class default object, which belongs to no world)."""

    def __init__(self, type: type = Object):
        self._type = type

    def __iter__(self) -> Any:
        ed = running_editor()
        objs: list[Any] = [_CDO]
        if getattr(ed, "partition", None) is not None:
            objs.append(ed.partition.subsystem)
        return iter([o for o in objs if isinstance(o, self._type)])


def _clip(poly: list[tuple[float, float, float]], axis: int, bound: float,
          keep_above: bool) -> list[tuple[float, float, float]]:
    """Sutherland–Hodgman: the part of ``poly`` on one side of the plane ``axis = bound``."""
    out: list[tuple[float, float, float]] = []
    for i, a in enumerate(poly):
        b = poly[(i + 1) % len(poly)]
        ina = a[axis] >= bound if keep_above else a[axis] <= bound
        inb = b[axis] >= bound if keep_above else b[axis] <= bound
        if ina:
            out.append(a)
        if ina != inb:
            t = (bound - a[axis]) / (b[axis] - a[axis])
            out.append(tuple(a[k] + t * (b[k] - a[k]) for k in range(3)))  # type: ignore[misc]
    return out


class StreamingCells:
    """The partitioned level of one PIE world: per-cell collision bodies and their states."""

    def __init__(self, engine: Any, cell_m: float, range_m: float, delay_frames: int,
                 stalls: bool = False):
        self.engine, self.cell_m, self.range_m = engine, cell_m, range_m
        self.delay, self.stalls = delay_frames, stalls
        self.subsystem = WorldPartitionSubsystem(None, self)
        self.bodies = self._split()
        self._frames: dict[tuple[int, int], int] = {}  # frames each wanted cell was in range
        self.activated: set[tuple[int, int]] = set()
        self.source: tuple[float, float, float] | None = None  # metres, contract frame
        self.history: list[tuple[int, int]] = []  # (frame, activated cells) per tick

    # ---- the level's collision, per cell
    def _split(self) -> dict[tuple[int, int], Any]:
        from panda3d.bullet import BulletRigidBodyNode, BulletTriangleMesh, BulletTriangleMeshShape
        from panda3d.core import GeomVertexReader, Point3

        from stages.engine.models import is_render_only

        eng, c = self.engine, self.cell_m
        meshes: dict[tuple[int, int], Any] = {}
        for gnp in eng.level_np.findAllMatches("**/+GeomNode"):
            if is_render_only(gnp) or gnp.getTag("dynamic"):
                continue
            mat = gnp.getMat(eng.render)
            for geom in gnp.node().getGeoms():
                reader = GeomVertexReader(geom.getVertexData(), "vertex")
                for prim in geom.getPrimitives():
                    tris = prim.decompose()
                    for i in range(tris.getNumPrimitives()):
                        s = tris.getPrimitiveStart(i)
                        tri = []
                        for j in range(s, s + 3):
                            reader.setRow(tris.getVertex(j))
                            p = mat.xformPoint(reader.getData3())
                            tri.append((p.x, p.y, p.z))
                        xs, ys = [p[0] for p in tri], [p[1] for p in tri]
                        for ix in range(math.floor(min(xs) / c), math.floor(max(xs) / c) + 1):
                            for iy in range(math.floor(min(ys) / c), math.floor(max(ys) / c) + 1):
                                poly = tri
                                for axis, bound, above in ((0, ix * c, True),
                                                           (0, (ix + 1) * c, False),
                                                           (1, iy * c, True),
                                                           (1, (iy + 1) * c, False)):
                                    poly = _clip(poly, axis, bound, above) if poly else poly
                                if len(poly) < 3:
                                    continue
                                m = meshes.setdefault((ix, iy), BulletTriangleMesh())
                                for k in range(1, len(poly) - 1):
                                    m.addTriangle(Point3(*poly[0]), Point3(*poly[k]),
                                                  Point3(*poly[k + 1]), True)
        bodies = {}
        for k, m in meshes.items():
            body = BulletRigidBodyNode(f"cell:{k[0]}_{k[1]}")
            body.addShape(BulletTriangleMeshShape(m, dynamic=False))
            body.setFriction(0.8)
            eng.render.attachNewNode(body)
            bodies[k] = body
        return bodies

    def begin(self, source: tuple[float, float, float]) -> None:
        """PIE starts: the one level body goes, the cells around the first view point are
        loaded before the first frame (PIE flushes the initial streaming)."""
        for body in self.engine._level_bodies:
            self.engine.world.removeRigidBody(body)
        self.source = source
        for k in self.wanted():
            self._activate(k)
        self.initial = set(self.activated)  # the cells loaded when PIE began

    def end(self) -> None:
        for k in list(self.activated):
            self.engine.world.removeRigidBody(self.bodies[k])
        self.activated.clear()
        for body in self.engine._level_bodies:
            self.engine.world.attachRigidBody(body)

    def _activate(self, k: tuple[int, int]) -> None:
        if k in self.bodies and k not in self.activated:
            self.engine.world.attachRigidBody(self.bodies[k])
        self.activated.add(k)

    # ---- streaming
    def covering(self, p: tuple[float, float, float], r: float) -> list[tuple[int, int]]:
        """Cells of the level within ``r`` metres of ``p`` (2D, as a 2D runtime grid)."""
        c = self.cell_m
        out = []
        for ix, iy in self.bodies:
            dx = max(ix * c - p[0], 0.0, p[0] - (ix + 1) * c)
            dy = max(iy * c - p[1], 0.0, p[1] - (iy + 1) * c)
            if math.hypot(dx, dy) <= r:
                out.append((ix, iy))
        return out

    def wanted(self) -> list[tuple[int, int]]:
        return self.covering(self.source, self.range_m) if self.source is not None else []

    def state(self, k: tuple[int, int]) -> str:
        if k in self.activated:
            return "ACTIVATED"
        return "LOADED" if self._frames.get(k, 0) * 2 >= self.delay else "UNLOADED"

    def settled(self) -> bool:
        return all(k in self.activated for k in self.wanted())

    def tick(self, frame: int, source: tuple[float, float, float]) -> None:
        """One world tick: the source moved to ``source``; cells in range count a frame and
        activate after ``delay`` of them (never once streaming stalls); others unload."""
        self.source = source
        wanted = set(self.wanted())
        for k in list(self.activated - wanted):
            self.engine.world.removeRigidBody(self.bodies[k])
            self.activated.discard(k)
        self._frames = {k: n for k, n in self._frames.items() if k in wanted}
        for k in wanted - self.activated:
            if self.stalls:
                continue
            self._frames[k] = self._frames.get(k, 0) + 1
            if self._frames[k] >= self.delay:
                self._activate(k)
        self.history.append((frame, len(self.activated)))

    def cell_of(self, p: tuple[float, float, float]) -> tuple[int, int]:
        return (math.floor(p[0] / self.cell_m), math.floor(p[1] / self.cell_m))


def view_point(pc: PlayerController) -> tuple[float, float, float]:
    """Player 0's view point, metres: its view target's (a pawn's eyes), else its own (a
    destroyed view target falls back to the controller, as the camera manager does)."""
    t = pc.view_target
    if t is not None and t.world is not None and t in t.world.actors:
        loc = t.get_actor_location()
        if isinstance(t, Pawn):
            loc = Vector(loc.x, loc.y, loc.z + EYE_HEIGHT_CM)
        return _m(loc)
    return _m(pc.get_actor_location())


def streaming_source(pc: PlayerController, p: tuple[float, float, float]) -> None:
    """What the camera manager caches at the end of the tick: the source's location."""
    pc.source_location, pc.source_rotation = _ue(p), Rotator()
