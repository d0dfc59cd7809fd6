"""`wmforge characters`: a picture of every guess the inventory made about each character, before
any GPU hour is spent on it — one PNG per character under ``data/inventory/sheets/`` (front and
side views in the bind pose with the measured height, capsule, ground line and facing arrow,
one frame of each mapped clip with its action key, the guesses in words) and an ``index.html``
that shows them all, each with its reasons.

Reads ``characters.parquet`` and the library it was made from; never changes either. A model
that cannot be drawn gets a line on the page with the reason, never a crash.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from .core.gltf import GltfError, read_buffers, read_gltf
from .core.model_probe import ProbeError, model_format, to_z_up
from .core.skin import SkinError, bind_pose, clip_pose
from .media.character_sheet import SheetInput, draw_sheet
from .shared.inventory_characters import probe_file

MAX_BYTES = 256_000_000


def _clip_points(model: Path, clip_key: str, doc: dict, bufs: list[bytes], cs: str
                 ) -> list[tuple[float, float, float]]:
    """The model's vertices a quarter into clip ``clip_key`` (a clip inside the model, or a
    glTF clip-only file beside it posing the model's joints by name)."""
    conv = to_z_up(cs)
    names = [str(a.get("name") or f"anim{i}") for i, a in enumerate(doc.get("animations", []))]
    if clip_key in names:
        pose = clip_pose(doc, bufs, names.index(clip_key), 0.25)
    elif model_format(model.parent / clip_key) in ("glb", "gltf"):
        cf = model.parent / clip_key
        cdoc, cbin = read_gltf(cf)
        cbufs = read_buffers(cdoc, cbin, cf.parent)
        pose = clip_pose(cdoc, cbufs, 0, 0.25, target=doc)
    else:
        return []
    return bind_pose(doc, bufs, conv, pose).points[::4]


def sheet_for(root: Path, r: Any, out_dir: Path) -> Path:
    """Draw one character's sheet; ProbeError/SkinError/GltfError/OSError when it cannot."""
    model = root / str(r.model_path)
    probe = probe_file(model, MAX_BYTES, r.up_axis if isinstance(r.up_axis, str) else None)
    points = list(probe.bind_points)
    if not points and probe.bounds_min and probe.bounds_max:  # egg, FBX: the box corners
        lo, hi = probe.bounds_min, probe.bounds_max
        points = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                  for z in (lo[2], hi[2])]
    amap = json.loads(str(r.animation_json or "{}"))
    guesses = json.loads(str(r.guesses or "[]"))
    lines = [f"kind {r.kind}; scale {r.scale:g}; yaw_correction_deg {r.yaw_correction_deg:g}",
             f"height {r.visual_height_m:.2f} m; capsule r {r.capsule_radius_m:.2f} m, "
             f"total {2 * (r.capsule_radius_m + r.capsule_half_height_m):.2f} m",
             "clips: " + ", ".join(f"{a}={c}" for a, c in amap.items() if c)]
    lines += [f"- {g}" for g in guesses]
    clips: list[tuple[str, str, list]] = []
    if probe.format == "gltf":
        doc, binary = read_gltf(model)
        bufs = read_buffers(doc, binary, model.parent)
        done: set[str] = set()
        for action in ("IDLE", "W", "S", "A", "D"):
            c = amap.get(action)
            if c and c not in done:
                done.add(c)
                try:
                    clips.append((action, c, _clip_points(model, c, doc, bufs,
                                                          probe.coordinate_system)))
                except (SkinError, GltfError, OSError, KeyError, IndexError) as exc:
                    lines.append(f"clip {c}: not drawn ({exc})")
    sh = SheetInput(character_id=str(r.character_id), points=points, joints=probe.joints,
                    parents=probe.joint_parents, scale=float(r.scale),
                    yaw_deg=float(r.yaw_correction_deg), height_m=float(r.visual_height_m),
                    capsule_radius_m=float(r.capsule_radius_m),
                    capsule_half_height_m=float(r.capsule_half_height_m), lines=lines,
                    clips=clips)
    return draw_sheet(sh, out_dir / (str(r.character_id).replace("/", "__") + ".png"))


def write_sheets(root: Path, characters: pd.DataFrame, out_dir: Path) -> list[tuple[str, str]]:
    """A sheet per character row and ``index.html``; returns (character, png or reason)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done: list[tuple[str, str]] = []
    for r in characters.itertuples():
        cid = str(r.character_id)
        if not r.ok:
            done.append((cid, f"not drawn: {r.reason!s}: {r.animation_notes or ''!s}"))
            continue
        try:
            done.append((cid, sheet_for(root, r, out_dir).name))
        except (ProbeError, SkinError, GltfError, OSError, ValueError, KeyError) as exc:
            done.append((cid, f"not drawn: {type(exc).__name__}: {exc}"))
    items = []
    for cid, what in done:
        body = (f'<img src="{html.escape(what)}" alt="{html.escape(cid)}">'
                if what.endswith(".png") else f"<p>{html.escape(what)}</p>")
        items.append(f"<section><h2>{html.escape(cid)}</h2>{body}</section>")
    (out_dir / "index.html").write_text(
        "<!doctype html><meta charset='utf-8'><title>wmforge characters</title>"
        "<style>body{background:#181a1e;color:#eee;font-family:sans-serif}"
        "img{max-width:100%}</style><h1>Characters as the inventory measured them</h1>"
        + "".join(items), encoding="utf-8")
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge characters", description=__doc__.splitlines()[0])
    ap.add_argument("--library", required=True, help="the library root the inventory read")
    ap.add_argument("--inventory", default="data/inventory",
                    help="folder holding characters.parquet (default data/inventory)")
    ap.add_argument("--out", default=None, help="default: <inventory>/sheets")
    args = ap.parse_args(argv)
    chars = pd.read_parquet(Path(args.inventory) / "characters.parquet")
    out = Path(args.out or Path(args.inventory) / "sheets")
    for cid, what in write_sheets(Path(args.library), chars, out):
        print(f"{cid}: {what}")
    print(f"index: {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
