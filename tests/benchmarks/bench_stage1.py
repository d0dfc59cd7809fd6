"""Stage I speed: simulated seconds per wall second on one core, with and without camera rays.

Run: .venv/bin/python tests/benchmarks/bench_stage1.py [library root]
Prints one line per level; the monastery (125k triangles) target is >= 100x real time with rays.
"""

import sys
import time
from pathlib import Path

from stages.config import load_params
from stages.core.model_probe import normalize_coordinate_system
from stages.core.stage1 import Stage1Controller
from stages.engine.base import make_engine
from stages.inventory import run_inventory
from stages.trajectories import character_specs


def main() -> None:
    cfg = load_params()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else cfg.library.root)
    inv = run_inventory(root, cfg.inventory, cfg.library.overrides_file)
    specs = character_specs(inv.characters, root, ["CharacterPack/Alex"])
    frames = 900
    for row in inv.levels[inv.levels["enabled"].astype(bool)].to_dict("records"):
        for rays in (True, False):
            eng = make_engine(cfg.engine)
            t_load = time.perf_counter()
            ctrl = Stage1Controller(eng, str(root / row["path"]), row["level_id"], specs, [0, 1],
                                    frames, 30, 0, cfg.trajectories.actions,
                                    cfg.trajectories.spawn, cfg.trajectories.cameras,
                                    float(row["scale"]),
                                    normalize_coordinate_system(row["up_axis"]), camera_rays=rays)
            ctrl.tick()  # initialize: level load + collision build
            t0 = time.perf_counter()
            res = ctrl.run()
            wall = time.perf_counter() - t0
            sim = sum(len(r.frames) for r in res) / 30
            print(f"{row['level_id']:34s} rays={rays!s:5s} load {t0 - t_load:5.2f} s  "
                  f"{sim:5.0f} s simulated in {wall:5.2f} s = {sim / wall:6.0f}x real time")
            eng.close()


if __name__ == "__main__":
    main()
