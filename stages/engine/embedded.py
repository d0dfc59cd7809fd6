"""The embedded engine adapter: Panda3D scene graph + its Bullet physics, no window in Stage I.

Levels become Bullet collision in ``stages.engine.level_collision``. The character is a capsule
moved by a sweep-based collide-and-slide controller (``sweepTestClosest``): Panda3D's own
BulletCharacterControllerNode sticks on 0.2 m steps and slides on 20° slopes.

Controller, per tick:
1. grounded: step up by the step height, sweep the horizontal move (sliding along what it hits,
   pushing dynamic props), then sweep down by twice the step height; a walkable landing
   (normal within ``max_slope_deg`` of up) is accepted. Otherwise the move is redone without the
   step, with steep surfaces treated as vertical walls (so they cannot be climbed).
2. airborne: gravity integrates vertical speed (semi-implicit Euler); the vertical sweep lands
   the capsule on walkable ground or slides it along a steep one.
3. no input while grounded: nothing moves (no drift on walkable slopes).
Fly: no gravity; altitude eases toward ground height + ``height_offset`` (follows terrain).
Swim: no gravity; holds the altitude it was spawned at (a water surface), slides along whatever
it meets and never climbs over it.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.engine_types import CharacterSpec, CharacterState, LevelInfo, RayHit, Vec3
from .level_collision import build_level
from .models import _configure_panda, load_model
from .slope_limit import climbs_steep

GRAVITY = 9.81
SKIN = 0.01  # m kept between the capsule and any surface
MIN_CAPSULE_RADIUS = 0.04  # m: Bullet's default collision margin (see spawn_character)


class EmbeddedEngine:
    """Panda3D + Bullet behind the engine protocol (see ``stages.engine.base``)."""

    name = "embedded"

    def __init__(self, cfg: Any = None):
        _configure_panda(getattr(cfg, "display", "p3headlessgl"))
        import panda3d
        from panda3d.bullet import BulletWorld
        from panda3d.core import NodePath
        from panda3d.core import Vec3 as PVec3

        self.version = f"panda3d {panda3d.__version__}"
        self._P = PVec3
        self.render = NodePath("render")
        self.world = BulletWorld()
        self.world.setGravity(PVec3(0, 0, -GRAVITY))
        self.level_np: Any = None
        self._level_bodies: list[Any] = []
        self._props: list[Any] = []
        self.spec: CharacterSpec | None = None
        self._shape: Any = None
        self._observed = (0.0, 0.0)
        self._pos = (0.0, 0.0, 0.0)  # capsule centre
        self._yaw = 0.0
        self._vz = 0.0
        self._vel = (0.0, 0.0, 0.0)
        self._grounded = False
        self._normal = (0.0, 0.0, 1.0)
        self._model_cache: dict[str, Any] = {}
        self.model_loads = 0

    # ------------------------------------------------------------------ loading

    def load_model(self, path: str, scale: float = 1.0, up_axis: str | None = None) -> Any:
        """Load any supported model as a NodePath in the contract frame (Z up, metres)."""
        self.model_loads += 1
        return load_model(path, scale, up_axis)

    def cached_model(self, path: str, scale: float = 1.0, up_axis: str | None = None) -> Any:
        """Character models are loaded once per task and instanced after (§6.1)."""
        key = f"{path}|{scale}|{up_axis}"
        if key not in self._model_cache:
            self._model_cache[key] = self.load_model(path, scale, up_axis)
        return self._model_cache[key]

    def load_character(self, spec: CharacterSpec) -> Any:
        """Load a character's model (and its clips) once per task; later calls reuse it."""
        if not spec.model_path:
            return None
        return self.cached_model(spec.model_path, spec.scale, spec.up_axis)

    def load_level(self, path: str, level_id: str, scale: float = 1.0,
                   up_axis: str | None = None) -> LevelInfo:
        self._unload_level()
        model = self.load_model(path, scale, up_axis)
        model.reparentTo(self.render)
        self.level_np = model
        info, self._level_bodies, self._props = build_level(model, level_id, self.render,
                                                            self.world)
        return info

    def _unload_level(self) -> None:
        for body in self._level_bodies:
            self.world.removeRigidBody(body)
        for p in self._props:
            self.world.removeRigidBody(p.node())
            p.removeNode()
        self._level_bodies, self._props = [], []
        if self.level_np is not None:
            self.level_np.removeNode()
            self.level_np = None

    # ------------------------------------------------------------------ character

    def spawn_character(self, spec: CharacterSpec, position: Vec3, yaw_deg: float) -> None:
        from panda3d.bullet import BulletCapsuleShape, ZUp

        if self.spec is None or self.spec != spec:
            self.spec = spec
            # Bullet's convex sweeps are unreliable for shapes thinner than its collision margin
            # (0.04 m), so the engine builds at least that radius: the capsule it really uses can
            # differ from the request, and that observed one is what Stage I records (§7.2)
            self._shape = BulletCapsuleShape(max(spec.capsule_radius, MIN_CAPSULE_RADIUS),
                                             2 * max(spec.capsule_half_height, 0.0), ZUp)
            self._observed = (float(self._shape.getRadius()),
                              float(self._shape.getHalfHeight()))
        self._pos = (position[0], position[1], position[2] + self._centre_offset())
        self._yaw = yaw_deg
        self._vz = 0.0
        self._vel = (0.0, 0.0, 0.0)
        self._grounded = False

    def _centre_offset(self) -> float:
        r, hh = self.observed_capsule()
        return r + hh

    def observed_capsule(self) -> tuple[float, float]:
        """(radius, half cylinder height), m, read back from the collision shape the engine
        built for the spawned character — not the requested values."""
        assert self.spec is not None and self._shape is not None, "no character spawned"
        return self._observed

    def character_state(self) -> CharacterState:
        c = self._pos
        return CharacterState(position=(c[0], c[1], c[2] - self._centre_offset()),
                              yaw_deg=self._yaw, velocity=self._vel, grounded=self._grounded,
                              ground_normal=self._normal)

    def _sweep(self, a: Vec3, b: Vec3) -> Any:
        from panda3d.core import TransformState

        P = self._P
        return self.world.sweepTestClosest(self._shape, TransformState.makePos(P(*a)),
                                           TransformState.makePos(P(*b)))

    def _walkable(self, n: Vec3) -> bool:
        assert self.spec is not None
        return n[2] >= math.cos(math.radians(self.spec.max_slope_deg)) - 1e-6

    def _slide(self, start: Vec3, delta: Vec3, walls_vertical: bool,
               push_speed: float = 0.0) -> tuple[Vec3, list[Vec3]]:
        """Collide-and-slide ``delta`` from ``start``; returns the end and the hit normals."""
        pos = start
        rem = delta
        normals: list[Vec3] = []
        for _ in range(4):
            dist = math.sqrt(rem[0] ** 2 + rem[1] ** 2 + rem[2] ** 2)
            if dist < 1e-7:
                break
            end = (pos[0] + rem[0], pos[1] + rem[1], pos[2] + rem[2])
            hit = self._sweep(pos, end)
            if not hit.hasHit():
                pos = end
                break
            f = hit.getHitFraction()
            travel = max(f * dist - SKIN, 0.0)
            u = (rem[0] / dist, rem[1] / dist, rem[2] / dist)
            pos = (pos[0] + u[0] * travel, pos[1] + u[1] * travel, pos[2] + u[2] * travel)
            hn = hit.getHitNormal()
            n = (hn.x, hn.y, hn.z)
            if n[0] * u[0] + n[1] * u[1] + n[2] * u[2] > 0:
                n = (-n[0], -n[1], -n[2])
            node = hit.getNode()
            if push_speed > 0 and node is not None and node.getName().startswith("prop:"):
                self._push(node, u, push_speed)
            if walls_vertical and not self._walkable(n):
                h = math.hypot(n[0], n[1])
                n = (n[0] / h, n[1] / h, 0.0) if h > 1e-6 else n
            normals.append(n)
            left = max(dist - travel, 0.0)
            r = (u[0] * left, u[1] * left, u[2] * left)
            d = r[0] * n[0] + r[1] * n[1] + r[2] * n[2]
            rem = (r[0] - d * n[0], r[1] - d * n[1], r[2] - d * n[2])
        return pos, normals

    def _push(self, body: Any, u: Vec3, speed: float) -> None:
        h = math.hypot(u[0], u[1])
        if h < 1e-6:
            return
        v = body.getLinearVelocity()
        body.setActive(True)
        body.setLinearVelocity(self._P(u[0] / h * speed, u[1] / h * speed, v.z))

    def _ground_probe(self, pos: Vec3, depth: float) -> tuple[Vec3, Any]:
        end = (pos[0], pos[1], pos[2] - depth)
        hit = self._sweep(pos, end)
        if not hit.hasHit():
            return end, None
        f = hit.getHitFraction()
        z = pos[2] - max(f * depth - SKIN, 0.0)
        return (pos[0], pos[1], z), hit

    def apply_input(self, move_world: tuple[float, float], yaw_deg: float, dt: float) -> None:
        assert self.spec is not None, "spawn_character first"
        spec = self.spec
        self._yaw = yaw_deg
        start = self._pos
        mx, my = move_world
        speed = spec.walk_speed
        delta = (mx * speed * dt, my * speed * dt, 0.0)
        moving = abs(mx) + abs(my) > 1e-9
        if spec.locomotion == "fly":
            self._fly(delta, dt)
        elif spec.locomotion == "swim":
            self._pos, _ = self._slide(self._pos, delta, walls_vertical=True, push_speed=speed)
            self._grounded = False
        elif self._grounded:
            self._ground_move(delta, moving, speed)
        else:
            self._air_move(delta, dt, speed)
        if self._props:
            self.world.doPhysics(dt, 2, dt / 2)
        e = self._pos
        self._vel = ((e[0] - start[0]) / dt, (e[1] - start[1]) / dt, (e[2] - start[2]) / dt)

    def _ground_move(self, delta: Vec3, moving: bool, speed: float) -> None:
        assert self.spec is not None
        step = self.spec.step_height
        if not moving:
            # stay put, but notice when the ground vanished (a prop pushed away, a platform)
            _, hit = self._ground_probe(self._pos, 2 * SKIN + 0.02)
            if hit is None:
                self._grounded = False
                self._vz = 0.0
            return
        # 1) stepped path: up, across, down
        up, _ = self._slide(self._pos, (0.0, 0.0, step), walls_vertical=False)
        across, _ = self._slide(up, delta, walls_vertical=True, push_speed=speed)
        down, hit = self._ground_probe(across, (up[2] - self._pos[2]) + step)
        if hit is not None:
            hn = hit.getHitNormal()
            n = (hn.x, hn.y, hn.z)
            moved = math.hypot(down[0] - self._pos[0], down[1] - self._pos[1])
            if not self._walkable(n):
                # the capsule's rounded bottom touching a step edge reports a slanted normal:
                # trust the surface straight below the centre instead
                below = self.raycast(down, (down[0], down[1], down[2] - self._centre_offset()
                                            - step))
                if below is not None and self._walkable(below.normal):
                    n = below.normal
            if (self._walkable(n) and down[2] - self._pos[2] <= step + 1e-4 and moved > 1e-5
                    and not self._climbs_steep(down)):
                self._pos, self._normal = down, n
                return
        elif math.hypot(across[0] - self._pos[0], across[1] - self._pos[1]) > 1e-5:
            # walked off an edge: keep the horizontal move, start falling
            flat, _ = self._slide(self._pos, delta, walls_vertical=True, push_speed=speed)
            self._pos = flat
            self._grounded = False
            self._vz = 0.0
            return
        # 2) flat path: steep surfaces are walls
        flat, _ = self._slide(self._pos, delta, walls_vertical=True, push_speed=speed)
        snapped, hit = self._ground_probe(flat, step)
        if hit is not None and self._walkable(_n(hit)) and self._climbs_steep(snapped):
            return  # a rough steep face: held at its foot, as at a wall
        if hit is not None and self._walkable(_n(hit)):
            self._pos, self._normal = snapped, _n(hit)
        else:
            self._pos = flat
            self._grounded = False
            self._vz = 0.0

    def _climbs_steep(self, end: Vec3) -> bool:
        """Moving the capsule centre to ``end`` would climb ground steeper than the walkable
        limit (a rough or terraced face, ledge by ledge): ``stages.engine.slope_limit``."""
        assert self.spec is not None
        return climbs_steep(self.raycast, self._pos, end, self.spec.capsule_radius,
                            self.spec.step_height, self.spec.max_slope_deg,
                            self._centre_offset())

    def _air_move(self, delta: Vec3, dt: float, speed: float) -> None:
        self._vz -= GRAVITY * dt
        pos, _ = self._slide(self._pos, delta, walls_vertical=True, push_speed=speed)
        dz = self._vz * dt
        end = (pos[0], pos[1], pos[2] + dz)
        hit = self._sweep(pos, end)
        if not hit.hasHit():
            self._pos = end
            return
        f = hit.getHitFraction()
        n = _n(hit)
        if n[2] < 0:
            n = (-n[0], -n[1], -n[2]) if dz < 0 else n
        travel = max(f * abs(dz) - SKIN, 0.0)
        landed = (pos[0], pos[1], pos[2] + math.copysign(travel, dz))
        if dz < 0 and self._walkable(n):
            self._pos = landed
            self._grounded = True
            self._normal = n
            self._vz = 0.0
        else:
            # steep: slide the rest along the surface
            self._pos, _ = self._slide(landed, (0.0, 0.0, dz - math.copysign(travel, dz)),
                                       walls_vertical=False)
            if dz > 0:
                self._vz = 0.0

    def _fly(self, delta: Vec3, dt: float) -> None:
        assert self.spec is not None
        pos, _ = self._slide(self._pos, delta, walls_vertical=False)
        probe = self.raycast(pos, (pos[0], pos[1], pos[2] - 200.0))
        ground = probe.position[2] if probe else pos[2] - self._centre_offset()
        target = ground + self.spec.height_offset + self._centre_offset()
        dz = (target - pos[2]) * min(1.0, 3.0 * dt)
        self._pos, _ = self._slide(pos, (0.0, 0.0, dz), walls_vertical=False)
        self._grounded = False

    # ------------------------------------------------------------------ queries

    def raycast(self, start: Vec3, end: Vec3) -> RayHit | None:
        P = self._P
        r = self.world.rayTestClosest(P(*start), P(*end))
        if not r.hasHit():
            return None
        p, n = r.getHitPos(), r.getHitNormal()
        return RayHit((p.x, p.y, p.z), (n.x, n.y, n.z), r.getHitFraction())

    def raycast_all(self, start: Vec3, end: Vec3) -> list[RayHit]:
        """Every static-geometry surface crossed on the segment, nearest first; crossings within
        1 mm of each other (shared triangle edges) count once."""
        P = self._P
        r = self.world.rayTestAll(P(*start), P(*end))
        length = math.dist(start, end)
        out: list[RayHit] = []
        for h in sorted(r.getHits(), key=lambda h: h.getHitFraction()):
            f = h.getHitFraction()
            if out and (f - out[-1].fraction) * length < 1e-3:
                continue
            p, n = h.getHitPos(), h.getHitNormal()
            out.append(RayHit((p.x, p.y, p.z), (n.x, n.y, n.z), f))
        return out

    def world_ready(self, point: Vec3) -> bool:
        """The whole level is loaded with it: always ready."""
        return True

    def prop_positions(self) -> dict[str, Vec3]:
        return {p.getName(): tuple(p.getPos(self.render)) for p in self._props}

    def prop_transforms(self) -> list[tuple[str, Vec3, tuple[float, float, float, float]]]:
        """(name, pivot position, world-from-pivot quaternion w x y z) of each dynamic prop,
        in the level's depth-first order; the pivot is the centre of the prop's bounds at load
        with identity rotation (the same pivot Stage II rebuilds)."""
        out = []
        for p in self._props:
            pos, q = p.getPos(self.render), p.getQuat(self.render)
            out.append((p.getName().removeprefix("prop:"), (pos.x, pos.y, pos.z),
                        (q.getR(), q.getI(), q.getJ(), q.getK())))
        return out

    def close(self) -> None:
        self._unload_level()


def _n(hit: Any) -> Vec3:
    hn = hit.getHitNormal()
    return (hn.x, hn.y, hn.z)
