"""Stage II's look settings (one per render, from its RenderSettings)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass
class Look:
    """Stage II's look settings: built from a render's RenderSettings (:meth:`from_settings`);
    no defaults of its own (they live once, in ``stages.config.RenderConfig``)."""

    # sun shadow map size, px (per side), and the half-width of the area around the character
    # it covers, m (the map is refitted around the character every frame)
    shadow_map_size: int
    shadow_extent_m: float
    # shadow-map taps per output pixel (1, 2, 4 or 8; each a hardware 2x2 comparison):
    # softness; a pixel's taps are spread over its samples (at 8 samples each takes one tap,
    # so the cost per sample is one tap whatever this is)
    shadow_pcf_taps: int
    # exposure: metered on the first frames of each trajectory to bring the geometric mean
    # luminance to exposure_key; 0 frames = fixed exposure 1 (then only the compensation)
    meter_frames: int
    exposure_key: float
    # "aces" (filmic) or "none" (clamp)
    tone_map: str
    # strength of the sky's image-based light
    ibl_strength: float
    # "deferred": a G-buffer from the rasterizer, lit by a compute pass (stages/engine/
    # deferred.py; fast where pixel shaders run on few units, as on an H200); "forward": the
    # whole look in the fragment shader (the reference); "auto": deferred on a GPU with
    # compute shaders, forward on a software rasterizer
    shading: str

    @classmethod
    def from_settings(cls, s: Any) -> Look:
        """The look of a RenderSettings (or anything with these attributes)."""
        return cls(**{f.name: getattr(s, f.name) for f in dataclasses.fields(cls)})
