"""Unreal ↔ contract frame conversion: the one place where units and handedness change.

Contract (DESIGN §3): right-handed, Z up, metres; yaw counter-clockwise about +Z from +X;
cameras world-from-camera in OpenCV axes (x right, y down, z forward).
Unreal: left-handed, Z up, centimetres, X forward / Y right; ``Rotator(roll, pitch, yaw)`` in
degrees with yaw turning +X toward +Y (clockwise seen from above, i.e. the contract's −yaw); a
camera looks along its local +X with +Y right and +Z up in the image.

The mirror between the two is y → −y. Standard library only (runs inside the editor and in tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from stages.core.cameras import quat_from_columns

CM_PER_M = 100.0

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]  # w, x, y, z


def lift_to_lowest_point_cm(lowest_cm: float, scale: float) -> float:
    """How far above the recorded feet a character's mesh origin goes, cm, so that the
    model's lowest point stands on them (``pos`` means the same point for every kind of
    character): ``lowest_cm`` is the lowest z of the mesh's imported bounds in mesh space, 0
    for a model whose origin is at its feet, minus half its height for one centred on its
    origin (a flying drone)."""
    return -lowest_cm * scale


def to_ue_length(m: float) -> float:
    """A length, speed or height: metres → centimetres (no direction, no mirror)."""
    return m * CM_PER_M


def from_ue_length(cm: float) -> float:
    return cm / CM_PER_M


def from_ue_extent(e: Sequence[float]) -> Vec3:
    """Half-sizes of a box (Unreal's actor bounds extent): centimetres → metres, unsigned."""
    return (abs(e[0]) / CM_PER_M, abs(e[1]) / CM_PER_M, abs(e[2]) / CM_PER_M)


def to_ue_location(p: Sequence[float]) -> Vec3:
    """Contract metres → Unreal centimetres (mirror y)."""
    return (p[0] * CM_PER_M, -p[1] * CM_PER_M, p[2] * CM_PER_M)


def from_ue_location(p: Sequence[float]) -> Vec3:
    """Unreal centimetres → contract metres (mirror y)."""
    return (p[0] / CM_PER_M, -p[1] / CM_PER_M, p[2] / CM_PER_M)


def to_ue_vector(v: Sequence[float]) -> Vec3:
    """A direction or velocity: the same mirror and unit change as a location."""
    return to_ue_location(v)


def from_ue_vector(v: Sequence[float]) -> Vec3:
    return from_ue_location(v)


def to_ue_yaw(yaw_deg: float) -> float:
    """Contract yaw (CCW from +X) → Unreal yaw (turns +X toward +Y, which is contract −Y)."""
    return _wrap(-yaw_deg)


def from_ue_yaw(ue_yaw_deg: float) -> float:
    return _wrap(-ue_yaw_deg) % 360.0


def _wrap(a: float) -> float:
    return (a + 180.0) % 360.0 - 180.0


def unwrap_angle(prev: float | None, a: float) -> float:
    """``a`` plus the multiple of 360° nearest to ``prev`` (degrees): Sequencer interpolates a
    Rotator channel as a plain number, so keys 179° then -179° would turn through 0° at every
    sub-frame sample; keyed unwrapped (179°, 181°) they turn the short way."""
    if prev is None:
        return a
    return prev + _wrap(a - prev)


def unwrap_rotator(prev: tuple[float, float, float] | None, rot: Sequence[float]
                   ) -> tuple[float, float, float]:
    """(roll, pitch, yaw) with each angle unwrapped against the previous key's."""
    if prev is None:
        return (float(rot[0]), float(rot[1]), float(rot[2]))
    return (unwrap_angle(prev[0], rot[0]), unwrap_angle(prev[1], rot[1]),
            unwrap_angle(prev[2], rot[2]))


# ---------------------------------------------------------------- rotators (Unreal's matrix)

def ue_axes(roll: float, pitch: float, yaw: float) -> tuple[Vec3, Vec3, Vec3]:
    """Unreal world vectors of an actor's local X (forward), Y (right), Z (up) for a
    ``Rotator(roll, pitch, yaw)`` — the rows of Unreal's FRotationMatrix."""
    sr, cr = math.sin(math.radians(roll)), math.cos(math.radians(roll))
    sp, cp = math.sin(math.radians(pitch)), math.cos(math.radians(pitch))
    sy, cy = math.sin(math.radians(yaw)), math.cos(math.radians(yaw))
    x = (cp * cy, cp * sy, sp)
    y = (sr * sp * cy - cr * sy, sr * sp * sy + cr * cy, -sr * cp)
    z = (-(cr * sp * cy + sr * sy), cy * sr - cr * sp * sy, cr * cp)
    return x, y, z


def ue_rotator_from_axes(forward: Sequence[float], up: Sequence[float]) -> tuple[float, float,
                                                                                    float]:
    """(roll, pitch, yaw) whose local X is ``forward`` and local Z is ``up`` (Unreal vectors)."""
    yaw = math.degrees(math.atan2(forward[1], forward[0]))
    pitch = math.degrees(math.atan2(forward[2], math.hypot(forward[0], forward[1])))
    _x0, y0, z0 = ue_axes(0.0, pitch, yaw)
    roll = math.degrees(math.atan2(_dot(up, y0), _dot(up, z0)))
    return roll, pitch, yaw


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _quat_matrix(q: Sequence[float]) -> tuple[Vec3, Vec3, Vec3]:
    """Columns of the rotation matrix of unit quaternion (w, x, y, z)."""
    w, x, y, z = q
    c0 = (1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y))
    c1 = (2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x))
    c2 = (2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y))
    return c0, c1, c2


