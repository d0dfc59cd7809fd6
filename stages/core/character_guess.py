"""What a character's files say about it when nobody wrote a sidecar (paper §4.1): which clip
plays which action, the model's units, its kind and its forward axis. Every answer is a guess
that the inventory records beside the value, so a user can see and override it. What the
skeleton says: ``core.skeleton_guess``.

Standard library only.
"""

from __future__ import annotations

import re

# plausible standing heights, m, and the units tried (in order) when a model is outside them
PLAUSIBLE_HEIGHT_M = (0.25, 3.0)
UNIT_GUESSES: tuple[tuple[str, float], ...] = (
    ("metres", 1.0), ("centimetres", 0.01), ("inches", 0.0254), ("millimetres", 0.001))
# a skeleton that says humanoid is first held to a person's height, in these units (Minetest
# and Irrlicht models are 10 units to the metre; Quake and Source characters are in inches)
HUMANOID_HEIGHT_M = (0.9, 2.6)
HUMANOID_UNIT_GUESSES: tuple[tuple[str, float], ...] = (
    ("metres", 1.0), ("centimetres", 0.01), ("decimetres (10 units to the metre)", 0.1),
    ("inches", 0.0254), ("millimetres", 0.001))


def name_tokens(name: str) -> list[str]:
    """'Walk_Back', 'walkBack', 'walk-back.egg.pz', 'Armature|Walk Back' → ['walk', 'back']
    (lower case; CamelCase, snake, kebab, spaces, dots, colons and Blender's '|' split;
    digits dropped)."""
    stem = re.sub(r"\.(egg\.pz|egg|glb|gltf|bam|fbx)$", "", name, flags=re.I)
    stem = re.sub(r"([a-z])([A-Z])", r"\1 \2", stem)
    stem = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", stem)
    return [t for t in re.split(r"[^A-Za-z]+", stem.lower()) if t]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# clip-name words → their stem; the stems say the action
_STEMS: dict[str, str] = {}
for _stem, _ws in {
    "walk": "walk walking walks walked walkcycle",
    "jog": "jog jogging jogs trot trotting",
    "run": "run running runs gallop galloping",
    "sprint": "sprint sprinting sprints",
    "move": "move moving locomotion",
    "forward": "forward forwards fwd ahead",
    "back": "back backward backwards bwd reverse retreat",
    "left": "left lt",
    "right": "right rt",
    "strafe": "strafe strafing side sidestep sidestepping",
    "idle": "idle idling idles breathing breath breathe stand standing rest resting survey "
            "surveying wait waiting",
    "look": "look looking",
    "around": "around",
    "turn": "turn turning",
}.items():
    for _w in _ws.split():
        _STEMS[_w] = _stem
# words that carry no meaning in a clip name (exporters' and stores' decoration)
_NOISE = _words("anim anims animation animations clip take action armature mixamo com layer "
                "cycle loop looped in place inplace root motion rm default baked")
# words that make a clip something else than plain locomotion (a clip with one still maps,
# but any plain clip beats it)
_OTHER = _words("jump jumping attack attacking die dying death dead hit hurt punch kick fall "
                "falling dance dancing crouch crouched crouching swim swimming fly flying fight "
                "fighting combat sword gun rifle pistol aim aiming shoot shooting injured limp "
                "drunk sneak sneaking crawl crawling climb climbing push pull carry sit sitting "
                "lie sleep sleeping wave waving talk talking yes no")
# for the same action, a walk beats a jog beats a run (Stage I moves at walking speed)
_PREFERENCE = ("walk", "forward", "move", "jog", "run", "sprint")


