"""unreal/ue_frame.py: the one place where units and handedness change, with round trips and a
check against Unreal's rotation matrix written independently (tests/fakes/unreal/frame.py)."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unreal"))
import ue_frame  # noqa: E402

from stages.core.cameras import look_rotation  # noqa: E402
from tests.fakes.unreal import namespace as fu  # noqa: E402


def rnd_quat(rng: random.Random) -> tuple[float, float, float, float]:
    q = [rng.gauss(0, 1) for _ in range(4)]
    n = math.sqrt(sum(v * v for v in q))
    q = [v / n for v in q]
    return tuple(q) if q[0] >= 0 else tuple(-v for v in q)  # type: ignore[return-value]


def test_locations_and_yaw_round_trip() -> None:
    rng = random.Random(1)
    for _ in range(200):
        p = (rng.uniform(-50, 50), rng.uniform(-50, 50), rng.uniform(-5, 20))
        u = ue_frame.to_ue_location(p)
        assert u == pytest.approx((p[0] * 100, -p[1] * 100, p[2] * 100))
        assert ue_frame.from_ue_location(u) == pytest.approx(p)
        yaw = rng.uniform(0, 360)
        assert ue_frame.from_ue_yaw(ue_frame.to_ue_yaw(yaw)) == pytest.approx(yaw % 360)
    # contract +Y (left of +X, counter-clockwise) is Unreal's -Y; yaw 90 is Unreal yaw -90
    assert ue_frame.to_ue_location((0, 1, 0)) == (0, -100, 0)
    assert ue_frame.to_ue_yaw(90.0) == -90.0


def test_camera_rotation_round_trip_and_against_unreal_matrix() -> None:
    rng = random.Random(2)
    for _ in range(300):
        q = rnd_quat(rng)
        roll, pitch, yaw = ue_frame.camera_rotator_from_cv_quat(q)
        back = ue_frame.cv_quat_from_camera_rotator(roll, pitch, yaw)
        assert back == pytest.approx(q, abs=1e-7)
        # the fake engine's own camera basis (forward, right, up) agrees with the OpenCV axes
        f, r, u = fu.camera_basis(fu.Rotator(roll, pitch, yaw))
        w, x, y, z = q
        cols = ((1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)),
                (2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)),
                (2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)))
        assert f == pytest.approx(cols[2], abs=1e-7)  # OpenCV z: forward
        assert r == pytest.approx(cols[0], abs=1e-7)  # OpenCV x: right
        assert u == pytest.approx(tuple(-v for v in cols[1]), abs=1e-7)  # OpenCV -y: up


def test_a_level_camera_looking_along_contract_y() -> None:
    q = look_rotation((0.0, 1.0, 0.0))  # the project's own camera maker (OpenCV axes)
    roll, pitch, yaw = ue_frame.camera_rotator_from_cv_quat(q)
    assert (roll, pitch, yaw) == pytest.approx((0.0, 0.0, -90.0), abs=1e-9)


def test_capsule_feet_and_clamp() -> None:
    r_cm, hh_cm = ue_frame.ue_capsule_request(0.3, 0.6)
    assert (r_cm, hh_cm) == pytest.approx((30.0, 90.0))
    assert ue_frame.contract_capsule(30.0, 90.0) == pytest.approx((0.3, 0.6))
    assert ue_frame.contract_capsule(40.0, 40.0) == pytest.approx((0.4, 0.0))  # clamped
    c = ue_frame.ue_center_from_feet((1.0, 2.0, 3.0), 90.0)
    assert c == pytest.approx((100.0, -200.0, 390.0))
    assert ue_frame.feet_from_ue_center(c, 90.0) == pytest.approx((1.0, 2.0, 3.0))


def test_object_paths_from_pack_files() -> None:
    import ue_paths

    assert ue_paths.object_path("/lib/Chars/Alex/Content/Alex/Meshes/SK_Alex.uasset") == \
        "/Game/Alex/Meshes/SK_Alex"
    assert ue_paths.object_path("/Game/Alex/Anims/Walk") == "/Game/Alex/Anims/Walk"
    assert ue_paths.object_path("Walk.uasset", "/lib/Chars/Alex/Content/Alex/SK_Alex.uasset") \
        == "/Game/Alex/Walk"
    with pytest.raises(ValueError, match="Content"):
        ue_paths.object_path("/lib/Chars/Alex/SK_Alex.glb")
