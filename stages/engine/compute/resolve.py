"""The resolve pass in torch: the compute Stage II's port of ``pbr.RESOLVE_FRAG`` (mean of a
view's samples in linear light, exposure, filmic tone map, sRGB, 8-bit), on CPU or CUDA.

GL semantics matched (read from the GLSL and the buffers of ``render_targets``): each sample
is clamped at 0 before the sum (``max(texelFetch(...), 0)``), the sum is divided by the sample
count, then multiplied by the exposure; the tone map is Narkowicz's ACES fit clamped to [0, 1]
(or a clamp); sRGB is the piecewise curve with ``step(0.0031308, c)``; the RGBA8 target turns
each channel into ``floor(c * 255 + 0.5)`` (GL's round-to-nearest unorm conversion). Meter mode
writes ``clamp((log2(max(lum, 1e-7)) + 16) / 24, 0, 1)`` as an 8-bit code instead.

The character mask of the alignment gate is not made here: GL draws it in a buffer of its own
(flat white character, ``render_targets.mask_buf``), not in the resolve.
"""

from __future__ import annotations

import torch

TONE_MAPS = ("aces", "none")


def _check(radiance: torch.Tensor) -> None:
    if radiance.dim() != 5 or radiance.shape[-1] != 3:
        raise ValueError("compute resolve: radiance must be [views, samples, H, W, 3]; got "
                         f"{tuple(radiance.shape)}")
    if radiance.shape[1] < 1 or radiance.shape[1] > 64:
        raise ValueError(f"compute resolve: {radiance.shape[1]} samples a view; 1 to 64 "
                         "(as the GL resolve reads)")


def mean_samples(radiance: torch.Tensor) -> torch.Tensor:
    """``[V, N, H, W, 3]`` → ``[V, H, W, 3]``: the mean of each pixel's samples in linear
    light, each clamped at 0, summed in sample order as GL's loop does."""
    _check(radiance)
    x = radiance.to(torch.float32).clamp_min(0.0)
    acc = x[:, 0].clone()
    for k in range(1, x.shape[1]):
        acc = acc + x[:, k]
    return acc / float(x.shape[1])


def aces(x: torch.Tensor) -> torch.Tensor:
    """Narkowicz's ACES filmic fit, clamped to [0, 1]."""
    return ((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14)).clamp(0.0, 1.0)


def to_srgb(c: torch.Tensor) -> torch.Tensor:
    """Linear [0, 1] → sRGB-encoded [0, 1] (the resolve shader's curve)."""
    hi = 1.055 * c.clamp_min(0.0).pow(1.0 / 2.4) - 0.055
    return torch.where(c >= 0.0031308, hi, c * 12.92)


def unorm8(c: torch.Tensor) -> torch.Tensor:
    """[0, 1] floats → uint8, as a GL RGBA8 target stores them (round to nearest)."""
    return torch.floor(c.clamp(0.0, 1.0) * 255.0 + 0.5).to(torch.uint8)


def encode_linear(lin: torch.Tensor, tone_map: str) -> torch.Tensor:
    """Exposed linear light → uint8: the tone map (``aces``, else a clamp), sRGB, 8 bits."""
    return unorm8(to_srgb(aces(lin) if tone_map == "aces" else lin.clamp(0.0, 1.0)))


def resolve(radiance: torch.Tensor, exposure: float = 1.0, tone_map: str = "aces"
            ) -> torch.Tensor:
    """Each view's picture: ``radiance[V, N, H, W, 3]`` (linear light of its N samples, as the
    atlas holds it) → uint8 ``[V, H, W, 3]``, row 0 at the top."""
    if tone_map not in TONE_MAPS:
        raise ValueError(f"compute resolve: tone_map {tone_map!r}; expected aces|none")
    return encode_linear(mean_samples(radiance) * float(exposure), tone_map)


def meter_codes(radiance: torch.Tensor) -> torch.Tensor:
    """Meter mode: each pixel's log2 luminance as 8-bit codes over 24 stops, ``[V, H, W]``
    (what ``pbr.exposure_from_meter`` reads)."""
    lin = mean_samples(radiance)
    lum = lin[..., 0] * 0.2126 + lin[..., 1] * 0.7152 + lin[..., 2] * 0.0722
    code = ((torch.log2(lum.clamp_min(1e-7)) + 16.0) / 24.0).clamp(0.0, 1.0)
    return unorm8(code)


def exposure_from_codes(codes: torch.Tensor, key: float) -> tuple[float, float]:
    """(exposure multiplier, log2 mean luminance) of metered codes, by the GL path's own rule
    (``pbr.exposure_from_meter``; the codes are small, they are read on the host)."""
    from ..pbr import exposure_from_meter

    return exposure_from_meter(codes.cpu().numpy(), key)


__all__ = ["TONE_MAPS", "aces", "encode_linear", "exposure_from_codes", "mean_samples",
           "meter_codes", "resolve", "to_srgb", "unorm8"]
