"""Unreal's structs and enums, as far as the scripts in ``unreal/`` use them (the names and
fields of the 5.6 stub). A stand-in: no Unreal runs here."""

from __future__ import annotations

from typing import Any


class Vector:
    def __init__(self, x: float = 0.0, y: float = 0.0, z: float = 0.0):
        self.x, self.y, self.z = float(x), float(y), float(z)

    def __repr__(self) -> str:
        return f"Vector({self.x:.3f}, {self.y:.3f}, {self.z:.3f})"


class Rotator:
    def __init__(self, roll: float = 0.0, pitch: float = 0.0, yaw: float = 0.0):
        self.roll, self.pitch, self.yaw = float(roll), float(pitch), float(yaw)


class Box:
    def __init__(self, min: Vector | None = None, max: Vector | None = None,
                 is_valid: bool = False):
        self.min, self.max, self.is_valid = min or Vector(), max or Vector(), is_valid


class BoxSphereBounds:
    def __init__(self, origin: Vector | None = None, box_extent: Vector | None = None,
                 sphere_radius: float = 0.0):
        self.origin, self.box_extent = origin or Vector(), box_extent or Vector()
        self.sphere_radius = float(sphere_radius)


class FrameNumber:
    def __init__(self, value: int = 0):
        self.value = int(value)


class FrameRate:
    def __init__(self, numerator: int = 0, denominator: int = 1):
        self.numerator, self.denominator = numerator, denominator


class IntPoint:
    def __init__(self, x: int = 0, y: int = 0):
        self.x, self.y = int(x), int(y)


class SoftObjectPath:
    def __init__(self, path_string: str = ""):
        self.path = path_string


class DirectoryPath:
    def __init__(self, path: str = ""):
        self.path = path


class Text(str):
    pass


class Array(list):
    @classmethod
    def cast(cls, type_: type, obj: Any) -> list:
        return list(obj)


class _Enum:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


class TraceTypeQuery:
    TRACE_TYPE_QUERY1 = _Enum("TRACE_TYPE_QUERY1")
    TRACE_TYPE_QUERY2 = _Enum("TRACE_TYPE_QUERY2")


class DrawDebugTrace:
    NONE = _Enum("NONE")


class MovementMode:
    MOVE_WALKING = _Enum("MOVE_WALKING")
    MOVE_FLYING = _Enum("MOVE_FLYING")


class MovieSceneKeyInterpolation:
    LINEAR = _Enum("LINEAR")
    AUTO = _Enum("AUTO")


class MovieSceneTimeUnit:
    DISPLAY_RATE = _Enum("DISPLAY_RATE")


class CameraFocusMethod:
    DO_NOT_OVERRIDE = _Enum("DO_NOT_OVERRIDE")
    MANUAL = _Enum("MANUAL")
    TRACKING = _Enum("TRACKING")
    DISABLE = _Enum("DISABLE")


class AntiAliasingMethod:
    AAM_NONE = _Enum("AAM_NONE")
    AAM_FXAA = _Enum("AAM_FXAA")
    AAM_TEMPORAL_AA = _Enum("AAM_TEMPORAL_AA")
    AAM_MSAA = _Enum("AAM_MSAA")
    AAM_TSR = _Enum("AAM_TSR")


class HitResult:
    def __init__(self, *fields: Any):
        self._f = fields

    def to_tuple(self) -> tuple:
        return self._f
