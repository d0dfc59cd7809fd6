"""Stage II on heavy levels (``render.limits``, issue #30 "Bad input and faults"): wall time
and peak RSS of one renderer process rendering a short trajectory on a level with one large
texture or a ground grid of millions of triangles, per backend.

Run: .venv/bin/python tests/benchmarks/bench_render_limits.py [--backend gl,compute]
         [--texture 8192] [--cells 1000,1415] [--frames 3] [--size 64x36]

It builds the sample library and one Stage I trajectory (AlpineMeadow, Alex) in a scratch
folder, writes each level (tests/heavy_levels.py), and renders the trajectory replayed on it in
a fresh process per case, with the default limits (so nothing is downscaled or refused unless
a case is over them), printing one JSON line per case: the level's triangles and largest
texture as rendered, the seconds to render (level load, warm-up, meter and frames), the peak
RSS, and the failure reason if any. ``--cells`` N is an N x N grid: 2 N² triangles.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def one(spec: dict) -> dict:
    """One case in this process: render ``spec['traj']`` with ``spec['backend']``."""
    from stages.cluster.keys import render_settings
    from stages.config import load_params
    from stages.engine.instance_render import InstanceRenderer
    from stages.engine.stage2 import Stage2Failure

    w, h = (int(x) for x in spec["size"].split("x"))
    rcfg = load_params(overrides=[
        f"render.width={w}", f"render.height={h}", "render.spatial_samples=1",
        "render.temporal_samples=1", "render.mask_scale=1", "render.warmup_frames=1",
        "render.preview=false", "render.meter_frames=1",
        f"render.backend={spec['backend']}"]).render
    out = Path(spec["out"])
    out.mkdir(parents=True)
    ir = InstanceRenderer(out, render_settings(rcfg, 30), "p3headlessgl", ROOT,
                          log=lambda *_: None)
    t0 = time.perf_counter()
    res: dict = {"case": spec["case"], "backend": spec["backend"]}
    try:
        meta = ir.render(Path(spec["traj"]), "traj_0000", "k" * 16)
        lv = meta["level"]
        res.update(triangles=lv["triangles"], max_texture_px=lv["max_texture_px"],
                   downscaled=len(lv["textures_downscaled"]), frames=meta["frame_count"])
    except Stage2Failure as exc:
        res.update(failed=exc.reason, detail=exc.detail)
    finally:
        ir.close()
    res["render_s"] = round(time.perf_counter() - t0, 2)
    res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="gl,compute")
    ap.add_argument("--texture", type=int, default=8192, help="texture side, px (0: none)")
    ap.add_argument("--cells", default="1000,1415", help="grid sizes (2 N² triangles each)")
    ap.add_argument("--frames", type=int, default=3)
    ap.add_argument("--size", default="64x36")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(json.loads(args.one))), flush=True)
        return 0
    from stages.config import SampleLibraryConfig
    from stages.sample_library import build_sample_library
    from tests.conftest import make_trajectories
    from tests.heavy_levels import replay_on, write_grid_level, write_textured_level

    with tempfile.TemporaryDirectory(prefix="bench_limits_") as tmp:
        t = Path(tmp)
        lib = t / "lib"
        build_sample_library(lib, SampleLibraryConfig(include_wheel_assets=False))
        src = make_trajectories(lib, t / "traj", 1, args.frames)
        traj = src / "NatureValley__AlpineMeadow" / "traj_0000"
        levels = {}
        if args.texture:
            levels[f"texture_{args.texture}"] = write_textured_level(
                t / "tex" / "level.glb", args.texture)
        for c in (int(x) for x in args.cells.split(",") if x):
            levels[f"grid_{2 * c * c}_tris"] = write_grid_level(t / f"grid{c}" / "level.glb", c)
        for case, level in levels.items():
            tr = replay_on(traj, t / "on" / case / "traj_0000", level)
            for backend in args.backend.split(","):
                spec = {"case": case, "backend": backend, "traj": str(tr), "size": args.size,
                        "out": str(t / "out" / case / backend)}
                r = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)],
                                   capture_output=True, text=True, cwd=ROOT)
                line = [x for x in r.stdout.splitlines() if x.startswith("{")]
                print(line[-1] if line else json.dumps(
                    {**spec, "error": r.returncode, "stderr": r.stderr[-500:]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
