"""One five-view frame of a character, through the real stages: inventory → Stage I → Stage II
(encoded videos) → the frame decoded back from each view's video and tiled with labels.

Used for docs/ before/after figures; runs against whichever checkout is on PYTHONPATH:

    PYTHONPATH=. .venv/bin/python scripts/five_view_frame.py --library /tmp/lib \
        --level Panda3DSamples/environment --character Panda3DSamples/Panda --out f.png

With ``--frame -1`` the frame with the most collapsed (or occluded) external views is taken.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("--level", required=True)
    ap.add_argument("--character", required=True)
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--frame", type=int, default=-1)
    ap.add_argument("--index", type=int, default=0, help="trajectory index")
    ap.add_argument("--width", type=int, default=480)
    ap.add_argument("--height", type=int, default=270)
    ap.add_argument("--title", default="")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    from stages.config import load_params
    from stages.inventory import run_inventory
    from stages.media.video import read_frames
    from stages.render import run_render
    from stages.trajectories import run_trajectories

    lib = Path(a.library)
    cfg = load_params(overrides=[
        f"trajectories.per_level={a.index + 1}", f"trajectories.frames={a.frames}",
        f"trajectories.levels=[{a.level}]", f"trajectories.characters=[{a.character}]",
        f"trajectories.cameras.width={a.width}", f"trajectories.cameras.height={a.height}",
        f"render.width={a.width}", f"render.height={a.height}", "render.spatial_samples=2",
        "render.temporal_samples=1", "render.mask_scale=1", "render.warmup_frames=2"])
    inv = run_inventory(lib, cfg.inventory, cfg.library.overrides_file)
    work = Path(tempfile.mkdtemp(prefix="fiveview-"))
    fails = run_trajectories(cfg, inv.levels, inv.characters, lib, work / "traj")
    if len(fails):
        raise SystemExit(f"Stage I failed: {fails.to_dict('records')}")
    index, rfails = run_render(cfg.render, work / "traj", work / "renders")
    if len(rfails):
        raise SystemExit(f"Stage II failed: {rfails.to_dict('records')}")
    row = index.sort_values("trajectory").iloc[a.index]
    d = work / "renders" / row["path"]
    cams = pd.read_parquet(d / "cameras.parquet")
    frame = a.frame
    if frame < 0:
        ext = cams[cams["view"] != "fp"].copy()
        bad = ext["collapsed"] if "collapsed" in ext else ext["boom_m"] < 0.3 * ext[
            "boom_desired_m"]
        ext["bad"] = bad.astype(int) + ext["occluded"].astype(int) * 0.1
        frame = int(ext.groupby("frame")["bad"].sum().idxmax())
    views = ("back", "left", "right", "top", "fp")
    tiles = []
    for v in views:
        img = read_frames(d / f"{v}.mp4")[frame]
        c = cams[(cams["view"] == v) & (cams["frame"] == frame)].iloc[0]
        label = v
        if v != "fp":
            ratio = c["boom_m"] / c["boom_desired_m"] if c["boom_desired_m"] else 1.0
            label += f"  boom {c['boom_m']:.2f} m ({100 * ratio:.0f}%)"
            if ratio < 0.3:
                label += " COLLAPSED"
        im = Image.fromarray(np.asarray(img))
        dr = ImageDraw.Draw(im)
        dr.rectangle([0, 0, im.width, 16], fill=(0, 0, 0))
        dr.text((4, 2), label, fill=(255, 255, 255))
        tiles.append(im)
    W, H = tiles[0].size
    sheet = Image.new("RGB", (W * 3, H * 2 + 20), (20, 20, 20))
    for i, t in enumerate(tiles):
        sheet.paste(t, ((i % 3) * W, 20 + (i // 3) * H))
    meta = json.loads((d / "meta.json").read_text())
    ImageDraw.Draw(sheet).text(
        (4, 4), f"{a.title}  {a.level}  {a.character}  {row['trajectory']} frame {frame}  "
        f"({meta.get('lineage', {}).get('code_version', '?')})", fill=(255, 255, 255))
    sheet.save(a.out)
    print(f"{a.out}: frame {frame} of {row['path']}")


if __name__ == "__main__":
    main()
