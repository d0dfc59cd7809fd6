"""The walkable-slope limit holds on a real Panda3D + Bullet course (issue 19, point 3): ground
steeper than ``max_slope_deg`` is never climbed — smooth ramps, terraced faces whose ledges are
each a legal step, and rough faces — from every approach direction and at speed; 44° is
climbed."""

import math
from pathlib import Path

import numpy as np
import pytest

from stages.assetgen.levels import LevelBuilder
from stages.assetgen.primitives import box, heightfield, ramp, stairs
from stages.core.engine_types import CharacterSpec
from stages.engine.base import make_engine

DT = 1 / 30
LANES = {"ramp44": 0.0, "ramp46": 30.0, "ramp54": 60.0, "terraced54": 90.0,
         "terraced46": 120.0, "rough54": 150.0}


def _rough(angle: float, y0: float):
    t = math.tan(math.radians(angle))

    def h(x, y):
        return (t * np.clip(x + 3.0, 0, 6.0) + 0.06 * np.sin(7.3 * x + 3.1 * (y - y0))
                + 0.05 * np.sin(11.0 * (y - y0) - 4.0 * x))
    return h


def build_slopes(path: Path) -> Path:
    b = LevelBuilder("Slopes", "day", 16, 0)
    b.part("Ground", box(120, 400, 0.5, 2.0, center=(0, 60, -0.5)), "concrete")
    for name, angle in (("ramp44", 44), ("ramp46", 46), ("ramp54", 54)):
        b.part(name, ramp(6.0, 10.0, angle, 1.0, (0, LANES[name], 0)), "concrete")
    # ledges 0.1 m deep: each riser is far below the step height, the face is 54° / 46°
    b.part("terraced54", stairs(40, 0.1 * math.tan(math.radians(54)), 0.1, 10.0, 1.0,
                                (0, LANES["terraced54"], 0)), "stone")
    b.part("terraced46", stairs(40, 0.1 * math.tan(math.radians(46)), 0.1, 10.0, 1.0,
                                (0, LANES["terraced46"], 0)), "stone")
    y0 = LANES["rough54"]
    b.part("rough54", heightfield(12, 12, 48, _rough(54, y0), 2.0, center=(0, y0)), "stone")
    b.lights()
    path.write_bytes(b.to_glb())
    return path


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = make_engine("embedded")
    eng.load_level(str(build_slopes(tmp_path_factory.mktemp("slopes") / "slopes.glb")),
                   "test/slopes")
    yield eng
    eng.close()


def climb(eng, lane: str, approach_deg: float, speed: float, frames: int = 150) -> float:
    """Height gained walking at the face from 1.5 m before its foot (x = 0, or x = -3 for the
    rough face), heading ``approach_deg`` off the fall line."""
    spec = CharacterSpec("test/human", 0.3, 0.6, 1.8, walk_speed=speed, step_height=0.45)
    r = math.radians(approach_deg)
    d = (math.cos(r), math.sin(r))
    x0 = -3.0 if lane == "rough54" else 0.0
    eng.spawn_character(spec, (x0 - 1.5 * d[0], LANES[lane] - 1.5 * d[1], 0.3), 0.0)
    for _ in range(15):
        eng.apply_input((0.0, 0.0), approach_deg, DT)
    z0 = eng.character_state().position[2]
    top = z0
    for _ in range(frames):
        eng.apply_input(d, approach_deg, DT)
        top = max(top, eng.character_state().position[2])
    return top - z0


APPROACHES = (0.0, 20.0, -40.0, 40.0, 60.0, -75.0, 75.0)


@pytest.mark.parametrize("lane", ["ramp46", "ramp54", "terraced54", "terraced46", "rough54"])
@pytest.mark.parametrize("speed", [1.6, 4.0])
def test_steeper_than_the_limit_is_never_climbed(engine, lane, speed):
    gains = {a: round(climb(engine, lane, a, speed), 3) for a in APPROACHES}
    # a ramp's toe is climbable for a few centimetres; never a step height, never the face
    assert max(gains.values()) < 0.3, gains


@pytest.mark.parametrize("approach", [0.0, 40.0])
def test_44_degrees_is_climbed(engine, approach):
    gain = climb(engine, "ramp44", approach, 1.6, frames=240)
    assert gain > 5.0, gain  # the top of the 6 m ramp: 6 tan 44° = 5.79 m
