"""The nine discrete action states (paper §3.1) and how each maps to motion and animation.

Standard library only: Unreal's embedded Python imports this module.
"""

from __future__ import annotations

import math

ACTIONS: tuple[str, ...] = ("W", "A", "S", "D", "WA", "WD", "SA", "SD", "IDLE")

# Direction of each action in the character frame: x forward, y left (right-handed, Z up).
_RAW_DIRECTIONS: dict[str, tuple[float, float]] = {
    "W": (1.0, 0.0),
    "S": (-1.0, 0.0),
    "A": (0.0, 1.0),
    "D": (0.0, -1.0),
    "WA": (1.0, 1.0),
    "WD": (1.0, -1.0),
    "SA": (-1.0, 1.0),
    "SD": (-1.0, -1.0),
    "IDLE": (0.0, 0.0),
}


def _unit(v: tuple[float, float]) -> tuple[float, float]:
    n = math.hypot(*v)
    return (v[0] / n, v[1] / n) if n > 0 else (0.0, 0.0)


DIRECTIONS: dict[str, tuple[float, float]] = {a: _unit(v) for a, v in _RAW_DIRECTIONS.items()}

# Diagonal, backward and lateral actions: the share the paper reports as 46.6% (§4.3).
NON_FORWARD: frozenset[str] = frozenset({"A", "D", "S", "WA", "WD", "SA", "SD"})

# Animation fallback chain per action: the first clip a character has wins (§11).
ANIMATION_FALLBACKS: dict[str, tuple[str, ...]] = {
    "W": ("W",),
    "S": ("S", "W"),
    "A": ("A", "W"),
    "D": ("D", "W"),
    "WA": ("WA", "W"),
    "WD": ("WD", "W"),
    "SA": ("SA", "S", "A", "W"),
    "SD": ("SD", "S", "D", "W"),
    "IDLE": ("IDLE",),
}


def resolve_animation_map(clips: dict[str, str | None]) -> tuple[dict[str, str | None], list[str]]:
    """Map each of the nine actions to a clip name through the fallback chain.

    ``clips`` maps action → clip name (missing or None when the character has no such clip).
    Returns (mapping, notes) where notes say which actions fell back, and to what. An action
    with no clip along its chain maps to None (posed statically: the bind pose).
    """
    unknown = sorted(set(clips) - set(ACTIONS))
    if unknown:
        raise ValueError(f"unknown action(s) {unknown} in animation map; expected {list(ACTIONS)}")
    mapping: dict[str, str | None] = {}
    notes: list[str] = []
    for action in ACTIONS:
        chosen = None
        for candidate in ANIMATION_FALLBACKS[action]:
            if clips.get(candidate):
                chosen = clips[candidate]
                if candidate != action:
                    notes.append(f"{action}->{candidate}")
                break
        if chosen is None:
            notes.append(f"{action}->static")
        mapping[action] = chosen
    return mapping, notes


def yaw_deltas(yaws: list[float]) -> list[float]:
    """Per-frame yaw change in degrees (counter-clockwise positive, wrapped to [-180, 180)):
    what a mouse would have turned that frame; 0 for the first frame. Their sum is the net
    yaw change (mod 360) from the first frame to the last."""
    out = [0.0]
    for a, b in zip(yaws, yaws[1:], strict=False):
        out.append((b - a + 180.0) % 360.0 - 180.0)
    return out

