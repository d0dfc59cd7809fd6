"""Character controller behaviour on a real Panda3D + Bullet test course."""

import math

import pytest

from stages.core.engine_types import CharacterSpec
from stages.engine.base import make_engine
from tests.engine.course import CRATE, LEDGE, RAMP20, RAMP50, STAIRS, WALL_X, build_course

DT = 1 / 30
SPEC = CharacterSpec("test/human", capsule_radius=0.3, capsule_half_height=0.6,
                     visual_height=1.8, walk_speed=1.6, step_height=0.45)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    course = build_course(tmp_path_factory.mktemp("course") / "course.glb")
    eng = make_engine("embedded")
    eng.load_level(str(course), "test/course")
    yield eng
    eng.close()


def settle(eng, x, y, z=0.3, yaw=0.0, frames=15):
    eng.spawn_character(SPEC, (x, y, z), yaw)
    for _ in range(frames):
        eng.apply_input((0.0, 0.0), yaw, DT)
    st = eng.character_state()
    assert st.grounded, st
    return st


def walk(eng, direction, frames, yaw=0.0):
    states = []
    for _ in range(frames):
        eng.apply_input(direction, yaw, DT)
        states.append(eng.character_state())
    return states


def test_ramp_20_climbed_near_full_speed(engine):
    settle(engine, RAMP20[0] - 2.0, RAMP20[1])
    states = walk(engine, (1.0, 0.0), 250)
    on_ramp = [s for s in states if 0.5 < s.position[0] < 7.5]
    speeds = [math.hypot(s.velocity[0], s.velocity[1]) for s in on_ramp]
    assert min(speeds) > 0.9 * SPEC.walk_speed, min(speeds)
    top = states[-1].position
    assert top[0] > 9.0 and top[2] == pytest.approx(8.0 * math.tan(math.radians(20)), abs=0.05)
    assert states[-1].grounded


def test_ramp_50_blocks(engine):
    settle(engine, RAMP50[0] - 2.0, RAMP50[1])
    states = walk(engine, (1.0, 0.0), 120)
    assert max(s.position[2] for s in states) < 0.5  # never climbs above step height
    assert states[-1].position[0] < 0.6


def test_stairs_up_and_down(engine):
    settle(engine, STAIRS[0] - 2.0, STAIRS[1])
    up = walk(engine, (1.0, 0.0), 140)
    assert up[-1].position[2] == pytest.approx(2.0, abs=0.03), up[-1]
    assert up[-1].position[0] > 4.0
    down = walk(engine, (-1.0, 0.0), 140)
    assert down[-1].position[2] == pytest.approx(0.0, abs=0.03)
    assert sum(not s.grounded for s in down) <= 3  # steps down stay in ground contact


def test_wall_stops_and_diagonal_slides(engine):
    settle(engine, WALL_X - 3.0, 10.0)
    states = walk(engine, (1.0, 0.0), 90)
    gap = WALL_X - (states[-1].position[0] + SPEC.capsule_radius)
    assert 0.0 <= gap <= 0.03, gap
    settle(engine, WALL_X - 1.0, 8.0)
    d = 1 / math.sqrt(2)
    states = walk(engine, (d, d), 45)
    assert states[-1].position[0] + SPEC.capsule_radius <= WALL_X + 1e-3
    dy = states[-1].position[1] - states[0].position[1]
    assert dy > 0.8  # it slid along the wall, keeping the parallel component


def test_drop_3m_freefall_frames_and_landing(engine):
    settle(engine, LEDGE[0] - 1.0, LEDGE[1], z=3.2)
    states = walk(engine, (1.0, 0.0), 60)
    airborne = [i for i, s in enumerate(states) if not s.grounded]
    assert airborne
    expected = math.sqrt(2 * 3.0 / 9.81) * 30  # 23.5 frames
    assert abs(len(airborne) - expected) <= 1.5, (len(airborne), expected)
    landed = states[airborne[-1] + 1]
    assert landed.grounded and landed.position[2] == pytest.approx(0.0, abs=0.02)


def test_crate_is_pushed(engine):
    before = engine.prop_positions()["prop:Crate"]
    settle(engine, CRATE[0] - 2.0, CRATE[1])
    walk(engine, (1.0, 0.0), 90)
    after = engine.prop_positions()["prop:Crate"]
    assert after[0] - before[0] > 1.0
    # what Stage I records for Stage II: the same pivot, by the prop's own name
    (name, pos, quat), = [t for t in engine.prop_transforms() if t[0] == "Crate"]
    assert pos == pytest.approx(after, abs=1e-6)
    assert sum(c * c for c in quat) == pytest.approx(1.0, abs=1e-5)


def test_idle_on_slope_does_not_drift(engine):
    st = settle(engine, RAMP20[0] + 4.0, RAMP20[1], z=2.0)
    start = st.position
    for _ in range(60):
        engine.apply_input((0.0, 0.0), 0.0, DT)
    end = engine.character_state().position
    assert math.dist(start, end) < 0.01
