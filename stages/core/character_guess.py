"""What a character's files say about it when nobody wrote a sidecar (paper §4.1): which clip
plays which action, the model's units, its kind and its forward axis. Every answer is a guess
that the inventory records beside the value, so a user can see and override it.

Standard library only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

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


# ---------------------------------------------------------------- skeletons

_LEG = _words("leg upleg thigh knee calf shin foot ankle toe toes toebase ball heel")
_ARM = _words("arm upperarm forearm shoulder clavicle hand elbow wrist palm")
_HEAD = _words("head neck")
_TORSO = _words("spine chest torso pelvis hips hip abdomen")
_QUADRUPED = _words("tail paw hoof front hind rear")
_TOE = _words("toe toes toebase ball")
_HAND = _words("hand wrist palm")


_SIDE_PLACE = {"lf": ("l", "front"), "rf": ("r", "front"), "lr": ("l", "rear"),
               "rr": ("r", "rear"), "lh": ("l", "hind"), "rh": ("r", "hind")}


def joint_words(name: str) -> tuple[str | None, frozenset[str]]:
    """(side 'l'/'r'/None, words) of a joint name in the common conventions: Mixamo
    'mixamorig:LeftUpLeg', Unreal 'thigh_l', Blender 'thigh.L' / 'DEF-thigh.L', Unity and
    Godot 'LeftUpperLeg', 3ds Max 'Bip01 L Thigh', 'L_Hip'."""
    raw = re.sub(r"^.*:", "", name)  # namespace (mixamorig:)
    toks = name_tokens(raw)
    side = None
    words = []
    for t in toks:
        if t in _SIDE_PLACE:  # Panda3D's panda: lf / rf / lr / rr (left-front ... right-rear)
            side, place = _SIDE_PLACE[t]
            words.append(place)
        elif t in ("l", "left", "lft"):
            side = "l"
        elif t in ("r", "right", "rgt"):
            side = "r"
        elif t.startswith("left") and len(t) > 4:
            side, t = "l", t[4:]
            words.append(t)
        elif t.startswith("right") and len(t) > 5:
            side, t = "r", t[5:]
            words.append(t)
        else:
            words.append(t)
    joined = "".join(words)
    out = set(words)
    for compound, parts in (("upleg", "upleg"), ("upperleg", "upleg"), ("upperarm", "upperarm"),
                            ("forearm", "forearm"), ("lowerleg", "calf"), ("lowerarm", "forearm"),
                            ("toebase", "toe")):
        if compound in joined:
            out.add(parts)
    return side, frozenset(out)


@dataclass
class SkeletonGuess:
    kind: str | None  # humanoid | quadruped | None (the skeleton does not say)
    kind_evidence: str
    forward: tuple[float, float] | None  # the model's own forward, contract frame (x, y)
    facing_evidence: str


def _unit2(v: tuple[float, float]) -> tuple[float, float] | None:
    n = math.hypot(*v)
    return (v[0] / n, v[1] / n) if n > 1e-9 else None


def _feet_clusters(points: list[tuple[float, float, float]], radius: float) -> int:
    """Groups of points closer than ``radius`` (single linkage, horizontal distance)."""
    groups: list[list[tuple[float, float, float]]] = []
    for p in points:
        near = [g for g in groups if any(math.hypot(p[0] - q[0], p[1] - q[1]) < radius
                                         for q in g)]
        merged = [p]
        for g in near:
            merged.extend(g)
            groups.remove(g)
        groups.append(merged)
    return len(groups)


def analyse_skeleton(joints: dict[str, tuple[float, float, float]],
                     parents: dict[str, str | None], z_min: float, height: float,
                     walk_travel: tuple[float, float, float] | None = None) -> SkeletonGuess:
    """Kind and forward axis from a skeleton in its bind pose (contract frame), never from
    the body's widest extent: a T-pose biped is wider than it is deep or tall.

    Kind: joint names first (arms with hands above the hips and two legs: humanoid; a tail,
    paws, hooves, front/hind legs, or "hands" on the ground: quadruped), then topology (how
    many feet stand on the ground). Forward: left/right joint pairs (forward = up x right),
    else toes ahead of ankles, else head ahead of tail/hips, else the walk clip's travel."""
    if not joints or height <= 0:
        return SkeletonGuess(None, "no skeleton", None, "no skeleton")
    info = {n: joint_words(n) for n in joints}
    children: dict[str, list[str]] = {}
    for n, p in parents.items():
        if p is not None:
            children.setdefault(p, []).append(n)
    low = z_min + 0.15 * height

    def has(words: frozenset[str], side: str | None) -> list[str]:
        return [n for n, (s, w) in info.items() if s == side and w & words]

    legs = {s: has(_LEG, s) for s in ("l", "r")}
    arms = {s: has(_ARM, s) for s in ("l", "r")}
    hands = [n for s in ("l", "r") for n in has(_HAND, s)]
    head = [n for n, (_, w) in info.items() if w & _HEAD]
    quad_words = sorted({w for _, ws in info.values() for w in ws & _QUADRUPED})
    leaves = [n for n in joints if not children.get(n)]
    feet = [joints[n] for n in leaves if joints[n][2] < low]
    n_feet = _feet_clusters(feet, 0.08 * height)
    named_biped = all(legs.values()) and all(arms.values())
    hands_high = bool(hands) and all(joints[h][2] > z_min + 0.3 * height for h in hands)
    kind: str | None
    if named_biped and hands_high:
        kind, why = "humanoid", ("joint names: two arms with hands above the hips, two legs"
                                 + (", a head" if head else ""))
    elif named_biped and hands and not hands_high:
        kind, why = "quadruped", "joint names say arms, but their 'hands' stand on the ground"
    elif quad_words:
        kind, why = "quadruped", f"joint names: {', '.join(quad_words)}"
    elif named_biped and head and not hands:
        # blocky rigs (Minetest's player: Body, Head, Arm_Left ... Leg_Right) name no hands
        kind, why = "humanoid", "joint names: two arms, two legs and a head (no hands named)"
    elif n_feet >= 3:
        kind, why = "quadruped", f"topology: {n_feet} feet on the ground"
    elif n_feet in (1, 2) and sum(1 for n in leaves if joints[n][2] > z_min + 0.4 * height) >= 2:
        kind, why = "humanoid", (f"topology: {n_feet} feet on the ground, limbs and a head "
                                 "above the hips")
    else:
        kind, why = None, "skeleton neither names its limbs nor stands on 2 or 4 feet"

    # facing
    evidence: list[tuple[str, tuple[float, float]]] = []
    pairs = []
    for n, (s, w) in info.items():
        if s != "l":
            continue
        for m, (s2, w2) in info.items():
            if s2 == "r" and w2 == w and w:
                pairs.append((n, m))
                break
    if pairs:
        rx = sum(joints[m][0] - joints[n][0] for n, m in pairs)
        ry = sum(joints[m][1] - joints[n][1] for n, m in pairs)
        f = _unit2((-ry, rx))
        if f:
            evidence.append((f"{len(pairs)} left/right joint pairs (e.g. {pairs[0][0]} / "
                             f"{pairs[0][1]}): forward = up x right", f))
    toe_vecs = []
    for n, (_, w) in info.items():
        p = parents.get(n)
        if w & _TOE and p is not None and p in joints:
            toe_vecs.append((joints[n][0] - joints[p][0], joints[n][1] - joints[p][1]))
    what = "toe joints"
    if not toe_vecs:  # nameless: the lowest leaves (toe tips, paws) ahead of their parents
        what = "lowest leaf joints"
        for n in leaves:
            p = parents.get(n)
            if joints[n][2] < low and p is not None and p in joints:
                toe_vecs.append((joints[n][0] - joints[p][0], joints[n][1] - joints[p][1]))
    if toe_vecs:
        f = _unit2((sum(v[0] for v in toe_vecs), sum(v[1] for v in toe_vecs)))
        if f and math.hypot(sum(v[0] for v in toe_vecs),
                            sum(v[1] for v in toe_vecs)) > 0.01 * height:
            evidence.append((f"toes ahead of ankles ({len(toe_vecs)} {what})", f))
    tail = [n for n, (_, w) in info.items() if "tail" in w]
    hips = [n for n, (_, w) in info.items() if w & _words("hips hip pelvis") and not
            info[n][0]]
    if head and (tail or hips):
        hz = max(head, key=lambda n: joints[n][2])
        back = joints[tail[0]] if tail else joints[hips[0]]
        f = _unit2((joints[hz][0] - back[0], joints[hz][1] - back[1]))
        if f and kind == "quadruped":
            evidence.append((f"head ahead of {'tail' if tail else 'hips'}", f))
    if walk_travel is not None:
        f = _unit2((walk_travel[0], walk_travel[1]))
        if f and math.hypot(walk_travel[0], walk_travel[1]) > 0.05 * height:
            evidence.append(("the walk clip's root travel", f))
    if not evidence:
        return SkeletonGuess(kind, why, None, "no facing evidence in the skeleton")
    main_why, fwd = evidence[0]
    agree = [e for e, f in evidence[1:] if f[0] * fwd[0] + f[1] * fwd[1] > 0.7]
    disagree = [e for e, f in evidence[1:] if f[0] * fwd[0] + f[1] * fwd[1] <= 0.7]
    text = main_why + (f"; agrees: {', '.join(agree)}" if agree else "") + (
        f"; disagrees: {', '.join(disagree)}" if disagree else "")
    return SkeletonGuess(kind, why, fwd, text)


