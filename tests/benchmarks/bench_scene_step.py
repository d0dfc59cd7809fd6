"""The compute backend's scene step (``SceneGeometry.frame``: skinning the character, placing
every moving piece and prop) per frame, this tree against an earlier revision's ``stages/``
in the same run, alternating (issue #30: the host's CPU a frame is what bounds a compute
renderer; the scene step was the largest share of it).

    python tests/benchmarks/bench_scene_step.py [--old e131207] [--rounds 2] [--frames 10]
        [--level NatureValley/AlpineMeadow] [--size 128x72] [--json out.json]

Each round runs the old tree, then this one, each in its own process over the same recorded
trajectory: a real ``ReplayRenderer`` poses each frame (``render``), then ``geo.frame()`` is
timed alone, ``--repeat`` times a frame, and the torch ops one call dispatches are counted
(on a GPU each is about one kernel launch or copy, and the host's time goes with their
number; on a CPU the step's time also holds the arithmetic itself). Prints one JSON line per
run and the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child(a: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))  # tests/ (this tree's helpers)
    sys.path.insert(0, a.root)  # this run's stages/ first
    import torch

    import stages
    from stages.config import load_params
    from tests.benchmarks.bench_render import make_trajectories
    from tests.posed_frames import posed_frames

    assert Path(stages.__file__).resolve().is_relative_to(Path(a.root).resolve()), stages.__file__
    W, H = (int(x) for x in a.size.lower().split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="wmforge-scene-"))
    trajs = make_trajectories(tmp, a.level, 1, max(40, a.frames + 8))
    traj = trajs / a.level.replace("/", "__") / "traj_0000"
    cfg = load_params(overrides=[f"render.width={W}", f"render.height={H}",
                                 "render.spatial_samples=1", "render.temporal_samples=1",
                                 "render.backend=compute"]).render
    with posed_frames(tmp / "r", cfg, traj) as pf:
        r = pf.ir.r
        for i in range(3):  # warm-up: the scene built, every cache filled
            p = pf.pose(i, i / 30)
            r.render([p], p, 0.0)
        geo = r.targets._geo
        dev = r.targets.device
        ms = []
        for i in range(a.frames):
            p = pf.pose(3 + i, (3 + i) / 30)
            r.render([p], p, 0.0)
            for _ in range(a.repeat):
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                t0 = time.perf_counter()
                geo.frame()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                ms.append((time.perf_counter() - t0) * 1000)
        from torch.utils._python_dispatch import TorchDispatchMode

        class Count(TorchDispatchMode):  # every torch op the step dispatches: on a GPU, about
            n = 0                        # one kernel launch (or copy) each

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
                Count.n += 1
                return func(*args, **(kwargs or {}))

        with Count():
            geo.frame()
        print("RESULT " + json.dumps({"ops_a_frame": Count.n,
            "tree": a.label, "device": str(dev), "level": a.level,
            "moving_pieces": len(geo.moving), "triangles": geo.num_triangles,
            "samples": len(ms), "ms_median": round(statistics.median(ms), 2),
            "ms_min": round(min(ms), 2)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default="e131207", help="the revision whose stages/ is compared")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--level", default="NatureValley/AlpineMeadow")
    ap.add_argument("--size", default="128x72")
    ap.add_argument("--json", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    ap.add_argument("--label", default="new", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    old_root = Path(tempfile.mkdtemp(prefix="wmforge-old-"))
    tar = subprocess.run(["git", "archive", a.old, "stages", "conf", "params.yaml"],
                         cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "xf", "-", "-C", str(old_root)], input=tar, check=True)
    results = []
    for _ in range(a.rounds):
        for label, root in (("old", old_root), ("new", ROOT)):
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--root", str(root), "--label",
                 f"{label} ({a.old})" if label == "old" else "new", "--frames", str(a.frames),
                 "--repeat", str(a.repeat), "--level", a.level, "--size", a.size],
                cwd=ROOT, capture_output=True, text=True)
            line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if out.returncode != 0 or line is None:
                raise SystemExit(f"{label} run failed:\n{out.stdout[-2000:]}{out.stderr[-3000:]}")
            res = json.loads(line[len("RESULT "):])
            print(json.dumps(res), flush=True)
            results.append(res)
    for label in ("old", "new"):
        runs = [r["ms_median"] for r in results if r["tree"].startswith(label)]
        ops = {r["ops_a_frame"] for r in results if r["tree"].startswith(label)}
        print(f"{label}: scene step {statistics.median(runs):.2f} ms a frame (medians of "
              f"{len(runs)} runs: {runs}), torch ops a frame {sorted(ops)}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
