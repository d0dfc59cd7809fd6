"""RGB → YUV420 planes on the device, as the encoder's own conversion makes them, so the CPU
only runs x264.

What the encoder expects (``stages.media.video``): ``VideoWriter`` hands PyAV rgb24 frames and
lets ``encode()`` convert them to the stream's yuv420p with libswscale's defaults — no colour
space or range set on the frame, so swscale uses BT.601 in limited ("tv") range: Y in 16..235,
Cb/Cr in 16..240. Its chroma for rgb24 → yuv420p (SWS_BILINEAR, measured against PyAV 18's
reformat): each pair of horizontal neighbours averaged, then a [1, 3, 3, 1] / 8 vertical filter
centred between the two rows of each chroma row (the edge rows repeated). This module rounds
in float where swscale works in fixed point: planes agree within ±1 (tests/engine/compute).

The compute backend on a GPU (``compute.targets``, ``yuv``) converts every view here, tiles
the preview here too (:func:`tile_preview`, the same bytes as ``media.video.tile_preview``)
and copies all the planes to the host at once (half the bytes of RGB); the writers take them
as ``media.video.Yuv420``. Fed planes, an encoding thread spent 12 % less CPU at 720p
(tests/benchmarks/bench_encode_input.py, docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np
import torch

from ...media.video import Yuv420, yuv420_frame

# BT.601, limited range (8-bit): Y = 16 + (KY . rgb) / 255, Cb/Cr = 128 + (K . rgb) / 255
KY = (65.481, 128.553, 24.966)
KU = (-37.797, -74.203, 112.0)
KV = (112.0, -93.786, -18.214)


def rgb_to_yuv420(rgb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """uint8 ``[..., H, W, 3]`` (H, W even) → uint8 planes Y ``[..., H, W]``, U and V
    ``[..., H/2, W/2]``, on the tensor's device."""
    if rgb.dtype != torch.uint8 or rgb.shape[-1] != 3 or rgb.dim() < 3:
        raise ValueError(f"compute yuv: expected uint8 [..., H, W, 3] RGB; got {rgb.dtype} "
                         f"{tuple(rgb.shape)}")
    h, w = rgb.shape[-3:-1]
    if h % 2 or w % 2:
        raise ValueError(f"compute yuv: {w}x{h} has an odd side; yuv420p needs even sizes")
    x = rgb.to(torch.float32)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    y = 16.0 + (KY[0] * r + KY[1] * g + KY[2] * b) / 255.0
    u = 128.0 + (KU[0] * r + KU[1] * g + KU[2] * b) / 255.0
    v = 128.0 + (KV[0] * r + KV[1] * g + KV[2] * b) / 255.0
    return _byte(y), _byte(_chroma(u)), _byte(_chroma(v))


def _chroma(c: torch.Tensor) -> torch.Tensor:
    """Full-resolution chroma → 4:2:0 (horizontal pairs, then [1, 3, 3, 1] / 8 vertically)."""
    c = (c[..., 0::2] + c[..., 1::2]) * 0.5
    top = torch.cat([c[..., :1, :], c[..., :-1, :]], -2)  # row i - 1, edge repeated
    bot = torch.cat([c[..., 1:, :], c[..., -1:, :]], -2)  # row i + 1
    return (top[..., 0::2, :] + 3.0 * c[..., 0::2, :] + 3.0 * c[..., 1::2, :]
            + bot[..., 1::2, :]) * 0.125


def _byte(x: torch.Tensor) -> torch.Tensor:
    return torch.floor(x + 0.5).clamp(0.0, 255.0).to(torch.uint8)


def tile_preview(img: torch.Tensor, labels: list[np.ndarray]) -> torch.Tensor:
    """``media.video.tile_preview`` on the device, to the same bytes: uint8 ``[V, H, W, 3]``
    views → the 3 x 2 grid of half-resolution views (2x2 box filter rounded as Pillow's
    ``reduce(2)``: (sum + 2) / 4) with each view's label bitmap in its corner."""
    v, h, w = img.shape[:3]
    hh, hw = h // 2 // 2 * 2, w // 2 // 2 * 2
    x = img[:, : hh * 2, : hw * 2].to(torch.int32)
    small = ((x[:, 0::2, 0::2] + x[:, 0::2, 1::2] + x[:, 1::2, 0::2] + x[:, 1::2, 1::2] + 2)
             >> 2).to(torch.uint8)
    out = torch.zeros((2 * hh, 3 * hw, 3), dtype=torch.uint8, device=img.device)
    for i in range(v):
        r, c = divmod(i, 3)
        cell = out[r * hh:(r + 1) * hh, c * hw:(c + 1) * hw]
        cell[:] = small[i]
        lab = labels[i]
        lh, lw = min(lab.shape[0], hh), min(lab.shape[1], hw)
        cell[:lh, :lw] = torch.tensor(lab[:lh, :lw], dtype=torch.uint8, device=img.device)
    return out


def packed_planes(img: torch.Tensor) -> torch.Tensor:
    """uint8 ``[..., H, W, 3]`` → one flat uint8 tensor of each picture's Y, U and V planes in
    turn (one copy to the host for all of them; :func:`unpack_planes` splits it)."""
    y, u, v = rgb_to_yuv420(img)
    n = y.shape[:-2].numel()
    return torch.cat([p.reshape(n, -1) for p in (y, u, v)], 1).reshape(-1)


def unpack_planes(flat: np.ndarray, count: int, height: int, width: int) -> list[Yuv420]:
    """The :class:`~stages.media.video.Yuv420` pictures of :func:`packed_planes`' layout
    (views into ``flat``)."""
    per = height * width * 3 // 2
    out = []
    for k in range(count):
        a = flat[k * per:(k + 1) * per]
        ys, cs = height * width, (height // 2) * (width // 2)
        out.append(Yuv420(a[:ys].reshape(height, width),
                          a[ys:ys + cs].reshape(height // 2, width // 2),
                          a[ys + cs:].reshape(height // 2, width // 2)))
    return out


__all__ = ["KU", "KV", "KY", "packed_planes", "rgb_to_yuv420", "tile_preview", "unpack_planes",
           "yuv420_frame"]
