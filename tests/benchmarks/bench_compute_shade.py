"""The compute Stage II's work after the G-buffer (issue #30): lighting, resolve and RGB→YUV420
of one five-view frame in torch, and the copy of its planes to pinned host memory.

    python tests/benchmarks/bench_compute_shade.py [--size 1280x720] [--spatial 8]
        [--device cpu|cuda] [--frames 10] [--compile] [--json out.json]

Synthetic G-buffer planes (seeded: a ground plane and boxes under a sky, the sun and three
point lights, half the sun's pixels in shadow) at the given size and samples per view, made
on the device once. Each frame is lit, stored as R11G11B10 (as the atlas), resolved (mean of
the samples, exposure, ACES, sRGB, 8 bits) and converted to yuv420p planes view by view (the
intermediates of one view at a time: a 720p x 8 frame's planes alone are ~2.5 GB of float32).
Prints milliseconds per five-view frame for each step and in total, and on CUDA the copy of
the five views' yuv420p planes to pinned host memory (``non_blocking``, then a blocking
``torch.cuda.Event``: the waiting thread sleeps instead of spinning).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

from stages.core.trajectory import VIEWS
from stages.engine.compute.lighting import Lighting, make_lighting
from stages.engine.compute.resolve import resolve
from stages.engine.compute.shade import quantize_r11g11b10, shade
from stages.engine.compute.yuv import rgb_to_yuv420
from stages.engine.pbr import sky_settings


def _perspective_inv(eye: torch.Tensor, yaw: float, w: int, h: int) -> torch.Tensor:
    """clip → world (column vectors) of a camera at ``eye`` looking along ``yaw``, 60° hfov."""
    f = torch.tensor([math.cos(yaw), math.sin(yaw), -0.15])
    f = f / f.norm()
    r = torch.linalg.cross(f, torch.tensor([0.0, 0.0, 1.0]))
    r = r / r.norm()
    u = torch.linalg.cross(r, f)
    view = torch.eye(4)
    view[0, :3], view[1, :3], view[2, :3] = r, u, -f
    view[:3, 3] = -view[:3, :3] @ eye
    n, fa = 0.05, 4000.0
    t = math.tan(math.radians(30.0))
    proj = torch.zeros(4, 4)
    proj[0, 0], proj[1, 1] = 1 / t, w / (h * t)
    proj[2, 2], proj[2, 3], proj[3, 2] = -(fa + n) / (fa - n), -2 * fa * n / (fa - n), -1.0
    return torch.linalg.inv(proj @ view)


def make_planes(w: int, h: int, s: int, device: str, seed: int = 0) -> dict:
    """Seeded G-buffer planes ``[5, s, h, w, ...]`` with about a fifth of the pixels sky."""
    g = torch.Generator().manual_seed(seed)
    v = len(VIEWS)
    shape = (v, s, h, w)
    row = torch.arange(h, dtype=torch.float32)[:, None].expand(h, w)
    sky = (row < h * 0.2).expand(shape)
    depth = torch.where(sky, 1.0, 0.995 + 0.004 * torch.rand(shape, generator=g))
    normal = torch.nn.functional.normalize(torch.randn((*shape, 3), generator=g) * 0.2
                                           + torch.tensor([0.0, 0.0, 1.0]), dim=-1)
    eye = torch.tensor([[[2.0 * i, -3.0, 1.6]] * s for i in range(v)])
    inv = torch.stack([torch.stack([_perspective_inv(eye[i, k], 0.7 * i, w, h)
                                    for k in range(s)]) for i in range(v)])
    planes = {
        "emission": torch.zeros((*shape, 3)), "albedo": torch.rand((*shape, 3), generator=g),
        "metallic": (torch.rand(shape, generator=g) > 0.8).float(),
        "normal": normal, "roughness": 0.04 + 0.96 * torch.rand(shape, generator=g),
        "shadow": (torch.rand(shape, generator=g) > 0.5).float(), "depth": depth,
        "inv_view_proj": inv, "eye": eye}
    return {k: x.to(device) for k, x in planes.items()}


def lighting() -> Lighting:
    lights = [{"vec": (0.4, 0.3, 0.85, 0.0), "color": (3.0, 2.9, 2.6)}]
    lights += [{"vec": (4.0 * i, 2.0, 3.0, 1.0), "color": (2.0, 1.8, 1.2),
                "att": (1.0, 0.0, 1.0), "range": 12.0} for i in range(3)]
    return make_lighting(lights, sky_settings({"lighting": "day"}), shadow_light=0,
                         ibl_strength=0.6)


def view_fn(lt: Lighting):
    """shade → R11G11B10 → resolve → yuv420p of one view's planes (what --compile fuses)."""
    def run(*planes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rad = quantize_r11g11b10(shade(*planes, lt))
        return rgb_to_yuv420(resolve(rad[None], 1.0, "aces")[0])
    return run


def frame_compiled(p: dict, fn, out: list, times: dict, sync) -> None:
    """One five-view frame through the compiled whole (no per-step times)."""
    t0 = time.perf_counter()
    for v in range(len(VIEWS)):
        out[v] = fn(*(p[k][v] for k in PLANES))
    sync()
    times["all"] += time.perf_counter() - t0


PLANES = ("emission", "albedo", "metallic", "normal", "roughness", "shadow", "depth",
          "inv_view_proj", "eye")


def frame(p: dict, lt: Lighting, out: list, times: dict, sync) -> None:
    """One five-view frame, view by view: shade → R11G11B10 → resolve → yuv420p."""
    for v in range(len(VIEWS)):
        t0 = time.perf_counter()
        rad = shade(p["emission"][v], p["albedo"][v], p["metallic"][v], p["normal"][v],
                    p["roughness"][v], p["shadow"][v], p["depth"][v], p["inv_view_proj"][v],
                    p["eye"][v], lt)
        rad = quantize_r11g11b10(rad)
        sync()
        t1 = time.perf_counter()
        rgb = resolve(rad[None], 1.0, "aces")[0]
        sync()
        t2 = time.perf_counter()
        y, u, vv = rgb_to_yuv420(rgb)
        out[v] = (y, u, vv)
        sync()
        t3 = time.perf_counter()
        times["shade"] += t1 - t0
        times["resolve"] += t2 - t1
        times["yuv"] += t3 - t2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--spatial", type=int, default=8)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--json", default="")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile each view's whole chain (fused kernels)")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    cuda = a.device.startswith("cuda")
    p = make_planes(w, h, a.spatial, a.device)
    lt = lighting().to(a.device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    out: list = [None] * len(VIEWS)
    times = {"shade": 0.0, "resolve": 0.0, "yuv": 0.0}
    if a.compile:
        fn = torch.compile(view_fn(lt))
        t0 = time.perf_counter()
        frame_compiled(p, fn, out, {"all": 0.0}, sync)  # compiles
        compile_s = time.perf_counter() - t0
        times = {"all": 0.0}
    else:
        frame(p, lt, out, dict(times), sync)  # warm-up
    t0 = time.perf_counter()
    for _ in range(a.frames):
        if a.compile:
            frame_compiled(p, fn, out, times, sync)
        else:
            frame(p, lt, out, times, sync)
    total = (time.perf_counter() - t0) / a.frames * 1000
    res = {"device": str(torch.cuda.get_device_name() if cuda else "cpu"),
           "torch_threads": torch.get_num_threads(), "size": a.size, "spatial": a.spatial,
           "frames": a.frames, "compiled": a.compile, "ms_per_frame": round(total, 2),
           **{f"ms_{k}": round(v / a.frames * 1000, 2) for k, v in times.items()}}
    if a.compile:
        res["compile_s"] = round(compile_s, 1)
    if cuda:  # the five views' planes to pinned host memory, then a sleeping wait
        host = [[torch.empty(x.shape, dtype=x.dtype, pin_memory=True) for x in planes]
                for planes in out]
        done = torch.cuda.Event(blocking=True)
        copies = []
        for _ in range(a.frames):
            t0 = time.perf_counter()
            for hv, dv in zip(host, out, strict=True):
                for hx, dx in zip(hv, dv, strict=True):
                    hx.copy_(dx, non_blocking=True)
            done.record()
            done.synchronize()
            copies.append(time.perf_counter() - t0)
        res["ms_copy_to_pinned"] = round(sorted(copies)[len(copies) // 2] * 1000, 3)
        res["gpu_peak_mib"] = round(torch.cuda.max_memory_allocated() / 2 ** 20)
    print(json.dumps(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
