"""Count distinct Stage II outputs of the same trajectories rendered N times under full load.

Stage I runs once (the sample trajectories of tests/test_node_runner.py: four levels, one
24-frame trajectory each, the humanoid Alex); Stage II then renders them ``N`` times through the
node runner (``--slots`` engine processes at once, 192x108 with 2x2 samples unless ``--preset
720p8``), while ``--burners`` busy processes keep every core loaded. Each run's videos and the
the
script prints each run's digest and, at the end, the number of distinct outputs per file.

Usage: .venv/bin/python scripts/render_determinism.py OUT_DIR [N] [--burners K] [--slots S]
Exit status 0 when every file had one output over the N runs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LEVELS = ["CastleCourtyard/Courtyard", "DesertCanyon/Canyon", "InteriorKit/Apartment",
          "NatureValley/AlpineMeadow"]
PRESETS = {
    "small": ["render.width=192", "render.height=108", "render.spatial_samples=2",
              "render.temporal_samples=2", "render.mask_scale=1", "render.warmup_frames=2"],
    "720p8": ["render.width=1280", "render.height=720", "render.spatial_samples=8",
              "render.temporal_samples=1"],
}


def _burn() -> None:
    while True:
        pass


def _videos(root: Path) -> dict[str, str]:
    """level/traj/file → sha256 of every video (instance folder names dropped: they carry time)."""
    out = {}
    for p in sorted(root.rglob("traj_*/*.mp4")):
        parts = p.relative_to(root).parts
        out["/".join(parts[:2] + parts[3:])] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
    return out


def main() -> int:
    from stages.cluster.lifecycle import make_trajectories, render_trajectories
    from stages.config import SampleLibraryConfig, load_params
    from stages.inventory import run_inventory
    from stages.sample_library import build_sample_library

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("n", nargs="?", type=int, default=50)
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 2,
                    help="busy processes beside the renders (default: one per core)")
    ap.add_argument("--slots", type=int, default=2, help="engine processes at once")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    ap.add_argument("--levels", nargs="*", default=LEVELS)
    ap.add_argument("--max-seconds", type=float, default=0.0,
                    help="stop after the run that passes this many seconds (0: run all N)")
    a = ap.parse_args()
    base = Path(a.out)
    lib = base / "lib" / "sample"
    if not lib.exists():
        build_sample_library(lib, SampleLibraryConfig())
    inv = run_inventory(lib, load_params().inventory, "overrides.yaml")
    levels = inv.levels[inv.levels["level_id"].isin(a.levels)]
    over = ["trajectories.per_level=1", "trajectories.frames=24",
            "trajectories.characters=[CharacterPack/Alex]", f"node.work_dir={base}/work",
            f"node.snapshot_dir={base}/snap", "node.display=plain", f"node.cpu_slots={a.slots}",
            f"node.slots_per_gpu={a.slots}"]
    cfg = load_params(overrides=over)
    cfg = dataclasses.replace(cfg, render=load_params(overrides=PRESETS[a.preset]).render)
    trajs = base / "traj"
    if not trajs.exists():
        fails = make_trajectories(cfg, levels, inv.characters, lib, trajs, log=lambda m: None)
        if not fails.empty:
            print(fails.to_string())
            return 2
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(a.burners)]
    for b in burners:
        b.start()
    outputs: dict[str, Counter[str]] = defaultdict(Counter)
    t0 = time.monotonic()
    done = 0
    try:
        for i in range(a.n):
            if a.max_seconds and time.monotonic() - t0 > a.max_seconds:
                break
            root = base / "renders"
            shutil.rmtree(root, ignore_errors=True)
            index, fails = render_trajectories(cfg, trajs, root, cfg.render, log=lambda m: None,
                                               library=lib)
            if not fails.empty:
                print(fails.to_string())
                return 2
            vids = _videos(root)
            for k, h in vids.items():
                outputs[k][h] += 1
            run = hashlib.sha256(json.dumps(vids, sort_keys=True).encode()).hexdigest()[:12]
            keep = base / "distinct" / run
            if not keep.exists():  # one copy of each distinct output, to compare pixels
                shutil.copytree(root, keep)
            done += 1
            print(f"run {i}: {len(vids)} videos, digest {run}", flush=True)
    finally:
        for b in burners:
            b.terminate()
    many = {k: dict(c) for k, c in outputs.items() if len(c) > 1}
    print(f"{done} runs x {len(outputs)} videos ({a.preset}, {a.slots} slots, "
          f"{a.burners} burners): {len(many)} videos with more than one output")
    for k, c in sorted(many.items()):
        print(f"  {k}: {c}")
    return 1 if many else 0


if __name__ == "__main__":
    sys.exit(main())
