"""RGB → YUV420 planes on the device, as the encoder's own conversion makes them, so the CPU
only runs x264.

What the encoder expects (``stages.media.video``): ``VideoWriter`` hands PyAV rgb24 frames and
lets ``encode()`` convert them to the stream's yuv420p with libswscale's defaults — no colour
space or range set on the frame, so swscale uses BT.601 in limited ("tv") range: Y in 16..235,
Cb/Cr in 16..240. Its chroma for rgb24 → yuv420p (SWS_BILINEAR, measured against PyAV 18's
reformat): each pair of horizontal neighbours averaged, then a [1, 3, 3, 1] / 8 vertical filter
centred between the two rows of each chroma row (the edge rows repeated). This module rounds
in float where swscale works in fixed point: planes agree within ±1 (tests/engine/compute).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

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


def yuv420_frame(y: np.ndarray, u: np.ndarray, v: np.ndarray) -> Any:
    """A PyAV yuv420p VideoFrame holding these (host) planes, for ``stream.encode``: no
    conversion is left for the encoder to make."""
    import av

    h, w = y.shape
    frame = av.VideoFrame(w, h, "yuv420p")
    for plane, data in zip(frame.planes, (y, u, v), strict=True):
        rows, cols = data.shape
        dst = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)
        if dst.shape[0] < rows or plane.line_size < cols:
            raise ValueError(f"compute yuv: a {cols}x{rows} plane does not fit PyAV's "
                             f"{plane.line_size}x{dst.shape[0]}")
        dst[:rows, :cols] = data
    return frame


__all__ = ["KU", "KV", "KY", "rgb_to_yuv420", "yuv420_frame"]