def _stems(name: str, ignore: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """(action stems, other words) of a clip name; ``ignore``: the character's own name."""
    stems, other = [], []
    for t in name_tokens(name):
        if t in _NOISE or t in ignore:
            continue
        if t in _STEMS:
            stems.append(_STEMS[t])
        else:
            other.append(t)
    return stems, other


def action_for_clip(name: str, ignore: frozenset[str] = frozenset()) -> str | None:
    """The action a clip's name says it animates, or None (jump, wave, turn in place, ...)."""
    stems, _ = _stems(name, ignore)
    s = set(stems)
    joined = "".join(name_tokens(name))
    if not s:
        for word, stem in (("walkback", "back"), ("strafeleft", "left"),
                           ("straferight", "right"), ("walkforward", "forward")):
            if word in joined:
                s = {stem, "walk"}
                break
    if not s or "turn" in s:
        return None
    moving = bool(s & {"walk", "jog", "run", "sprint", "move", "forward", "strafe"})
    if "back" in s and "left" in s:
        return "SA"
    if "back" in s and "right" in s:
        return "SD"
    if "forward" in s and "left" in s:
        return "WA"
    if "forward" in s and "right" in s:
        return "WD"
    if "back" in s:
        return "S"
    if "left" in s and (moving or s <= {"left"}):
        return "A"
    if "right" in s and (moving or s <= {"right"}):
        return "D"
    if moving:
        return "W"
    if "idle" in s or s == {"look", "around"} or s == {"look"}:
        return "IDLE"
    return None


def clip_rank(name: str, ignore: frozenset[str] = frozenset()
              ) -> tuple[int, int, int, int, str]:
    """Sort key: the plainest name first (no words of another activity, fewest extra words),
    then a walk before a jog before a run (and the word idle before its synonyms), then the
    shorter name."""
    stems, other = _stems(name, ignore)
    pref = min((_PREFERENCE.index(x) for x in stems if x in _PREFERENCE), default=len(_PREFERENCE))
    literal_idle = 0 if "idle" in name_tokens(name) else 1
    return (sum(1 for w in other if w in _OTHER), len(other), pref, literal_idle,
            f"{len(name):04d}{name}")


def map_clips(clips: list[str], character_name: str = "") -> tuple[dict[str, str], list[str]]:
    """Map clip names to actions by their names. Returns (action → clip, guesses) where the
    guesses say which clip was taken for which action (with its runner-up), and which clips
    were left unmapped and why."""
    ignore = frozenset(name_tokens(character_name)) - set(_STEMS)
    chosen: dict[str, str] = {}
    guesses: list[str] = []
    by_action: dict[str, list[str]] = {}
    for clip in clips:
        a = action_for_clip(clip, ignore)
        if a is None:
            stems, _ = _stems(clip, ignore)
            why = "a turn in place, not one of the actions" if "turn" in stems else \
                "no action word in its name"
            guesses.append(f"clip '{clip}' not mapped ({why})")
        else:
            by_action.setdefault(a, []).append(clip)
    for action in sorted(by_action):
        ranked = sorted(by_action[action], key=lambda c: clip_rank(c, ignore))
        chosen[action] = ranked[0]
        also = ", ".join(f"'{c}'" for c in ranked[2:])
        extra = "" if len(ranked) < 2 else f" (runner-up '{ranked[1]}'" + (
            f", also {also})" if also else ")")
        guesses.append(f"{action} <- clip '{ranked[0]}' by its name{extra}")
    return chosen, guesses


def guess_units(height_raw: float, model_name: str = "model.glb", humanoid: bool = False
                ) -> tuple[float, str]:
    """Scale that brings a model's raw height into a plausible standing height, trying
    metres, centimetres, inches and millimetres in turn; (1.0, note) when none fits, the note
    giving the character.json line that fixes it. ``humanoid`` (the skeleton says so): first
    the unit that makes it a person's height (HUMANOID_HEIGHT_M, decimetres among the units)."""
    lo, hi = PLAUSIBLE_HEIGHT_M
    if height_raw <= 0:
        return 1.0, "model has no height: scale 1 kept"
    if humanoid:
        hlo, hhi = HUMANOID_HEIGHT_M
        for unit, factor in HUMANOID_UNIT_GUESSES:
            if hlo <= height_raw * factor <= hhi:
                return factor, (f"scale {factor:g}: model is {height_raw:.4g} units tall, read "
                                f"as {unit} ({height_raw * factor:.2f} m, a person's height "
                                f"for a humanoid skeleton)")
    for unit, factor in UNIT_GUESSES:
        if lo <= height_raw * factor <= hi:
            return factor, (f"scale {factor:g}: model is {height_raw:.4g} units tall, read as "
                            f"{unit} ({height_raw * factor:.2f} m)")
    fix = 1.8 / height_raw
    return 1.0, (f"scale 1: model is {height_raw:.4g} units tall and no unit gives "
                 f"{lo}-{hi} m; to fix it write a character.json beside it: "
                 f'{{"model": "{model_name}", "scale": {fix:.4g}}} (for a 1.8 m character)')


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
    convention = "glTF faces +Z (spec)" if fmt in ("glb", "gltf") else (
        "FBX characters face +Z of their Y-up axes (-Y once upright)" if fmt == "fbx" else
        "Panda3D models face -Y")
    if abs(ex - ey) <= 0.05 * max(ex, ey, 1e-9):
        return 90.0, f"yaw_correction_deg 90: {convention}; the shape cannot tell the axis"
    along_y = ey < ex if kind == "humanoid" else ey > ex
    if along_y:
        return 90.0, f"yaw_correction_deg 90: {convention}; the {kind}'s shape agrees (Y axis)"
    return 0.0, (f"yaw_correction_deg 0: the {kind}'s shape faces along X, not the convention's "
                 "Y; +X assumed — check a preview and set yaw_correction_deg")


GENERIC_CLIP_NAMES = ("mixamo.com", "layer0", "take 001", "take001", "default", "animation",
                      "anim", "action", "armatureaction", "scene")


def clip_display_name(clip: str, file_stem: str) -> str:
    """A clip's name as a user reads it: Blender's ``Armature|mixamo.com|Layer0``, Mixamo's
    ``mixamo.com``, FBX's ``Take 001`` say nothing, so such a clip is named after its file."""
    parts = [p.strip().lower() for p in clip.split("|") if p.strip()]
    meaningful = [p for p in parts if p not in GENERIC_CLIP_NAMES and p != "armature"
                  and not re.fullmatch(r"(armature|take|layer|anim|action)[ ._]?\d*", p)]
    return clip if meaningful else file_stem
