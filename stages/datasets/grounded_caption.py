"""Dense captions written from what the engine recorded, so nothing can be invented.

Every clause comes from a column of the trajectory contract or from the inventory: the level and
its category and lighting, the character, the recorded actions run-length encoded into holds
(with the distance covered, the turn, the climb, and whether the character was blocked or
airborne), the events (spawn, escape, respawn), and how each of the five cameras moves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ACTION_PHRASES = {
    "W": "{verb} forward", "S": "{verb} backward", "A": "strafes left", "D": "strafes right",
    "WA": "{verb} diagonally forward-left", "WD": "{verb} diagonally forward-right",
    "SA": "backs away to the left", "SD": "backs away to the right", "IDLE": "stands still",
}
VERBS = {"walk": "walks", "fly": "flies", "swim": "swims"}
VIEW_NAMES = {"back": "the chase camera behind the character",
              "left": "the side camera on the character's left",
              "right": "the side camera on the character's right",
              "top": "the top-down camera", "fp": "the first-person camera"}


@dataclass(frozen=True)
class Hold:
    """A run of frames with one action."""

    action: str
    start: int
    end: int  # exclusive


def holds(actions: Sequence[str]) -> list[Hold]:
    out: list[Hold] = []
    start = 0
    for i in range(1, len(actions) + 1):
        if i == len(actions) or actions[i] != actions[start]:
            out.append(Hold(str(actions[start]), start, i))
            start = i
    return out


def _unwrap_deg(values: Sequence[float]) -> list[float]:
    out = [float(values[0])] if values else []
    for v in values[1:]:
        d = (float(v) - out[-1] + 180.0) % 360.0 - 180.0
        out.append(out[-1] + d)
    return out


def _dur(n: int, fps: int) -> str:
    return f"{n / fps:.1f} s"


def describe_motion(frames: dict[str, Sequence], fps: int, name: str, locomotion: str = "walk"
                    ) -> tuple[str, list[dict]]:
    """One sentence per hold, joined: what the character does over time. Also returns the
    time-coded phrases ``[{frame, end, phrase}]``."""
    actions = [str(a) for a in frames["action"]]
    n = len(actions)
    xs, ys, zs = (list(map(float, frames[k])) for k in ("pos_x", "pos_y", "pos_z"))
    yaw = _unwrap_deg([float(y) for y in frames["yaw_deg"]])
    grounded = [bool(g) for g in frames["grounded"]]
    events = [str(e) for e in frames["event"]]
    speed = [float(s) for s in frames["speed"]]
    verb = VERBS.get(locomotion, "moves")
    phrases: list[dict] = []
    for h in holds(actions):
        seg = range(h.start, h.end)
        dist = sum(math.hypot(xs[i] - xs[i - 1], ys[i] - ys[i - 1]) for i in seg if i > h.start)
        turn = yaw[h.end - 1] - yaw[h.start]
        climb = zs[h.end - 1] - zs[h.start]
        airborne = sum(1 for i in seg if not grounded[i]) / len(seg)
        p = ACTION_PHRASES.get(h.action, h.action).format(verb=verb)
        p += f" for {_dur(h.end - h.start, fps)}"
        details = []
        moving = h.action != "IDLE"
        peak = max(speed[i] for i in seg)
        if moving and dist < 0.15 * max(1e-6, peak * (h.end - h.start) / fps) and dist < 0.3:
            details.append("but is blocked and barely moves, stopping by an obstacle")
        elif moving and dist >= 0.05:
            details.append(f"covering {dist:.1f} m")
        if abs(turn) >= 20:
            details.append(f"turning {'left' if turn > 0 else 'right'} by {abs(turn):.0f}°")
        if climb >= 0.3 and locomotion != "fly":
            details.append(f"climbing {climb:.1f} m")
        elif climb <= -0.3 and locomotion != "fly":
            details.append(f"descending {-climb:.1f} m")
        elif abs(climb) >= 0.3:
            details.append(f"{'rising' if climb > 0 else 'sinking'} {abs(climb):.1f} m")
        if airborne > 0.3 and locomotion == "walk":
            details.append("dropping through the air for part of it")
        if details:
            p += ", " + ", ".join(details)
        for i in seg:
            if events[i] == "respawn":
                p += f"; at {i / fps:.1f} s it is respawned at a new spot"
            elif events[i] == "escape" and i > 0:
                p += f"; at {i / fps:.1f} s it turns to escape a dead end"
        phrases.append({"frame": h.start, "end": h.end, "phrase": p})
    if not phrases:
        return f"{name} does nothing.", phrases
    parts = [x["phrase"] for x in phrases]
    if len(parts) == 1:
        body = parts[0]
    else:
        body = ", then ".join(parts[:-1]) + ", and finally " + parts[-1]
    return f"Over {_dur(n, fps)}, {name} {body}.", phrases


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2] if s else 0.0


def describe_camera(view: str, cam: dict[str, Sequence], char_z: Sequence[float]) -> str:
    """How one view's camera moves, from its recorded poses (cameras.parquet rows of a view)."""
    fwd = [(2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)) for w, x, y, z in
           zip(cam["rot_w"], cam["rot_x"], cam["rot_y"], cam["rot_z"], strict=True)]
    heading = _unwrap_deg([math.degrees(math.atan2(f[1], f[0])) for f in fwd])
    pan = heading[-1] - heading[0] if heading else 0.0
    boom = [float(b) for b in cam["boom_m"]]
    occluded = sum(1 for o in cam["occluded"] if bool(o)) / max(1, len(boom))
    fov = _median([float(f) for f in cam["fov_deg"]])
    height = _median([float(z) - float(c) for z, c in zip(cam["pos_z"], char_z, strict=True)])
    if view == "top":
        s = f"The top-down camera looks straight down from {height:.1f} m above the character"
    elif view == "fp":
        s = "The first-person camera sits at eye height and looks where the character faces"
    else:
        side = {"back": "from behind", "left": "from its left", "right": "from its right"}[view]
        s = (f"{VIEW_NAMES[view].capitalize()} follows the character {side} at about "
             f"{_median(boom):.1f} m")
        if occluded > 0.02:
            s += (f", pulling in to {min(boom):.1f} m when geometry blocks the view "
                  f"({occluded:.0%} of frames)")
    if abs(pan) >= 20 and view != "top":
        s += f", panning {'left' if pan > 0 else 'right'} by {abs(pan):.0f}° overall"
    elif view != "top":
        s += ", keeping a steady heading"
    return s + f" (horizontal field of view {fov:.0f}°)."


