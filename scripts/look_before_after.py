"""Before/after figures of Stage II's look (issue #20): the same trajectories and frames rendered
by an older checkout's Stage II and by this one, five views each; per level the mean luma and
BRISQUE of both, and the share of levels inside the paper's luminance band (25 < luma < 140).

    .venv/bin/python scripts/look_before_after.py --old /path/to/old/checkout \
        --library /tmp/lib --out docs/look_before_after

The old checkout makes the trajectories (its Stage I and its library format) and renders them;
this checkout renders the very same trajectory folders. Writes <out>.png (grid: per level a
before row and an after row) and <out>.json (the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
VIEWS = ("back", "left", "right", "top", "fp")

STAGE = r"""
import sys, json
from pathlib import Path
from stages.config import load_params
from stages.inventory import run_inventory
from stages.render import run_render
from stages.trajectories import run_trajectories
lib, traj, out, levels, w, h, frames, make = sys.argv[1:9]
cfg = load_params(overrides=[
    "trajectories.per_level=1", f"trajectories.frames={frames}",
    f"trajectories.levels=[{levels}]", "trajectories.characters=[CharacterPack/Alex]",
    f"render.width={w}", f"render.height={h}", "render.spatial_samples=2",
    "render.temporal_samples=1", "render.mask_scale=1", "render.warmup_frames=2",
    "render.preview=false"])
if make == "1":
    inv = run_inventory(Path(lib), cfg.inventory, cfg.library.overrides_file)
    f = run_trajectories(cfg, inv.levels, inv.characters, Path(lib), Path(traj))
    assert f.empty, f.to_dict("records")
index, fails = run_render(cfg.render, Path(traj), Path(out))
assert fails.empty, fails.to_dict("records")
print(json.dumps(index[["level_id", "path"]].to_dict("records")))
"""


def run(checkout: Path, *args: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    r = subprocess.run([sys.executable, "-c", STAGE, *args], cwd=checkout, env=env,
                       capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit(f"{checkout}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True, type=Path)
    ap.add_argument("--library", required=True)
    ap.add_argument("--levels", default="NatureValley/AlpineMeadow,InteriorKit/Apartment,"
                    "CastleCourtyard/Courtyard,DesertCanyon/Canyon,SciFiOutpost/Outpost,"
                    "UrbanBlocks/Downtown,Panda3DSamples/environment")
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--frame", type=int, default=20)
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--height", type=int, default=180)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    from PIL import Image, ImageDraw

    sys.path.insert(0, str(HERE))
    from stages.media.video import read_frames
    from stages.quality.scorers import BrisqueScorer, luminance

    work = Path(tempfile.mkdtemp(prefix="look-"))
    args = [a.library, str(work / "traj"), "", a.levels, str(a.width), str(a.height),
            str(a.frames)]
    args[2] = str(work / "old")
    before = run(a.old, *args, "1")
    args[2] = str(work / "new")
    after = run(HERE, *args, "0")
    scorer = BrisqueScorer()
    rows, figures = [], {}
    for label, index, root in (("before", before, work / "old"), ("after", after, work / "new")):
        for rec in sorted(index, key=lambda r: r["level_id"]):
            d = root / rec["path"]
            frames = {v: read_frames(d / f"{v}.mp4") for v in VIEWS}
            every = [f for v in VIEWS for f in frames[v]]
            luma = float(np.mean([luminance(f) for f in every]))
            brisque = float(np.mean(scorer.score([frames[v][a.frame] for v in VIEWS])))
            figures.setdefault(rec["level_id"], {})[label] = {
                "mean_luma": round(luma, 2), "brisque": round(brisque, 2),
                "in_band": 25 < luma < 140}
            rows.append((f"{label.upper()}  {rec['level_id']}  luma {luma:.0f}  "
                         f"BRISQUE {brisque:.1f}", [frames[v][a.frame] for v in VIEWS]))
    summary = {k: sum(1 for f in figures.values() if f[k]["in_band"]) / len(figures)
               for k in ("before", "after")}
    W, H = a.width, a.height
    order = sorted(figures)
    sheet = Image.new("RGB", (W * 5, (H + 14) * 2 * len(order)), (16, 16, 16))
    for i, lid in enumerate(order):
        for j, label in enumerate(("before", "after")):
            title, imgs = next(r for r in rows if r[0].startswith(label.upper() + "  " + lid +
                                                                    "  "))
            y = (2 * i + j) * (H + 14)
            ImageDraw.Draw(sheet).text((4, y + 1), title, fill=(255, 255, 255))
            for k, img in enumerate(imgs):
                sheet.paste(Image.fromarray(np.asarray(img)), (k * W, y + 14))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
        out.with_suffix(".png"), optimize=True)
    report = {"levels": figures, "share_in_band": summary, "frame": a.frame,
              "size": [W, H], "old_checkout": str(a.old)}
    out.with_suffix(".json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    for lid in order:
        b, f = figures[lid]["before"], figures[lid]["after"]
        print(f"{lid:32s} luma {b['mean_luma']:6.1f} -> {f['mean_luma']:6.1f}   "
              f"BRISQUE {b['brisque']:5.1f} -> {f['brisque']:5.1f}")
    print(f"share of levels in 25 < luma < 140: {summary['before']:.2f} -> {summary['after']:.2f}")


if __name__ == "__main__":
    main()