def _mirror(v: Sequence[float]) -> Vec3:
    return (v[0], -v[1], v[2])


def camera_rotator_from_cv_quat(q: Sequence[float]) -> tuple[float, float, float]:
    """Contract camera rotation (world-from-camera, OpenCV axes) → Unreal camera
    ``(roll, pitch, yaw)``: the camera looks along OpenCV +z, its image up is OpenCV −y."""
    right, down, fwd = _quat_matrix(q)
    return ue_rotator_from_axes(_mirror(fwd), _mirror((-down[0], -down[1], -down[2])))


def cv_quat_from_camera_rotator(roll: float, pitch: float, yaw: float) -> Quat:
    """Inverse of :func:`camera_rotator_from_cv_quat`."""
    x, y, z = ue_axes(roll, pitch, yaw)  # forward, right, up (Unreal vectors)
    fwd, right, up = _mirror(x), _mirror(y), _mirror(z)
    down = (-up[0], -up[1], -up[2])
    return quat_from_columns(right, down, fwd)


def character_rotator(yaw_deg: float, yaw_correction_deg: float = 0.0) -> tuple[float, float,
                                                                               float]:
    """Contract character yaw (+ the model's recorded correction) → Unreal (roll, pitch, yaw)."""
    return (0.0, 0.0, to_ue_yaw(yaw_deg + yaw_correction_deg))


# ---------------------------------------------------------------- capsule

def feet_from_ue_center(center_cm: Sequence[float], half_height_cm: float) -> Vec3:
    """Unreal actor location (capsule centre) → contract feet (capsule bottom), metres.
    ``half_height_cm`` is Unreal's scaled half-height, hemisphere included."""
    return from_ue_location((center_cm[0], center_cm[1], center_cm[2] - half_height_cm))


def ue_center_from_feet(feet_m: Sequence[float], half_height_cm: float) -> Vec3:
    c = to_ue_location(feet_m)
    return (c[0], c[1], c[2] + half_height_cm)


def ue_capsule_request(radius_m: float, half_height_m: float) -> tuple[float, float]:
    """Contract capsule (radius, half the cylinder) → Unreal ``set_capsule_size`` arguments
    (radius, half-height including the hemisphere), centimetres."""
    return radius_m * CM_PER_M, (half_height_m + radius_m) * CM_PER_M


def ue_half_height_cm(radius_m: float, half_height_m: float) -> float:
    """Unreal's half-height (hemisphere included) of a recorded contract capsule, cm."""
    return ue_capsule_request(radius_m, half_height_m)[1]


def contract_capsule(scaled_radius_cm: float, scaled_half_height_cm: float) -> tuple[float,
                                                                                    float]:
    """What the engine really uses (read back after spawning) → contract (radius, half the
    cylinder), metres. Unreal clamps the half-height to at least the radius (§7.2)."""
    r = scaled_radius_cm / CM_PER_M
    return r, max(0.0, scaled_half_height_cm / CM_PER_M - r)