def level_sentence(level_id: str, category: str | None, lighting: str | None,
                   width: int, height: int) -> str:
    pack, _, level = level_id.partition("/")
    cat = category if category and category not in ("uncategorized", "nan") else "3D"
    light = f" under {lighting} lighting" if lighting and lighting != "nan" else ""
    where = "an interior" if cat == "interior" else f"a {cat} environment"
    return (f"A rendered scene in {level or pack}, {where} from the {pack} asset pack{light}, "
            f"shown at {width}x{height}.")


def character_sentence(name: str, kind: str | None, height_m: float | None) -> str:
    k = f"a {kind} character" if kind and kind != "nan" else "a character"
    h = f" about {height_m:.1f} m tall" if height_m and height_m > 0.3 else ""
    return f"The main character is {name}, {k}{h}."


def grounded_captions(frames: dict[str, Sequence], cameras: dict[str, dict[str, Sequence]],
                      fps: int, level: dict, character: dict, size: tuple[int, int]
                      ) -> dict:
    """The clip caption, one caption per view, and the time-coded motion phrases."""
    name = str(character.get("name") or character.get("character_id", "the character"))
    env = level_sentence(str(level.get("level_id", "")), level.get("category"),
                         level.get("lighting"), *size)
    who = character_sentence(name, character.get("kind"), character.get("visual_height_m"))
    motion, phrases = describe_motion(frames, fps, name, str(character.get("locomotion") or
                                                             "walk"))
    cams = {v: describe_camera(v, c, frames["pos_z"]) for v, c in cameras.items()}
    per_view = {v: f"{env} {who} {motion} Seen through {VIEW_NAMES[v]}. {cams[v]}"
                for v in cameras}
    caption = f"{env} {who} {motion} Five synchronized views: " + " ".join(cams.values())
    return {"caption": caption, "views": per_view, "phrases": phrases}
