"""The compute backend's look against GL's at production size (issue #30 item 3): one Stage I
trajectory on the sample library's AlpineMeadow with Alex, rendered by the real
InstanceRenderer with ``render.backend=gl`` (deferred shading, the path compute ports, and
auto), ``compute``, and ``compute`` again; per view: PSNR of the decoded frames against GL,
the mean-luma difference, the alignment gate, and whether the two compute renders are the same
bytes. Writes a side-by-side picture (GL above compute, the five views of the middle frame)
and a JSON of the figures.

    python tests/benchmarks/compare_backends.py [--size 1280x720] [--spatial 8] [--frames 30]
        [--out DIR] [--set render.KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def _frames(p: Path) -> np.ndarray:
    import av

    with av.open(str(p)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def _render(traj: Path, out: Path, backend: str, shading: str, W: int, H: int,
            spatial: int, extra: list[str]) -> tuple[Path, float]:
    from stages.cluster.keys import render_settings
    from stages.config import load_params
    from stages.engine.instance_render import InstanceRenderer

    rcfg = load_params(overrides=[
        f"render.width={W}", f"render.height={H}", f"render.spatial_samples={spatial}",
        "render.preview=false", f"render.backend={backend}", f"render.shading={shading}",
        *extra]).render
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    ir = InstanceRenderer(out, render_settings(rcfg, 30), "p3headlessgl", Path.cwd())
    try:
        ir.render(traj, "traj_0000", "k" * 16)
    finally:
        ir.close()
    return out / "traj_0000", time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--spatial", type=int, default=8)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--out", default="")
    ap.add_argument("--set", action="append", default=[], help="another render override, "
                    "e.g. --set render.warmup_frames=1")
    a = ap.parse_args()
    W, H = (int(x) for x in a.size.lower().split("x"))
    from stages.config import SampleLibraryConfig
    from stages.core.trajectory import VIEWS
    from stages.sample_library import build_sample_library
    from tests.conftest import make_trajectories

    tmp = Path(tempfile.mkdtemp(prefix="compare_backends_"))
    out = Path(a.out) if a.out else tmp / "out"
    out.mkdir(parents=True, exist_ok=True)
    lib = tmp / "lib"
    build_sample_library(lib, SampleLibraryConfig())
    traj = make_trajectories(lib, tmp / "traj", 1, a.frames) / "NatureValley__AlpineMeadow" \
        / "traj_0000"
    runs = {"gl_deferred": ("gl", "deferred"), "gl": ("gl", "auto"),
            "compute": ("compute", "auto"), "compute_again": ("compute", "auto")}
    dirs, secs, errors = {}, {}, {}
    for name, (backend, shading) in runs.items():
        try:
            dirs[name], secs[name] = _render(traj, tmp / name, backend, shading, W, H,
                                                a.spatial, a.set)
        except Exception as e:  # noqa: BLE001 - a failed run is a figure too; the rest go on
            errors[name] = f"{type(e).__name__}: {e}"
            print(f"{name}: FAILED: {errors[name]}", flush=True)
            continue
        print(f"{name}: rendered in {secs[name]:.1f} s", flush=True)
    refs = [r for r in ("gl_deferred", "gl") if r in dirs]
    w = np.array([0.2126, 0.7152, 0.0722])
    res: dict = {"size": f"{W}x{H}", "spatial": a.spatial, "frames": a.frames,
                 "render_s": {k: round(v, 1) for k, v in secs.items()}, "errors": errors,
                 "views": {}}
    for ref in refs:
        for v in VIEWS:
            x = _frames(dirs[ref] / f"{v}.mp4").astype(float)
            y = _frames(dirs["compute"] / f"{v}.mp4").astype(float)
            mse = float(((x - y) ** 2).mean())
            psnr = 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)
            dl = abs(float((x @ w).mean() - (y @ w).mean()))
            res["views"].setdefault(v, {})[ref] = {"psnr_db": round(psnr, 2),
                                                   "mean_luma_diff": round(dl, 3)}
            print(f"{v}: compute vs {ref}: PSNR {psnr:.2f} dB, mean luma differs by {dl:.2f}")
    for name in [*refs, "compute"]:
        meta = json.loads((dirs[name] / "meta.json").read_text())
        res[f"aligned_fraction_{name}"] = meta["alignment"]["aligned_fraction"]
        # auto exposure steps in 1/8 stop: where the metered mean sits on a step's edge the two
        # backends can pick neighbouring steps (9 % apart), which moves the mean luma by itself
        res[f"auto_ev_{name}"] = meta["exposure"].get("auto_ev", 0.0)
    res["compute_same_bytes_twice"] = all(
        hashlib.sha256((dirs["compute"] / f"{v}.mp4").read_bytes()).digest()
        == hashlib.sha256((dirs["compute_again"] / f"{v}.mp4").read_bytes()).digest()
        for v in VIEWS)
    print(json.dumps(res))
    (out / "compare_backends.json").write_text(json.dumps(res, indent=1))
    from PIL import Image

    mid = a.frames // 2
    rows = [np.concatenate([_frames(dirs[n] / f"{v}.mp4")[mid] for v in VIEWS], 1)
            for n in (refs[0], "compute")]
    img = Image.fromarray(np.concatenate(rows, 0).astype(np.uint8))
    img.thumbnail((5 * 384, 2 * 216))
    img.save(out / "compare_backends.png")


if __name__ == "__main__":
    main()
