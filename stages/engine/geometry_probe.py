"""What a camera sees of a level, for the renderability screen (``stages.screen``): a Bullet world
of its own built from the level's visible geometry, independent of the Stage I adapter.
"""

from __future__ import annotations

import math

from .models import _configure_panda, is_collision_only, load_model


class VisibleGeometryProbe:
    """What a camera sees of a level, in a Bullet world of its own: custom-collision nodes left
    out, render-only nodes kept, pushable props left out (they move). The renderability
    detectors measure the recorded character against it: the visible ground straight below the
    capsule (hovering) and the capsule's overlap with visible geometry (interpenetration)."""

    def __init__(self, path: str, scale: float = 1.0, up_axis: str | None = None):
        from panda3d.bullet import (
            BulletGhostNode,
            BulletRigidBodyNode,
            BulletTriangleMesh,
            BulletTriangleMeshShape,
            BulletWorld,
        )
        from panda3d.core import GeomNode, NodePath

        _configure_panda()
        model = load_model(path, scale, up_axis)
        model.flattenLight()
        self.root = NodePath("probe")
        self.world = BulletWorld()
        mesh = BulletTriangleMesh()
        tris = 0
        for gnp in model.findAllMatches("**/+GeomNode"):
            if is_collision_only(gnp) or gnp.getNetTag("dynamic"):
                continue
            gnode = gnp.node()
            assert isinstance(gnode, GeomNode)
            ts = gnp.getTransform(model)
            for i in range(gnode.getNumGeoms()):
                mesh.addGeom(gnode.getGeom(i), False, ts)
                tris += 1
        self.triangles = tris
        b = model.getTightBounds()
        # rays for the inside test must end outside every solid: beyond the level's bounds
        self.reach = 10.0 + (float((b[1] - b[0]).length()) if b else 100.0)
        if tris:
            body = BulletRigidBodyNode("visible")
            body.addShape(BulletTriangleMeshShape(mesh, dynamic=False))
            self.root.attachNewNode(body)
            self.world.attachRigidBody(body)
        self.ghost = BulletGhostNode("capsule")
        self.ghost_np = self.root.attachNewNode(self.ghost)
        self.world.attachGhost(self.ghost)
        self._shape_key: tuple[float, float] | None = None

    def ground_below(self, x: float, y: float, z_from: float, depth: float = 200.0
                     ) -> float | None:
        """Height of the first visible surface straight below (x, y, z_from), or None."""
        from panda3d.core import Point3

        hit = self.world.rayTestClosest(Point3(x, y, z_from), Point3(x, y, z_from - depth))
        return float(hit.getHitPos().z) if hit.hasHit() else None

    def penetration(self, x: float, y: float, feet_z: float, radius: float,
                    half_height: float) -> float:
        """Deepest overlap, m, of the capsule standing at (x, y, feet_z) with visible geometry."""
        from panda3d.bullet import BulletCapsuleShape, ZUp

        key = (round(radius, 4), round(half_height, 4))
        if key != self._shape_key:
            for s in list(self.ghost.getShapes()):
                self.ghost.removeShape(s)
            self.ghost.addShape(BulletCapsuleShape(radius, 2 * half_height, ZUp))
            self._shape_key = key
        self.ghost_np.setPos(x, y, feet_z + radius + half_height)
        deepest = 0.0
        res = self.world.contactTest(self.ghost)
        for c in res.getContacts():
            deepest = max(deepest, -float(c.getManifoldPoint().getDistance()))
        # a capsule wholly inside a closed mesh touches none of its triangles: look outward
        # from points on the axis; a ray whose first hit is a back face started inside
        for frac in (0.3, 0.6, 0.9):
            z = feet_z + frac * 2 * (radius + half_height)
            inside, nearest = self._inside_depth(x, y, z, self.reach)
            # inside a solid: at least a radius deep; outside: how far a surface reaches in
            deepest = max(deepest, radius + inside if inside is not None else radius - nearest)
        return deepest

    def _inside_depth(self, x: float, y: float, z: float, reach: float = 50.0
                      ) -> tuple[float | None, float]:
        """(distance to the nearest surface when (x, y, z) is inside a closed visible mesh, else
        None; the nearest horizontal surface distance). Inside means an odd number of surface
        crossings along at least three of four horizontal rays and along the ray straight up
        (Bullet reports every hit facing the ray, so winding cannot tell)."""
        from panda3d.core import Point3

        inside, nearest = 0, reach
        d = math.sqrt(0.5)
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1), (d, d), (-d, -d), (d, -d), (-d, d)):
            res = self.world.rayTestAll(Point3(x, y, z),
                                        Point3(x + dx * reach, y + dy * reach, z))
            fr = sorted(h.getHitFraction() for h in res.getHits())
            crossings = [f for i, f in enumerate(fr) if i == 0 or f - fr[i - 1] > 1e-5]
            if len(crossings) % 2 == 1 and abs(dx) + abs(dy) == 1:
                inside += 1
            if crossings:
                nearest = min(nearest, crossings[0] * reach)
        # and straight up: a solid has a top above us; a valley between hills has open sky
        res = self.world.rayTestAll(Point3(x, y, z), Point3(x, y, z + reach))
        fr = sorted(h.getHitFraction() for h in res.getHits())
        up = len([f for i, f in enumerate(fr) if i == 0 or f - fr[i - 1] > 1e-5])
        return (nearest if inside >= 3 and up % 2 == 1 else None), nearest
