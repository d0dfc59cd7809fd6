"""Camera views on every enabled sample level: the share of frames in which each external view
has collapsed (boom below 30% of the distance configured for that view and level), the mean
boom ratio and the character's projected share of the image (issue #18, §6.3).

Run: .venv/bin/python tests/benchmarks/bench_cameras.py [library root] [trajectories] [frames]
     [nofit]   (nofit: judge against the nominal rig, without fitting it to the free space)
Prints one line per level and view; the target is < 10% collapsed for every external view.
"""

import sys
from collections import defaultdict
from pathlib import Path

from stages.config import load_params
from stages.core.model_probe import normalize_coordinate_system
from stages.core.stage1 import Stage1Controller
from stages.engine.base import make_engine
from stages.inventory import run_inventory
from stages.trajectories import character_specs

EXTERNAL = ("back", "left", "right", "top")


def main() -> None:
    cfg = load_params()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else cfg.library.root)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    frames = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    if len(sys.argv) > 4 and sys.argv[4] == "nofit":
        cfg.trajectories.cameras.fit_to_space = False
    inv = run_inventory(root, cfg.inventory, cfg.library.overrides_file)
    specs = character_specs(inv.characters, root, ["CharacterPack/Alex"])
    worst = 0.0
    for row in inv.levels[inv.levels["enabled"].astype(bool)].to_dict("records"):
        eng = make_engine(cfg.engine)
        ctrl = Stage1Controller(eng, str(root / row["path"]), row["level_id"], specs,
                                list(range(n)), frames, 30, cfg.seed, cfg.trajectories.actions,
                                cfg.trajectories.spawn, cfg.trajectories.cameras,
                                float(row["scale"]), normalize_coordinate_system(row["up_axis"]))
        try:
            res = [r for r in ctrl.run() if not r.failure]
        except Exception as exc:  # noqa: BLE001 - a level that cannot load is reported
            print(f"{row['level_id']:32s} does not load: {str(exc)[:80]}")
            continue
        finally:
            eng.close()
        stats: dict[str, list[float]] = defaultdict(list)
        share: dict[str, list[float]] = defaultdict(list)
        for r in res:
            for c in r.cameras:
                if c["view"] in EXTERNAL:
                    ratio = c["boom_m"] / c["boom_desired_m"] if c["boom_desired_m"] else 1.0
                    stats[c["view"]].append(ratio)
                    if "char_share" in c:
                        share[c["view"]].append(c["char_share"])
        line = [f"{row['level_id']:32s} {len(res)} traj"]
        for v in EXTERNAL:
            r_ = stats[v]
            col = sum(1 for x in r_ if x < 0.3) / max(len(r_), 1)
            worst = max(worst, col)
            sh = (f" share {sum(share[v]) / len(share[v]):.3f}" if share[v] else "")
            line.append(f"{v} {100 * col:5.1f}% (boom {sum(r_) / max(len(r_), 1):.2f}{sh})")
        print("  ".join(line), flush=True)
    print(f"worst collapsed share over levels and views: {100 * worst:.1f}%")


if __name__ == "__main__":
    main()