def yaw_for_forward(forward: tuple[float, float], snap_deg: float = 15.0) -> float:
    """The yaw correction (deg, counter-clockwise about +Z) that turns ``forward`` to +X,
    snapped to the nearest multiple of 90 deg when within ``snap_deg`` of it."""
    yaw = -math.degrees(math.atan2(forward[1], forward[0]))
    snapped = 90.0 * round(yaw / 90.0)
    if abs(yaw - snapped) <= snap_deg:
        yaw = snapped
    yaw = (yaw + 180.0) % 360.0 - 180.0
    return 180.0 if yaw == -180.0 else yaw + 0.0


def skeleton_match(model_parents: dict[str, str | None], clip_parents: dict[str, str | None]
                   ) -> float:
    """How well a clip file's skeleton fits a character's (0..1): the share of the smaller
    skeleton's joints that the other has, times the share of those shared joints whose parent
    (when both name one that is shared) agrees."""
    a, b = set(model_parents), set(clip_parents)
    shared = a & b
    if not shared:
        return 0.0
    names = len(shared) / min(len(a), len(b))
    checked = [j for j in shared if model_parents[j] in shared and clip_parents[j] in shared]
    same = sum(1 for j in checked if model_parents[j] == clip_parents[j])
    return names * (same / len(checked) if checked else 1.0)


GENERIC_CLIP_NAMES = ("mixamo.com", "layer0", "take 001", "take001", "default", "animation",
                      "anim", "action", "armatureaction", "scene")


def clip_display_name(clip: str, file_stem: str) -> str:
    """A clip's name as a user reads it: Blender's ``Armature|mixamo.com|Layer0``, Mixamo's
    ``mixamo.com``, FBX's ``Take 001`` say nothing, so such a clip is named after its file."""
    parts = [p.strip().lower() for p in clip.split("|") if p.strip()]
    meaningful = [p for p in parts if p not in GENERIC_CLIP_NAMES and p != "armature"
                  and not re.fullmatch(r"(armature|take|layer|anim|action)[ ._]?\d*", p)]
    return clip if meaningful else file_stem
