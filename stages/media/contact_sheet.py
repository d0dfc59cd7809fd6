"""A screening contact sheet (paper §4.2: the manual look): one row per clip — back-view frames
spread over the clip and a top-view frame, each tile at least ``MIN_TILE_W`` px wide with the
clip's reasons written on it — and, for a clip that never rendered, a panel with its reason and
the engine's own error text."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

MIN_TILE_W = 320
OK_COLOR = (90, 200, 120)
FAIL_COLOR = (235, 90, 80)


@dataclass
class SheetClip:
    label: str  # "traj_0001 CharacterPack/Alex"
    render_dir: Path | None  # None: the clip did not render
    reasons: list[str] = field(default_factory=list)
    detail: str = ""  # the engine's error text for a clip that failed


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the small bitmap font
        return ImageFont.load_default()


def _frames(d: Path, per_clip: int) -> list:
    from .video import read_frames

    back = read_frames(d / "back.mp4")
    top = read_frames(d / "top.mp4")
    picks = [back[round(i * (len(back) - 1) / max(1, per_clip - 1))] for i in range(per_clip)]
    return picks + [top[len(top) // 2]]


def contact_sheet(level_id: str, clips: list[SheetClip], verdict: str, reasons: list[str],
                  out: Path, tile_w: int = MIN_TILE_W, per_clip: int = 4) -> None:
    """Write ``out`` (PNG): a header with the level's verdict and reasons, then one row per
    clip, every tile ``max(tile_w, MIN_TILE_W)`` px wide and labelled with its reasons."""
    from PIL import Image, ImageDraw

    tw = max(int(tile_w), MIN_TILE_W)
    rows = [(c, _frames(c.render_dir, per_clip) if c.render_dir is not None else [])
            for c in clips]
    th = round(tw * 9 / 16)
    for _, imgs in rows:
        if imgs:
            th = round(tw * imgs[0].shape[0] / imgs[0].shape[1])
            break
    big, small = _font(max(14, tw // 18)), _font(max(12, tw // 24))
    head, label_h, banner = 34, 24, max(20, tw // 14)
    row_h = label_h + th
    width = tw * (per_clip + 1)
    sheet = Image.new("RGB", (width, head + row_h * max(1, len(rows))), (24, 24, 28))
    draw = ImageDraw.Draw(sheet)
    color = OK_COLOR if verdict == "pass" else FAIL_COLOR
    draw.text((6, 6), f"{level_id}: {verdict.upper()}  {' '.join(reasons)}", fill=color,
              font=big)
    for i, (clip, imgs) in enumerate(rows):
        y = head + i * row_h
        text = " ".join(clip.reasons) or "ok"
        ccol = OK_COLOR if not clip.reasons else FAIL_COLOR
        draw.text((6, y + 3), f"{clip.label}: {text}", fill=(210, 210, 210), font=small)
        if not imgs:
            draw.rectangle([0, y + label_h, width - 1, y + row_h - 1], fill=(58, 38, 40))
            draw.text((10, y + label_h + 8), f"not rendered: {text}", fill=FAIL_COLOR, font=big)
            wrap = max(20, width // max(7, tw // 40))
            lines = textwrap.wrap(clip.detail or "(no error text)", wrap)[:6]
            draw.multiline_text((10, y + label_h + 16 + banner), "\n".join(lines),
                                fill=(230, 210, 210), font=small)
            continue
        for j, img in enumerate(imgs):
            x = j * tw
            sheet.paste(Image.fromarray(img).resize((tw, th)), (x, y + label_h))
            # the clip's reasons on every tile: a judge never reads a tile without them
            draw.rectangle([x, y + row_h - banner, x + tw - 1, y + row_h - 1], fill=(0, 0, 0))
            draw.text((x + 6, y + row_h - banner + 2), text, fill=ccol, font=small)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(out, optimize=False)
