"""What a character's files say about it when nobody wrote a sidecar (paper §4.1): which clip
plays which action, the model's units, its kind and its forward axis. Every answer is a guess
that the inventory records beside the value, so a user can see and override it.

Standard library only.
"""

from __future__ import annotations

import re

# clip-name tokens → action; the first rule whose tokens all occur in the name wins
_CLIP_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("WA", ("forward", "left")), ("WD", ("forward", "right")),
    ("SA", ("back", "left")), ("SD", ("back", "right")),
    ("IDLE", ("idle",)), ("IDLE", ("stand",)), ("IDLE", ("breath",)), ("IDLE", ("rest",)),
    ("S", ("back",)), ("S", ("backward",)), ("S", ("backwards",)), ("S", ("reverse",)),
    ("A", ("strafe", "left")), ("A", ("left",)),
    ("D", ("strafe", "right")), ("D", ("right",)),
    ("W", ("walk",)), ("W", ("forward",)), ("W", ("jog",)), ("W", ("run",)),
    ("W", ("locomotion",)), ("W", ("move",)),
)
# for the same action, a walk beats a jog beats a run (Stage I moves at walking speed)
_PREFERENCE = ("walk", "forward", "locomotion", "move", "jog", "run")
# plausible standing heights, m, and the units tried (in order) when a model is outside them
PLAUSIBLE_HEIGHT_M = (0.25, 3.0)
UNIT_GUESSES: tuple[tuple[str, float], ...] = (
    ("metres", 1.0), ("centimetres", 0.01), ("inches", 0.0254), ("millimetres", 0.001))


def name_tokens(name: str) -> list[str]:
    """'Walk_Back', 'walkBack', 'walk-back.egg.pz' → ['walk', 'back'] (lower case)."""
    stem = re.sub(r"\.(egg\.pz|egg|glb|gltf|bam|fbx)$", "", name, flags=re.I)
    stem = re.sub(r"([a-z])([A-Z])", r"\1 \2", stem)
    return [t for t in re.split(r"[^A-Za-z]+", stem.lower()) if t]


def action_for_clip(name: str) -> str | None:
    """The action a clip's name says it animates, or None (jump, wave, ...)."""
    tokens = set(name_tokens(name))
    # "walkback", "strafeleft" written as one word
    joined = "".join(name_tokens(name))
    for action, need in _CLIP_RULES:
        if all(t in tokens for t in need) or (len(need) > 1 and "".join(need) in joined):
            return action
    return None


def map_clips(clips: list[str]) -> tuple[dict[str, str], list[str]]:
    """Map clip names to actions by their names. Returns (action → clip, guesses) where the
    guesses say which clip was taken for which action, and which clips were left unmapped."""
    chosen: dict[str, str] = {}
    guesses: list[str] = []

    def rank(clip: str) -> tuple[int, str]:
        toks = name_tokens(clip)
        for i, word in enumerate(_PREFERENCE):
            if word in toks:
                return (i, clip)
        return (len(_PREFERENCE), clip)

    by_action: dict[str, list[str]] = {}
    for clip in clips:
        a = action_for_clip(clip)
        if a is None:
            guesses.append(f"clip '{clip}' not mapped (no action word in its name)")
        else:
            by_action.setdefault(a, []).append(clip)
    for action in sorted(by_action):
        ranked = sorted(by_action[action], key=rank)
        chosen[action] = ranked[0]
        extra = f" (over {', '.join(ranked[1:])})" if len(ranked) > 1 else ""
        guesses.append(f"{action} <- clip '{ranked[0]}' by its name{extra}")
    return chosen, guesses


def guess_units(height_raw: float) -> tuple[float, str]:
    """Scale that brings a model's raw height into a plausible standing height, trying
    metres, centimetres, inches and millimetres in turn; (1.0, note) when none fits."""
    lo, hi = PLAUSIBLE_HEIGHT_M
    if height_raw <= 0:
        return 1.0, "model has no height: scale 1 kept"
    for unit, factor in UNIT_GUESSES:
        if lo <= height_raw * factor <= hi:
            return factor, (f"scale {factor:g}: model is {height_raw:.4g} units tall, read as "
                            f"{unit} ({height_raw * factor:.2f} m)")
    return 1.0, (f"scale 1: model is {height_raw:.4g} units tall and no unit gives "
                 f"{lo}–{hi} m; set 'scale' in a character.json")


def guess_kind(extent: tuple[float, float, float]) -> str:
    """'quadruped' when the body is longer than it is tall, else 'humanoid'."""
    return "quadruped" if max(extent[0], extent[1]) > extent[2] else "humanoid"


def guess_forward(extent: tuple[float, float, float], kind: str, fmt: str
                  ) -> tuple[float, str]:
    """Yaw correction (deg, counter-clockwise about +Z) that turns the model's own forward to
    the contract's +X, estimated from its format's convention and checked on its shape.

    Convention: glTF assets face +Z (the glTF spec), which is -Y once converted to Z-up; Panda3D
    models face -Y (toward the default camera). Both mean a correction of +90°. The shape
    checks the axis: a biped's arms make its lateral extent the wider one, so it faces along
    the narrower horizontal axis; a quadruped faces along its longer one. When the shape says
    X instead of Y, the sign cannot be told apart from the mesh and +X (0°) is assumed.
    """
    ex, ey = extent[0], extent[1]
    convention = "glTF faces +Z (spec)" if fmt in ("glb", "gltf") else \
        "Panda3D models face -Y"
    if abs(ex - ey) <= 0.05 * max(ex, ey, 1e-9):
        return 90.0, f"yaw_correction_deg 90: {convention}; the shape cannot tell the axis"
    along_y = ey < ex if kind == "humanoid" else ey > ex
    if along_y:
        return 90.0, f"yaw_correction_deg 90: {convention}; the {kind}'s shape agrees (Y axis)"
    return 0.0, (f"yaw_correction_deg 0: the {kind}'s shape faces along X, not the convention's "
                 "Y; +X assumed — check a preview and set yaw_correction_deg")
