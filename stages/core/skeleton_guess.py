"""Guesses from a character's skeleton in its bind pose (paper §4.1): kind, forward axis, a clip
file's fit. The inventory records them beside the name-based ones of ``core.character_guess``.

Standard library only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .character_guess import name_tokens


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


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


