"""Level loading for the embedded engine: a Panda3D level model becomes Bullet collision.

Level meshes become static triangle-mesh collision (added without duplicate-vertex removal:
0.3 s instead of 30 s for the 125k-triangle monastery); nodes tagged ``dynamic`` become rigid
bodies with their ``mass``; player starts and points of interest are read before flattening.
"""

from __future__ import annotations

from typing import Any

from ..core.engine_types import LevelInfo
from ..core.spawns import is_start_node
from .models import is_collision_only, is_render_only


def build_level(model: Any, level_id: str, render: Any, world: Any
                ) -> tuple[LevelInfo, list[Any], list[Any]]:
    """Attach ``model``'s collision to ``world`` (under ``render``): returns the level's
    ``LevelInfo``, its static bodies and its dynamic prop NodePaths (depth-first order)."""
    from panda3d.bullet import (
        BulletBoxShape,
        BulletRigidBodyNode,
        BulletTriangleMesh,
        BulletTriangleMeshShape,
    )
    from panda3d.core import GeomNode, LightLensNode
    from panda3d.core import Vec3 as PVec3

    bodies: list[Any] = []
    props: list[Any] = []
    info = LevelInfo(level_id=level_id, bounds_min=(0, 0, 0), bounds_max=(0, 0, 0))
    # markers before flattening: an empty node's transform does not survive it
    for n in model.findAllMatches("**"):
        p = n.getPos(render)
        tags = {k: n.getTag(k) for k in n.getTagKeys()}
        if is_start_node(n.getName(), tags):  # names and tags: stages.core.spawns
            info.player_starts.append(((p.x, p.y, p.z), n.getH(render) % 360.0))
        elif tags.get("role") == "poi":
            info.pois.append((p.x, p.y, p.z))
    model.flattenLight()  # bake the import transforms into vertices (keeps node names)
    removed = []
    for cam in model.findAllMatches("**/+Camera"):
        if cam.node().isOfType(LightLensNode.getClassType()):
            continue  # a directional or spot light is a Camera subclass (shadow lens)
        removed.append(f"camera:{cam.getName()}")
        cam.removeNode()
    dynamic = list(model.findAllMatches("**/=dynamic"))
    for prop in dynamic:
        lo, hi = prop.getTightBounds(render)
        half = (hi - lo) * 0.5
        centre = (lo + hi) * 0.5
        body = BulletRigidBodyNode(f"prop:{prop.getName()}")
        try:
            mass = float(prop.getTag("mass") or 10.0)
        except ValueError:
            mass = 10.0
        body.setMass(max(mass, 0.1))
        body.addShape(BulletBoxShape(PVec3(max(half.x, 0.02), max(half.y, 0.02),
                                             max(half.z, 0.02))))
        body.setFriction(0.6)
        body.setDeactivationEnabled(False)
        body_np = render.attachNewNode(body)
        body_np.setPos(centre)
        prop.wrtReparentTo(body_np)
        world.attachRigidBody(body)
        props.append(body_np)
    mesh = BulletTriangleMesh()
    tris = 0
    for gnp in model.findAllMatches("**/+GeomNode"):
        gnode = gnp.node()
        assert isinstance(gnode, GeomNode)
        if is_render_only(gnp):
            continue  # drawn, never collides
        if is_collision_only(gnp):
            gnp.hide()  # collides, never drawn
        ts = gnp.getTransform(render)
        for i in range(gnode.getNumGeoms()):
            geom = gnode.getGeom(i)
            mesh.addGeom(geom, False, ts)
            for j in range(geom.getNumPrimitives()):
                tris += geom.getPrimitive(j).getNumFaces()
    info.triangles = tris
    info.dynamic_props = len(dynamic)
    if tris:
        body = BulletRigidBodyNode(f"level:{level_id}")
        body.addShape(BulletTriangleMeshShape(mesh, dynamic=False))
        body.setFriction(0.8)
        render.attachNewNode(body)
        world.attachRigidBody(body)
        bodies.append(body)
    bounds = model.getTightBounds(render)
    if bounds:
        lo, hi = bounds
        info.bounds_min = (lo.x, lo.y, lo.z)
        info.bounds_max = (hi.x, hi.y, hi.z)
    for gnp in model.findAllMatches("**/+GeomNode"):
        b = gnp.getTightBounds(render)
        if b and gnp.getTag("dynamic") == "":
            size = b[1] - b[0]
            if max(size.x, size.y) > 3.0 and size.z > 1.0:
                c = (b[0] + b[1]) * 0.5
                info.large_objects.append((c.x, c.y, b[1].z))
    info.removed = removed
    return info, bodies, props
