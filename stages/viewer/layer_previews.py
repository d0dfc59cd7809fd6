"""Colourised preview videos of a render's ground-truth layers, made when the viewer page is
built: depth (turbo, near = red, no surface black), normals (camera-space xyz → rgb), ids (one
colour per instance id, none black) and forward flow (colour wheel: hue = direction, brightness
= speed; not valid black). Previews are for eyes only (H.264, lossy); the data stays in the
lossless layer files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.trajectory import VIEWS

# page toggle → layer file it is made from
PREVIEW_LAYERS = {"depth": "depth", "normals": "normals", "ids": "ids", "flow": "flow_fwd"}


def colour_depth(d: np.ndarray) -> np.ndarray:
    """(T, H, W) metres → (T, H, W, 3) uint8: inverse depth over the clip's 2nd-98th percentile
    on the turbo colour map (near red, far blue); no surface (inf) black."""
    from matplotlib import colormaps

    fin = np.isfinite(d)
    inv = np.zeros(d.shape, np.float64)
    inv[fin] = 1.0 / np.maximum(d[fin], 1e-3)
    lo, hi = (np.percentile(inv[fin], [2, 98]) if fin.any() else (0.0, 1.0))
    t = np.clip((inv - lo) / max(hi - lo, 1e-9), 0, 1)
    rgb = (colormaps["turbo"](t)[..., :3] * 255).astype(np.uint8)
    rgb[~fin] = 0
    return rgb


def colour_normals(n: np.ndarray) -> np.ndarray:
    rgb = np.clip((n * 0.5 + 0.5) * 255, 0, 255).astype(np.uint8)
    rgb[np.abs(n).sum(-1) == 0] = 0
    return rgb


def colour_ids(ids: np.ndarray) -> np.ndarray:
    """A fixed colour per id (a hash of the id, the same in every frame and view), 0 black."""
    x = ids.astype(np.uint64) * np.uint64(2654435761) & np.uint64(0xFFFFFF)
    rgb = np.stack([(x >> np.uint64(s)) & np.uint64(255) for s in (16, 8, 0)], -1)
    rgb = (rgb.astype(np.uint16) // 2 + 96).astype(np.uint8)  # never black, never white
    rgb[ids == 0] = 0
    return rgb


def colour_flow(f: np.ndarray) -> np.ndarray:
    """(T, H, W, 3) flow → colour wheel: hue = direction (right red, down yellow-green, left
    cyan, up blue-magenta), value = speed over the clip's largest valid speed; not valid black."""
    from matplotlib.colors import hsv_to_rgb

    valid = f[..., 2] > 0.5
    mag = np.hypot(f[..., 0], f[..., 1])
    top = float(mag[valid].max()) if valid.any() else 1.0
    hue = (np.arctan2(f[..., 1], f[..., 0]) / (2 * np.pi)) % 1.0
    hsv = np.stack([hue, np.ones_like(hue), np.clip(mag / max(top, 1e-9), 0, 1) * 0.85 + 0.15],
                   -1)
    rgb = (hsv_to_rgb(hsv) * 255).astype(np.uint8)
    rgb[~valid] = 0
    return rgb


COLOURS = {"depth": colour_depth, "normals": colour_normals, "ids": colour_ids,
           "flow": colour_flow}


def build_previews(traj_dir: Path, layers: list[str], fps: int, gop: int, out: Path
                   ) -> dict[str, dict[str, str]]:
    """One MP4 per view and toggle whose layer the render has, in ``out``; returns
    {view: {toggle: file name}}."""
    from ..media.layers import read_layer
    from ..media.video import EncodeSettings, VideoWriter

    made: dict[str, dict[str, str]] = {}
    for v in VIEWS:
        for toggle, layer in PREVIEW_LAYERS.items():
            if layer not in layers:
                continue
            rgb = COLOURS[toggle](read_layer(traj_dir, v, layer))
            name = f"{v}.{toggle}.mp4"
            w = VideoWriter(out / name, rgb.shape[2], rgb.shape[1], fps,
                            EncodeSettings(gop=gop, crf=12, preset="ultrafast", threads=1))
            for frame in rgb:
                w.write(frame)
            w.close(len(rgb))
            made.setdefault(v, {})[toggle] = name
    return made
