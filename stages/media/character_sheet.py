"""A character's guesses in one picture, before any GPU hour is spent on it: front and side views
of the model as the inventory measured it (bind pose, its scale and yaw correction applied, so
its own forward is the contract's +X), the measured height, the collision capsule, the ground
line and the facing arrow drawn in, the skeleton over the vertices, one side view per mapped
clip with its action key, and the guesses written beside them.

Orthographic point drawings (every vertex a dot): no renderer, no GPU, a fraction of a second a
character. A wrong kind, scale or facing shows at a glance: a character lying down, an arrow
pointing at its back, a capsule that does not fit.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

Vec = tuple[float, float, float]
PANEL = (300, 400)  # width, height of a view, px
CLIP_PANEL = (170, 220)
BG = (24, 26, 30)
POINT = (150, 160, 175)
BONE = (250, 200, 70)
CAPSULE = (80, 200, 255)
GROUND = (120, 200, 120)
ARROW = (255, 90, 90)
TEXT = (235, 235, 235)


@dataclass
class SheetInput:
    character_id: str
    points: list[Vec]  # model units, contract frame (Z up), bind pose
    joints: dict[str, Vec] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    scale: float = 1.0
    yaw_deg: float = 0.0
    height_m: float = 0.0
    capsule_radius_m: float = 0.0
    capsule_half_height_m: float = 0.0
    lines: list[str] = field(default_factory=list)  # kind, facing, clips... in words
    clips: list[tuple[str, str, list[Vec]]] = field(default_factory=list)  # action, clip, pts


def to_world(points: list[Vec], scale: float, yaw_deg: float) -> list[Vec]:
    """Model units → metres, turned by the yaw correction (the model's forward → +X)."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return [(scale * (c * x - s * y), scale * (s * x + c * y), scale * z) for x, y, z in points]


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):
        return ImageFont.load_default()


def _view(img, origin: tuple[int, int], size: tuple[int, int], pts: list[Vec],
          joints: dict[str, Vec], parents: dict[str, str | None], axis: str,
          sh: SheetInput, z0: float, ppm: float, title: str, arrow: bool = True) -> None:
    from PIL import ImageDraw

    d = ImageDraw.Draw(img)
    ox, oy = origin
    w, h = size
    d.rectangle([ox, oy, ox + w - 1, oy + h - 1], outline=(60, 64, 72))
    ground_y = oy + h - 30

    def px(p: Vec) -> tuple[float, float]:
        horiz = p[1] if axis == "front" else p[0]  # front: camera at +X (right = +Y)
        return ox + w / 2 + horiz * ppm, ground_y - (p[2] - z0) * ppm

    for p in pts:
        x, y = px(p)
        if ox <= x < ox + w and oy <= y < oy + h:
            d.point((x, y), fill=POINT)
    for j, p in joints.items():
        q = parents.get(j)
        if q in joints:
            d.line([px(joints[q]), px(p)], fill=BONE, width=2)
    d.line([ox + 5, ground_y, ox + w - 5, ground_y], fill=GROUND, width=2)
    r, hh = sh.capsule_radius_m * ppm, sh.capsule_half_height_m * ppm
    cx = ox + w / 2
    top, bottom = ground_y - 2 * r - 2 * hh, ground_y
    d.arc([cx - r, top, cx + r, top + 2 * r], 180, 360, fill=CAPSULE, width=2)
    d.arc([cx - r, bottom - 2 * r, cx + r, bottom], 0, 180, fill=CAPSULE, width=2)
    d.line([cx - r, top + r, cx - r, bottom - r], fill=CAPSULE, width=2)
    d.line([cx + r, top + r, cx + r, bottom - r], fill=CAPSULE, width=2)
    f = _font(13)
    if sh.height_m > 0:
        hx = ox + 18
        ht = ground_y - sh.height_m * ppm
        d.line([hx, ground_y, hx, ht], fill=TEXT, width=1)
        d.line([hx - 5, ht, hx + 5, ht], fill=TEXT, width=1)
        d.text((hx + 6, ht - 2), f"{sh.height_m:.2f} m", fill=TEXT, font=f)
    if arrow:
        ay = ground_y - 0.55 * sh.height_m * ppm
        if axis == "side":  # forward (+X) points right
            x1 = cx + max(r, 10) + 45
            d.line([cx, ay, x1, ay], fill=ARROW, width=3)
            d.polygon([(x1 + 10, ay), (x1, ay - 6), (x1, ay + 6)], fill=ARROW)
        else:  # front: the character looks at the viewer
            d.ellipse([cx - 7, ay - 7, cx + 7, ay + 7], outline=ARROW, width=3)
            d.ellipse([cx - 2, ay - 2, cx + 2, ay + 2], fill=ARROW)
    d.text((ox + 6, oy + 4), title, fill=TEXT, font=f)


