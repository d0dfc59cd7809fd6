"""Procedural characters: skinned humanoids (``humanoid`` module), a flat bat and a flying
drone with glTF node-rotation clips. Each is a .glb plus a ``character.json`` manifest (the
calibration record of §4.1: animation per action, scale, yaw correction, walk speed,
locomotion, height offset).
"""

from __future__ import annotations

import math

import numpy as np

from .gltf_writer import GlbBuilder, encode_png
from .humanoid import skinned_humanoid
from .primitives import box, cylinder, texture


def _axis_angle_y_up(axis_z_up, deg: float) -> list[float]:
    ax = np.array([axis_z_up[0], axis_z_up[2], -axis_z_up[1]], float)
    ax /= np.linalg.norm(ax)
    h = math.radians(deg) / 2
    return [*(ax * math.sin(h)), math.cos(h)]


def humanoid(name: str, height: float, build: float, shirt: str, seed: int, tex: int,
             clips: list[str], walk_speed: float | None = None) -> bytes:
    """A skinned humanoid ~``height`` tall, origin at the feet, facing +x (see ``humanoid``
    module); clips are authored for ``walk_speed`` (default: the HUMANOIDS entry's, else
    1.6 m/s)."""
    speed = walk_speed if walk_speed is not None else HUMANOIDS.get(name, (0, 0, "", [], 1.6))[4]
    return skinned_humanoid(name, height, build, shirt, seed, tex, clips, float(speed))


def bat(seed: int, tex: int) -> bytes:
    """Flat: 0.6 m wingspan, 6 cm tall; far below any sane minimum collision capsule."""
    g = GlbBuilder(generator="wmforge assetgen: Bat")
    m = g.material("bat", texture=g.texture(encode_png(texture("bark", tex, seed)), "bat"))
    root = g.node("Bat", extras={"role": "character_root"})
    g.node("body", mesh=g.mesh("body", box(0.16, 0.08, 0.06, 0.2), m), parent=root)
    for side, sy in (("l", 1), ("r", -1)):
        wing = g.node(f"wing_{side}", translation=(0, sy * 0.04, 0.04), parent=root)
        g.doc["nodes"][wing]["mesh"] = g.mesh(f"wing_{side}_m", box(0.14, 0.26, 0.01, 0.2,
                                                                    (0, sy * 0.13, 0)), m)
    for clip, amp, period in (("flap", 35.0, 0.3), ("glide", 4.0, 1.5)):
        times = np.linspace(0, period, 9)
        ph = np.sin(2 * math.pi * times / period)
        g.animation(clip, [(n, times, np.array([_axis_angle_y_up((1, 0, 0), sg * amp * p)
                                                 for p in ph]))
                           for n, sg in ((2, 1), (3, -1))])
    return g.to_glb()


def drone(seed: int, tex: int) -> bytes:
    g = GlbBuilder(generator="wmforge assetgen: Drone")
    m = g.material("drone", metallic=0.6, texture=g.texture(encode_png(texture("metal", tex,
                                                                                seed)), "m"))
    root = g.node("Drone", extras={"role": "character_root"})
    g.node("hull", mesh=g.mesh("hull", box(0.5, 0.5, 0.18, 0.3), m), parent=root)
    rotors = []
    for i, (x, y) in enumerate([(0.3, 0.3), (0.3, -0.3), (-0.3, 0.3), (-0.3, -0.3)]):
        mesh = g.mesh(f"rotor_{i}_m", cylinder(0.14, 0.03, 10, 0.3), m)
        rotors.append(g.node(f"rotor_{i}", mesh=mesh, translation=(x, y, 0.18), parent=root))
    times = np.linspace(0, 0.2, 5)
    g.animation("hover", [(rotors[i], times, np.array([_axis_angle_y_up((0, 0, 1), 90.0 * k)
                                                    for k in range(5)])) for i in range(4)])
    return g.to_glb()


HUMANOIDS = {
    # name: (height m, build, shirt texture, clips it has, walk speed m/s)
    "Alex": (1.80, 1.0, "fabric", ["idle", "walk", "run", "walk_back", "strafe_left",
                                   "strafe_right", "walk_left", "walk_right", "walk_back_left",
                                   "walk_back_right"], 1.6),
    "Bea": (1.62, 0.85, "brick", ["idle", "walk", "run", "walk_back"], 1.4),
    "Cole": (1.95, 1.2, "scifi", ["idle", "walk", "run"], 1.7),
}

CLIP_FOR_ACTION = {"IDLE": "idle", "W": "walk", "S": "walk_back", "A": "strafe_left",
                   "D": "strafe_right", "WA": "walk_left", "WD": "walk_right",
                   "SA": "walk_back_left", "SD": "walk_back_right"}


def humanoid_manifest(name: str) -> dict:
    height, build, shirt, clips, speed = HUMANOIDS[name]
    anims = {a: c for a, c in CLIP_FOR_ACTION.items() if c in clips}
    return {"name": name, "model": f"{name}.glb", "animations": anims, "scale": 1.0,
            "yaw_correction_deg": 0.0, "walk_speed": speed, "locomotion": "walk",
            "height_offset_m": 0.0, "kind": "humanoid"}
