"""The poses Stage II replays, and where its samples sit: Halton (2, 3) sub-pixel jitter for the
spatial samples, sub-frame times for the temporal ones, and the OpenCV -> Panda3D camera
rotation. Pure arithmetic (no Panda3D import), tested in tests/test_replay.py.
"""

from __future__ import annotations

from dataclasses import dataclass


def halton(i: int, base: int) -> float:
    f, r = 1.0, 0.0
    while i > 0:
        f /= base
        r += f * (i % base)
        i //= base
    return r


def jitter_offsets(n: int) -> list[tuple[float, float]]:
    """Sub-pixel offsets in pixels, centred on 0; a single sample is exactly the pixel centre."""
    if n == 1:
        return [(0.0, 0.0)]
    pts = [(halton(i + 1, 2), halton(i + 1, 3)) for i in range(n)]
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    return [(p[0] - mx, p[1] - my) for p in pts]


def temporal_offsets(n: int, shutter: float) -> list[float]:
    """Sub-frame times (in frames) inside the shutter interval centred on the frame."""
    if n == 1:
        return [0.0]
    return [((k + 0.5) / n - 0.5) * shutter for k in range(n)]


def cv_to_panda_mat(q: tuple[float, float, float, float]) -> list[list[float]]:
    """Rows of Panda3D's camera rotation (x right, y forward, z up) from a world-from-camera
    OpenCV quaternion (x right, y down, z forward)."""
    w, x, y, z = q
    r = [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]
    cx = [r[0][0], r[1][0], r[2][0]]
    cy = [r[0][1], r[1][1], r[2][1]]
    cz = [r[0][2], r[1][2], r[2][2]]
    return [cx, cz, [-v for v in cy]]  # panda x = cv x, panda y = cv z, panda z = -cv y


@dataclass
class ViewPose:
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]  # world-from-camera, OpenCV
    fov_deg: float


@dataclass
class CharacterPose:
    pos: tuple[float, float, float]  # feet
    quat: tuple[float, float, float, float]  # w x y z
    scale: tuple[float, float, float]
    clip: str | None
    clip_time: float


@dataclass
class SamplePose:
    character: CharacterPose
    views: dict[str, ViewPose]
