"""Unreal's ground-truth EXR passes → layer files on the node: bytes of MRQ's EXRs per frame
and view, and the conversion's time per frame and view (stages/engine/unreal_layers.convert).

Run: .venv/bin/python tests/benchmarks/bench_unreal_layers.py [--width 960 --height 540]
         [--frames 20]

The passes are made as MRQ lays them out (unreal/ue_layers.py) for an analytic scene: every
camera 1.6 m above a floor, pitched down 20°, turning 2° a frame; depth z along the view axis
in cm, world normals in Unreal's axes, Cryptomatte ids (the floor, and a box in the middle of
the picture as the character) with their manifest. All six layers are converted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stages.core.trajectory import VIEWS  # noqa: E402
from stages.engine import unreal_layers as U  # noqa: E402
from stages.media.layers import LAYERS  # noqa: E402
from tests.fakes.unreal.mrq_layers import crypto_id  # noqa: E402


def quat(yaw_deg: float, pitch_deg: float) -> tuple[float, float, float, float]:
    """OpenCV camera-to-world rotation (w, x, y, z): looking along yaw, pitched down."""
    y, p = math.radians(yaw_deg), math.radians(pitch_deg)
    f = np.array([math.cos(p) * math.cos(y), math.cos(p) * math.sin(y), -math.sin(p)])
    r = np.cross(f, [0, 0, 1.0])
    r /= np.linalg.norm(r)
    d = np.cross(f, r)
    R = np.stack([r, d, f], 1)
    w = math.sqrt(max(0.0, 1 + R[0, 0] + R[1, 1] + R[2, 2])) / 2
    return (w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w),
            (R[1, 0] - R[0, 1]) / (4 * w))


def make(root: Path, W: int, H: int, n: int) -> tuple[Path, Path]:
    import OpenEXR
    import pandas as pd

    traj, ldir = root / "traj", root / "layers"
    traj.mkdir()
    (traj / "meta.json").write_text(json.dumps({"frame_count": n, "fps": 30,
                                                "character": {"model": "/Game/SK"}}))
    rows = []
    f = (W / 2) / math.tan(math.radians(45))
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    man = {x: f"{crypto_id(x):08x}" for x in ("default", "Floor", "wmforge_character")}
    hdr = {"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage,
           "cryptomatte/abcdef0/manifest": json.dumps(man)}
    for k in range(n):
        for view in VIEWS:
            q = quat(2.0 * k + VIEWS.index(view) * 72, 20.0)
            rows.append({"frame": k, "view": view, "pos_x": 0.0, "pos_y": 0.0, "pos_z": 1.6,
                         "rot_w": q[0], "rot_x": q[1], "rot_y": q[2], "rot_z": q[3],
                         "fov_deg": 90.0})
            w, x, y, z = q
            R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                          [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                          [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
            ray = np.stack([(u - W / 2) / f, (v - H / 2) / f, np.ones_like(u)], -1) @ R.T
            with np.errstate(divide="ignore"):
                t = np.where(ray[..., 2] < -1e-6, -1.6 / ray[..., 2], np.inf)  # z-depth, m
            hit = np.isfinite(t) & (t < 500)
            box = (np.abs(u - W / 2) < W / 10) & (np.abs(v - H / 2) < H / 4)
            depth = np.where(hit, t * 100, 3.4e38).astype(np.float32)
            ids = np.where(box, crypto_id("wmforge_character"),
                           np.where(hit, crypto_id("Floor"), crypto_id("default")))
            zero = np.zeros((H, W), np.float32)
            d = ldir / view
            d.mkdir(parents=True, exist_ok=True)
            for name, ch, h in (
                    ("FinalImageWmfDepth", {"R": depth, "G": zero, "B": zero, "A": zero},
                     hdr),
                    ("FinalImageWmfNormal", {"R": zero, "G": zero, "B": np.where(
                        hit, 1.0, 0.0).astype(np.float32), "A": zero}, hdr),
                    ("ActorHitProxyMask00", {"R": ids.astype(np.uint32).view(np.float32),
                                             "G": np.ones((H, W), np.float32), "B": zero,
                                             "A": zero}, hdr)):
                with OpenEXR.File(dict(h), ch) as exr:
                    exr.write(str(d / f"{name}.{k:06d}.exr"))
    pd.DataFrame(rows).to_parquet(traj / "cameras.parquet")
    return traj, ldir


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=960)
    ap.add_argument("--height", type=int, default=540)
    ap.add_argument("--frames", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        traj, ldir = make(root, a.width, a.height, a.frames)
        exr = {p: sum(f.stat().st_size for f in ldir.rglob(f"{p}.*.exr"))
               for p in U.RENDER_PASS.values()}
        out = root / "out"
        out.mkdir()
        t0 = time.perf_counter()
        U.convert(ldir, traj, out, LAYERS, a.width, a.height, log=lambda *_: None)
        dt = time.perf_counter() - t0
        per = a.frames * len(VIEWS)
        print(f"{a.width}x{a.height}, {a.frames} frames x {len(VIEWS)} views, all layers")
        for p, b in exr.items():
            print(f"  MRQ EXR {p:22s} {b / per / 1e3:8.1f} kB per frame and view")
        print(f"  convert (read EXR, convert, flow, encode 6 layers): {1e3 * dt / per:.1f} ms "
              "per frame and view")
        for layer in LAYERS:
            b = sum(f.stat().st_size for f in out.glob(f"*.{layer}.mkv"))
            print(f"  layer file {layer:9s} {b / per / 1e3:8.1f} kB per frame and view")


if __name__ == "__main__":
    main()