def draw_sheet(sh: SheetInput, out: Path) -> Path:
    """Write ``out`` (PNG): front and side views with height, capsule, ground and facing, one
    side view per mapped clip, and the guesses in words."""
    from PIL import Image, ImageDraw

    pts = to_world(sh.points, sh.scale, sh.yaw_deg)
    names = list(sh.joints)
    jw = dict(zip(names, to_world([sh.joints[n] for n in names], sh.scale, sh.yaw_deg),
                  strict=True))
    z0 = min((p[2] for p in pts), default=0.0)
    extent = max([sh.height_m, 2 * (sh.capsule_radius_m + sh.capsule_half_height_m)]
                 + [2 * abs(c) for p in pts for c in p[:2]] + [0.1])
    ppm = min((PANEL[1] - 60) / max(extent, 1e-6), (PANEL[0] - 40) / max(extent, 1e-6))
    n_clips = len(sh.clips)
    per_row = 4
    clip_rows = math.ceil(n_clips / per_row)
    text_w = 460
    width = 2 * PANEL[0] + text_w + 30
    height = PANEL[1] + 20 + clip_rows * (CLIP_PANEL[1] + 10) + 10
    img = Image.new("RGB", (width, max(height, PANEL[1] + 20)), BG)
    _view(img, (10, 10), PANEL, pts, jw, sh.parents, "front", sh, z0, ppm,
          "front (bind pose)")
    _view(img, (20 + PANEL[0], 10), PANEL, pts, jw, sh.parents, "side", sh, z0, ppm,
          "side: forward ->")
    d = ImageDraw.Draw(img)
    f, fb = _font(13), _font(16)
    tx, ty = 30 + 2 * PANEL[0], 12
    d.text((tx, ty), sh.character_id, fill=TEXT, font=fb)
    ty += 24
    for line in sh.lines:
        for part in textwrap.wrap(line, 64) or [""]:
            if ty > PANEL[1]:
                break
            d.text((tx, ty), part, fill=TEXT, font=f)
            ty += 16
    cppm = ppm * CLIP_PANEL[1] / PANEL[1]
    for k, (action, clip, cpts) in enumerate(sh.clips):
        cw = to_world(cpts, sh.scale, sh.yaw_deg)
        if cw:  # in place: centre the posed body on the capsule axis
            mx = (min(p[0] for p in cw) + max(p[0] for p in cw)) / 2
            my = (min(p[1] for p in cw) + max(p[1] for p in cw)) / 2
            bx = (min(p[0] for p in pts) + max(p[0] for p in pts)) / 2 if pts else 0.0
            by = (min(p[1] for p in pts) + max(p[1] for p in pts)) / 2 if pts else 0.0
            cw = [(x - mx + bx, y - my + by, z) for x, y, z in cw]
        row, col = divmod(k, per_row)
        origin = (10 + col * (CLIP_PANEL[0] + 10), PANEL[1] + 20 + row * (CLIP_PANEL[1] + 10))
        _view(img, origin, CLIP_PANEL, cw, {}, {}, "side", sh,
              min((p[2] for p in cw), default=z0), cppm, f"{action}: {clip[:18]}",
              arrow=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    img.save(out)
    return out
