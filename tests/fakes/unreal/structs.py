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

    def __copy__(self) -> _Enum:  # an enum value is one object: the scripts compare with `is`
        return self

    def __deepcopy__(self, memo: dict) -> _Enum:
        return self


def unreal_enum(name: str, members: str) -> Any:
    """The enum class ``name``: one attribute per space-separated name in ``members``, each an
    :class:`_Enum` of that name (``unreal_enum("X", "A B").A`` is ``A``)."""
    return type(name, (), {"__module__": __name__, **{m: _Enum(m) for m in members.split()}})


TraceTypeQuery = unreal_enum("TraceTypeQuery", "TRACE_TYPE_QUERY1 TRACE_TYPE_QUERY2")
DrawDebugTrace = unreal_enum("DrawDebugTrace", "NONE")
MovementMode = unreal_enum("MovementMode", "MOVE_WALKING MOVE_FLYING")
MovieSceneKeyInterpolation = unreal_enum("MovieSceneKeyInterpolation", "LINEAR AUTO")
MovieSceneTimeUnit = unreal_enum("MovieSceneTimeUnit", "DISPLAY_RATE")
CameraFocusMethod = unreal_enum("CameraFocusMethod", "DO_NOT_OVERRIDE MANUAL TRACKING DISABLE")
AntiAliasingMethod = unreal_enum("AntiAliasingMethod", "AAM_NONE AAM_FXAA AAM_TEMPORAL_AA "
                                 "AAM_MSAA AAM_TSR")


class HitResult:
    def __init__(self, *fields: Any):
        self._f = fields

    def to_tuple(self) -> tuple:
        return self._f
