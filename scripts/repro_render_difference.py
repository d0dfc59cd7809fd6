"""Reproduce the known one-pixel render difference (README, Known issues).

Runs Stage I and Stage II of the DesertCanyon sample trajectory of tests/test_node_runner.py
(192x108, 2x2 samples, one slot) N times while ``--burners`` processes keep the CPUs busy, and
prints the sha256 of each back.mp4: on this 2-core machine about 1 run in 10 gives the second
file. Usage: .venv/bin/python scripts/repro_render_difference.py OUT_DIR [N] [--burners 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import multiprocessing
import shutil
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _burn() -> None:
    while True:
        pass


def main() -> int:
    from stages.cluster.lifecycle import run_levels
    from stages.config import SampleLibraryConfig, load_params
    from stages.inventory import run_inventory
    from stages.sample_library import build_sample_library

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("n", nargs="?", type=int, default=20)
    ap.add_argument("--burners", type=int, default=3)
    a = ap.parse_args()
    base = Path(a.out)
    lib = base / "lib" / "sample"
    if not lib.exists():
        build_sample_library(lib, SampleLibraryConfig())
    inv = run_inventory(lib, load_params().inventory, "overrides.yaml")
    levels = inv.levels[inv.levels["level_id"] == "DesertCanyon/Canyon"]
    small = ["render.width=192", "render.height=108", "render.spatial_samples=2",
             "render.temporal_samples=2", "render.mask_scale=1", "render.warmup_frames=2"]
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(a.burners)]
    for b in burners:
        b.start()
    seen: Counter[str] = Counter()
    try:
        for i in range(a.n):
            t = base / "run"
            shutil.rmtree(t, ignore_errors=True)
            cfg = load_params(overrides=[
                "trajectories.per_level=1", "trajectories.frames=24",
                "trajectories.characters=[CharacterPack/Alex]", f"node.work_dir={t}/work",
                f"node.snapshot_dir={t}/snap", "node.display=plain", "node.cpu_slots=1"])
            cfg = dataclasses.replace(cfg, render=load_params(overrides=small).render)
            run_levels(cfg, levels, inv.characters, lib, t / "traj", t / "renders",
                       log=lambda m: None)
            back = next((t / "renders").rglob("traj_0000/back.mp4"))
            h = hashlib.sha256(back.read_bytes()).hexdigest()[:12]
            seen[h] += 1
            print(f"{i}: back.mp4 {h}", flush=True)
    finally:
        for b in burners:
            b.terminate()
    print(dict(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
