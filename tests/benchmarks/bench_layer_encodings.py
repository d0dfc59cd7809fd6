"""Ground-truth layer encodings compared: bytes per frame, encode and decode ms per frame.

Run: .venv/bin/python tests/benchmarks/bench_layer_encodings.py [--width 960 --height 540]
         [--frames 30]

The planes are those ``stages/media/layers.py`` stores (fixed-point uint16 planes, stacked),
made from an analytic scene: a camera 1.6 m above a floor, pitched down 10°, turning 2° a
frame, in front of a wall of five instances (ids above 65535) and a box (the character's mask).
Each candidate must give the planes back bit-exact. Candidates: FFV1 in Matroska through PyAV
(default options; version 3 with 4 slices; version 3 with 4 slices and the large context
model, which layers.py uses), 16-bit PNG per frame (Pillow), and one compressed npz.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stages.media import layers as L  # noqa: E402


def scene_planes(t: int, w: int, h: int) -> dict[str, np.ndarray]:
    f = w / 2 / np.tan(np.radians(45))
    u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    d = np.stack([(u - w / 2) / f, (v - h / 2) / f, np.ones_like(u)], -1)  # OpenCV rays, z=1
    p, yaw = np.radians(10), np.radians(2 * t)
    r0 = np.array([[0, 0, 1], [-1, 0, 0], [0, -1, 0]], float)  # OpenCV → world (x fwd, z up)
    rp = np.array([[np.cos(p), 0, np.sin(p)], [0, 1, 0], [-np.sin(p), 0, np.cos(p)]])
    ry = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    rot = ry @ rp @ r0
    wd, o = d @ rot.T, np.array([0.01 * t, 0.0, 1.6])
    z = np.full((h, w), np.inf)
    ids = np.zeros((h, w), np.uint32)
    n = np.zeros((h, w, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        tf = -o[2] / wd[..., 2]
        ok = (tf > 0) & (tf < 200)
        z[ok], ids[ok], n[ok] = tf[ok], 3, rot.T @ [0, 0, 1]
        tw = (12 - o[0]) / wd[..., 0]
        ok = (tw > 0) & (tw < z) & (o[2] + tw * wd[..., 2] < 5)
        z[ok], n[ok] = tw[ok], rot.T @ [-1, 0, 0]
        ids[ok] = 70000 + np.floor((o[1] + tw * wd[..., 1])[ok] / 2).astype(int) % 5
        tb = (5 - o[0]) / wd[..., 0]
        y, zz = o[1] + tb * wd[..., 1], o[2] + tb * wd[..., 2]
        ok = (tb > 0) & (tb < z) & (abs(y) < 0.4) & (zz < 1.8) & (zz > 0)
        z[ok], ids[ok], n[ok] = tb[ok], 1, rot.T @ [-1, 0, 0]
    fin = np.isfinite(z)
    flow = np.zeros((h, w, 3), np.float32)
    flow[..., 0] = (-f * np.radians(2) + (u - w / 2) * 0.001) * fin
    flow[..., 1] = (v - h / 2) * 0.002 * fin
    flow[..., 2] = fin
    return {"depth": z.astype(np.float32), "normals": n.astype(np.float32), "ids": ids,
            "mask": ids == 1, "flow_fwd": flow}


def ffv1(pics: list[np.ndarray], opts: dict[str, str]) -> tuple[int, float, float]:
    import av

    fmt = "gray16le" if pics[0].dtype == np.uint16 else "gray"
    buf = io.BytesIO()
    t0 = time.perf_counter()
    with av.open(buf, "w", format="matroska", options={"fflags": "+bitexact"}) as c:
        s = c.add_stream("ffv1", rate=30, options=opts)
        s.height, s.width = pics[0].shape  # type: ignore[attr-defined]
        s.pix_fmt = fmt  # type: ignore[attr-defined]
        for i, a in enumerate(pics):
            fr = av.VideoFrame.from_ndarray(a, format=fmt)
            fr.pts = i
            for pkt in s.encode(fr):  # type: ignore[attr-defined]
                c.mux(pkt)
        for pkt in s.encode():  # type: ignore[attr-defined]
            c.mux(pkt)
    te = time.perf_counter() - t0
    data = buf.getvalue()
    t0 = time.perf_counter()
    with av.open(io.BytesIO(data)) as c2:
        out = [f.to_ndarray() for f in c2.decode(video=0)]
    td = time.perf_counter() - t0
    assert all(np.array_equal(a, b) for a, b in zip(out, pics, strict=True)), "not lossless"
    return len(data), te, td


def png(pics: list[np.ndarray]) -> tuple[int, float, float]:
    from PIL import Image

    t0 = time.perf_counter()
    blobs = []
    for a in pics:
        b = io.BytesIO()
        Image.fromarray(a).save(b, format="PNG")
        blobs.append(b.getvalue())
    te = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = [np.asarray(Image.open(io.BytesIO(x))) for x in blobs]
    td = time.perf_counter() - t0
    assert all(np.array_equal(a, b) for a, b in zip(out, pics, strict=True)), "not lossless"
    return sum(map(len, blobs)), te, td


def npz(pics: list[np.ndarray]) -> tuple[int, float, float]:
    t0 = time.perf_counter()
    b = io.BytesIO()
    np.savez_compressed(b, a=np.stack(pics))
    te = time.perf_counter() - t0
    data = b.getvalue()
    t0 = time.perf_counter()
    out = np.load(io.BytesIO(data))["a"]
    td = time.perf_counter() - t0
    assert np.array_equal(out, np.stack(pics)), "not lossless"
    return len(data), te, td


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=960)
    ap.add_argument("--height", type=int, default=540)
    ap.add_argument("--frames", type=int, default=30)
    a = ap.parse_args()
    frames = [scene_planes(t, a.width, a.height) for t in range(a.frames)]
    candidates = {
        "ffv1 default": lambda p: ffv1(p, {"threads": "1"}),
        "ffv1 v3 slices4": lambda p: ffv1(p, {"level": "3", "slices": "4", "g": "1",
                                              "threads": "1"}),
        "ffv1 v3 slices4 ctx1 (used)": lambda p: ffv1(p, dict(L.FFV1_OPTIONS)),
        "png16": png, "npz": npz}
    print(f"{a.width}x{a.height}, {a.frames} frames; kB/frame, encode ms/frame, decode ms/frame")
    for layer in ("depth", "normals", "ids", "mask", "flow_fwd"):
        pics = [np.ascontiguousarray(L.encode_plane(layer, f[layer], a.height, a.width)[0])
                for f in frames]
        for name, fn in candidates.items():
            n, te, td = fn(pics)
            print(f"{layer:9s} {name:28s} {n / a.frames / 1e3:7.1f} kB {te / a.frames * 1e3:6.1f}"
                  f" ms {td / a.frames * 1e3:6.1f} ms", flush=True)


if __name__ == "__main__":
    main()
